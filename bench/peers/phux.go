package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/pauseproxy"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// phuxWorld is a witness, a coordinator on pebblestore or boltstore over a Unix socket
// and a pool of registered workload keys, all in one temporary directory:
// what an embedder runs, set up through the public packages only.
type phuxWorld struct {
	dir    string
	sock   string
	auth   *keystore.AuthorityKey
	wid    witness.Identity
	keys   []*coordclient.WorkloadKey
	reg    *keystore.Watcher
	wsrv   *witness.Server
	wdone  chan error
	srv    *coordserver.Server
	served chan error
	store  commitStats // the coordinator's, once it opened it
}

// commitStats is the store's committer counters, as one line for the
// writes workloads' note.
type commitStats func() (commits, txs uint64, note func(c0, t0 uint64) string)

// phuxStore is the engine of phuxcoord's store (flag -store).
var phuxStore = "pebble"

// openPhuxStore opens the benchmark's store of engine phuxStore at path
// (a bbolt file or a pebble directory), with the group-commit delay.
func openPhuxStore(path string, delay time.Duration) (coordstore.Store, commitStats, error) {
	if phuxStore == "bolt" {
		st, err := boltstore.Open(path+".bolt", boltstore.Config{MaxBatchDelay: delay})
		if err != nil {
			return nil, nil, err
		}
		return st, func() (uint64, uint64, func(uint64, uint64) string) {
			s0 := st.Stats()
			return s0.Commits, s0.Transactions, func(c0, t0 uint64) string {
				s := st.Stats()
				n := float64(s.Commits - c0)
				return fmt.Sprintf("bbolt: %.1f commands per commit, 2 fdatasyncs each", float64(s.Transactions-t0)/n)
			}
		}, nil
	}
	st, err := pebblestore.Open(path+".pebble", pebblestore.Config{MaxBatchDelay: delay})
	if err != nil {
		return nil, nil, err
	}
	return st, func() (uint64, uint64, func(uint64, uint64) string) {
		s0 := st.Stats()
		return s0.Commits, s0.Transactions, func(c0, t0 uint64) string {
			s := st.Stats()
			n := float64(s.Commits - c0)
			return fmt.Sprintf("pebble: %.1f commands per commit, 1 WAL fdatasync each", float64(s.Transactions-t0)/n)
		}
	}, nil
}

// phuxBatchDelay is the coordinator store's MaxBatchDelay (flag
// -phux-batch-delay; 0 is the store's default).
var phuxBatchDelay time.Duration

// phuxScope is what every benchmark key may do.
const phuxScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand

// newPhuxWorld makes nkeys workload keys; preload, if set, runs against
// the fresh store before the coordinator activates (bulk loading).
func newPhuxWorld(ctx context.Context, nkeys int, preload func(coordstore.Store) error, caps ...coordwire.Capabilities) (*phuxWorld, error) {
	base, err := os.MkdirTemp("", "phux-peers-")
	if err != nil {
		return nil, err
	}
	w := &phuxWorld{dir: base, sock: filepath.Join(base, "c.sock")}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()
	coordDir := filepath.Join(base, "coord")
	witnessDir := filepath.Join(base, "witness")
	storePath := filepath.Join(coordDir, "store")
	wsock := filepath.Join(base, "w.sock")
	if w.auth, err = keystore.InitAuthority(coordDir); err != nil {
		return nil, err
	}
	for i := range nkeys {
		k, err := keystore.GenerateWorkloadKey(filepath.Join(base, "keys", fmt.Sprintf("k%d.key", i)))
		if err != nil {
			return nil, err
		}
		if _, err := keystore.AddKey(coordDir, k.Public(), phuxScope, time.Now().Add(24*time.Hour)); err != nil {
			return nil, err
		}
		ck, err := coordclient.LoadKeyFile(filepath.Join(base, "keys", fmt.Sprintf("k%d.key", i)))
		if err != nil {
			return nil, err
		}
		w.keys = append(w.keys, ck)
	}
	if w.reg, err = keystore.NewWatcher(context.WithoutCancel(ctx), coordDir, keystore.WatcherConfig{}); err != nil {
		return nil, err
	}
	if w.wid, err = witness.Init(witnessDir); err != nil {
		return nil, err
	}
	wl, err := net.Listen("unix", wsock)
	if err != nil {
		return nil, err
	}
	if w.wsrv, err = witness.Open(witness.Config{StateDir: witnessDir}); err != nil {
		wl.Close()
		return nil, err
	}
	w.wdone = make(chan error, 1)
	go func() { w.wdone <- w.wsrv.Serve(context.WithoutCancel(ctx), wl) }()

	if preload != nil {
		st, _, err := openPhuxStore(storePath, 0)
		if err != nil {
			return nil, err
		}
		err = preload(st)
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	cfg := coordserver.Config{
		OpenStore: func(context.Context) (coordstore.Store, error) {
			st, stats, err := openPhuxStore(storePath, phuxBatchDelay)
			if err != nil {
				return nil, err
			}
			w.store = stats
			return st, nil
		},
		Witness:      witness.ClientConfig{Address: "unix:" + wsock, WitnessPublicKey: w.wid.PublicKey},
		AuthorityKey: w.auth,
		Registry:     w.reg,
	}
	for _, c := range caps {
		cfg.Capabilities |= c
	}
	if w.srv, err = coordserver.New(ctx, cfg); err != nil {
		return nil, err
	}
	l, err := coordserver.ListenUnix(w.sock)
	if err != nil {
		return nil, err
	}
	w.served = make(chan error, 1)
	go func() { w.served <- w.srv.Serve(l) }()
	ok = true
	return w, nil
}

// clientConfig is the client configuration of key i.
func (w *phuxWorld) clientConfig(i int) coordclient.Config {
	return coordclient.Config{
		WorkloadKey:          w.keys[i%len(w.keys)],
		AuthorityFingerprint: w.auth.Fingerprint(),
		WitnessPublicKey:     w.wid.PublicKey,
		Scope:                phuxScope,
		ClientName:           "bench-peers",
	}
}

// dial connects a client with key i.
func (w *phuxWorld) dial(ctx context.Context, i int) (*coordclient.Client, error) {
	return coordclient.Dial(ctx, "unix:"+w.sock, w.clientConfig(i))
}

func (w *phuxWorld) close() {
	if w.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w.srv.Shutdown(ctx)
		cancel()
		if w.served != nil {
			<-w.served
		}
	}
	if w.wsrv != nil {
		w.wsrv.Close()
		<-w.wdone
	}
	if w.reg != nil {
		w.reg.Close()
	}
	os.RemoveAll(w.dir)
}

// doc returns a document of n bytes (a JSON string padded with 'x'),
// distinct per i.
func doc(n, i int) []byte {
	b := []byte(fmt.Sprintf(`{"i":%d,"pad":"`, i))
	for len(b) < n-2 {
		b = append(b, 'x')
	}
	return append(b, '"', '}')[:n]
}

// phuxWrites runs the durable-write workload: each of clients clients
// creates one Objective and then updates it (compare-and-set on its
// revision) until the duration is over; every command is acknowledged
// only after durable admission.
func phuxWrites(ctx context.Context, clients int, d time.Duration, docBytes int) result {
	res := result{System: "phuxcoord"}
	w, err := newPhuxWorld(ctx, clients, nil)
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	cs := make([]*coordclient.Client, clients)
	for i := range cs {
		if cs[i], err = w.dial(ctx, i); err != nil {
			res.Err = err
			return res
		}
		defer cs[i].Close()
	}
	var lat latencies
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	c0, t0, note := w.store()
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := coordwire.NewObjectiveID()
			local := make([]time.Duration, 0, 4096)
			defer func() { lat.add(local...) }()
			for n := 0; time.Now().Before(deadline); n++ {
				var cmd *coordclient.Cmd
				if n == 0 {
					cmd = coordclient.CreateObjective(id, coordwire.RecordSchemaVersion, doc(docBytes, i))
				} else {
					cmd = coordclient.UpdateObjective(id, coordwire.RecordSchemaVersion, doc(docBytes, n), coordclient.ObjectiveAt(id, uint64(n)))
				}
				t0 := time.Now()
				r, err := c.Command(ctx, cmd)
				if err == nil && r.Tag() != coordwire.OperationSucceeded {
					err = fmt.Errorf("command %v", r.Tag())
				}
				if err != nil {
					errs <- err
					return
				}
				local = append(local, time.Since(t0))
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Took = time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		res.Err = err
		return res
	}
	res.Ops = int(ops.Load())
	res.P50, res.P99 = lat.quantiles()
	if c1, _, _ := w.store(); c1 > c0 {
		res.Note = note(c0, t0)
	}
	return res
}

// writerInflight is how many writes the one writer of the fan-out and
// catch-up workloads keeps in flight (phuxcoord: one update chain per
// Objective, each compare-and-set on its revision; etcd: puts to as many
// keys). The fan-out measures delivery, so the durable writer must not be
// what limits it: at 32 in flight phuxcoord's group commit of one
// connection tops out near 4 k commits/s on the development VM.
const writerInflight = 128

// phuxFanout runs the fan-out workload: subs subscriptions (each its own
// connection, spread over keys so the per-principal quotas of A.3 hold),
// one writer client committing rounds of batch updates (writerInflight in flight);
// each round ends when every subscription has received every event of
// it. Ops counts delivered events.
func phuxFanout(ctx context.Context, subs, batch, rounds, payload int) result {
	res := result{System: "phuxcoord"}
	const perKey = 4
	w, err := newPhuxWorld(ctx, subs/perKey+2, nil)
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	writer, err := w.dial(ctx, 0)
	if err != nil {
		res.Err = err
		return res
	}
	defer writer.Close()
	ids := make([]coordwire.ObjectiveID, writerInflight)
	for i := range ids {
		ids[i] = coordwire.NewObjectiveID()
		if _, err := writer.Command(ctx, coordclient.CreateObjective(ids[i], coordwire.RecordSchemaVersion, doc(payload, i))); err != nil {
			res.Err = err
			return res
		}
	}
	last, err := phuxLastCut(ctx, writer)
	if err != nil {
		res.Err = err
		return res
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	subCtx, stopSubs := context.WithCancel(ctx)
	defer func() { stopSubs(); wg.Wait() }()
	subErr := make(chan error, subs)
	for i := range subs {
		c, err := w.dial(ctx, 1+i/perKey)
		if err != nil {
			res.Err = err
			return res
		}
		defer c.Close()
		s, err := c.Subscribe(ctx, last, coordclient.SubscribeOptions{})
		if err != nil {
			res.Err = err
			return res
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// A view (no allocation): the event is counted, not kept.
				if _, err := s.NextView(subCtx); err != nil {
					if subCtx.Err() == nil {
						subErr <- err
					}
					return
				}
				got.Add(1)
			}
		}()
	}
	revs := make([]uint64, len(ids))
	for i := range revs {
		revs[i] = 1
	}
	start := time.Now()
	want := int64(0)
	for r := range rounds {
		if err := phuxBatch(ctx, writer, ids, revs, batch, payload, r); err != nil {
			res.Err = err
			return res
		}
		want += int64(batch * subs)
		for got.Load() < want {
			select {
			case err := <-subErr:
				res.Err = err
				return res
			case <-ctx.Done():
				res.Err = ctx.Err()
				return res
			case <-time.After(100 * time.Microsecond):
			}
		}
	}
	res.Took = time.Since(start)
	res.Ops = int(want)
	return res
}

// phuxBatch commits n updates over the objectives in ids, len(ids) in
// flight on the one writer connection.
func phuxBatch(ctx context.Context, c *coordclient.Client, ids []coordwire.ObjectiveID, revs []uint64, n, payload, round int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	per := (n + len(ids) - 1) / len(ids)
	left := n
	for j := range ids {
		k := min(per, left)
		left -= k
		if k <= 0 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				cmd := coordclient.UpdateObjective(ids[j], coordwire.RecordSchemaVersion, doc(payload, round), coordclient.ObjectiveAt(ids[j], revs[j]))
				r, err := c.Command(ctx, cmd)
				if err == nil && r.Tag() != coordwire.OperationSucceeded {
					err = fmt.Errorf("command %v", r.Tag())
				}
				if err != nil {
					errs <- err
					return
				}
				revs[j]++
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// phuxLastCut is the current EventCut as a client sees it: the base cut
// of a snapshot (small here: the store holds a few objects).
func phuxLastCut(ctx context.Context, c *coordclient.Client) (coordwire.EventCut, error) {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return 0, err
	}
	return s.BaseEventCut, nil
}

// phuxPreload bulk-loads n Objectives with documents of docBytes directly
// into the store before activation, in transactions of 10,000.
func phuxPreload(n, docBytes int) func(coordstore.Store) error {
	return func(st coordstore.Store) error {
		const per = 10_000
		for done := 0; done < n; {
			k := min(per, n-done)
			err := st.Update(context.Background(), func(tx coordstore.Tx) error {
				for i := range k {
					rec := coordwire.ObjectiveRecord{DocumentSchema: coordwire.RecordSchemaVersion, Document: doc(docBytes, done+i), State: coordwire.ObjectiveActive}
					o := coordstore.Object{
						Key:      coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte(coordwire.NewObjectiveID())},
						Revision: 1,
						Schema:   coordwire.RecordSchemaVersion,
						Payload:  rec.AppendTLV(nil),
					}
					if err := tx.PutObject(o); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			done += k
		}
		return nil
	}
}

// phuxFullRead runs the full-read workload: n objects loaded, then one
// verified whole-authority snapshot through the client (every page
// staged, keys, totals and the digest checked). Ops counts records.
func phuxFullRead(ctx context.Context, n, docBytes int) result {
	res := result{System: "phuxcoord"}
	w, err := newPhuxWorld(ctx, 1, phuxPreload(n, docBytes))
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	c, err := w.dial(ctx, 0)
	if err != nil {
		res.Err = err
		return res
	}
	defer c.Close()
	start := time.Now()
	s, err := c.Snapshot(ctx)
	res.Took = time.Since(start)
	if err != nil {
		res.Err = err
		return res
	}
	if len(s.Records) < n {
		res.Err = fmt.Errorf("snapshot has %d records, want ≥ %d", len(s.Records), n)
		return res
	}
	res.Ops = len(s.Records)
	res.Note = fmt.Sprintf("%d pages, digest verified", s.Pages)
	return res
}

// phuxCatchUp runs the catch-up workload the way a client lives through
// it: a coordclient.Mirror (EVENT_REPLAY negotiated, a credit of one event)
// behind a proxy that stops forwarding, so it receives nothing while
// missed+1 updates commit (the first uses the credit, the next 1,024 fill
// its unsent queue, the one after overflows it: GAP/QUEUE_OVERFLOW with
// missed visible events behind its cut); the proxy then resumes and the
// Mirror heals by a verified replay at the exact cut (§10) and resumes
// LIVE. Timed from the resume until the Mirror's cut reaches the last
// event. Ops counts the missed events.
func phuxCatchUp(ctx context.Context, missed, payload int) result {
	res := result{System: "phuxcoord"}
	w, err := newPhuxWorld(ctx, 2, nil, coordwire.CapEventReplay)
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	writer, err := w.dial(ctx, 0)
	if err != nil {
		res.Err = err
		return res
	}
	defer writer.Close()
	ids := make([]coordwire.ObjectiveID, writerInflight)
	revs := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = coordwire.NewObjectiveID()
		revs[i] = 1
		if _, err := writer.Command(ctx, coordclient.CreateObjective(ids[i], coordwire.RecordSchemaVersion, doc(payload, i))); err != nil {
			res.Err = err
			return res
		}
	}
	px, err := pauseproxy.New(filepath.Join(w.dir, "p.sock"), w.sock)
	if err != nil {
		res.Err = err
		return res
	}
	defer px.Close()
	// The writer's own key: its OPERATION records are visible to it, so
	// the last event of the log is one the Mirror sees (WaitForCut needs
	// a visible event at or after the cut).
	cfg := w.clientConfig(0)
	cfg.OfferedCapabilities = coordwire.CapEventReplay
	c, err := coordclient.Dial(ctx, "unix:"+px.Path(), cfg)
	if err != nil {
		res.Err = err
		return res
	}
	defer c.Close()
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 1})
	defer m.Close()
	if err := m.WaitSynced(ctx); err != nil {
		res.Err = err
		return res
	}
	px.Pause(true)
	if err := phuxBatch(ctx, writer, ids, revs, missed+1, payload, 0); err != nil {
		res.Err = err
		return res
	}
	last, err := phuxLastCut(ctx, writer)
	if err != nil {
		res.Err = err
		return res
	}
	start := time.Now()
	px.Pause(false)
	if err := m.WaitForCut(ctx, last); err != nil {
		res.Err = err
		return res
	}
	res.Took = time.Since(start)
	// The healing's counters are bumped right after it publishes the cut.
	st := m.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.Replays+st.Replacements == 0 && time.Now().Before(deadline); st = m.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.Replays != 1 || st.Replacements != 0 || st.Reconnects != 0 {
		res.Err = fmt.Errorf("the Mirror healed by %d replays, %d snapshots, %d reconnects; want exactly one replay", st.Replays, st.Replacements, st.Reconnects)
		return res
	}
	res.Ops = missed
	res.Note = "Mirror: GAP, verified replay at the cut, ACK resume"
	return res
}
