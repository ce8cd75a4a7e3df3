package coordserver_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
)

// TestCrashSIGKILL is the commands crash test (invariant 8 for
// Objectives). The coordinator runs as a child process (crashchild_test.go)
// on one store (a boltstore file, or a pebblestore directory: the two
// lineages run one engine each), beside a real phux-witness daemon that survives
// every kill and issues 2-second certificates, so that each restart waits
// at most about 2 s for the dead child's lease to expire. Two such
// coordinators (lineages: own store, own CoordinatorId, own lanes) run side
// by side, sharing the witness, and split the kills. Per lineage, eight
// client lanes
// (three principals; coordclient lanes and raw-frame lanes) issue
// CREATE_OBJECTIVE / UPDATE_OBJECTIVE with client-minted OperationIds, each
// lane sequentially on objectives only it touches, and drop replies on
// purpose: a coordclient call whose reply is ignored, a raw command whose
// connection is closed right after it was written, a raw frame torn in the
// middle, a raw command whose reply is left unread. The child is SIGKILLed
// while they run, in rotation:
//
//   - at a random moment 100–600 ms after the lanes were let in;
//   - by itself right before the store commit of its n-th Update;
//   - by itself right after that commit returned, before any reply.
//
// (n is 1 or 2 — the activation's own commits — for a tenth of those, so
// activations are cut at their commit boundaries too.) After every kill the
// parent opens the store file itself and checks it against what the lanes
// were told; after every restart the lanes reconnect, look every operation
// whose reply they lost up with GET_OPERATION_RESULT and resend only the
// same command with the same id, and only after UNKNOWN; and a checker
// verifies the new activation and samples acknowledged operations (lookup,
// exact resend) and the conflicts (same id with another payload or
// principal, CREATE of an existing objective). Checked throughout:
//
//   - every acknowledged operation is in the store with the acknowledged
//     result, and every later observation of an OperationId (reply, lookup,
//     resend, store record) is that same result: one outcome per id;
//   - a torn frame is never admitted; an UNKNOWN id is admitted exactly
//     once by its resend;
//   - every stored operation is one a lane minted, with its principal and
//     exact digest; every objective was created once: its revisions are
//     exactly 1..n, one OBJECTIVE_CHANGED event each, consecutive with the
//     OPERATION_CHANGED event the result names, one per operation, and the
//     record holds the last update's document;
//   - the epoch strictly increases across restarts, the incarnation is new
//     every time, the CoordinatorId never changes, and HELLO_OK says so.
//
// PHUX_COORD_CRASH_KILLS=N sets the total number of kills (default 50,
// about 50 s, 55 s under -race on 2 cores; use ≥ 1,000 for the long run,
// with -timeout 0: 1,000 kills take about 20 minutes). Each lineage fails if it verified fewer than 2
// acknowledged operations per kill, no torn frame, dropped reply or
// unknown-then-admitted resend, no reply lost to a kill and found
// committed, or too few kills with work in flight or completed restart
// checks: it must not pass vacuously.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: not in -short")
	}
	kills := 50
	if v := os.Getenv("PHUX_COORD_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHUX_COORD_CRASH_KILLS=%q: want a positive integer", v)
		}
		kills = n
	}
	// Independent coordinators (own store file, own CoordinatorId, own
	// lanes) share the witness and run side by side: a restart spends most
	// of its time waiting for the dead child's lease, so two lineages give
	// twice the kills in the same time.
	w := startWitness(t, crashLifetime)
	per := (kills + crashLineages - 1) / crashLineages
	start := time.Now()
	var mu sync.Mutex
	var total crashTallies
	t.Run("lineages", func(t *testing.T) {
		for i := range crashLineages {
			store := crashStores[i%len(crashStores)]
			t.Run(fmt.Sprintf("lineage%d_%s", i, store), func(t *testing.T) {
				t.Parallel()
				h := newCrashHarness(t, w, store)
				t0 := time.Now()
				h.run(per)
				h.report(time.Since(t0))
				mu.Lock()
				total.kills += h.tal.kills
				total.acked += h.tal.acked
				total.dropped += h.tal.dropped
				total.resent += h.tal.resent
				total.unknownThenAdmitted += h.tal.unknownThenAdmitted
				mu.Unlock()
			})
		}
	})
	t.Logf("crash test: %d kills in %v over %d lineages; %d acknowledged operations verified, %d replies dropped on purpose, %d resent after UNKNOWN, %d unknown-then-admitted",
		total.kills, time.Since(start).Round(time.Millisecond), crashLineages, total.acked, total.dropped, total.resent, total.unknownThenAdmitted)
	if !t.Failed() && total.kills < kills {
		t.Errorf("only %d kills, want %d", total.kills, kills)
	}
}

// crashLineages is the number of coordinators killed side by side.
const crashLineages = 2

// crashStores are the lineages' stores in turn: a bbolt file and a pebble
// directory (crashOpenStore picks the engine by the name), so that both
// embedded engines are killed in every run.
var crashStores = []string{"coord.db", "coord" + pebbleSuffix}

// crashLifetime is the witness certificate lifetime (whole seconds; the
// witness's minimum usable with a safety margin below a second).
const crashLifetime = 2 * time.Second

// crashLeaseMargin is the child's lease margin. The default (1 s +
// lifetime/10) exceeds what a 2 s lifetime leaves after the witness's
// whole-second truncation; on one host the child's and the witness's clocks
// are the same clock, so expires_at − 300 ms is safe.
const crashLeaseMargin = 300 * time.Millisecond

var crashCmpOpts = cmp.Options{cmpopts.EquateEmpty()}

type crashOp struct {
	id     coordwire.OperationID
	lane   *crashLane
	obj    *crashObj
	rev    uint64 // the objective revision this op produces (1 = the create)
	doc    []byte
	cmd    *coordclient.Cmd
	digest [32]byte

	// Guarded by crashHarness.mu.
	known       bool
	result      coordwire.OperationResult
	via         string
	acked       bool
	torn        bool // sent as a torn frame and not resent since
	unknownSeen bool
	resends     int
	lostToKill  bool // its reply was lost because the coordinator died
}

type crashObj struct {
	id  coordwire.ObjectiveID
	ops []*crashOp // in revision order; ops[i].rev == i+1
}

type crashTallies struct {
	kills, killsRandom, killsBefore, killsAfter, killsBackstop, killsActivation int
	killsInFlight                                                               int
	fenced                                                                      int
	issued, acked, dropped, torn, resent, unknownThenAdmitted                   int
	lostToKill, lostFoundDurable                                                int
	checks, checksInterrupted, sampled, conflictProbes                          int
	leaseWait, storeChecks, untilReady                                          time.Duration
	restarts                                                                    int
}

// crashServer is the current child as the lanes see it.
type crashServer struct {
	gen     int
	up      bool
	ready   crashReady
	changed chan struct{} // closed and replaced at every change
}

type crashHarness struct {
	t        *testing.T
	w        *daemon
	dir      string
	store    string
	keysDir  string
	authDir  string
	sock     string
	childLog string
	authFP   [32]byte
	wpub     ed25519.PublicKey
	keys     []*keystore.WorkloadKey
	memory   []*coordclient.AuthorityMemory // the checker's, per principal

	mu    sync.Mutex // the model and the tallies
	ops   map[coordwire.OperationID]*crashOp
	objs  map[coordwire.ObjectiveID]*crashObj
	tal   crashTallies
	fails atomic.Int64 // failf may be called with mu held

	smu sync.Mutex
	srv crashServer

	lanes    []*crashLane
	lanesWG  sync.WaitGroup
	final    atomic.Bool // lanes stop issuing new operations
	stop     atomic.Bool // lanes return
	inflight atomic.Int64

	// Activation history, for the epoch and incarnation checks.
	coordID      string
	lastEpoch    uint64
	lastAct      uint64
	incarnations map[string]bool
	childN       int
}

func newCrashHarness(t *testing.T, w *daemon, storeName string) *crashHarness {
	h := &crashHarness{t: t, ops: map[coordwire.OperationID]*crashOp{}, objs: map[coordwire.ObjectiveID]*crashObj{},
		incarnations: map[string]bool{}}
	h.srv.changed = make(chan struct{})
	h.w = w
	h.wpub = h.w.id.PublicKey
	h.dir = shortDir(t)
	h.store = filepath.Join(h.dir, storeName)
	h.keysDir = filepath.Join(h.dir, "keys")
	h.authDir = filepath.Join(h.dir, "auth")
	h.sock = filepath.Join(h.dir, "c.sock")
	h.childLog = filepath.Join(h.dir, "child.log")
	a, err := keystore.InitAuthority(h.authDir)
	if err != nil {
		t.Fatal(err)
	}
	h.authFP = a.Fingerprint()
	for range 3 {
		seed := make([]byte, 32)
		crashRand(seed)
		k, err := keystore.WorkloadKeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.AddKey(h.keysDir, k.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		h.keys = append(h.keys, k)
		h.memory = append(h.memory, &coordclient.AuthorityMemory{})
	}
	return h
}

func crashRand(b []byte) {
	for i := range b {
		b[i] = byte(mrand.Uint32())
	}
}

// failf records a failure of an invariant; the run stops soon after.
func (h *crashHarness) failf(format string, args ...any) {
	h.t.Helper()
	h.fails.Add(1)
	h.t.Errorf(format, args...)
	h.stop.Store(true)
}

func (h *crashHarness) failed() bool { return h.fails.Load() > 0 }

func (h *crashHarness) clientConfig(key int, mem *coordclient.AuthorityMemory) coordclient.Config {
	return coordclient.Config{
		WorkloadKey: h.keys[key], AuthorityFingerprint: h.authFP, WitnessPublicKey: h.wpub,
		Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, Authority: mem,
		HandshakeTimeout: 5 * time.Second,
	}
}

// ---- the server as the lanes see it ----

func (h *crashHarness) current() crashServer {
	h.smu.Lock()
	defer h.smu.Unlock()
	return h.srv
}

func (h *crashHarness) setServer(up bool, r crashReady) {
	h.smu.Lock()
	if up {
		h.srv.gen++
		h.srv.ready = r
	}
	h.srv.up = up
	close(h.srv.changed)
	h.srv.changed = make(chan struct{})
	h.smu.Unlock()
}

// waitServer blocks until a server of a generation above gen is up (or the
// run stops) and returns it.
func (h *crashHarness) waitServer(gen int) (crashServer, bool) {
	for {
		s := h.current()
		if s.up && s.gen > gen {
			return s, true
		}
		if h.stop.Load() {
			return s, false
		}
		select {
		case <-s.changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---- the model ----

// observe records one observation of op's outcome (a reply, a lookup, a
// resend's reply or the store record) and checks that every observation
// of an OperationId agrees.
func (h *crashHarness) observe(op *crashOp, res coordwire.OperationResult, via string, ack bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch res.Tag {
	case coordwire.OperationUnknown:
		if op.known {
			h.failf("operation %v (objective %v rev %d) is UNKNOWN via %s, but its outcome was known via %s: %+v",
				op.id, op.obj.id, op.rev, via, op.via, op.result)
			return
		}
		op.unknownSeen = true
		return
	case coordwire.OperationSucceeded:
	default:
		h.failf("operation %v: outcome %v via %s, want SUCCEEDED: %+v", op.id, res.Tag, via, res)
		return
	}
	if op.torn {
		h.failf("operation %v was admitted (via %s) although only a torn frame of it was ever sent", op.id, via)
		return
	}
	p, err := coordwire.DecodeResultPayload(res.ResultKind, res.ResultPayload)
	ref, ok := p.(*coordwire.ObjectRefResult)
	if err != nil || !ok || ref.Object != (coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte(op.obj.id)}) {
		h.failf("operation %v (lane %d raw %v rev %d): result via %s does not name its objective %x: %+v (%v, %+v)", op.id, op.lane.idx, op.lane.raw, op.rev, via, op.obj.id[:], res, err, p)
		return
	}
	if ack {
		op.acked = true
		h.tal.acked++
	}
	if !op.known {
		op.known, op.result, op.via = true, res, via
		op.result.ResultPayload = append([]byte(nil), res.ResultPayload...)
		if op.unknownSeen {
			h.tal.unknownThenAdmitted++
		}
		if op.lostToKill && !ack {
			h.tal.lostFoundDurable++
		}
		return
	}
	// Canonical images are equal exactly when the results are (cheap: this
	// runs for every stored operation after every kill).
	if string(op.result.Append(nil)) == string(res.Append(nil)) {
		return
	}
	if diff := cmp.Diff(op.result, res, crashCmpOpts); diff != "" {
		h.failf("operation %v has two outcomes: first via %s, then via %s (-first +then):\n%s", op.id, op.via, via, diff)
	}
}

// ---- the kill loop ----

type crashChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan crashReady
	exited chan struct{}
	state  *os.ProcessState
}

func (h *crashHarness) startChild(killAt int, mode string) *crashChild {
	t := h.t
	h.childN++
	cfg := crashChildConfig{Store: h.store, Keys: h.keysDir, Authority: h.authDir, Witness: h.w.addr,
		WitnessPub: hex.EncodeToString(h.wpub), Socket: h.sock, LeaseMarginMS: int(crashLeaseMargin / time.Millisecond),
		KillAt: killAt, KillMode: mode}
	b, _ := json.Marshal(cfg)
	p := filepath.Join(h.dir, "child.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(h.childLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- child %d (kill at %d %s)\n", h.childN, killAt, mode)
	return h.execChild(p, logf)
}

// execChild starts this test binary as a coordinator child on the
// crashChildConfig JSON at cfgPath, its stderr appended to logf, and
// returns it with a goroutine that delivers its READY line and closes
// exited once it has exited.
func (h *crashHarness) execChild(cfgPath string, logf *os.File) *crashChild {
	t := h.t
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+cfgPath)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The child dies when this pipe reaches EOF: when the parent dies.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, stdin: stdin, ready: make(chan crashReady, 1), exited: make(chan struct{})}
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

func (c *crashChild) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

func (c *crashChild) killedBySIGKILL() bool {
	ws, ok := c.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (h *crashHarness) childLogTail() string {
	b, _ := os.ReadFile(h.childLog)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// activated checks a READY line against the activation history.
func (h *crashHarness) activated(r crashReady) {
	if h.coordID == "" {
		h.coordID = r.CoordinatorID
	} else if r.CoordinatorID != h.coordID {
		h.failf("CoordinatorId changed across a restart: %s → %s", h.coordID, r.CoordinatorID)
	}
	if r.Epoch <= h.lastEpoch || r.Activation <= h.lastAct {
		h.failf("restart did not advance: epoch %d → %d, activation %d → %d", h.lastEpoch, r.Epoch, h.lastAct, r.Activation)
	}
	if h.incarnations[r.Incarnation] {
		h.failf("incarnation %s reused", r.Incarnation)
	}
	h.incarnations[r.Incarnation] = true
	h.lastEpoch, h.lastAct = r.Epoch, r.Activation
	h.mu.Lock()
	h.tal.restarts++
	h.tal.leaseWait += time.Duration(r.LeaseWaitMS) * time.Millisecond
	h.mu.Unlock()
}

func (h *crashHarness) run(kills int) {
	t := h.t
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	h.startLanes()
	defer func() {
		h.stop.Store(true)
		h.setServer(false, crashReady{})
		h.lanesWG.Wait()
		for _, l := range h.lanes {
			l.close()
		}
	}()
	for i := 0; h.tal.kills < kills && !h.failed(); i++ {
		h.checkStore(false)
		if h.failed() {
			return
		}
		// Rotate the kill points.
		mode, killAt := "", 0
		switch i % 3 {
		case 1, 2:
			mode = map[int]string{1: "before", 2: "after"}[i%3]
			if rng.IntN(10) == 0 {
				killAt = 1 + rng.IntN(2)
			} else {
				killAt = 3 + rng.IntN(40)
			}
		}
		c := h.startChild(killAt, mode)
		t0 := time.Now()
		var ready crashReady
		select {
		case ready = <-c.ready:
			h.mu.Lock()
			h.tal.untilReady += time.Since(t0)
			h.mu.Unlock()
		case <-c.exited:
		case <-time.After(30 * time.Second):
			c.kill()
			t.Fatalf("child %d did not activate within 30 s\n%s", h.childN, h.childLogTail())
		}
		if ready.Epoch != 0 {
			h.activated(ready)
			// The restart checks run before the lanes see the new server,
			// so that the kill rarely cuts them short; then the lanes
			// reconnect, resolve what they lost, and go on.
			h.checkServer(ready)
			h.setServer(true, ready)
			if mode == "" {
				select {
				case <-time.After(time.Duration(100+rng.IntN(500)) * time.Millisecond):
					h.noteInflight()
					c.kill()
				case <-c.exited:
				}
			} else {
				select {
				case <-c.exited:
					h.noteInflight()
				case <-time.After(3 * time.Second):
					h.noteInflight()
					c.kill()
					mode = "backstop"
				}
			}
			h.setServer(false, crashReady{})
		}
		<-c.exited
		if !c.killedBySIGKILL() {
			ws, _ := c.state.Sys().(syscall.WaitStatus)
			if ws.Exited() && ws.ExitStatus() == crashExitFenced {
				h.mu.Lock()
				h.tal.fenced++
				h.mu.Unlock()
				continue
			}
			t.Fatalf("child %d ended without SIGKILL: %v\n%s", h.childN, c.state, h.childLogTail())
		}
		h.mu.Lock()
		h.tal.kills++
		switch {
		case ready.Epoch == 0:
			h.tal.killsActivation++
		case mode == "":
			h.tal.killsRandom++
		case mode == "before":
			h.tal.killsBefore++
		case mode == "after":
			h.tal.killsAfter++
		default:
			h.tal.killsBackstop++
		}
		h.mu.Unlock()
	}
	if h.failed() {
		return
	}
	// The final activation: no kill while the lanes resolve every operation
	// whose reply they lost; then every operation is looked up, the child
	// is killed once more, and the store file is checked in full.
	h.checkStore(false)
	c := h.startChild(0, "")
	var ready crashReady
	select {
	case ready = <-c.ready:
	case <-c.exited:
		t.Fatalf("final child exited\n%s", h.childLogTail())
	case <-time.After(30 * time.Second):
		c.kill()
		t.Fatalf("final child did not activate\n%s", h.childLogTail())
	}
	h.activated(ready)
	h.final.Store(true)
	h.setServer(true, ready)
	h.checkServer(ready)
	lanesDone := make(chan struct{})
	go func() { h.lanesWG.Wait(); close(lanesDone) }()
	select {
	case <-lanesDone:
	case <-time.After(60 * time.Second):
		h.failf("lanes did not resolve their operations within 60 s of the final activation")
	}
	h.lookupAll(ready)
	c.kill()
	h.mu.Lock()
	h.tal.kills++
	h.mu.Unlock()
	h.setServer(false, crashReady{})
	h.checkStore(true)
}

func (h *crashHarness) noteInflight() {
	if h.inflight.Load() > 0 {
		h.mu.Lock()
		h.tal.killsInFlight++
		h.mu.Unlock()
	}
}

func (h *crashHarness) report(elapsed time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tl := h.tal
	stored := 0
	for _, op := range h.ops {
		if op.known {
			stored++
		}
	}
	avgWait := time.Duration(0)
	if tl.restarts > 0 {
		avgWait = tl.leaseWait / time.Duration(tl.restarts)
	}
	h.t.Logf("crash test: %d kills in %v (random %d, before commit %d, after commit %d, backstop %d, during activation %d; %d with requests in flight); %d children fenced; mean lease wait %v, start to READY %v in all, store checks %v in all",
		tl.kills, elapsed.Round(time.Millisecond), tl.killsRandom, tl.killsBefore, tl.killsAfter, tl.killsBackstop, tl.killsActivation, tl.killsInFlight, tl.fenced, avgWait.Round(time.Millisecond), tl.untilReady.Round(time.Millisecond), tl.storeChecks.Round(time.Millisecond))
	h.t.Logf("crash test: %d operations issued on %d objectives, %d stored; %d acknowledged, %d replies dropped on purpose (%d torn frames), %d replies lost to a kill or a broken connection (%d of them found committed by lookup or in the store), %d resent after UNKNOWN, %d unknown-then-admitted",
		tl.issued, len(h.objs), stored, tl.acked, tl.dropped, tl.torn, tl.lostToKill, tl.lostFoundDurable, tl.resent, tl.unknownThenAdmitted)
	h.t.Logf("crash test: %d restart checks completed (%d cut short by the kill), %d acknowledged operations sampled by lookup and resend, %d conflict probes",
		tl.checks, tl.checksInterrupted, tl.sampled, tl.conflictProbes)
	if h.failed() {
		return
	}
	// Not vacuous: enough acknowledged work, and every kind of loss seen.
	if min := 2 * tl.kills; tl.acked < min {
		h.t.Errorf("only %d acknowledged operations verified (want ≥ %d: 2 per kill)", tl.acked, min)
	}
	if tl.torn == 0 || tl.dropped == 0 || tl.unknownThenAdmitted == 0 || tl.resent == 0 {
		h.t.Errorf("no torn frame, dropped reply, resend or unknown-then-admitted operation was verified")
	}
	if tl.lostToKill == 0 || tl.lostFoundDurable == 0 || tl.killsInFlight < tl.kills/4 {
		h.t.Errorf("kills did not hit work in flight often enough: %d lost replies, %d found committed, %d of %d kills with requests in flight",
			tl.lostToKill, tl.lostFoundDurable, tl.killsInFlight, tl.kills)
	}
	if tl.checks < tl.kills/4 {
		h.t.Errorf("only %d restart checks completed", tl.checks)
	}
}

// ---- the store file, read after every kill ----

// checkStore opens the store file (the child is dead, so its lock is free)
// with the full integrity scan and checks it against the model.
func (h *crashHarness) checkStore(final bool) {
	t := h.t
	defer func(t0 time.Time) {
		h.mu.Lock()
		h.tal.storeChecks += time.Since(t0)
		h.mu.Unlock()
	}(time.Now())
	if _, err := os.Stat(h.store); errors.Is(err, os.ErrNotExist) {
		return // killed before the first activation created it
	}
	st, err := crashOpenStore(context.Background(), crashChildConfig{Store: h.store})
	if err != nil {
		h.failf("opening the store after a kill: %v", err)
		return
	}
	defer st.Close()
	if _, err := os.Stat(h.store); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = st.View(ctx, func(tx coordstore.ReadTx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		if h.coordID != "" && hex.EncodeToString(m.CoordinatorID[:]) != h.coordID {
			h.failf("store CoordinatorId %v, activations named %s", m.CoordinatorID, h.coordID)
		}
		if m.AuthorityEpoch < h.lastEpoch || m.ActivationSequence < h.lastAct {
			h.failf("store meta went back: epoch %d (last activation %d), activation %d (last %d)", m.AuthorityEpoch, h.lastEpoch, m.ActivationSequence, h.lastAct)
		}
		// The event log: contiguous; one OBJECTIVE_CHANGED per objective
		// revision, one OPERATION_CHANGED per operation.
		events := map[uint64]coordstore.Event{}
		objChanged := map[coordwire.ObjectiveID]map[uint64]int{}
		opChanged := map[coordwire.OperationID]int{}
		var last uint64
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			if e.Sequence != last+1 {
				h.failf("event log not contiguous: %d after %d", e.Sequence, last)
			}
			last = e.Sequence
			events[e.Sequence] = e
			switch e.Kind {
			case coordwire.EventObjectiveChanged:
				id := coordwire.ObjectiveID(e.Object.ID)
				if objChanged[id] == nil {
					objChanged[id] = map[uint64]int{}
				}
				objChanged[id][e.ObjectRevision]++
			case coordwire.EventOperationChanged:
				opChanged[coordwire.OperationID(e.Object.ID)]++
			}
		}
		if ls, err := tx.LastSequence(); err != nil || ls != last {
			h.failf("LastSequence %d (%v), events end at %d", ls, err, last)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		// Every stored operation is one a lane minted, with its principal
		// and exact digest, and one OPERATION_CHANGED event.
		stored := map[coordwire.OperationID]coordwire.OperationResult{}
		storedRevs := map[*crashObj]map[uint64]bool{}
		for o, err := range tx.Operations(nil) {
			if err != nil {
				return err
			}
			op := h.ops[o.ID]
			if op == nil {
				h.failf("the store holds operation %v, which no client minted", o.ID)
				continue
			}
			var res coordwire.OperationResult
			if err := res.Decode(o.Result); err != nil {
				return fmt.Errorf("operation %v: result: %w", o.ID, err)
			}
			if o.PrincipalKeyID != h.keys[op.lane.key].KeyID() || o.Digest != op.digest || o.Tombstoned || o.Revision != 1 {
				h.failf("stored operation %v: principal/digest/tombstone/revision not the command's: %+v", o.ID, o)
			}
			if opChanged[o.ID] != 1 {
				h.failf("operation %v has %d OPERATION_CHANGED events, want 1", o.ID, opChanged[o.ID])
			}
			stored[o.ID] = res
			if storedRevs[op.obj] == nil {
				storedRevs[op.obj] = map[uint64]bool{}
			}
			storedRevs[op.obj][op.rev] = true
			// The result names the OPERATION_CHANGED event; the event before
			// it is this command's OBJECTIVE_CHANGED at its revision.
			ev, evObj := events[uint64(res.CompletedEventSequence)], events[uint64(res.CompletedEventSequence)-1]
			if ev.Kind != coordwire.EventOperationChanged || coordwire.OperationID(ev.Object.ID) != o.ID ||
				evObj.Kind != coordwire.EventObjectiveChanged || coordwire.ObjectiveID(evObj.Object.ID) != op.obj.id || evObj.ObjectRevision != op.rev {
				h.failf("operation %v (objective %v rev %d): events %d/%d are not its OBJECTIVE_CHANGED and OPERATION_CHANGED: %+v / %+v",
					o.ID, op.obj.id, op.rev, res.CompletedEventSequence-1, res.CompletedEventSequence, evObj, ev)
			} else if doc, err := crashEventDocument(evObj); err != nil || string(doc) != string(op.doc) {
				h.failf("operation %v: its OBJECTIVE_CHANGED event does not carry its document (%v)", o.ID, err)
			}
		}
		for id := range opChanged {
			if _, ok := stored[id]; !ok {
				h.failf("OPERATION_CHANGED event for operation %v, which is not stored", id)
			}
		}
		// Every acknowledged (or otherwise known) outcome is stored, and
		// the stored record is that outcome.
		for _, op := range h.ops {
			res, ok := stored[op.id]
			switch {
			case ok:
				h.mu.Unlock()
				h.observe(op, res, "store", false)
				h.mu.Lock()
			case op.known:
				h.failf("operation %v (acknowledged %v, via %s) is missing from the store", op.id, op.acked, op.via)
			case final:
				h.failf("operation %v was never resolved", op.id)
			}
		}
		// No objective created twice: revisions 1..n, one event each; the
		// record at revision n with the document of the n-th command.
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			if o.Key.Kind != coordwire.ObjectKindObjective {
				continue
			}
			id := coordwire.ObjectiveID(o.Key.ID)
			obj := h.objs[id]
			if obj == nil {
				h.failf("the store holds objective %v, which no client created", id)
				continue
			}
			revs := storedRevs[obj]
			n := uint64(len(revs))
			for r := uint64(1); r <= n; r++ {
				if !revs[r] || objChanged[id][r] != 1 {
					h.failf("objective %v at revision %d: revision %d stored %v, %d OBJECTIVE_CHANGED events", id, o.Revision, r, revs[r], objChanged[id][r])
				}
			}
			if o.Revision != n || len(objChanged[id]) != int(n) {
				h.failf("objective %v is at revision %d with %d stored commands and %d OBJECTIVE_CHANGED revisions", id, o.Revision, n, len(objChanged[id]))
				continue
			}
			var rec coordwire.ObjectiveRecord
			if err := rec.DecodeTLV(o.Payload); err != nil || string(rec.Document) != string(obj.ops[n-1].doc) {
				h.failf("objective %v at revision %d does not hold the document of its revision-%d command (%v)", id, n, n, err)
			}
			if final && int(n) != len(obj.ops) {
				h.failf("objective %v: %d of its %d commands stored after the final resolution", id, n, len(obj.ops))
			}
			delete(storedRevs, obj)
		}
		for obj := range storedRevs {
			h.failf("objective %v has stored commands but no record", obj.id)
		}
		return nil
	})
	if err != nil {
		h.failf("reading the store after a kill: %v", err)
	}
}

func crashEventDocument(e coordstore.Event) ([]byte, error) {
	var sr coordwire.SnapshotRecord
	if err := sr.Decode(e.Payload); err != nil {
		return nil, err
	}
	var rec coordwire.ObjectiveRecord
	if err := rec.DecodeTLV(sr.Payload); err != nil {
		return nil, err
	}
	return rec.Document, nil
}

// ---- the restart checks, through the server ----

// crashInterrupted reports whether err is the kill cutting a call short
// (the connection broke or could not be made, the authority went away);
// anything else is a real refusal.
func crashInterrupted(err error) bool {
	return errors.Is(err, coordclient.ErrConnectionLost) || errors.Is(err, coordclient.ErrStaleAuthority) ||
		errors.Is(err, coordclient.ErrFenced) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, coordclient.ErrClosed)
}

// checkServer runs the checks of one restart through the new activation,
// until the kill cuts them short: HELLO_OK names the activation the child
// announced; sampled acknowledged operations look up and resend to their
// result; an OperationId reused with another payload or by another
// principal is OPERATION_CONFLICT, CREATE of an existing objective is
// REVISION_CONFLICT and stores nothing.
func (h *crashHarness) checkServer(r crashReady) {
	interrupted := func(what string, err error) bool {
		if err == nil {
			return false
		}
		if crashInterrupted(err) {
			h.mu.Lock()
			h.tal.checksInterrupted++
			h.mu.Unlock()
			return true
		}
		h.failf("restart check (%s): %v", what, err)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cls := make([]*coordclient.Client, len(h.keys))
	defer func() {
		for _, c := range cls {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range h.keys {
		c, err := coordclient.Dial(ctx, "unix:"+h.sock, h.clientConfig(i, h.memory[i]))
		if interrupted("dial", err) {
			return
		}
		cls[i] = c
		ok := c.Session().HelloOK
		if hex.EncodeToString(ok.CoordinatorID[:]) != r.CoordinatorID || uint64(ok.AuthorityEpoch) != r.Epoch ||
			hex.EncodeToString(ok.IncarnationID[:]) != r.Incarnation || uint64(ok.ActivationCertificate.ActivationSequence) != r.Activation {
			h.failf("HELLO_OK names another activation than the child's READY: %v epoch %d incarnation %v, want %+v", ok.CoordinatorID, ok.AuthorityEpoch, ok.IncarnationID, r)
			return
		}
		if err := cert.VerifyHelloOK(&ok, h.wpub, time.Now()); err != nil {
			h.failf("HELLO_OK certificate: %v", err)
			return
		}
	}
	// Sample known operations of every principal.
	h.mu.Lock()
	var known []*crashOp
	for _, op := range h.ops {
		if op.known {
			known = append(known, op)
		}
	}
	h.mu.Unlock()
	mrand.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	if len(known) > 12 {
		known = known[:12]
	}
	for _, op := range known {
		c := cls[op.lane.key]
		res, err := c.OperationResult(ctx, op.id)
		if interrupted("lookup", err) {
			return
		}
		h.observe(op, res.Operation, "restart lookup", false)
		res, err = c.Command(ctx, op.cmd)
		if interrupted("resend", err) {
			return
		}
		h.observe(op, res.Operation, "restart resend", false)
		h.mu.Lock()
		h.tal.sampled++
		h.mu.Unlock()
	}
	// Conflicts on the first two sampled operations.
	for i, op := range known {
		if i == 2 {
			break
		}
		own, other := cls[op.lane.key], cls[(op.lane.key+1)%len(cls)]
		// Another principal, the same command and id.
		_, err := other.Command(ctx, op.cmd)
		if crashInterrupted(err) {
			interrupted("conflict", err)
			return
		}
		if !errors.Is(err, coordclient.ErrOperationConflict) {
			h.failf("operation %v resent by another principal: %v, want OPERATION_CONFLICT", op.id, err)
			return
		}
		// Another principal cannot see it (A.4).
		_, err = other.OperationResult(ctx, op.id)
		if crashInterrupted(err) {
			interrupted("conflict", err)
			return
		}
		if coordwire.CodeOf(err) != coordwire.NotFound {
			h.failf("operation %v looked up by another principal: %v, want NOT_FOUND", op.id, err)
			return
		}
		// The same id with another payload.
		changed := coordclient.UpdateObjective(op.obj.id, 1, []byte("another payload")).WithOperationID(op.id)
		_, err = own.Command(ctx, changed)
		if crashInterrupted(err) {
			interrupted("conflict", err)
			return
		}
		if !errors.Is(err, coordclient.ErrOperationConflict) {
			h.failf("operation %v reused with another payload: %v, want OPERATION_CONFLICT", op.id, err)
			return
		}
		// A second CREATE of the objective under a fresh id: refused,
		// nothing stored.
		again := coordclient.CreateObjective(op.obj.id, 1, []byte("second create"))
		_, err = own.Command(ctx, again)
		if crashInterrupted(err) {
			interrupted("conflict", err)
			return
		}
		if !errors.Is(err, coordwire.RevisionConflict) {
			h.failf("second CREATE_OBJECTIVE of objective %v: %v, want REVISION_CONFLICT", op.obj.id, err)
			return
		}
		_, err = own.OperationResult(ctx, again.OperationID())
		if crashInterrupted(err) {
			interrupted("conflict", err)
			return
		}
		if !errors.Is(err, coordclient.ErrUnknownOperation) {
			h.failf("the refused second CREATE was stored: %v, want UNKNOWN", err)
			return
		}
		res, err := own.OperationResult(ctx, op.id)
		if interrupted("lookup", err) {
			return
		}
		h.observe(op, res.Operation, "lookup after conflicts", false)
		h.mu.Lock()
		h.tal.conflictProbes++
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.tal.checks++
	h.mu.Unlock()
}

// lookupAll looks every operation up through the final activation.
func (h *crashHarness) lookupAll(r crashReady) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h.mu.Lock()
	byKey := make([][]*crashOp, len(h.keys))
	for _, op := range h.ops {
		byKey[op.lane.key] = append(byKey[op.lane.key], op)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for k, ops := range byKey {
		wg.Go(func() {
			c, err := coordclient.Dial(ctx, "unix:"+h.sock, h.clientConfig(k, h.memory[k]))
			if err != nil {
				h.failf("final lookups: dial: %v", err)
				return
			}
			defer c.Close()
			for _, op := range ops {
				res, err := c.OperationResult(ctx, op.id)
				if err != nil {
					h.failf("final lookup of %v: %v", op.id, err)
					return
				}
				h.observe(op, res.Operation, "final lookup", false)
			}
		})
	}
	wg.Wait()
}
