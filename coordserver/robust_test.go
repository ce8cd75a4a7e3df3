package coordserver_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/history"
	"github.com/phuxcoord/coord/internal/testkit/pauseproxy"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/keystore"
)

// TestRobustness runs every fault scenario on real processes — the
// coordinator a child re-executing this test binary
// (robustchild_test.go) on the store engine under test, a real
// phux-witness daemon, the terminal owner examples/execowner/cmd/execowner
// in its own process — while client goroutines record every call they
// make (internal/testkit/history) and a Mirror (principal 0) and a raw
// subscriber (principal 1) record their streams:
//
//   - coordinator: SIGKILL at random moments, right before and right
//     after the n-th store commit, and at each START_RUN commit boundary;
//   - owner: SIGKILL of the execowner process at random moments (the
//     coordinator registers its next incarnation) and at its spawn;
//   - pgstop: on PostgreSQL, the active coordinator SIGSTOPped while a
//     standby takes over, then SIGCONTed (it must exit fenced);
//   - witness: the witness SIGKILLed and restarted within the lease, and
//     SIGSTOPped past the lease (the coordinator fences itself; the next
//     one activates once the witness is back);
//   - replies: every client connection cut while its replies are held
//     (pauseproxy), so that every client and the Mirror reconnect at once;
//   - full: boltstore's MaxFileSize reached (RESOURCE_EXHAUSTED
//     store.full), then the coordinator restarted with room again;
//   - clock: the witness's clock stepped forward past the lease and back
//     (a -tags witnesstest witness).
//
// After each scenario: the history is linearizable under history.Model
// (no acknowledged operation lost, one outcome per OperationId,
// preconditions honoured), commit order agrees with real time, both
// streams validate against the store's log (with the commits the history
// knows), the Mirror equals a fresh snapshot, no Run spawned twice, and
// the epochs the coordinators activated with strictly increase.
//
// PHUX_ROBUST_CYCLES=N sets the fault cycles of each scenario (default:
// a short run of each); PHUX_ROBUST_ENGINES=pebble,bolt,pg the engines
// the coordinator scenario runs on (default pebble,bolt; pg needs
// PostgreSQL; the other scenarios run on pebble, phux-coordd's default,
// but the full-store one on bolt);
// PHUX_ROBUST_SEED the seed of the workload and fault choices (printed).
// Skipped under -race (race_test.go): the children and the owner are
// real processes whose load does not fit the race budget.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("robustness scenarios: not in -short")
	}
	if raceEnabled {
		t.Skip("robustness scenarios: process-heavy, not under -race")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("PHUX_ROBUST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PHUX_ROBUST_SEED=%q", v)
		}
		seed = s
	}
	t.Logf("PHUX_ROBUST_SEED=%d", seed)
	cycles := 0
	if v := os.Getenv("PHUX_ROBUST_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHUX_ROBUST_CYCLES=%q: want a positive integer", v)
		}
		cycles = n
	}
	engines := []string{"pebble", "bolt"}
	if v := os.Getenv("PHUX_ROBUST_ENGINES"); v != "" {
		engines = strings.Split(v, ",")
	}
	if os.Getenv(pgtest.EnvDSN) != "" {
		rbPG.dsn, rbPG.ok = os.Getenv(pgtest.EnvDSN), true
	} else if _, err := pgtest.FindBin(); err == nil {
		rbPG.dsn, rbPG.ok = pgtest.Private(t), true
	}
	rbBinDir = t.TempDir()
	// The binaries built once per run go into this run's directory, which
	// ends with it: a second run of the test binary (-count) builds them
	// again instead of starting the paths the first one removed.
	rbCoorddBin, rbClockBin = rbBuilt{}, rbBuilt{}
	w := startWitness(t, crashLifetime)
	bin := buildExecownerBin(t)
	var tally rbTally
	start := time.Now()
	var pt *testing.T // the parent of the scenarios
	scen := func(name string, short int, fn func(l *rbLineage, n int)) {
		pt.Run(name, func(t *testing.T) {
			t.Parallel()
			n := short
			if cycles > 0 {
				n = cycles
			}
			// A long run is split into lineages of at most rbRound
			// cycles, each with its own store and history, so that every
			// history stays small enough to check.
			for done, r := 0, 0; done < n; r++ {
				k := min(rbRound, n-done)
				l := newRBLineage(t, name, seed+uint64(r), w, &tally)
				fn(l, k)
				l.finish()
				done += k
			}
		})
	}
	t.Run("scenarios", func(t *testing.T) {
		pt = t
		// The short run: each fault kind of each scenario once.
		for _, eng := range engines {
			scen("coordinator-"+eng, 3, func(l *rbLineage, n int) { l.engine = eng; l.scenarioCoordinator(n) })
		}
		scen("owner", 3, func(l *rbLineage, n int) { l.withOwner(bin); l.scenarioOwner(n) })
		scen("pgstop", 1, func(l *rbLineage, n int) { l.useCoordd(); l.scenarioPGStop(n) })
		scen("daemon", 2, func(l *rbLineage, n int) { l.scenarioDaemon(n) })
		scen("witness", 2, func(l *rbLineage, n int) { l.scenarioWitness(n) })
		scen("replies", 4, func(l *rbLineage, n int) { l.scenarioReplies(n) })
		scen("full", 1, func(l *rbLineage, n int) { l.scenarioFull(n) })
		scen("clock", 2, func(l *rbLineage, n int) { l.scenarioClock(n) })
	})
	tally.mu.Lock()
	defer tally.mu.Unlock()
	t.Logf("robustness (%v, seed %d): histories checked %d, operations %d (acknowledged %d, lost %d), faults injected %d (kills %d: coordinator %d, owner %d, witness %d; stops %d; cuts %d; clock steps %d; store full %d), "+
		"streams validated %d (events %d), mirror snapshot matches %d, runs spawned %d (none twice), epochs %d (strictly increasing)",
		time.Since(start).Round(time.Millisecond), seed, tally.histories, tally.ops, tally.acked, tally.lost, tally.faults(), tally.kills(), tally.coordKills, tally.ownerKills, tally.witnessKills,
		tally.stops, tally.cuts, tally.clockSteps, tally.full, tally.streams, tally.events, tally.matches, tally.spawned, tally.epochs)
}

// rbBinDir holds the binaries TestRobustness builds (phux-coordd, the
// witnesstest witness); it is the test's temporary directory.
var rbBinDir string

// rbRound is the most fault cycles one lineage (one history) runs.
const rbRound = 40

// rbTally is the run's tallies.
type rbTally struct {
	mu                                               sync.Mutex
	histories, ops, acked, lost, streams, events     int
	coordKills, ownerKills, witnessKills, stops      int
	cuts, clockSteps, full, matches, spawned, epochs int
}

func (t *rbTally) kills() int  { return t.coordKills + t.ownerKills + t.witnessKills }
func (t *rbTally) faults() int { return t.kills() + t.stops + t.cuts + t.clockSteps + t.full }

func (t *rbTally) add(f func(t *rbTally)) {
	t.mu.Lock()
	f(t)
	t.mu.Unlock()
}

// rbChild is one coordinator child process.
type rbChild struct {
	cmd    *exec.Cmd
	sock   string
	ready  chan crashReady
	exited chan struct{}
	state  *os.ProcessState
}

func (c *rbChild) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// rbLineage is one coordinator lineage under one scenario: its store,
// keys, witness, children, clients and recordings.
type rbLineage struct {
	t      *testing.T
	name   string
	rng    *mrand.Rand
	engine string
	dir    string
	w      *daemon
	wpub   ed25519.PublicKey
	tally  *rbTally

	keysDir, authDir, store string
	authFP                  [32]byte
	keys                    [2]*keystore.WorkloadKey
	pgDSN, pgSchema         string
	coordd, pgURL           string // phux-coordd (robust_coordd_test.go) and its --store
	maxFile                 int

	svc      string // the path clients dial: a symlink to the serving socket, or the proxy
	proxy    *pauseproxy.Proxy
	childLog string
	childN   int

	mu       sync.Mutex
	cur      *rbChild
	children []*rbChild
	epochs   []uint64
	objs     []coordwire.ObjectiveID // the window of objectives in play
	made     int                     // calls since the window last moved
	runObj   coordwire.ObjectiveID
	runs     []coordwire.RunID

	// owner
	ownerBin, ownerSock, spawnLog string
	ownerFP                       [32]byte
	ownerCmd                      *exec.Cmd
	ownerDone                     chan struct{}
	ownerInc                      coordwire.IncarnationID

	rec      *history.Recorder
	mirror   *coordclient.Mirror
	mirrorC  *coordclient.Client
	rawC     *coordclient.Client
	mstream  *history.Stream
	rstream  *history.Stream
	rawLast  atomic.Uint64
	stop     chan struct{} // the workers stop
	readStop chan struct{} // the subscriber stops (after the final checks)
	workers  sync.WaitGroup
	readers  sync.WaitGroup
	clients  []*coordclient.Client
	started  bool
	finished bool
}

func newRBLineage(t *testing.T, name string, seed uint64, w *daemon, tally *rbTally) *rbLineage {
	l := &rbLineage{t: t, name: name, engine: "pebble", w: w, wpub: w.id.PublicKey, tally: tally, rec: history.NewRecorder(), stop: make(chan struct{}), readStop: make(chan struct{})}
	h := uint64(0)
	for _, c := range name {
		h = h*31 + uint64(c)
	}
	l.rng = mrand.New(mrand.NewPCG(seed, h))
	l.dir = shortDir(t)
	l.store = filepath.Join(l.dir, "coord.db")
	l.keysDir = filepath.Join(l.dir, "keys")
	l.authDir = filepath.Join(l.dir, "auth")
	l.childLog = filepath.Join(l.dir, "child.log")
	l.svc = filepath.Join(l.dir, "svc.sock")
	a, err := keystore.InitAuthority(l.authDir)
	if err != nil {
		t.Fatal(err)
	}
	l.authFP = a.Fingerprint()
	for i := range l.keys {
		seedb := make([]byte, 32)
		crashRand(seedb)
		if l.keys[i], err = keystore.WorkloadKeyFromSeed(seedb); err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.AddKey(l.keysDir, l.keys[i].Public(), runsScope, time.Now().Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	l.mstream, l.rstream = history.NewStream(name+"/mirror"), history.NewStream(name+"/subscriber")
	l.runObj = coordwire.NewObjectiveID()
	return l
}

func (l *rbLineage) fatalf(format string, args ...any) {
	l.t.Helper()
	b, _ := os.ReadFile(l.childLog)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	l.t.Fatalf("%s: "+format+"\nchild log tail:\n%s", append([]any{l.name}, append(args, string(b))...)...)
}

// startChild starts a coordinator child serving sock (the lineage's
// default socket when empty) with cfg's fault settings.
func (l *rbLineage) startChild(sock string, edit func(*robustChildConfig)) *rbChild {
	l.childN++
	if sock == "" {
		sock = filepath.Join(l.dir, fmt.Sprintf("c%d.sock", l.childN))
	}
	if l.coordd != "" {
		return l.startCoordd(sock)
	}
	cfg := robustChildConfig{Engine: l.engine, Store: l.store, MaxFileSize: l.maxFile, PGDSN: l.pgDSN, PGSchema: l.pgSchema,
		Keys: l.keysDir, Authority: l.authDir, Witness: l.w.addr, WitnessPub: hex.EncodeToString(l.wpub), Socket: sock,
		LeaseMarginMS: int(crashLeaseMargin / time.Millisecond), OwnerSocket: l.ownerSock}
	if edit != nil {
		edit(&cfg)
	}
	b, _ := json.Marshal(cfg)
	p := filepath.Join(l.dir, fmt.Sprintf("child%d.json", l.childN))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		l.t.Fatal(err)
	}
	logf, err := os.OpenFile(l.childLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		l.t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- child %d %+v\n", l.childN, cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), robustChildEnv+"="+p)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	c := &rbChild{cmd: cmd, sock: sock, ready: make(chan crashReady, 1), exited: make(chan struct{})}
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
	l.mu.Lock()
	l.children = append(l.children, c)
	l.mu.Unlock()
	l.t.Cleanup(func() { c.cmd.Process.Signal(syscall.SIGKILL); <-c.exited })
	return c
}

// serve waits for c's READY, records its epoch and points the service
// address at it.
func (l *rbLineage) serve(c *rbChild, within time.Duration) bool {
	select {
	case r := <-c.ready:
		l.mu.Lock()
		if n := len(l.epochs); n > 0 && r.Epoch <= l.epochs[n-1] {
			l.mu.Unlock()
			l.fatalf("activation epoch %d after %d", r.Epoch, l.epochs[n-1])
		}
		l.epochs = append(l.epochs, r.Epoch)
		l.cur = c
		l.mu.Unlock()
		l.flip(c.sock)
		return true
	case <-c.exited:
		return false
	case <-time.After(within):
		l.fatalf("no READY within %v", within)
	}
	return false
}

// up starts children until one serves.
func (l *rbLineage) up(edit func(*robustChildConfig)) *rbChild {
	for range 5 {
		c := l.startChild("", edit)
		if l.serve(c, 60*time.Second) {
			return c
		}
	}
	l.fatalf("no child served in 5 attempts")
	return nil
}

func (l *rbLineage) flip(sock string) {
	link := l.svc
	if l.proxy != nil {
		link = l.proxySrc()
	}
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(sock, tmp); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		l.t.Fatal(err)
	}
}

// proxySrc: with a proxy, clients dial the proxy, which dials the
// serving child through this stable link.
func (l *rbLineage) proxySrc() string { return filepath.Join(l.dir, "proxy.sock") }

func (l *rbLineage) clientConfig(key int) coordclient.Config {
	return coordclient.Config{WorkloadKey: l.keys[key], AuthorityFingerprint: l.authFP, WitnessPublicKey: l.wpub,
		Scope: runsScope, Authority: &coordclient.AuthorityMemory{}, ClientName: "robust", HandshakeTimeout: 2 * time.Second,
		OfferedCapabilities: coordwire.CapTerminalBindings | coordwire.CapSignals | coordwire.CapEventReplay}
}

func (l *rbLineage) dial(key int) *coordclient.Client {
	var err error
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var c *coordclient.Client
		c, err = coordclient.Dial(ctx, "unix:"+l.svc, l.clientConfig(key))
		cancel()
		if err == nil {
			l.mu.Lock()
			l.clients = append(l.clients, c)
			l.mu.Unlock()
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.fatalf("dial: %v", err)
	return nil
}
