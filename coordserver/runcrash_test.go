package coordserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
)

// TestRunCrashSIGKILL is the Runs crash test (invariants 8
// and 9 for Runs, on real processes). Per lineage, three processes: a
// real phux-witness daemon (shared by the lineages, 2-second
// certificates), the terminal owner examples/execowner/cmd/execowner (its
// own process, journal and socket; never killed), and the coordinator, a
// child re-executing this test binary (runcrashchild_test.go) on one
// store (a boltstore file or a pebblestore directory, the lineages taking
// the engines in turn), which reaches the owner over its socket
// (execowner.Dial). Three client lanes per lineage issue START_RUN
// (client-minted OperationId, RunId, WorkSessionId, PendingBindingId) of
// `sh -c 'printf RUNID >> spawns.log'`, so every process the owner spawns
// leaves one line naming its Run. The coordinator is SIGKILLed, in
// rotation, at a random moment 100–600 ms after the lanes were let in, or
// by itself at the n-th (n = 1..3) occurrence of each commit boundary of
// START_RUN:
//
//   - right after the admission commit (RUN Planned, READY SPAWN row);
//   - right after the commit that marks the SPAWN DISPATCHED, before the
//     adapter call;
//   - after the adapter answered a spawn, before the result transaction;
//   - right after the result commit (SUCCEEDED), before any reply;
//
// and, in the same rotation, the parent SIGKILLs the execowner process at a
// random moment (its children die with it; a spawn between its journal's
// intent and result stays unprovable for good) and then the coordinator;
// the owner restarts on the same journal as a new incarnation, which the
// next coordinator registers (ending the old incarnation's bindings
// OwnerLost), and the lanes target it from then on.
//
// After every kill (child dead) the parent opens the store file and asks
// the owner's journal (Outcome over its own execowner.Dial connection),
// and after every restart the lanes look up every operation whose reply
// they lost and resend only after UNKNOWN. Checked throughout:
//
//   - no EffectAttemptId spawned two processes: at most one line per Run
//     in the spawn log, none for a Run whose SPAWN was never dispatched,
//     exactly one for every SUCCEEDED START_RUN at the end, at most one
//     SPAWN row per operation;
//   - no OperationId produced two Runs: every RUN record is one a lane
//     minted, an objective's attempts are distinct and consecutive, every
//     admitted operation has its Run;
//   - every acknowledged operation has exactly one outcome: every later
//     observation (lookup, resend, store record) is the same result, and an
//     admitted operation is never UNKNOWN;
//   - an unprovable dispatch is INDETERMINATE: the effect and the
//     operation INDETERMINATE together, the Run Planned, an
//     EXECUTION_BLOCKED Signal on its WorkSession, and the owner's journal
//     never learns of the effect afterwards (no second dispatch);
//   - a SUCCEEDED spawn's binding carries the ResourceId the owner's
//     journal stored for the key;
//   - only a START_RUN addressed to a dead owner incarnation is refused at
//     admission or REJECTED (its READY SPAWN never dispatched, no process).
//
// PHUX_RUN_CRASH_KILLS=N sets the total number of kills (default 52, split
// over four lineages run side by side); use ≥ 1,000 for the long run, with
// -timeout 0. Each lineage (from 7 kills a lineage on) fails when a kill
// point was never hit, or when it saw no INDETERMINATE operation, no lost reply
// resolved by lookup, or too few acknowledged Runs: it must not pass
// vacuously. The count and the outcome tallies are printed.
func TestRunCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	kills := 52
	if v := os.Getenv("PHUX_RUN_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHUX_RUN_CRASH_KILLS=%q: want a positive integer", v)
		}
		kills = n
	}
	bin := buildExecownerBin(t)
	w := startWitness(t, crashLifetime)
	per := (kills + runCrashLineages - 1) / runCrashLineages
	start := time.Now()
	var mu sync.Mutex
	var total rcTallies
	// The lineages run side by side in goroutines of this test (not
	// parallel subtests, which -parallel would cap at GOMAXPROCS): a
	// restart spends most of its time waiting for the dead child's lease.
	hs := make([]*rcHarness, runCrashLineages)
	for i := range hs {
		hs[i] = newRCHarness(t, w, bin, i)
	}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(per)
		}()
	}
	wg.Wait()
	for _, h := range hs {
		h.report(per >= len(runKillPoints))
		mu.Lock()
		total.add(&h.tal)
		mu.Unlock()
	}
	t.Logf("run crash test: %d kills in %v over %d lineages (%s); %s",
		total.kills, time.Since(start).Round(time.Millisecond), runCrashLineages, total.killLine(), total.outcomeLine())
	if !t.Failed() && total.kills < kills {
		t.Errorf("only %d kills, want %d", total.kills, kills)
	}
}

const runCrashLineages = 4

// runKillOwner: the parent SIGKILLs the execowner process at a random
// moment, then the coordinator; the owner restarts as a new incarnation.
const runKillOwner = "owner"

var runKillPoints = []string{"", runKillAdmission, runKillDispatched, runKillSpawned, runKillResult, "", runKillOwner}

var execownerBin struct {
	mu   sync.Mutex
	path string
}

// buildExecownerBin builds examples/execowner/cmd/execowner (the go build
// cache makes a rebuild cheap) into a directory removed when the calling
// test or benchmark ends; a caller while it exists shares it.
func buildExecownerBin(t testing.TB) string {
	t.Helper()
	eb := &execownerBin
	eb.mu.Lock()
	defer eb.mu.Unlock()
	if eb.path != "" {
		if _, err := os.Stat(eb.path); err == nil {
			return eb.path
		}
	}
	dir, err := os.MkdirTemp("", "csowner")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "execowner")
	out, err := exec.Command("go", "build", "-o", path, "github.com/phuxcoord/coord/examples/execowner/cmd/execowner").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("building cmd/execowner: %v\n%s", err, out)
	}
	eb.path = path
	t.Cleanup(func() {
		eb.mu.Lock()
		defer eb.mu.Unlock()
		os.RemoveAll(dir)
		if eb.path == path {
			eb.path = ""
		}
	})
	return path
}

type rcTallies struct {
	kills, killsRandom, killsBackstop, restarts, fenced int
	killsAt                                             map[string]int
	issued, acked, lost, resolved, resent               int
	succeeded, indeterminate, completed, running        int
	indeterminateSpawned, indeterminateOwnerResult      int
	indeterminateUnprovable, rejected, refused          int
	spawnLines, storeChecks, ownerQueries               int
	leaseWait                                           time.Duration
}

func (a *rcTallies) add(b *rcTallies) {
	if a.killsAt == nil {
		a.killsAt = map[string]int{}
	}
	a.kills += b.kills
	a.killsRandom += b.killsRandom
	a.killsBackstop += b.killsBackstop
	a.restarts += b.restarts
	a.fenced += b.fenced
	for k, v := range b.killsAt {
		a.killsAt[k] += v
	}
	a.issued += b.issued
	a.acked += b.acked
	a.lost += b.lost
	a.resolved += b.resolved
	a.resent += b.resent
	a.succeeded += b.succeeded
	a.indeterminate += b.indeterminate
	a.completed += b.completed
	a.running += b.running
	a.indeterminateSpawned += b.indeterminateSpawned
	a.indeterminateOwnerResult += b.indeterminateOwnerResult
	a.indeterminateUnprovable += b.indeterminateUnprovable
	a.rejected += b.rejected
	a.refused += b.refused
	a.spawnLines += b.spawnLines
	a.storeChecks += b.storeChecks
	a.ownerQueries += b.ownerQueries
	a.leaseWait += b.leaseWait
}

func (a *rcTallies) killLine() string {
	return fmt.Sprintf("random %d, after admission %d, after DISPATCHED %d, after spawn before result %d, after result %d, owner and coordinator at a random moment %d, backstop %d; %d fenced",
		a.killsRandom, a.killsAt[runKillAdmission], a.killsAt[runKillDispatched], a.killsAt[runKillSpawned], a.killsAt[runKillResult], a.killsAt[runKillOwner], a.killsBackstop, a.fenced)
}

func (a *rcTallies) outcomeLine() string {
	return fmt.Sprintf("%d START_RUN issued, %d acknowledged by their reply, %d replies lost to a kill (%d resolved by lookup, %d resent after UNKNOWN), %d refused at admission (owner incarnation gone); outcomes: %d SUCCEEDED/STARTED (Runs %d Completed, %d not), %d INDETERMINATE (%d of them spawned once before the kill; the owner's journal: %d unprovable, %d with a result), %d REJECTED (owner incarnation gone before dispatch); %d spawned processes, %d store checks, %d owner journal queries",
		a.issued, a.acked, a.lost, a.resolved, a.resent, a.refused, a.succeeded, a.completed, a.running, a.indeterminate, a.indeterminateSpawned, a.indeterminateUnprovable, a.indeterminateOwnerResult, a.rejected, a.spawnLines, a.storeChecks, a.ownerQueries)
}

// rcOp is one START_RUN a lane minted.
type rcOp struct {
	id   coordwire.OperationID
	p    coordwire.StartRun
	cmd  *coordclient.Cmd
	lane int

	// Guarded by rcHarness.mu.
	admitted bool // seen PENDING or final somewhere
	known    bool // a final outcome was observed
	// admittedAt and knownAt are the harness's observation count
	// (rcHarness.seen) when admitted and known were first set.
	admittedAt, knownAt uint64
	result              coordwire.OperationResult
	via                 string
	acked               bool
	refused             bool // refused at admission: its owner incarnation was gone
	// ownerFirst is the owner journal's first answer for the SPAWN key
	// while the effect was INDETERMINATE: "unknown", "unprovable" or
	// "stored".
	ownerFirst string
}

type rcHarness struct {
	t         *testing.T
	idx       int // the lineage
	w         *daemon
	bin       string
	dir       string
	store     string
	keysDir   string
	authDir   string
	sock      string
	ownerSock string
	spawnLog  string
	childLog  string
	authFP    [32]byte
	key       *keystore.WorkloadKey
	ownerFP   [32]byte
	ownerInc  coordwire.IncarnationID // guarded by mu
	ownerCmd  *exec.Cmd               // guarded by mu
	ownerDone chan struct{}           // guarded by mu
	group     []byte

	mu    sync.Mutex
	seen  uint64 // observations that set an rcOp's admitted or known
	ops   map[coordwire.OperationID]*rcOp
	runs  map[coordwire.RunID]*rcOp
	objs  []coordwire.ObjectiveID
	tal   rcTallies
	fails atomic.Int64

	smu     sync.Mutex
	gen     int
	up      bool
	changed chan struct{}

	lanesWG sync.WaitGroup
	final   atomic.Bool
	stop    atomic.Bool

	coordID   string
	lastEpoch uint64
	childN    int
}

func newRCHarness(t *testing.T, w *daemon, bin string, idx int) *rcHarness {
	h := &rcHarness{t: t, w: w, bin: bin, idx: idx, ops: map[coordwire.OperationID]*rcOp{}, runs: map[coordwire.RunID]*rcOp{},
		changed: make(chan struct{}), group: execowner.DefaultGroup}
	h.tal.killsAt = map[string]int{}
	h.dir = shortDir(t)
	h.store = filepath.Join(h.dir, crashStores[idx%len(crashStores)]) // the engines in turn
	h.keysDir = filepath.Join(h.dir, "keys")
	h.authDir = filepath.Join(h.dir, "auth")
	h.sock = filepath.Join(h.dir, "c.sock")
	h.ownerSock = filepath.Join(h.dir, "o", "owner.sock")
	h.spawnLog = filepath.Join(h.dir, "spawns.log")
	h.childLog = filepath.Join(h.dir, "child.log")
	a, err := keystore.InitAuthority(h.authDir)
	if err != nil {
		t.Fatal(err)
	}
	h.authFP = a.Fingerprint()
	seed := make([]byte, 32)
	crashRand(seed)
	h.key, err = keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(h.keysDir, h.key.Public(), runsScope, time.Now().Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	crashRand(h.ownerFP[:])
	h.startOwner()
	return h
}

// startOwner starts the execowner process (a fresh incarnation on the
// same journal each time); the first start registers the lineage's
// cleanup, which stops whichever owner runs then.
func (h *rcHarness) startOwner() {
	logf, err := os.OpenFile(filepath.Join(h.dir, "owner.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.fatalf("%v", err)
	}
	cmd := exec.Command(h.bin, "-socket", h.ownerSock, "-journal", filepath.Join(h.dir, "owner.journal"),
		"-fingerprint", hex.EncodeToString(h.ownerFP[:]), "-dir", h.dir)
	cmd.Stderr = logf
	childproc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		h.fatalf("%v", err)
	}
	logf.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	inc, herr := hex.DecodeString(safeField(f, 2))
	if err != nil || len(f) != 4 || f[1] != "ready" || herr != nil || len(inc) != 16 {
		cmd.Process.Kill()
		cmd.Wait()
		h.fatalf("execowner did not start: %q %v", line, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	first := h.ownerCmd == nil
	h.mu.Lock()
	h.ownerInc = coordwire.IncarnationID(inc)
	h.ownerCmd, h.ownerDone = cmd, done
	h.mu.Unlock()
	if first {
		h.t.Cleanup(func() {
			h.mu.Lock()
			cmd, done := h.ownerCmd, h.ownerDone
			h.mu.Unlock()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
}

// killOwner SIGKILLs the execowner process and waits for it; its
// children die with it (Pdeathsig).
func (h *rcHarness) killOwner() {
	h.mu.Lock()
	cmd, done := h.ownerCmd, h.ownerDone
	h.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// currentInc is the live owner incarnation.
func (h *rcHarness) currentInc() coordwire.IncarnationID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ownerInc
}

func safeField(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

func (h *rcHarness) failf(format string, args ...any) {
	h.t.Helper()
	h.fails.Add(1)
	h.t.Errorf("lineage %d: %s", h.idx, fmt.Sprintf(format, args...))
	h.stop.Store(true)
}

func (h *rcHarness) failed() bool { return h.fails.Load() > 0 }

// fatalf records a failure and ends the lineage's goroutine (run is not
// the test's goroutine, so t.Fatal is not allowed there).
func (h *rcHarness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.failf(format, args...)
	runtime.Goexit()
}

// ---- the server as the lanes see it ----

func (h *rcHarness) setUp(up bool) {
	h.smu.Lock()
	if up {
		h.gen++
	}
	h.up = up
	close(h.changed)
	h.changed = make(chan struct{})
	h.smu.Unlock()
}

func (h *rcHarness) waitServer(gen int) (int, bool) {
	for {
		h.smu.Lock()
		g, up, ch := h.gen, h.up, h.changed
		h.smu.Unlock()
		if up && g > gen {
			return g, true
		}
		if h.stop.Load() {
			return g, false
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---- the model ----

func (h *rcHarness) newOp(lane int, obj coordwire.ObjectiveID) *rcOp {
	inc := h.currentInc()
	p := coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: execowner.ExecutorSchema, PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: h.ownerFP, OwnerIncarnation: inc, TerminalGroup: h.group,
	}
	doc, err := (&execowner.Executor{Argv: []string{"sh", "-c", `printf '%s\n' "$1" >> "$2"`, "sh", hex.EncodeToString(p.RunID[:]), h.spawnLog}}).Marshal()
	if err != nil {
		h.failf("executor document: %v", err)
	}
	p.ExecutorDocument = doc
	cmd := coordclient.StartRun(p)
	op := &rcOp{id: cmd.OperationID(), p: p, cmd: cmd, lane: lane}
	h.mu.Lock()
	h.ops[op.id] = op
	h.runs[p.RunID] = op
	h.tal.issued++
	h.mu.Unlock()
	return op
}

// asked is the observation count to pass to observe for a request about
// to be sent.
func (h *rcHarness) asked() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen
}

// fromStore is observe's asked for the store: read after the child died,
// it is never older than an observation.
const fromStore = math.MaxUint64

// observe records one observation of op's outcome and checks that all
// observations of an OperationId agree. It reports whether the outcome is
// final. asked is h.asked() from before the request was sent: an answer
// to a request sent before op's admission or outcome was observed
// elsewhere may be older than that observation (a reply the coordinator
// sent before it committed the outcome, read by the client after the
// kill, or a lane descheduled between its reply and observe while the
// store was checked), so UNKNOWN or PENDING is then not a contradiction;
// the lane looks the operation up again.
func (h *rcHarness) observe(op *rcOp, res coordwire.OperationResult, via string, ack bool, asked uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch res.Tag {
	case coordwire.OperationUnknown:
		if (op.admitted && op.admittedAt <= asked) || (op.known && op.knownAt <= asked) {
			h.failf("operation %x is UNKNOWN via %s, but it was admitted (outcome via %s)", op.id[:4], via, op.via)
		}
		return false
	case coordwire.OperationPending:
		if op.known && op.knownAt <= asked {
			h.failf("operation %x is PENDING via %s after its final outcome via %s", op.id[:4], via, op.via)
		}
		h.admit(op)
		return false
	case coordwire.OperationSucceeded:
		p, err := coordwire.DecodeResultPayload(res.ResultKind, res.ResultPayload)
		st, ok := p.(*coordwire.StartedResult)
		if err != nil || !ok || st.RunID != op.p.RunID || st.WorkSessionID != op.p.WorkSessionID || st.BindingID != coordwire.BindingID(op.p.PendingBindingID) {
			h.failf("operation %x: SUCCEEDED via %s does not name its Run, WorkSession and binding: %+v (%v)", op.id[:4], via, p, err)
			return true
		}
	case coordwire.OperationIndeterminate:
	case coordwire.OperationRejected:
		if op.p.OwnerIncarnation == h.ownerInc {
			h.failf("operation %x: REJECTED via %s (%+v) although its owner incarnation is alive", op.id[:4], via, res)
			return true
		}
	default:
		h.failf("operation %x: outcome %v via %s (%+v), want SUCCEEDED, INDETERMINATE, or REJECTED for a dead owner incarnation", op.id[:4], res.Tag, via, res)
		return true
	}
	h.admit(op)
	if ack && !op.acked {
		op.acked = true
		h.tal.acked++
	}
	if !op.known {
		h.seen++
		op.known, op.knownAt, op.result, op.via = true, h.seen, res, via
		op.result.ResultPayload = bytes.Clone(res.ResultPayload)
		return true
	}
	if !bytes.Equal(op.result.Append(nil), res.Append(nil)) {
		h.failf("operation %x has two outcomes: %+v via %s, then %+v via %s", op.id[:4], op.result, op.via, res, via)
	}
	return true
}

// admit marks op admitted (under mu).
func (h *rcHarness) admit(op *rcOp) {
	if !op.admitted {
		h.seen++
		op.admitted, op.admittedAt = true, h.seen
	}
}

// ---- the lanes ----

func (h *rcHarness) clientConfig() coordclient.Config {
	return coordclient.Config{
		WorkloadKey: h.key, AuthorityFingerprint: h.authFP, WitnessPublicKey: h.w.id.PublicKey,
		Scope: runsScope, OfferedCapabilities: runsCaps, RequiredCapabilities: runsCaps,
		HandshakeTimeout: 5 * time.Second,
	}
}

func (h *rcHarness) startLanes(n int) {
	for i := range n {
		obj := coordwire.NewObjectiveID()
		h.objs = append(h.objs, obj)
		h.lanesWG.Add(1)
		go h.lane(i, obj)
	}
}

func (h *rcHarness) lane(i int, obj coordwire.ObjectiveID) {
	defer h.lanesWG.Done()
	create := coordclient.CreateObjective(obj, 1, []byte("run crash"))
	created := false
	var pending []*rcOp
	gen, retry := 0, false
	for {
		after := gen
		if retry { // the same server may still be up: a dial or session error is not a kill
			after--
			time.Sleep(50 * time.Millisecond)
		}
		g, ok := h.waitServer(after)
		if !ok {
			return
		}
		gen, retry = g, true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl, err := coordclient.Dial(ctx, "unix:"+h.sock, h.clientConfig())
		cancel()
		if err != nil {
			continue // killed before or while we dialed: wait for the next one
		}
		done := h.laneSession(cl, i, obj, create, &created, &pending)
		cl.Close()
		if done {
			return
		}
	}
}

// laneSession issues START_RUNs on one connection until it breaks or the
// run stops; it reports true when the lane is finished (final phase,
// nothing unresolved).
func (h *rcHarness) laneSession(cl *coordclient.Client, lane int, obj coordwire.ObjectiveID, create *coordclient.Cmd, created *bool, pending *[]*rcOp) bool {
	// A Result is an answer whatever its error says (coordclient returns
	// ErrIndeterminate, ErrRejected, ErrUnknownOperation with the result);
	// only a nil Result is a lost or refused request.
	call := func(f func(ctx context.Context) (*coordclient.Result, error)) (*coordclient.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := f(ctx)
		if r != nil {
			return r, nil
		}
		if err == nil {
			err = errors.New("no result")
		}
		return nil, err
	}
	if !*created {
		r, err := call(func(ctx context.Context) (*coordclient.Result, error) { return cl.Command(ctx, create) })
		if err != nil {
			return false
		}
		if !r.Succeeded() {
			h.failf("lane %d: CREATE_OBJECTIVE answered %v", lane, r.Tag())
			return true
		}
		*created = true
	}
	for !h.stop.Load() {
		// Resolve what earlier sessions lost, by lookup, resending only
		// after UNKNOWN (the same command, the same OperationId).
		var still []*rcOp
		for i, op := range *pending {
			asked := h.asked()
			r, err := call(func(ctx context.Context) (*coordclient.Result, error) { return cl.OperationResult(ctx, op.id) })
			if err == nil && r.Tag() == coordwire.OperationUnknown {
				h.observe(op, r.Operation, "lookup", false, asked)
				h.mu.Lock()
				h.tal.resent++
				h.mu.Unlock()
				asked = h.asked()
				r, err = call(func(ctx context.Context) (*coordclient.Result, error) { return cl.Command(ctx, op.cmd) })
			}
			if err != nil && h.refused(op, err) {
				continue // its owner incarnation is gone: never admitted
			}
			if err != nil {
				*pending = append(still, (*pending)[i:]...)
				return false
			}
			if h.observe(op, r.Operation, "lookup", false, asked) {
				h.mu.Lock()
				h.tal.resolved++
				h.mu.Unlock()
			} else {
				still = append(still, op)
			}
		}
		*pending = still
		if h.final.Load() {
			if len(*pending) == 0 {
				return true
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		op := h.newOp(lane, obj)
		asked := h.asked()
		r, err := call(func(ctx context.Context) (*coordclient.Result, error) { return cl.Command(ctx, op.cmd) })
		if err != nil && h.refused(op, err) {
			continue
		}
		if err != nil {
			h.mu.Lock()
			h.tal.lost++
			h.mu.Unlock()
			*pending = append(*pending, op)
			return false
		}
		if !h.observe(op, r.Operation, "reply", true, asked) {
			*pending = append(*pending, op)
		}
	}
	return false
}

// refused reports (and records) a request-scoped refusal of op's
// START_RUN: allowed only when its owner incarnation is gone (the owner
// was restarted), which START_RUN's admission refuses.
func (h *rcHarness) refused(op *rcOp, err error) bool {
	var ce *coordclient.Error
	if !errors.As(err, &ce) || !ce.Remote || ce.Code == 0 || ce.Code.ConnectionFatal() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if op.p.OwnerIncarnation == h.ownerInc || op.admitted {
		h.failf("operation %x refused (%v) although its owner incarnation is alive or it was admitted", op.id[:4], err)
		return true
	}
	op.refused = true
	h.tal.refused++
	return true
}

// ---- the child ----

type rcChild struct {
	cmd    *exec.Cmd
	ready  chan crashReady
	exited chan struct{}
	state  *os.ProcessState
}

func (h *rcHarness) startChild(at string, n int) *rcChild {
	h.childN++
	cfg := runCrashChildConfig{Store: h.store, Keys: h.keysDir, Authority: h.authDir, Witness: h.w.addr,
		WitnessPub: hex.EncodeToString(h.w.id.PublicKey), Socket: h.sock, OwnerSocket: h.ownerSock,
		LeaseMarginMS: int(crashLeaseMargin / time.Millisecond), KillAt: at, KillN: n}
	b, _ := json.Marshal(cfg)
	p := filepath.Join(h.dir, "child.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		h.fatalf("%v", err)
	}
	logf, err := os.OpenFile(h.childLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.fatalf("%v", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- child %d (kill at %q #%d)\n", h.childN, at, n)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runCrashChildEnv+"="+p)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.fatalf("%v", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		h.fatalf("%v", err)
	}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		h.fatalf("%v", err)
	}
	c := &rcChild{cmd: cmd, ready: make(chan crashReady, 1), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if js, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				var r crashReady
				if json.Unmarshal([]byte(js), &r) == nil {
					c.ready <- r
				}
			}
		}
		cmd.Wait()
		stdin.Close()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	return c
}

func (c *rcChild) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

func (c *rcChild) killedBySIGKILL() bool {
	ws, ok := c.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (h *rcHarness) childLogTail() string {
	b, _ := os.ReadFile(h.childLog)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (h *rcHarness) activated(r crashReady) {
	if h.coordID == "" {
		h.coordID = r.CoordinatorID
	} else if r.CoordinatorID != h.coordID {
		h.failf("CoordinatorId changed across a restart: %s → %s", h.coordID, r.CoordinatorID)
	}
	if r.Epoch <= h.lastEpoch {
		h.failf("restart did not advance the epoch: %d → %d", h.lastEpoch, r.Epoch)
	}
	h.lastEpoch = r.Epoch
	h.mu.Lock()
	h.tal.restarts++
	h.tal.leaseWait += time.Duration(r.LeaseWaitMS) * time.Millisecond
	h.mu.Unlock()
}

// life starts one child with kill point at (n-th occurrence) and returns
// once it is dead.
func (h *rcHarness) life(rng *mrand.Rand, at string, n int) {
	childAt := at
	if at == runKillOwner {
		childAt = ""
	}
	c := h.startChild(childAt, n)
	var ready crashReady
	select {
	case ready = <-c.ready:
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.kill()
		h.fatalf("child %d did not activate within 30 s\n%s", h.childN, h.childLogTail())
	}
	parentKilled := false
	if ready.Epoch != 0 {
		h.activated(ready)
		h.setUp(true)
		if at == runKillOwner {
			time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
			h.killOwner()
			c.kill() // it may have exited already: its owner connection ended
			h.startOwner()
		} else if at == "" {
			select {
			case <-time.After(time.Duration(100+rng.IntN(500)) * time.Millisecond):
				parentKilled = true
				c.kill()
			case <-c.exited:
			}
		} else {
			select {
			case <-c.exited:
			case <-time.After(4 * time.Second):
				parentKilled = true
				c.kill()
			}
		}
		h.setUp(false)
	}
	<-c.exited
	if ws, _ := c.state.Sys().(syscall.WaitStatus); at == runKillOwner && ws.Exited() && ws.ExitStatus() == runCrashExitOwner {
		// The coordinator saw its owner connection end before our kill.
	} else if !c.killedBySIGKILL() {
		ws, _ := c.state.Sys().(syscall.WaitStatus)
		if ws.Exited() && ws.ExitStatus() == crashExitFenced {
			h.mu.Lock()
			h.tal.fenced++
			h.mu.Unlock()
			return
		}
		h.fatalf("child %d ended without SIGKILL: %v\n%s", h.childN, c.state, h.childLogTail())
	}
	h.mu.Lock()
	h.tal.kills++
	switch {
	case at == "" && parentKilled:
		h.tal.killsRandom++
	case parentKilled:
		h.tal.killsBackstop++
	case at == "":
		h.failf("child %d died of SIGKILL with no kill point and no kill", h.childN)
	default:
		h.tal.killsAt[at]++
	}
	h.mu.Unlock()
}

func (h *rcHarness) run(kills int) {
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	h.startLanes(3)
	defer func() {
		h.stop.Store(true)
		h.setUp(false)
		h.lanesWG.Wait()
	}()
	for i := 0; h.tal.kills < kills && !h.failed(); i++ {
		at := runKillPoints[i%len(runKillPoints)]
		h.life(rng, at, 1+rng.IntN(3))
		h.check(false)
	}
	if h.failed() {
		return
	}
	// The final activation: no kill while the lanes resolve everything
	// they lost (a child that fences on a starved machine is replaced);
	// then the child is killed once more (not counted) and everything is
	// checked in full.
	h.final.Store(true)
	lanesDone := make(chan struct{})
	go func() { h.lanesWG.Wait(); close(lanesDone) }()
	deadline := time.After(90 * time.Second)
	var c *rcChild
	for c == nil {
		c = h.startChild("", 0)
		select {
		case ready := <-c.ready:
			h.activated(ready)
		case <-c.exited:
			h.fatalf("final child exited before READY: %v\n%s", c.state, h.childLogTail())
		case <-time.After(30 * time.Second):
			c.kill()
			h.fatalf("final child did not activate\n%s", h.childLogTail())
		}
		h.setUp(true)
		select {
		case <-lanesDone:
		case <-c.exited:
			h.setUp(false)
			h.mu.Lock()
			h.tal.fenced++
			h.mu.Unlock()
			c = nil // fenced: the next one
			continue
		case <-deadline:
			h.mu.Lock()
			var open []string
			for _, op := range h.ops {
				if !op.known {
					open = append(open, fmt.Sprintf("%x(admitted %v)", op.id[:4], op.admitted))
				}
			}
			h.mu.Unlock()
			c.kill()
			h.failf("lanes did not resolve their operations within 90 s of the final phase; unresolved: %v; their effects: %s\n%s", open, h.describeOpen(), h.childLogTail())
		}
	}
	// Let the spawned processes' CLOSED facts reach the coordinator.
	time.Sleep(300 * time.Millisecond)
	c.kill()
	h.setUp(false)
	h.check(true)
}

// ---- the checks (child dead) ----

// check opens the store file and asks the owner's journal; final adds the
// checks that need every operation resolved.
func (h *rcHarness) check(final bool) {
	if h.failed() {
		return
	}
	ctx := context.Background()
	if _, err := os.Stat(h.store); err != nil {
		if !final && errors.Is(err, os.ErrNotExist) {
			return
		}
		h.failf("open store: %v", err)
		return
	}
	st, err := crashOpenStore(ctx, crashChildConfig{Store: h.store})
	if err != nil {
		h.failf("open store: %v", err)
		return
	}
	defer st.Close()
	h.mu.Lock()
	ops := make([]*rcOp, 0, len(h.ops))
	for _, op := range h.ops {
		ops = append(ops, op)
	}
	h.tal.storeChecks++
	h.mu.Unlock()

	stored := map[coordwire.OperationID]coordwire.OperationResult{}
	runs := map[coordwire.RunID]coordwire.RunRecord{}
	effects := map[coordwire.OperationID][]rcEffectRow{}
	blocked := map[coordwire.WorkSessionID]bool{}
	resource := map[coordwire.BindingID][]byte{}
	err = st.View(ctx, func(tx coordstore.ReadTx) error {
		for _, op := range ops {
			o, err := tx.Operation(op.id)
			if errors.Is(err, coordstore.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			var r coordwire.OperationResult
			if err := r.Decode(o.Result); err != nil {
				return fmt.Errorf("operation %x result: %w", op.id[:4], err)
			}
			stored[op.id] = r
		}
		for _, kind := range []coordwire.ObjectKind{coordwire.ObjectKindRun, coordwire.ObjectKindSignal} {
			start := coordstore.ObjectKey{Kind: kind}
			for o, err := range tx.Objects(&start) {
				if err != nil {
					return err
				}
				if o.Key.Kind != kind {
					break
				}
				if kind == coordwire.ObjectKindRun {
					var r coordwire.RunRecord
					if err := r.DecodeTLV(o.Payload); err != nil {
						return err
					}
					runs[coordwire.RunID(o.Key.ID)] = r
					continue
				}
				var s coordwire.SignalRecord
				if err := s.DecodeTLV(o.Payload); err != nil {
					return err
				}
				if s.Kind == coordwire.SignalExecutionBlocked {
					blocked[s.WorkSessionID] = true
				}
			}
		}
		for s := coordwire.EffectReady; s.Valid(); s++ {
			for row, err := range tx.EffectsByState(s) {
				if err != nil {
					return err
				}
				var a coordwire.EffectAttempt
				if err := a.Decode(row.Image); err != nil {
					return err
				}
				effects[row.OperationID] = append(effects[row.OperationID], rcEffectRow{a, row.State})
				if a.Kind == coordwire.EffectSpawn && row.State == coordwire.EffectSucceeded {
					b, err := tx.Binding(coordwire.BindingID(a.Target.PendingBindingID))
					if err != nil {
						return fmt.Errorf("binding of a SUCCEEDED spawn: %w", err)
					}
					resource[b.ID] = b.Ref.ResourceID
				}
			}
		}
		return nil
	})
	if err != nil {
		h.failf("reading the store: %v", err)
		return
	}
	lines := h.spawnLines()

	// Every stored operation agrees with what the lanes saw.
	for _, op := range ops {
		if r, ok := stored[op.id]; ok {
			h.observe(op, r, "store", false, fromStore)
		} else {
			h.mu.Lock()
			if op.admitted || op.known {
				h.failf("operation %x was admitted (via %s) but is not in the store", op.id[:4], op.via)
			}
			h.mu.Unlock()
		}
	}
	// Runs: each one a lane minted, one per admitted operation, distinct
	// consecutive attempts per objective.
	attempts := map[coordwire.ObjectiveID][]uint32{}
	h.mu.Lock()
	for id, r := range runs {
		op := h.runs[id]
		if op == nil {
			h.failf("Run %x was not minted by any lane", id[:4])
			continue
		}
		if _, ok := stored[op.id]; !ok {
			h.failf("Run %x exists without its operation %x", id[:4], op.id[:4])
		}
		attempts[r.ObjectiveID] = append(attempts[r.ObjectiveID], r.Attempt)
	}
	h.mu.Unlock()
	for obj, as := range attempts {
		seen := map[uint32]bool{}
		for _, a := range as {
			if seen[a] || a < 1 || int(a) > len(as) {
				h.failf("objective %x: Run attempts %v are not distinct 1..%d", obj[:4], as, len(as))
				break
			}
			seen[a] = true
		}
	}
	var queries []coordserver.EffectKey
	var queryOps []*rcOp
	var queryStates []coordwire.EffectState
	for _, op := range ops {
		r, ok := stored[op.id]
		n := lines[hex.EncodeToString(op.p.RunID[:])]
		if !ok {
			if n != 0 {
				h.failf("Run %x: %d processes spawned for an operation that was never admitted", op.p.RunID[:4], n)
			}
			continue
		}
		run, hasRun := runs[op.p.RunID]
		if !hasRun {
			h.failf("operation %x admitted without its Run", op.id[:4])
			continue
		}
		rows := effects[op.id]
		if len(rows) != 1 || rows[0].a.Kind != coordwire.EffectSpawn {
			h.failf("operation %x has %d effect rows (want exactly one SPAWN)", op.id[:4], len(rows))
			continue
		}
		row := rows[0]
		dead := op.p.OwnerIncarnation != h.currentInc() // its owner was restarted
		if n > 1 {
			h.failf("EffectAttemptId %x (Run %x) spawned %d processes", row.a.ID[:4], op.p.RunID[:4], n)
		}
		switch row.st {
		case coordwire.EffectReady:
			if r.Tag != coordwire.OperationPending || run.State != coordwire.RunPlanned || n != 0 {
				h.failf("READY SPAWN %x: operation %v, Run %v, %d processes (want PENDING, Planned, none)", row.a.ID[:4], r.Tag, run.State, n)
			}
		case coordwire.EffectDispatched:
			if r.Tag != coordwire.OperationPending || run.State != coordwire.RunPlanned {
				h.failf("DISPATCHED SPAWN %x: operation %v, Run %v (want PENDING, Planned)", row.a.ID[:4], r.Tag, run.State)
			}
		case coordwire.EffectSucceeded:
			okRun := run.State == coordwire.RunRunning || run.State == coordwire.RunCompleted ||
				(dead && run.State == coordwire.RunFailed) // its binding ended OwnerLost
			if r.Tag != coordwire.OperationSucceeded || !okRun {
				h.failf("SUCCEEDED SPAWN %x: operation %v, Run %v (want SUCCEEDED, Running or Completed, or Failed once its owner is gone)", row.a.ID[:4], r.Tag, run.State)
			}
			// A dead owner's process may have died with it before it wrote
			// its line: at most one then.
			if final && n != 1 && !dead {
				h.failf("SUCCEEDED SPAWN %x (Run %x): %d processes spawned, want exactly 1", row.a.ID[:4], op.p.RunID[:4], n)
			}
		case coordwire.EffectRejected:
			if !dead || r.Tag != coordwire.OperationRejected || run.State != coordwire.RunFailed {
				h.failf("REJECTED SPAWN %x: operation %v, Run %v, owner gone %v (want REJECTED, Failed, only for a gone owner)", row.a.ID[:4], r.Tag, run.State, dead)
			}
		case coordwire.EffectIndeterminate:
			if r.Tag != coordwire.OperationIndeterminate || run.State != coordwire.RunPlanned || !blocked[op.p.WorkSessionID] {
				h.failf("INDETERMINATE SPAWN %x: operation %v, Run %v, EXECUTION_BLOCKED %v (want INDETERMINATE, Planned, raised)", row.a.ID[:4], r.Tag, run.State, blocked[op.p.WorkSessionID])
			}
		default:
			h.failf("SPAWN %x in state %v", row.a.ID[:4], row.st)
		}
		if row.st != coordwire.EffectReady {
			queries = append(queries, coordserver.EffectKey{ID: row.a.ID, Digest: row.a.EffectDigest})
			queryOps = append(queryOps, op)
			queryStates = append(queryStates, row.st)
		}
		if final {
			h.mu.Lock()
			switch row.st {
			case coordwire.EffectSucceeded:
				h.tal.succeeded++
				if run.State == coordwire.RunCompleted {
					h.tal.completed++
				} else {
					h.tal.running++
				}
			case coordwire.EffectIndeterminate:
				h.tal.indeterminate++
				if n == 1 {
					h.tal.indeterminateSpawned++
				}
			case coordwire.EffectRejected:
				h.tal.rejected++
			default:
				h.failf("after the final activation SPAWN %x is still %v", row.a.ID[:4], row.st)
			}
			h.tal.spawnLines += n
			h.mu.Unlock()
		}
	}
	h.checkOwner(queries, queryOps, queryStates, resource, final)
}

// rcEffectRow is one outbox row read from the store.
type rcEffectRow struct {
	a  coordwire.EffectAttempt
	st coordwire.EffectState
}

// errCheckerSink answers the facts the owner sends to the checker's
// connection: transient, so the owner resends them to the next
// coordinator.
var errCheckerSink = errors.New("run crash checker: not a coordinator")

// checkOwner asks the owner's journal, over the parent's own connection
// (the coordinator is dead), for every dispatched SPAWN key: a SUCCEEDED
// row's key holds the spawn the binding names; an INDETERMINATE row's key
// is unknown or unprovable to the owner, and once seen so it never gets a
// result later (that would be a second dispatch).
func (h *rcHarness) checkOwner(keys []coordserver.EffectKey, ops []*rcOp, states []coordwire.EffectState, resource map[coordwire.BindingID][]byte, final bool) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := execowner.Dial(ctx, h.ownerSock, func(context.Context, coordwire.TerminalSourceFact) error { return errCheckerSink })
	if err != nil {
		h.failf("dial the owner: %v", err)
		return
	}
	defer cl.Close()
	if inc := h.currentInc(); cl.Incarnation() != inc {
		h.failf("the owner answers as incarnation %x, the live one is %x", cl.Incarnation(), inc)
		return
	}
	for i, k := range keys {
		out, err := cl.Outcome(ctx, k)
		op := ops[i]
		ans := "stored"
		switch {
		case errors.Is(err, coordserver.ErrOutcomeUnprovable):
			ans = "unprovable"
		case errors.Is(err, coordserver.ErrEffectUnknown):
			ans = "unknown"
		case err != nil:
			h.failf("owner Outcome of SPAWN %x (state %v): %v", k.ID[:4], states[i], err)
			return
		case out.Kind != coordwire.EffectSpawn:
			h.failf("owner Outcome of SPAWN %x is a %v result", k.ID[:4], out.Kind)
			return
		}
		h.mu.Lock()
		h.tal.ownerQueries++
		switch states[i] {
		case coordwire.EffectSucceeded:
			if ans != "stored" || out.Spawn.Rejected || !bytes.Equal(out.Spawn.ResourceID, resource[coordwire.BindingID(op.p.PendingBindingID)]) {
				h.failf("SUCCEEDED SPAWN %x: the owner's journal says %s %+v, the binding names resource %q", k.ID[:4], ans, out.Spawn, resource[coordwire.BindingID(op.p.PendingBindingID)])
			}
		case coordwire.EffectIndeterminate:
			if op.ownerFirst == "" {
				op.ownerFirst = ans
			} else if op.ownerFirst != "stored" && ans == "stored" {
				h.failf("INDETERMINATE SPAWN %x: the owner's journal had no result (%s) and now has one: dispatched again", k.ID[:4], op.ownerFirst)
			}
			if final && ans == "stored" {
				h.tal.indeterminateOwnerResult++
			}
			if final && ans == "unprovable" {
				h.tal.indeterminateUnprovable++
			}
		}
		h.mu.Unlock()
	}
}

// describeOpen reads the store (the child is dead) and describes the
// outbox rows and results of the unresolved operations: a diagnostic.
func (h *rcHarness) describeOpen() string {
	st, err := crashOpenStore(context.Background(), crashChildConfig{Store: h.store})
	if err != nil {
		return err.Error()
	}
	defer st.Close()
	var out []string
	h.mu.Lock()
	defer h.mu.Unlock()
	st.View(context.Background(), func(tx coordstore.ReadTx) error {
		for s := coordwire.EffectReady; s.Valid(); s++ {
			for row, err := range tx.EffectsByState(s) {
				if err != nil {
					return err
				}
				if op := h.ops[row.OperationID]; op != nil && !op.known {
					o, _ := tx.Operation(row.OperationID)
					var r coordwire.OperationResult
					r.Decode(o.Result)
					out = append(out, fmt.Sprintf("%x: effect %x %v, operation %v", op.id[:4], row.ID[:4], row.State, r.Tag))
				}
			}
		}
		return nil
	})
	return strings.Join(out, "; ")
}

// spawnLines counts the spawn log's lines per Run id (hex).
func (h *rcHarness) spawnLines() map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile(h.spawnLog)
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		h.failf("spawn log: %v", err)
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out[l]++
		}
	}
	return out
}

// report logs the lineage's tallies; strict requires every kill point and
// path to have been exercised.
func (h *rcHarness) report(strict bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tl := &h.tal
	avg := time.Duration(0)
	if tl.restarts > 0 {
		avg = tl.leaseWait / time.Duration(tl.restarts)
	}
	h.t.Logf("run crash test, lineage %d: %d kills (%s), mean lease wait %v; %s", h.idx, tl.kills, tl.killLine(), avg.Round(time.Millisecond), tl.outcomeLine())
	if h.failed() || !strict {
		return
	}
	for _, p := range runKillPoints {
		if p != "" && tl.killsAt[p] == 0 {
			h.t.Errorf("the child never killed itself at %q: the kill point is not exercised", p)
		}
	}
	if tl.indeterminate == 0 {
		h.t.Error("no INDETERMINATE operation: the unprovable-dispatch path is not exercised")
	}
	if tl.resolved == 0 {
		h.t.Error("no lost reply resolved by lookup")
	}
	if tl.succeeded < tl.kills {
		h.t.Errorf("only %d SUCCEEDED Runs for %d kills", tl.succeeded, tl.kills)
	}
}
