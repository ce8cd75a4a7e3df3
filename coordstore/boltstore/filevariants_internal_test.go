package boltstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// BenchmarkCommitFileVariants compares, for one writer, the production
// store with two bbolt file treatments that were candidates for the
// durable-write targets and were not adopted: "zeroed" writes zeros from
// the high-water mark to 64 MiB after Open (so that commits overwrite
// written blocks instead of allocating in the sparse region bbolt's
// truncate leaves), "nofreelistsync" sets bbolt's NoFreelistSync (one page
// write fewer per commit), and "zeroed+nofl" both. Every iteration runs 50
// commits of each variant in turn, rotating which goes first (each commit
// the records of one CREATE_OBJECTIVE admission), so that all share the
// machine's noise; it reports each variant's median commit latency and
// page writes per commit:
//
//	go test -run '^$' -bench CommitFileVariants -benchtime 40x ./coordstore/boltstore/
func BenchmarkCommitFileVariants(b *testing.B) {
	dir := b.TempDir()
	type variant struct {
		name         string
		zeroed, nofl bool
		s            *Store
		lat          []float64
		w0           int64
	}
	vs := []*variant{{name: "default"}, {name: "zeroed", zeroed: true}, {name: "nofreelistsync", nofl: true}, {name: "zeroed+nofl", zeroed: true, nofl: true}}
	for _, v := range vs {
		path := filepath.Join(dir, v.name+".db")
		s, err := Open(path, Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.db.NoFreelistSync = v.nofl
		if v.zeroed {
			var hwm int64
			s.db.View(func(tx *bolt.Tx) error { hwm = tx.Size(); return nil })
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			z := make([]byte, 1<<20)
			for off := hwm; off < 64<<20; off += int64(len(z)) {
				if _, err := f.WriteAt(z, off); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		v.s = s
		st := s.db.Stats()
		v.w0 = st.TxStats.GetWrite()
	}
	doc := make([]byte, 200)
	ctx := context.Background()
	n := 0
	for it := 0; b.Loop(); it++ {
		for k := range vs {
			v := vs[(it+k)%len(vs)] // rotate which variant goes first
			for range 50 {
				t0 := time.Now()
				err := v.s.Update(ctx, func(tx coordstore.Tx) error {
					return createRecords(tx, coordwire.NewObjectiveID(), coordwire.NewOperationID(), doc)
				})
				if err != nil {
					b.Fatal(err)
				}
				v.lat = append(v.lat, float64(time.Since(t0))/float64(time.Microsecond))
			}
		}
		n += 50
	}
	b.ReportMetric(0, "ns/op")
	for _, v := range vs {
		slices.Sort(v.lat)
		st := v.s.db.Stats()
		b.ReportMetric(v.lat[len(v.lat)/2], v.name+"-p50-µs")
		b.ReportMetric(float64(st.TxStats.GetWrite()-v.w0)/float64(n), v.name+"-writes/commit")
	}
}

// createRecords writes what one CREATE_OBJECTIVE admission writes: the
// OBJECTIVE record, its event, the SUCCEEDED OPERATION and its event.
func createRecords(tx coordstore.Tx, obj coordwire.ObjectiveID, id coordwire.OperationID, doc []byte) error {
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj}
	rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: doc, State: coordwire.ObjectiveActive}
	o := coordstore.Object{Key: key, Revision: 1, Schema: coordwire.RecordSchemaVersion, Payload: rec.AppendTLV(nil)}
	if err := tx.PutObject(o); err != nil {
		return err
	}
	sr := o.SnapshotRecord()
	seq, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged,
		Object: key, ObjectRevision: 1, Schema: coordwire.RecordSchemaVersion, Payload: sr.Append(nil)})
	if err != nil {
		return err
	}
	ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj}
	res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(seq + 1),
		ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil)}
	op := coordstore.Operation{ID: id, Revision: 1, PrincipalKeyID: [32]byte{1}, Digest: [32]byte{2},
		Result: res.Append(nil), AdmittedAt: 1, FinalizedAt: 1}
	if err := tx.PutOperation(op); err != nil {
		return err
	}
	or := op.Record()
	osr := or.SnapshotRecord()
	_, err = tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventOperationChanged,
		Object: or.Key, ObjectRevision: or.Revision, Schema: coordwire.RecordSchemaVersion, Payload: osr.Append(nil)})
	return err
}
