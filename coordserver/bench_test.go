package coordserver_test

// Benchmarks: durable commands end to end over a Unix socket on
// pebblestore or boltstore (real fsync; PHUX_BENCH_STORE) beside the raw store's commit rate with
// the same records, and the connection setup beside its raw crypto bound,
// each in one run. Every name in this file starts with "bench" or
// "Benchmark" so that it cannot clash with the package's other tests. They
// run only with -bench (README.md's Measured section has the figures):
//
//	go test -run '^$' -bench Compare -benchtime 3x ./coordserver/                 # checks the targets, fails when one is missed
//	go test -run '^$' -bench '^Benchmark(Commands|Handshake)$' ./coordserver/    # plain sub-benchmarks, e.g. to profile one variant

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

const (
	// benchDocBytes is the size of every CREATE_OBJECTIVE document.
	benchDocBytes = 200
	// benchClients is the concurrency of the concurrent variants: 32
	// clients, each its own connection and workload key (A.3 caps one
	// key at 16 connections), each issuing one command at a time; and 32
	// store writers, each one Update at a time.
	benchClients = 32
	// benchMinCommandsRatio is the commands target: at 32 clients,
	// commands/s >= 0.5 x raw store commits/s at 32 writers.
	benchMinCommandsRatio = 0.5
	// benchMinHandshakeRatio is the handshake target: connection setups/s
	// >= 0.5 x the raw crypto bound (two signatures, two strict
	// verifications) per second.
	benchMinHandshakeRatio = 0.5
)

// benchWorld is one coordinator under benchmark: an in-process witness
// server on a Unix socket, an authority key, a registry of benchClients
// workload keys behind a keystore.Watcher, the coordinator's store
// (openBenchStore: pebble, or bbolt with PHUX_BENCH_STORE=bolt) and a
// coordserver serving a Unix socket; plus a second store of the same engine
// and Config in the same directory for the raw baseline.
type benchWorld struct {
	auth       *keystore.AuthorityKey
	keys       []*keystore.WorkloadKey
	witnessPub ed25519.PublicKey
	srv        *coordserver.Server
	store      coordstore.Store // the coordinator's
	raw        coordstore.Store // the baseline's
	addr       string           // "unix:PATH" of the coordinator
	doc        []byte
}

// openBenchStore opens a durable store (default Config: fsync on, group
// commit) of the engine PHUX_BENCH_STORE names: pebble (the default, as
// phux-coordd's for a new state directory) or bolt.
func openBenchStore(path string) (coordstore.Store, error) {
	switch e := os.Getenv("PHUX_BENCH_STORE"); e {
	case "", "pebble":
		st, err := pebblestore.Open(path+".pebble", pebblestore.Config{})
		if err != nil {
			return nil, err
		}
		return st, nil
	case "bolt":
		st, err := boltstore.Open(path+".db", boltstore.Config{})
		if err != nil {
			return nil, err
		}
		return st, nil
	default:
		return nil, fmt.Errorf("PHUX_BENCH_STORE=%q: want pebble or bolt", e)
	}
}

func benchFatal(b *testing.B, what string, err error) {
	b.Helper()
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
}

// newBenchWorld starts an in-process witness and coordinator, with one
// registered workload key per concurrent client and a raw baseline store;
// the server offers caps (0: the default Config's offer; the replay
// benchmark passes coordwire.CapEventReplay).
func newBenchWorld(b *testing.B, caps coordwire.Capabilities) *benchWorld {
	b.Helper()
	// A short directory: Unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "csbench")
	benchFatal(b, "temp dir", err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	benchFatal(b, "chmod", os.Chmod(dir, 0o700))
	w := &benchWorld{doc: make([]byte, benchDocBytes)}
	rand.Read(w.doc)

	wsock, watcher := w.startWitnessAndKeys(b, dir)

	// The two stores, same engine and Config, same file system.
	w.store, err = openBenchStore(filepath.Join(dir, "coord"))
	benchFatal(b, "open coordinator store", err)
	b.Cleanup(func() { w.store.Close() })
	w.raw, err = openBenchStore(filepath.Join(dir, "raw"))
	benchFatal(b, "open raw store", err)
	b.Cleanup(func() { w.raw.Close() })

	// The coordinator.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.serve(b, ctx, dir, coordserver.Config{
		Store:        w.store,
		Witness:      witness.ClientConfig{Address: "unix:" + wsock, WitnessPublicKey: w.witnessPub},
		AuthorityKey: w.auth,
		Registry:     watcher,
		Capabilities: caps,
	})
	return w
}

// startWitnessAndKeys runs the witness in process on its own state
// directory and socket under dir, makes the authority key and one workload
// key per concurrent client (registered under dir/keys), and returns the
// witness socket and the registry watcher; b's cleanups stop both.
func (w *benchWorld) startWitnessAndKeys(b *testing.B, dir string) (wsock string, watcher *keystore.Watcher) {
	b.Helper()
	// The witness, in process, on its own state directory and socket.
	wdir := filepath.Join(dir, "w")
	_, err := witness.Init(wdir)
	benchFatal(b, "witness init", err)
	ws, err := witness.Open(witness.Config{StateDir: wdir, Lifetime: 60 * time.Second})
	benchFatal(b, "witness open", err)
	w.witnessPub = ws.Identity().PublicKey
	wsock = filepath.Join(dir, "w.sock")
	wl, err := net.Listen("unix", wsock)
	benchFatal(b, "witness listen", err)
	wctx, wcancel := context.WithCancel(context.Background())
	var wwg sync.WaitGroup
	wwg.Add(1)
	go func() { defer wwg.Done(); ws.Serve(wctx, wl) }()
	b.Cleanup(func() { wcancel(); ws.Close(); wwg.Wait() })

	// Keys: the authority and one workload key per concurrent client.
	seed := make([]byte, 32)
	rand.Read(seed)
	w.auth, err = keystore.AuthorityKeyFromSeed(seed)
	benchFatal(b, "authority key", err)
	keysDir := filepath.Join(dir, "keys")
	for range benchClients {
		rand.Read(seed)
		k, err := keystore.WorkloadKeyFromSeed(seed)
		benchFatal(b, "workload key", err)
		_, err = keystore.AddKey(keysDir, k.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(24*time.Hour))
		benchFatal(b, "registry add", err)
		w.keys = append(w.keys, k)
	}
	watcher, err = keystore.NewWatcher(context.Background(), keysDir, keystore.WatcherConfig{})
	benchFatal(b, "watcher", err)
	b.Cleanup(func() { watcher.Close() })
	return wsock, watcher
}

// serve starts the coordinator of cfg on a Unix socket in dir, sets w.srv
// and w.addr, and shuts it down (Close if Shutdown fails within 10 s) when
// b's cleanups run.
func (w *benchWorld) serve(b *testing.B, ctx context.Context, dir string, cfg coordserver.Config) {
	b.Helper()
	var err error
	w.srv, err = coordserver.New(ctx, cfg)
	benchFatal(b, "coordserver.New", err)
	sock := filepath.Join(dir, "c.sock")
	l, err := coordserver.ListenUnix(sock)
	if err != nil {
		w.srv.Close()
		b.Fatalf("listen: %v", err)
	}
	go w.srv.Serve(l)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.srv.Shutdown(ctx); err != nil {
			w.srv.Close()
		}
	})
	w.addr = "unix:" + sock
}

// clientConfig is the coordclient configuration of workload key i.
func (w *benchWorld) clientConfig(i int) coordclient.Config {
	return coordclient.Config{
		WorkloadKey:          w.keys[i%len(w.keys)],
		AuthorityFingerprint: w.auth.Fingerprint(),
		WitnessPublicKey:     w.witnessPub,
		Scope:                coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
	}
}

// dialClients connects n clients, client i with workload key i.
func (w *benchWorld) dialClients(b *testing.B, n int) []*coordclient.Client {
	b.Helper()
	cs := make([]*coordclient.Client, n)
	for i := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := coordclient.Dial(ctx, w.addr, w.clientConfig(i))
		cancel()
		benchFatal(b, "dial", err)
		cs[i] = c
	}
	b.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// command issues one CREATE_OBJECTIVE of a fresh objective with the
// 200-byte document and checks that it SUCCEEDED: Command returns after
// COORD_COMMAND_RESULT, which the server sends only after the durable
// admission (the store's Update returned: fsynced).
func (w *benchWorld) command(ctx context.Context, c *coordclient.Client) (*coordclient.Cmd, error) {
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, w.doc)
	r, err := c.Command(ctx, cmd)
	if err != nil {
		return cmd, err
	}
	if !r.Succeeded() {
		return cmd, fmt.Errorf("command answered %v", r.Tag())
	}
	return cmd, nil
}

// rawCommit is the baseline: one boltstore Update that writes exactly the
// records a CREATE_OBJECTIVE admission writes (checked by
// checkSameRecords), built the way the core builds them.
func (w *benchWorld) rawCommit(ctx context.Context, principal [32]byte) error {
	obj, op := coordwire.NewObjectiveID(), coordwire.NewOperationID()
	var d [32]byte // a digest-sized value; the coordinator's is SHA-256
	copy(d[:], op[:])
	copy(d[16:], obj[:])
	now := uint64(time.Now().Unix())
	return w.raw.Update(ctx, func(tx coordstore.Tx) error {
		return benchWriteRecords(tx, obj, op, principal, d, now, w.doc)
	})
}

// benchWriteRecords writes the OBJECTIVE record (A.7, revision 1, state
// ACTIVE), its OBJECTIVE_CHANGED event, the SUCCEEDED OPERATION record with
// its OBJECT_REF result and its OPERATION_CHANGED event — the records of
// one admitted CREATE_OBJECTIVE.
func benchWriteRecords(tx coordstore.Tx, obj coordwire.ObjectiveID, id coordwire.OperationID, principal, digest [32]byte, now uint64, doc []byte) error {
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
	op := coordstore.Operation{ID: id, Revision: 1, PrincipalKeyID: principal, Digest: digest,
		Result: res.Append(nil), AdmittedAt: now, FinalizedAt: now}
	if err := tx.PutOperation(op); err != nil {
		return err
	}
	or := op.Record()
	osr := or.SnapshotRecord()
	_, err = tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventOperationChanged,
		Object: or.Key, ObjectRevision: or.Revision, Schema: coordwire.RecordSchemaVersion, Payload: osr.Append(nil)})
	return err
}

// benchShape is what must match between the coordinator's records and the
// baseline's: kinds, revisions, schemas and sizes of every record and
// event one command writes.
type benchShape struct {
	Kind          string
	Revision      uint64
	Schema        uint16
	Bytes         int
	EventsWritten uint64
}

// shapeOf reads the records of the objective obj and the operation id, and
// the events written since the cut before, from st.
func shapeOf(ctx context.Context, st coordstore.Store, obj coordwire.ObjectiveID, id coordwire.OperationID, before uint64) ([]benchShape, error) {
	var out []benchShape
	err := st.View(ctx, func(tx coordstore.ReadTx) error {
		o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj})
		if err != nil {
			return fmt.Errorf("objective: %w", err)
		}
		out = append(out, benchShape{Kind: "objective", Revision: o.Revision, Schema: o.Schema, Bytes: len(o.Payload)})
		op, err := tx.Operation(id)
		if err != nil {
			return fmt.Errorf("operation: %w", err)
		}
		r := op.Record()
		out = append(out, benchShape{Kind: "operation", Revision: r.Revision, Schema: r.Schema, Bytes: len(r.Payload) + len(op.Result)})
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		for ev, err := range tx.Events(before) {
			if err != nil {
				return err
			}
			out = append(out, benchShape{Kind: ev.Kind.String(), Revision: ev.ObjectRevision, Schema: ev.Schema, Bytes: len(ev.Payload)})
		}
		out = append(out, benchShape{Kind: "events", EventsWritten: last - before})
		return nil
	})
	return out, err
}

// checkSameRecords issues one command through c and one baseline commit
// and fails the benchmark unless both wrote records of the same shape:
// the baseline must stay what the coordinator writes.
func (w *benchWorld) checkSameRecords(b *testing.B, c *coordclient.Client) {
	b.Helper()
	ctx := context.Background()
	last := func(st coordstore.Store) uint64 {
		var n uint64
		benchFatal(b, "view", st.View(ctx, func(tx coordstore.ReadTx) error { var err error; n, err = tx.LastSequence(); return err }))
		return n
	}
	before := last(w.store)
	obj := coordwire.NewObjectiveID()
	cmd := coordclient.CreateObjective(obj, 1, w.doc)
	r, err := c.Command(ctx, cmd)
	benchFatal(b, "command", err)
	if !r.Succeeded() {
		b.Fatalf("command answered %v", r.Tag())
	}
	got, err := shapeOf(ctx, w.store, obj, cmd.OperationID(), before)
	benchFatal(b, "coordinator records", err)

	rawBefore := last(w.raw)
	robj, rop := coordwire.NewObjectiveID(), coordwire.NewOperationID()
	benchFatal(b, "raw commit", w.raw.Update(ctx, func(tx coordstore.Tx) error {
		return benchWriteRecords(tx, robj, rop, w.keys[0].KeyID(), [32]byte{1}, uint64(time.Now().Unix()), w.doc)
	}))
	want, err := shapeOf(ctx, w.raw, robj, rop, rawBefore)
	benchFatal(b, "raw records", err)
	if diff := cmp.Diff(want, got); diff != "" {
		b.Fatalf("the baseline does not write what a CREATE_OBJECTIVE admission writes (-baseline +coordinator):\n%s", diff)
	}
}

// benchParallel runs count calls of fn from n goroutines (goroutine g
// passes g) sharing one counter, and returns the wall time.
func benchParallel(n, count int, fn func(g int) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(count) {
				if err := fn(g); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(count)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// benchVariant is one measured way of doing one unit of work.
type benchVariant struct {
	name string
	conc int               // goroutines
	unit string            // metric name of the rate
	fn   func(g int) error // one unit of work by goroutine g
	st   coordstore.Store  // the store it commits to; nil: none
}

// commitStats are a durable store's committer counters.
type commitStats struct{ Commits, Transactions uint64 }

// statsOf reads st's committer counters (boltstore or pebblestore).
func statsOf(st coordstore.Store) commitStats {
	switch s := st.(type) {
	case *boltstore.Store:
		x := s.Stats()
		return commitStats{x.Commits, x.Transactions}
	case *pebblestore.Store:
		x := s.Stats()
		return commitStats{x.Commits, x.Transactions}
	}
	return commitStats{}
}

// commandVariants are the four commands variants: the raw store and the
// protocol, each with one goroutine and with benchClients.
func (w *benchWorld) commandVariants(b *testing.B) []benchVariant {
	clients := w.dialClients(b, benchClients)
	w.checkSameRecords(b, clients[0])
	ctx := context.Background()
	principal := w.keys[0].KeyID()
	raw := func(int) error { return w.rawCommit(ctx, principal) }
	proto := func(g int) error { _, err := w.command(ctx, clients[g]); return err }
	return []benchVariant{
		{"store-1w", 1, "commits/s", raw, w.raw},
		{"uds-1c", 1, "commands/s", proto, w.store},
		{"store-32w", benchClients, "commits/s", raw, w.raw},
		{"uds-32c", benchClients, "commands/s", proto, w.store},
	}
}

// runPlain runs v as a standard sub-benchmark: b.N units, allocations
// reported (all of the process: client, server and store), and the rate;
// with a base (a variant run before in the same invocation) also the ratio
// of the rates, named "v/base".
func runPlain(b *testing.B, v benchVariant, rates map[string]float64, base string) {
	b.Run(v.name, func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		d, err := benchParallel(v.conc, b.N, v.fn)
		b.StopTimer()
		benchFatal(b, v.name, err)
		rate := float64(b.N) / d.Seconds()
		rates[v.name] = rate
		b.ReportMetric(rate, v.unit)
		if r := rates[base]; r > 0 {
			b.ReportMetric(rate/r, v.name+"/"+base)
		}
		if v.st != nil {
			if st := statsOf(v.st); st.Commits > 0 {
				b.ReportMetric(float64(st.Transactions)/float64(st.Commits), "tx/fsync-cumulative")
			}
		}
	})
}

// BenchmarkCommands measures durable CREATE_OBJECTIVE commands end to end
// (coordclient → Unix socket → coordserver → boltstore, acknowledged after
// the fsynced admission) from 1 client and from 32 concurrent clients, and
// the raw boltstore commit rate of the same records from 1 and 32 writers,
// as standard sub-benchmarks in one invocation (allocs/op counts the whole
// process: client, server and store), then reports the ratios in the last
// sub-benchmark "ratio" (no target check; see BenchmarkCompareCommands).
// Use it to profile one variant:
//
//	go test -run '^$' -bench 'Commands/uds-32c' -cpuprofile cpu.out ./coordserver/
func BenchmarkCommands(b *testing.B) {
	w := newBenchWorld(b, 0)
	vs := w.commandVariants(b)
	rates := map[string]float64{}
	runPlain(b, vs[0], rates, "")
	runPlain(b, vs[1], rates, vs[0].name)
	runPlain(b, vs[2], rates, "")
	runPlain(b, vs[3], rates, vs[2].name)
}

// benchSample is one timed batch of a variant.
type benchSample struct {
	rate    float64 // units per second
	allocs  float64 // mallocs per unit, whole process
	bytes   float64 // heap bytes allocated per unit, whole process
	perSync float64 // store transactions per fsync'ed commit; 0: no store
}

// timedBatch runs count units of v and measures them.
func timedBatch(v benchVariant, count int) (benchSample, error) {
	var m0, m1 runtime.MemStats
	var s0, s1 commitStats
	if v.st != nil {
		s0 = statsOf(v.st)
	}
	runtime.ReadMemStats(&m0)
	d, err := benchParallel(v.conc, count, v.fn)
	runtime.ReadMemStats(&m1)
	if v.st != nil {
		s1 = statsOf(v.st)
	}
	s := benchSample{
		rate:   float64(count) / d.Seconds(),
		allocs: float64(m1.Mallocs-m0.Mallocs) / float64(count),
		bytes:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(count),
	}
	if c := s1.Commits - s0.Commits; c > 0 {
		s.perSync = float64(s1.Transactions-s0.Transactions) / float64(c)
	}
	return s, err
}

// benchPair is a baseline and the variant compared with it, measured in
// adjacent batches (alternating which runs first) so that both share the
// machine's load; the median over the pairs of variant/baseline is the
// figure checked.
type benchPair struct {
	base, subject benchVariant
	batch         int     // units per batch
	min           float64 // target on subject/base rate; 0: reported only
	metric        string
}

// benchComparePairs runs rounds of every pair in every b.Loop iteration,
// reports each variant's median rate, allocs and bytes per unit, each
// pair's median ratio, and fails when a pair with a target misses it over
// at least minPairs pairs.
func benchComparePairs(b *testing.B, pairs []benchPair, rounds, minPairs int) {
	samples := map[string][]benchSample{}
	ratios := make([][]float64, len(pairs))
	n := 0
	for b.Loop() {
		for range rounds {
			for i, p := range pairs {
				order := []benchVariant{p.base, p.subject}
				if n%2 == 1 {
					order[0], order[1] = order[1], order[0]
				}
				got := map[string]benchSample{}
				for _, v := range order {
					s, err := timedBatch(v, p.batch)
					benchFatal(b, v.name, err)
					got[v.name] = s
					samples[v.name] = append(samples[v.name], s)
				}
				ratios[i] = append(ratios[i], got[p.subject.name].rate/got[p.base.name].rate)
			}
			n++
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, p := range pairs {
		for _, v := range []benchVariant{p.base, p.subject} {
			ss := samples[v.name]
			b.ReportMetric(benchMedian(ss, func(s benchSample) float64 { return s.rate }), v.name+"-"+v.unit)
			b.ReportMetric(benchMedian(ss, func(s benchSample) float64 { return s.allocs }), v.name+"-allocs/op")
			b.ReportMetric(benchMedian(ss, func(s benchSample) float64 { return s.bytes }), v.name+"-B/op")
			if v.st != nil {
				b.ReportMetric(benchMedian(ss, func(s benchSample) float64 { return s.perSync }), v.name+"-tx/fsync")
			}
		}
	}
	for i, p := range pairs {
		r := benchMedian(ratios[i], func(f float64) float64 { return f })
		b.ReportMetric(r, p.metric)
		if p.min == 0 {
			continue
		}
		if len(ratios[i]) < minPairs {
			b.Logf("%s: %d pairs, too few to check the %.2f target (use -benchtime %dx or more)", p.metric, len(ratios[i]), p.min, (minPairs+rounds-1)/rounds)
			continue
		}
		if r < p.min {
			b.Errorf("target missed: %s = %.3f (median of %d adjacent pairs: %v), want >= %.2f", p.metric, r, len(ratios[i]), benchRound(ratios[i]), p.min)
		}
	}
	b.Logf("load average at the end: %s", benchLoad())
}

func benchMedian[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func benchRound(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}

// benchLoad is /proc/loadavg's first three fields ("?" elsewhere).
func benchLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	var a, c, d string
	fmt.Sscan(string(b), &a, &c, &d)
	return a + " " + c + " " + d
}

// Batch sizes and rounds of the Compare benchmarks: a batch lasts
// roughly 50–300 ms on the development VM, a b.Loop iteration
// benchCompareRounds rounds of every pair.
const (
	benchBatch1        = 64   // sequential commands / commits per batch
	benchBatch32       = 1024 // concurrent commands / commits per batch
	benchCompareRounds = 3
	benchMinPairs      = 5
	benchDialBatch     = 32 // handshakes per batch
)

// BenchmarkCompareCommands is the commands comparison, in
// one run: batches of the raw boltstore commit (the same records, checked)
// and of end-to-end commands alternate, at 1 and at 32 concurrency. It
// reports every variant's median rate ("-commits/s", "-commands/s"),
// allocations and bytes per unit (whole process), the median ratios of
// adjacent batches "uds-1c/store-1w" (reported) and "uds-32c/store-32w",
// and fails when the latter is below 0.5 over at least benchMinPairs pairs:
//
//	go test -run '^$' -bench CompareCommands -benchtime 3x ./coordserver/
func BenchmarkCompareCommands(b *testing.B) {
	w := newBenchWorld(b, 0)
	vs := w.commandVariants(b)
	benchComparePairs(b, []benchPair{
		{base: vs[0], subject: vs[1], batch: benchBatch1, metric: "uds-1c/store-1w"},
		{base: vs[2], subject: vs[3], batch: benchBatch32, min: benchMinCommandsRatio, metric: "uds-32c/store-32w"},
	}, benchCompareRounds, benchMinPairs)
}

// handshakeVariants are the raw crypto bound of one connection setup and
// two setups:
//
//   - "crypto-bound": what the workload handshake must compute in sequence,
//     on one goroutine — the authority signs SERVER_TRANSCRIPT, the client
//     checks it (edstrict.Check), the workload key signs CLIENT_TRANSCRIPT,
//     the server checks it — over transcripts of the real sizes, with the
//     real keys;
//   - "handshake": the full connection setup of the protocol: dial the Unix
//     socket, COORD_HELLO → WORKLOAD_CHALLENGE → WORKLOAD_RESPONSE →
//     COORD_HELLO_OK through the workload profile's client state machine
//     (which checks the authority proof and the grant), then close;
//   - "dial": coordclient.Dial then Close — the same exchange plus what
//     the client library adds before returning: Config validation, the
//     activation certificate's signature under the witness pin (a third
//     Ed25519 verification) and its other checks, the client's goroutines.
//
// Successive setups rotate over the workload keys (A.3 caps one key at 16
// connections, and a closed connection's server side ends asynchronously).
func (w *benchWorld) handshakeVariants() []benchVariant {
	k := w.keys[0]
	ch := coordwire.WorkloadChallenge{Service: workload.Service, NegotiatedMajor: 0, NegotiatedMinor: 1,
		ServerIncarnation: w.srv.Incarnation(), ChannelBindingKind: coordwire.BindingUDSPeer}
	rand.Read(ch.ClientNonce[:])
	rand.Read(ch.ServerNonce[:])
	copy(ch.AuthorityPublicKey[:], w.auth.Public())
	resp := coordwire.WorkloadResponse{KeyID: k.KeyID(), RequestedScope: []byte{0, 3}, RequestedExpiry: uint64(time.Now().Add(time.Hour).Unix())}
	authPub, wPub := w.auth.Public(), k.Public()
	bound := func(int) error {
		st := workload.ServerTranscript(&ch)
		sig := w.auth.Sign(st)
		if err := edstrict.Check(authPub, st, sig); err != nil {
			return err
		}
		ct := workload.ClientTranscript(&ch, &resp)
		sig = k.Sign(ct)
		return edstrict.Check(wPub, ct, sig)
	}
	var next atomic.Uint64
	sock := w.addr[len("unix:"):]
	handshake := func(int) error {
		i := int(next.Add(1))
		nc, err := net.Dial("unix", sock)
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		hs, err := workload.NewClientHandshake(workload.ClientConfig{
			WorkloadKey: w.keys[i%len(w.keys)], PinnedAuthorityFingerprint: w.auth.Fingerprint(),
			RequestedScope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, RequestedExpiry: time.Now().Add(time.Hour),
			Binding: workload.UDSClientBinding()})
		if err != nil {
			return err
		}
		fr, fw := coordwire.NewFrameReader(nc, coordwire.RoleClient), coordwire.NewFrameWriter(nc)
		if err := fw.WriteFrame(hs.Hello()); err != nil {
			return err
		}
		t, body, err := fr.ReadRaw()
		if err != nil {
			return err
		}
		if t != coordwire.TypeWorkloadChallenge {
			return fmt.Errorf("got frame type %v, want WORKLOAD_CHALLENGE", t)
		}
		r, err := hs.HandleChallenge(body, time.Now())
		if err != nil {
			return err
		}
		if err := fw.WriteFrame(r); err != nil {
			return err
		}
		if t, body, err = fr.ReadRaw(); err != nil {
			return err
		}
		_, err = hs.HandleHelloOK(t, body, time.Now())
		return err
	}
	dial := func(int) error {
		i := int(next.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := coordclient.Dial(ctx, w.addr, w.clientConfig(i))
		if err != nil {
			return err
		}
		return c.Close()
	}
	return []benchVariant{
		{"crypto-bound", 1, "setups/s", bound, nil},
		{"handshake", 1, "setups/s", handshake, nil},
		{"dial", 1, "setups/s", dial, nil},
	}
}

// BenchmarkHandshake measures the raw crypto bound and the full connection
// setup (see handshakeVariants) as standard sub-benchmarks in one
// invocation and reports "dial/crypto-bound" in the last sub-benchmark
// "ratio" (no target check; see BenchmarkCompareHandshake).
func BenchmarkHandshake(b *testing.B) {
	w := newBenchWorld(b, 0)
	vs := w.handshakeVariants()
	rates := map[string]float64{}
	runPlain(b, vs[0], rates, "")
	runPlain(b, vs[1], rates, vs[0].name)
	runPlain(b, vs[2], rates, vs[0].name)
}

// BenchmarkCompareHandshake is the handshake comparison:
// batches of connection setups and of the raw crypto bound alternate; it
// reports both median rates, allocations per unit and the median ratio of
// adjacent batches "dial/crypto-bound", and fails when it is below 0.5 over
// at least benchMinPairs pairs:
//
//	go test -run '^$' -bench CompareHandshake -benchtime 3x ./coordserver/
func BenchmarkCompareHandshake(b *testing.B) {
	w := newBenchWorld(b, 0)
	vs := w.handshakeVariants()
	// Warm up: the first setups pay for lazily built tables.
	for i := range 4 {
		benchFatal(b, "warm-up", errors.Join(vs[0].fn(i), vs[1].fn(i), vs[2].fn(i)))
	}
	benchComparePairs(b, []benchPair{
		{base: vs[0], subject: vs[1], batch: benchDialBatch, min: benchMinHandshakeRatio, metric: "handshake/crypto-bound"},
		{base: vs[0], subject: vs[2], batch: benchDialBatch, metric: "dial/crypto-bound"},
	}, benchCompareRounds*2, benchMinPairs)
}
