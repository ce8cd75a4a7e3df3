package coordserver_test

// Benchmarks of Runs: START_RUN to a running child process end
// to end with the real terminal owner (examples/execowner), and
// source-fact admission through the owner port on boltstore beside the
// raw store's commit rate of the same records, in the same run. They run
// only with -bench (README.md's Measured section has the figures):
//
//	go test -run '^$' -bench '^BenchmarkStartRunExec$' -benchtime 1000x ./coordserver/   # p50/p99 over 1,000 Runs
//	go test -run '^$' -bench '^BenchmarkStartRunExecProcess$' -benchtime 1000x ./coordserver/   # the same, owner in its own process
//	go test -run '^$' -bench CompareSourceFacts -benchtime 3x ./coordserver/            # checks the ≥ 0.5 targets

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

const (
	// benchFactBindings is the concurrency of the parallel fact variants:
	// 64 bindings, one goroutine each, and 64 raw store writers.
	benchFactBindings = 64
	// benchMinFactsRatio is the facts target: admitted facts/s >= 0.5 x
	// raw store commits/s of the same records, at 1 and at 64.
	benchMinFactsRatio = 0.5
)

// runsBench is a coordinator on boltstore (fsync on) serving a Unix
// socket, with one registered terminal owner and one client whose key
// may start Runs.
type runsBench struct {
	e     *env
	st    *boltstore.Store
	srv   *coordserver.Server
	cl    *coordclient.Client
	reg   coordserver.OwnerRegistration
	obj   coordwire.ObjectiveID
	doc   []byte // the executor document of every START_RUN
	group []byte
	dir   string // the store's directory
}

// newRunsBench starts it; adapter is the owner's adapter (its
// incarnation and fingerprint in reg).
func newRunsBench(b *testing.B, reg coordserver.OwnerRegistration, group, doc []byte) *runsBench {
	b.Helper()
	w := &runsBench{e: newEnv(b, 30*time.Second), reg: reg, doc: doc, group: group}
	w.dir = shortDir(b)
	st, err := boltstore.Open(filepath.Join(w.dir, "coord.db"), boltstore.Config{})
	benchFatal(b, "open store", err)
	b.Cleanup(func() { st.Close() })
	w.st = st
	cfg := w.e.config(st)
	cfg.Capabilities |= runsCaps
	cfg.Owner = &w.reg
	var path string
	w.srv, path = w.e.serve(cfg)
	k := w.e.addKey(runsScope, time.Now().Add(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w.cl, err = coordclient.Dial(ctx, "unix:"+path, coordclient.Config{
		WorkloadKey: k, AuthorityFingerprint: w.e.auth.Fingerprint(), WitnessPublicKey: w.e.w.id.PublicKey,
		Scope: runsScope, OfferedCapabilities: runsCaps, RequiredCapabilities: runsCaps,
	})
	benchFatal(b, "dial", err)
	b.Cleanup(func() { w.cl.Close() })
	w.obj = coordwire.NewObjectiveID()
	r, err := w.cl.Command(ctx, coordclient.CreateObjective(w.obj, 1, []byte("bench")))
	benchFatal(b, "create objective", err)
	if !r.Succeeded() {
		b.Fatalf("create objective: %v", r.Tag())
	}
	return w
}

// startRun issues one START_RUN and returns its binding once the reply
// says SUCCEEDED/STARTED (the server answers after the spawn's result
// transaction, within its command wait; a PENDING reply is waited out).
func (w *runsBench) startRun(ctx context.Context) (coordwire.BindingID, error) {
	p := coordwire.StartRun{
		ObjectiveID: w.obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: w.doc, PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: w.reg.Fingerprint, OwnerIncarnation: w.reg.Incarnation, TerminalGroup: w.group,
	}
	cmd := coordclient.StartRun(p)
	r, err := w.cl.Command(ctx, cmd)
	if err != nil {
		return coordwire.BindingID{}, err
	}
	if r.Tag() == coordwire.OperationPending {
		if r, err = w.cl.WaitFinal(ctx, cmd.OperationID()); err != nil {
			return coordwire.BindingID{}, err
		}
	}
	st, ok := r.Started()
	if !r.Succeeded() || !ok {
		return coordwire.BindingID{}, fmt.Errorf("START_RUN answered %v", r.Tag())
	}
	return st.BindingID, nil
}

// closedWaiter lets a benchmark wait for a binding's CLOSED fact to be
// admitted.
type closedWaiter struct {
	mu sync.Mutex
	m  map[coordwire.BindingID]chan struct{}
}

func (c *closedWaiter) chLocked(b coordwire.BindingID) chan struct{} {
	if c.m == nil {
		c.m = map[coordwire.BindingID]chan struct{}{}
	}
	ch := c.m[b]
	if ch == nil {
		ch = make(chan struct{})
		c.m[b] = ch
	}
	return ch
}

func (c *closedWaiter) ch(b coordwire.BindingID) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chLocked(b)
}

func (c *closedWaiter) closed(b coordwire.BindingID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chLocked(b)
	select {
	case <-ch: // a retried CLOSED
	default:
		close(ch)
	}
}

// BenchmarkStartRunExec measures START_RUN to a running process end to
// end: coordclient → Unix socket → coordserver (admission fsynced, SPAWN
// marked DISPATCHED durably, the adapter called, the result transaction
// fsynced) → examples/execowner in process (intent fsynced in its journal,
// a real child `true` in its own process group, the result fsynced), the
// reply SUCCEEDED/STARTED. One Run at a time; each iteration then waits
// until the child's CLOSED is admitted (the binding, Run and WorkSession
// ended and the evidence sealed) so that no Run's tail overlaps the next
// sample. Reported: p50-ms and p99-ms of the START_RUN latency, the mean
// full Run (start to CLOSED admitted) as run-ms, and allocs/op of the
// whole process (client, server, store, owner). Run it with -benchtime
// 1000x for the README's 1,000 Runs.
func BenchmarkStartRunExec(b *testing.B) {
	var port atomic.Pointer[coordserver.Owner]
	var waiter closedWaiter
	sink := benchSink(&port, &waiter)
	fp := [32]byte{0xbe, 0x4c, 1}
	eo, err := execowner.New(execowner.Config{Journal: filepath.Join(shortDir(b), "owner.journal"), Fingerprint: fp, Sink: sink})
	benchFatal(b, "execowner", err)
	b.Cleanup(func() { eo.Close() })
	benchStartRuns(b, &port, &waiter, coordserver.OwnerRegistration{Fingerprint: fp, Incarnation: eo.Incarnation(), Adapter: eo})
}

// BenchmarkStartRunExecProcess is BenchmarkStartRunExec with the owner in
// a process of its own: examples/execowner/cmd/execowner on its Unix
// socket, the coordinator's adapter and fact source an execowner.Dial
// client (the separate-process form of the crash test).
//
//	go test -run '^$' -bench '^BenchmarkStartRunExecProcess$' -benchtime 1000x ./coordserver/
func BenchmarkStartRunExecProcess(b *testing.B) {
	var port atomic.Pointer[coordserver.Owner]
	var waiter closedWaiter
	bin := buildExecownerBin(b)
	dir := shortDir(b)
	sock := filepath.Join(dir, "o", "owner.sock")
	fp := [32]byte{0xbe, 0x4c, 2}
	cmd := exec.Command(bin, "-socket", sock, "-journal", filepath.Join(dir, "owner.journal"), "-fingerprint", hex.EncodeToString(fp[:]))
	childproc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	benchFatal(b, "owner stdout", err)
	benchFatal(b, "start owner", cmd.Start())
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "execowner ready ") {
		b.Fatalf("execowner did not start: %q %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := execowner.Dial(ctx, sock, benchSink(&port, &waiter))
	benchFatal(b, "dial owner", err)
	b.Cleanup(func() { cl.Close() })
	benchStartRuns(b, &port, &waiter, coordserver.OwnerRegistration{Fingerprint: cl.Fingerprint(), Incarnation: cl.Incarnation(), Adapter: cl})
}

// benchSink admits the owner's facts through the port once it is set and
// tells the waiter about every admitted CLOSED.
func benchSink(port *atomic.Pointer[coordserver.Owner], waiter *closedWaiter) execowner.FactSink {
	return func(ctx context.Context, f coordwire.TerminalSourceFact) error {
		o := port.Load()
		if o == nil {
			return errors.New("bench: owner not registered yet")
		}
		if _, err := o.AdmitSourceFact(ctx, f); err != nil {
			return err
		}
		if f.Kind == coordwire.SourceClosed {
			waiter.closed(f.Source.BindingID)
		}
		return nil
	}
}

// benchStartRuns is the measured loop of the START_RUN benchmarks.
func benchStartRuns(b *testing.B, port *atomic.Pointer[coordserver.Owner], waiter *closedWaiter, reg coordserver.OwnerRegistration) {
	doc, err := (&execowner.Executor{Argv: []string{"true"}}).Marshal()
	benchFatal(b, "executor document", err)
	w := newRunsBench(b, reg, execowner.DefaultGroup, doc)
	port.Store(w.srv.Owner())

	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	var full time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		bid, err := w.startRun(ctx)
		benchFatal(b, "START_RUN", err)
		lat = append(lat, time.Since(t0))
		select {
		case <-waiter.ch(bid):
		case <-time.After(20 * time.Second):
			b.Fatalf("binding %x: no CLOSED admitted", bid[:4])
		}
		full += time.Since(t0)
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(full)/float64(b.N)/1e6, "run-ms")
	b.ReportMetric(float64(b.N)/full.Seconds(), "runs/s")
	b.Logf("%d Runs: START_RUN p50 %.2f ms, p99 %.2f ms, max %.2f ms; load average %s", b.N, q(0.50), q(0.99), float64(lat[len(lat)-1])/1e6, benchLoad())
}

// factsBench is the source-fact comparison: a coordinator whose owner
// (the in-memory dedupe adapter of runs_test.go: spawning is not measured
// here) has benchFactBindings active bindings started by START_RUN, and
// a raw boltstore in the same directory holding the same bindings.
type factsBench struct {
	*runsBench
	port     *coordserver.Owner
	bindings []coordwire.BindingID
	seqs     []uint64 // next source sequence per binding, coordinator
	raw      *boltstore.Store
	rawSeqs  []uint64
}

func newFactsBench(b *testing.B) *factsBench {
	b.Helper()
	ad := newMemAdapter("bench-group")
	reg := coordserver.OwnerRegistration{Fingerprint: [32]byte{0xfa, 0xc7}, Incarnation: coordwire.NewIncarnationID(), Adapter: ad}
	w := &factsBench{runsBench: newRunsBench(b, reg, []byte("bench-group"), []byte(`{"argv":["true"]}`))}
	w.port = w.srv.Owner()
	ctx := context.Background()
	for range benchFactBindings {
		bid, err := w.startRun(ctx)
		benchFatal(b, "START_RUN", err)
		w.bindings = append(w.bindings, bid)
		w.seqs = append(w.seqs, 0)
	}
	raw, err := boltstore.Open(filepath.Join(w.dir, "raw.db"), boltstore.Config{})
	benchFatal(b, "open raw store", err)
	b.Cleanup(func() { raw.Close() })
	w.raw = raw
	// The raw store holds the same BINDING rows (the coordinator's, copied).
	benchFatal(b, "copy bindings", w.st.View(ctx, func(rt coordstore.ReadTx) error {
		return raw.Update(ctx, func(tx coordstore.Tx) error {
			for _, id := range w.bindings {
				bd, err := rt.Binding(id)
				if err != nil {
					return err
				}
				if err := tx.PutBinding(bd); err != nil {
					return err
				}
			}
			return nil
		})
	}))
	w.rawSeqs = make([]uint64, benchFactBindings)
	w.checkSameRecords(b)
	return w
}

// fact is binding g's OUTPUT_RANGE at source sequence seq (owner
// sequence seq, 4 KiB attested).
func (w *factsBench) fact(g int, seq uint64) coordwire.TerminalSourceFact {
	p := coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: seq, LastOwnerSeq: seq, ByteCount: 4096}
	p.ContentSHA256[0], p.ContentSHA256[1] = byte(seq), byte(seq>>8)
	return coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: w.bindings[g], OwnerAuthorityFingerprint: w.reg.Fingerprint,
			OwnerIncarnation: w.reg.Incarnation, Sequence: coordwire.SourceSequence(seq)},
		Kind: p.Kind, Schema: coordwire.SourceFactSchema, Payload: p.Append(nil),
	}
}

// admit admits binding g's exact-next fact through the owner port (one
// coordinator transaction under the lease, fsynced).
func (w *factsBench) admit(ctx context.Context, g int) error {
	w.seqs[g]++
	a, err := w.port.AdmitSourceFact(ctx, w.fact(g, w.seqs[g]))
	if err != nil {
		return err
	}
	if a.Kind != coordserver.SourceAdmitted || a.Duplicate {
		return fmt.Errorf("fact %d of binding %d: %+v", w.seqs[g], g, a)
	}
	return nil
}

// rawCommit is the baseline: one boltstore Update writing exactly what an
// exact-next admission writes (checked by checkSameRecords): the retained
// fact and its SOURCE_FACT_ADMITTED event on the BINDING record.
func (w *factsBench) rawCommit(ctx context.Context, g int) error {
	w.rawSeqs[g]++
	f := w.fact(g, w.rawSeqs[g])
	img := f.Append(nil)
	return w.raw.Update(ctx, func(tx coordstore.Tx) error {
		return benchWriteFact(tx, w.bindings[g], w.rawSeqs[g], img)
	})
}

func benchWriteFact(tx coordstore.Tx, b coordwire.BindingID, seq uint64, img []byte) error {
	if err := tx.AppendSourceFact(coordstore.SourceFact{Binding: b, Sequence: seq, Image: img}); err != nil {
		return err
	}
	_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventSourceFactAdmitted,
		Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindBinding, ID: b}, ObjectRevision: 1,
		Schema: coordwire.RecordSchemaVersion, Payload: img})
	return err
}

// factShape is what must match between the two stores after one fact on
// binding 0: the retained fact and the events written.
type factShape struct {
	Fact   []byte
	Events []benchShape
}

func factShapeOf(ctx context.Context, st coordstore.Store, b coordwire.BindingID, seq, before uint64) (factShape, error) {
	var out factShape
	err := st.View(ctx, func(tx coordstore.ReadTx) error {
		f, err := tx.SourceFact(b, seq)
		if err != nil {
			return err
		}
		out.Fact = f.Image
		for ev, err := range tx.Events(before) {
			if err != nil {
				return err
			}
			out.Events = append(out.Events, benchShape{Kind: ev.Kind.String(), Revision: ev.ObjectRevision, Schema: ev.Schema, Bytes: len(ev.Payload)})
		}
		return nil
	})
	return out, err
}

// checkSameRecords admits one fact on binding 0 and commits one raw fact
// on it, and fails unless both stores wrote the same records.
func (w *factsBench) checkSameRecords(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	last := func(st coordstore.Store) uint64 {
		var n uint64
		benchFatal(b, "view", st.View(ctx, func(tx coordstore.ReadTx) error { var err error; n, err = tx.LastSequence(); return err }))
		return n
	}
	before, rawBefore := last(w.st), last(w.raw)
	benchFatal(b, "admit", w.admit(ctx, 0))
	benchFatal(b, "raw commit", w.rawCommit(ctx, 0))
	got, err := factShapeOf(ctx, w.st, w.bindings[0], w.seqs[0], before)
	benchFatal(b, "coordinator records", err)
	want, err := factShapeOf(ctx, w.raw, w.bindings[0], w.rawSeqs[0], rawBefore)
	benchFatal(b, "raw records", err)
	if diff := cmp.Diff(want, got); diff != "" {
		b.Fatalf("the baseline does not write what an admission writes (-baseline +coordinator):\n%s", diff)
	}
}

// factVariants: the raw store and the owner port, with 1 binding (one
// goroutine) and with 64 bindings (64 goroutines, goroutine g on binding
// g).
func (w *factsBench) factVariants() []benchVariant {
	ctx := context.Background()
	raw := func(g int) error { return w.rawCommit(ctx, g) }
	port := func(g int) error { return w.admit(ctx, g) }
	return []benchVariant{
		{"store-1w", 1, "commits/s", raw, w.raw},
		{"facts-1b", 1, "facts/s", port, w.st},
		{"store-64w", benchFactBindings, "commits/s", raw, w.raw},
		{"facts-64b", benchFactBindings, "facts/s", port, w.st},
	}
}

// BenchmarkSourceFacts measures source-fact admission through the owner
// port ((*coordserver.Owner).AdmitSourceFact: §11's exact-next admission
// of a 56-byte OUTPUT_RANGE in one fsynced transaction under the lease) on
// 1 binding and on 64 bindings in parallel, and the raw boltstore commit
// of the same records from 1 and from 64 writers, as standard
// sub-benchmarks in one invocation (allocs/op counts the whole process).
// No target check; see BenchmarkCompareSourceFacts.
func BenchmarkSourceFacts(b *testing.B) {
	w := newFactsBench(b)
	vs := w.factVariants()
	rates := map[string]float64{}
	runPlain(b, vs[0], rates, "")
	runPlain(b, vs[1], rates, vs[0].name)
	runPlain(b, vs[2], rates, "")
	runPlain(b, vs[3], rates, vs[2].name)
}

// BenchmarkCompareSourceFacts is the source-facts comparison, in
// one run: batches of the raw boltstore commit (the same fact and event,
// checked) and of admissions through the owner port alternate, at 1
// binding and at 64 bindings in parallel. It reports every variant's
// median rate, allocations and bytes per unit (whole process), the median
// ratios of adjacent batches "facts-1b/store-1w" and
// "facts-64b/store-64w", and fails when either is below 0.5 over at least
// benchMinPairs pairs:
//
//	go test -run '^$' -bench CompareSourceFacts -benchtime 3x ./coordserver/
func BenchmarkCompareSourceFacts(b *testing.B) {
	w := newFactsBench(b)
	vs := w.factVariants()
	benchComparePairs(b, []benchPair{
		{base: vs[0], subject: vs[1], batch: benchBatch1, min: benchMinFactsRatio, metric: "facts-1b/store-1w"},
		{base: vs[2], subject: vs[3], batch: benchBatch32, min: benchMinFactsRatio, metric: "facts-64b/store-64w"},
	}, benchCompareRounds, benchMinPairs)
}
