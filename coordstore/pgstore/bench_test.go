package pgstore_test

// Commit benchmarks on a real PostgreSQL (the throwaway cluster of
// internal/testkit/pgtest, fsync on, or PHUX_PG_DSN): pgstore Updates beside raw
// pgx transactions inserting the same rows into the same tables, from 1
// and 32 goroutines, in adjacent batches of one run:
//
//	go test -run '^$' -bench CommitCompare -benchtime 3x ./coordstore/pgstore/

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
)

const (
	benchPayload  = 200
	benchWriters  = 32
	benchMinRatio = 0.5 // pgstore at 32 writers >= 0.5 x raw pgx at 32 writers
)

type benchVariant struct {
	name string
	conc int
	fn   func() error
}

func benchParallel(n, count int, fn func() error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(count) {
				if err := fn(); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(count))
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// benchRows is one commit's rows: a 200-byte RUN object at revision 1 and
// its event.
func benchRows(n uint64) (coordstore.Object, coordstore.Event) {
	var id [16]byte
	rand.Read(id[:])
	id[0] |= 1
	binary.BigEndian.PutUint64(id[8:], n)
	p := make([]byte, benchPayload)
	rand.Read(p)
	k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
	o := coordstore.Object{Key: k, Revision: 1, Schema: 1, Payload: p}
	sr := o.SnapshotRecord()
	e := coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1, Schema: 1, Payload: sr.Append(nil)}
	return o, e
}

func BenchmarkCommitCompare(b *testing.B) {
	dsn, schema := freshSchema(b)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// The raw baseline: the same tables (created by a second store in its
	// own schema), plain pgx transactions of two INSERTs, sequences from a
	// counter in memory.
	_, rawSchema := freshSchema(b)
	rs, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: rawSchema})
	if err != nil {
		b.Fatal(err)
	}
	rs.Close()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{rawSchema}.Sanitize()
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pc.MaxConns = benchWriters
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var n, seq atomic.Uint64
	store := func() error {
		o, e := benchRows(n.Add(1))
		return s.Update(ctx, func(tx coordstore.Tx) error {
			if err := tx.PutObject(o); err != nil {
				return err
			}
			_, err := tx.AppendEvent(e)
			return err
		})
	}
	raw := func() error {
		o, e := benchRows(n.Add(1))
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			img := o.Key.Image()
			if _, err := tx.Exec(ctx, `INSERT INTO phux_objects (k, revision, schema, payload) VALUES ($1, $2, $3, $4)`, img[:], int64(1), int32(1), o.Payload); err != nil {
				return err
			}
			obj := e.Object.Image()
			_, err := tx.Exec(ctx, `INSERT INTO phux_events (seq, id, kind, obj, obj_rev, schema, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				int64(seq.Add(1)), e.ID[:], int32(e.Kind), obj[:], int64(1), int32(1), e.Payload)
			return err
		})
	}
	pairs := []struct {
		base, subject benchVariant
		batch         int
		min           float64
		metric        string
	}{
		{benchVariant{"raw-1w", 1, raw}, benchVariant{"pgstore-1w", 1, store}, 100, 0, "pgstore-1w/raw-1w"},
		{benchVariant{"raw-32w", benchWriters, raw}, benchVariant{"pgstore-32w", benchWriters, store}, 1000, benchMinRatio, "pgstore-32w/raw-32w"},
	}
	rates := map[string][]float64{}
	ratios := make([][]float64, len(pairs))
	round := 0
	for b.Loop() {
		for i, p := range pairs {
			order := []benchVariant{p.base, p.subject}
			if round%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			got := map[string]float64{}
			for _, v := range order {
				d, err := benchParallel(v.conc, p.batch, v.fn)
				if err != nil {
					b.Fatalf("%s: %v", v.name, err)
				}
				got[v.name] = float64(p.batch) / d.Seconds()
				rates[v.name] = append(rates[v.name], got[v.name])
			}
			ratios[i] = append(ratios[i], got[p.subject.name]/got[p.base.name])
		}
		round++
	}
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	b.ReportMetric(0, "ns/op")
	for _, p := range pairs {
		b.ReportMetric(median(rates[p.base.name]), p.base.name+"-commits/s")
		b.ReportMetric(median(rates[p.subject.name]), p.subject.name+"-commits/s")
	}
	for i, p := range pairs {
		r := median(ratios[i])
		b.ReportMetric(r, p.metric)
		if p.min > 0 && len(ratios[i]) >= 3 && r < p.min {
			b.Errorf("target missed: %s = %.3f (median of %d pairs %v), want >= %.2f", p.metric, r, len(ratios[i]), ratios[i], p.min)
		}
	}
}
