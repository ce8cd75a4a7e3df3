package coordserver_test

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/history"
	"github.com/phuxcoord/coord/internal/testkit/pauseproxy"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
)

type porcupineOp = porcupine.Operation

// rbPG is the PostgreSQL server of the pg scenarios, started once.
var rbPG struct {
	dsn string
	ok  bool
}

// pause lets the workload run for a random 150–600 ms.
func (l *rbLineage) pause() {
	l.mu.Lock()
	d := time.Duration(150+l.rng.IntN(450)) * time.Millisecond
	l.mu.Unlock()
	time.Sleep(d)
}

func (l *rbLineage) intn(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

func (l *rbLineage) current() *rbChild {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// scenarioCoordinator: the coordinator SIGKILLed n times, in rotation at
// a random moment, right before the commit of one of its next store
// Updates, and right after it.
func (l *rbLineage) scenarioCoordinator(n int) {
	if l.engine == "pg" {
		l.usePG()
	}
	l.up(nil)
	l.startWork()
	for i := range n {
		l.pause()
		l.current().kill()
		l.tally.add(func(t *rbTally) { t.coordKills++ })
		if i%3 == 0 {
			l.up(nil)
			continue
		}
		at, mode := 3+l.intn(40), []string{"before", "after"}[i%3-1]
		c := l.startChild("", func(c *robustChildConfig) { c.KillAt, c.KillMode = at, mode })
		if l.serve(c, 60*time.Second) {
			select {
			case <-c.exited:
			case <-time.After(4 * time.Second):
				c.kill()
			}
		}
		l.tally.add(func(t *rbTally) { t.coordKills++ })
		l.up(nil)
	}
}

// withOwner starts the execowner process of the lineage.
func (l *rbLineage) withOwner(bin string) {
	l.ownerBin = bin
	l.ownerSock = filepath.Join(l.dir, "o", "owner.sock")
	l.spawnLog = filepath.Join(l.dir, "spawns.log")
	crashRand(l.ownerFP[:])
	l.startOwner()
	l.t.Cleanup(func() {
		l.mu.Lock()
		cmd, done := l.ownerCmd, l.ownerDone
		l.mu.Unlock()
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	})
}

func (l *rbLineage) startOwner() {
	logf, err := os.OpenFile(filepath.Join(l.dir, "owner.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		l.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(l.ownerBin, "-socket", l.ownerSock, "-journal", filepath.Join(l.dir, "owner.journal"),
		"-fingerprint", hex.EncodeToString(l.ownerFP[:]), "-dir", l.dir)
	cmd.Stderr = logf
	childproc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	inc, herr := hex.DecodeString(safeField(f, 2))
	if err != nil || len(f) != 4 || f[1] != "ready" || herr != nil || len(inc) != 16 {
		cmd.Process.Kill()
		cmd.Wait()
		b, _ := os.ReadFile(filepath.Join(l.dir, "owner.log"))
		l.fatalf("execowner did not start: %q %v\nowner log:\n%s", line, err, b[max(0, len(b)-3000):])
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	l.mu.Lock()
	l.ownerInc = coordwire.IncarnationID(inc)
	l.ownerCmd, l.ownerDone = cmd, done
	l.mu.Unlock()
}

// scenarioOwner: in rotation, the execowner process SIGKILLed at a random
// moment while the coordinator lives (it registers the restarted owner's
// new incarnation), the coordinator SIGKILLed at a START_RUN commit
// boundary (admission, DISPATCHED, after the spawn, after the result),
// and both at random moments.
func (l *rbLineage) scenarioOwner(n int) {
	l.up(nil)
	l.startWork()
	points := []string{runKillAdmission, runKillDispatched, runKillSpawned, runKillResult}
	for i := range n {
		l.pause()
		switch i % 3 {
		case 0:
			l.mu.Lock()
			cmd, done := l.ownerCmd, l.ownerDone
			l.mu.Unlock()
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			l.startOwner()
			l.tally.add(func(t *rbTally) { t.ownerKills++ })
		case 1:
			l.current().kill()
			point := points[(i/3)%len(points)]
			c := l.startChild("", func(c *robustChildConfig) { c.RunKill, c.RunKillN = point, 1 })
			if l.serve(c, 60*time.Second) {
				select {
				case <-c.exited:
				case <-time.After(4 * time.Second):
					c.kill()
				}
			}
			l.tally.add(func(t *rbTally) { t.coordKills += 2 })
			l.up(nil)
		case 2:
			l.mu.Lock()
			cmd, done := l.ownerCmd, l.ownerDone
			l.mu.Unlock()
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			l.current().kill()
			l.startOwner()
			l.tally.add(func(t *rbTally) { t.ownerKills++; t.coordKills++ })
			l.up(nil)
		}
	}
}

// usePG puts the lineage on a fresh schema of the run's PostgreSQL.
func (l *rbLineage) usePG() {
	if !rbPG.ok {
		l.t.Skip("no PostgreSQL (set PHUX_PG_DSN or install postgresql)")
	}
	l.engine, l.pgDSN = "pg", rbPG.dsn
	l.pgSchema = fmt.Sprintf("rb_%d_%d_%s", os.Getpid(), time.Now().UnixNano()%1e6, strings.ReplaceAll(l.name, "-", "_"))
	pgtest.DropSchemaAtEnd(l.t, l.pgDSN, l.pgSchema)
}

// scenarioPGStop: on PostgreSQL, a standby waits; the active coordinator
// is SIGSTOPped under load, the standby takes over after the lease, the
// old one is SIGCONTed and must exit fenced.
func (l *rbLineage) scenarioPGStop(n int) {
	if l.coordd == "" {
		l.usePG()
	}
	l.up(nil)
	l.startWork()
	for range n {
		sb := l.startChild("", nil)
		l.pause()
		old := l.current()
		old.cmd.Process.Signal(syscall.SIGSTOP)
		if err := waitStopped(old.cmd.Process.Pid, 5*time.Second); err != nil {
			l.fatalf("%v", err)
		}
		if !l.serve(sb, 60*time.Second) {
			l.fatalf("the standby exited instead of taking over")
		}
		old.cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-old.exited:
		case <-time.After(30 * time.Second):
			l.fatalf("the resumed coordinator did not exit")
		}
		want := crashExitFenced
		if l.coordd != "" {
			want = coorddExitFenced
		}
		if code := old.state.ExitCode(); code != want {
			l.fatalf("the resumed coordinator exited %d, want %d (fenced)", code, want)
		}
		l.tally.add(func(t *rbTally) { t.stops++ })
	}
}

// waitStopped waits until every thread of pid is stopped (state T).
func waitStopped(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		all := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped within %v", pid, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// scenarioWitness: the witness SIGKILLed and restarted at once (within
// the lease), and SIGSTOPped past the lease, which fences the
// coordinator; once it is SIGCONTed a new coordinator activates.
func (l *rbLineage) scenarioWitness(n int) {
	l.w = startWitness(l.t, crashLifetime)
	l.wpub = l.w.id.PublicKey
	l.up(nil)
	l.startWork()
	for i := range n {
		l.pause()
		if i%2 == 0 {
			l.w.kill()
			l.w.start(crashLifetime)
			l.tally.add(func(t *rbTally) { t.witnessKills++ })
			continue
		}
		l.w.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(crashLifetime + time.Second)
		l.w.cmd.Process.Signal(syscall.SIGCONT)
		c := l.current()
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			l.fatalf("the coordinator still serves after its lease passed with the witness unreachable")
		}
		l.tally.add(func(t *rbTally) { t.stops++ })
		l.up(nil)
	}
}

// scenarioReplies: the clients and the Mirror reach the coordinator
// through a proxy; n times the proxy holds every reply, lets the
// commands through for a moment, and cuts every connection, so every
// client loses its replies and all reconnect at once.
func (l *rbLineage) scenarioReplies(n int) {
	p, err := pauseproxy.New(l.svc, l.proxySrc())
	if err != nil {
		l.t.Fatal(err)
	}
	l.proxy = p
	l.up(nil)
	l.startWork()
	for range n {
		l.pause()
		p.Pause(true)
		time.Sleep(time.Duration(20+l.intn(80)) * time.Millisecond)
		p.Cut()
		p.Pause(false)
		l.tally.add(func(t *rbTally) { t.cuts++ })
	}
}

// scenarioFull: boltstore's file limit is reached under load
// (RESOURCE_EXHAUSTED store.full, nothing admitted), then the coordinator
// restarts with more room and the workload goes on; n rounds.
func (l *rbLineage) scenarioFull(n int) {
	l.engine = "bolt" // its MaxFileSize is the limit this scenario reaches
	l.maxFile = 1 << 20
	l.up(nil)
	l.startWork()
	for range n {
		if !l.waitFull(60 * time.Second) {
			l.fatalf("the store never filled up")
		}
		l.pause()
		st, err := os.Stat(l.store)
		if err != nil {
			l.t.Fatal(err)
		}
		l.maxFile = int(st.Size()) + 1<<20 // room again
		l.current().kill()
		l.up(nil)
		l.tally.add(func(t *rbTally) { t.full++ })
	}
	l.maxFile = 0
}

// waitFull waits for a command refused RESOURCE_EXHAUSTED after now.
func (l *rbLineage) waitFull(within time.Duration) bool {
	from := l.rec.Len()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ops := l.rec.Operations()
		for _, op := range ops[min(from, len(ops)):] {
			if o := op.Output.(history.Output); o.Outcome == history.Unavailable && o.Code == coordwire.ResourceExhausted {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// rbClockBin is the -tags witnesstest witness.
var rbClockBin rbBuilt

// scenarioClock: the witness's clock (a -tags witnesstest witness reading
// its offset from a file) steps forward past the lease and back, n
// times; on PostgreSQL (when available) a standby waits throughout, so
// that a forward step lets it activate while the active coordinator still
// holds a certificate its own clock calls valid.
func (l *rbLineage) scenarioClock(n int) {
	witness := rbClockBin.get(l.t, "phux-witness", "github.com/phuxcoord/coord/witness/cmd/phux-witness", "-tags", "witnesstest")
	clock := filepath.Join(l.dir, "clock")
	if err := os.WriteFile(clock, []byte("0"), 0o600); err != nil {
		l.t.Fatal(err)
	}
	l.w = startWitnessWith(l.t, crashLifetime, witness, []string{"PHUX_WITNESS_TEST_CLOCK=" + clock})
	l.wpub = l.w.id.PublicKey
	standby := rbPG.ok
	if standby {
		l.usePG()
	}
	l.up(nil)
	l.startWork()
	offset := 0
	var sb *rbChild
	for i := range n {
		if standby && sb == nil {
			sb = l.startChild("", nil)
		}
		l.pause()
		step := 3000 // forward past the lease
		if i%2 == 1 {
			step = -1500
		}
		offset += step
		if err := os.WriteFile(clock, []byte(fmt.Sprint(offset)), 0o600); err != nil {
			l.t.Fatal(err)
		}
		l.tally.add(func(t *rbTally) { t.clockSteps++ })
		time.Sleep(crashLifetime + 500*time.Millisecond)
		if sb != nil {
			select {
			case r := <-sb.ready:
				sb.ready <- r
				if l.serve(sb, time.Second) {
					sb = nil
				}
			default:
			}
		}
		if c := l.current(); c != nil {
			select {
			case <-c.exited:
				if sb != nil {
					if l.serve(sb, 60*time.Second) {
						sb = nil
						continue
					}
				}
				l.up(nil)
			default:
			}
		}
	}
}
