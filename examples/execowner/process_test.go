package execowner_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/ownertest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

// ownerBin is the cmd/execowner binary, built once by TestMain.
var ownerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execowner-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ownerBin = filepath.Join(dir, "execowner")
	args := []string{"build", "-o", ownerBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/execowner")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/execowner:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running cmd/execowner.
type proc struct {
	cmd  *exec.Cmd
	inc  string
	done chan struct{}
	err  error
}

// shortDir returns a fresh 0700 directory with a short path (a Unix
// socket path must fit in 108 bytes).
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "eo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startProc(t *testing.T, sock, journal string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(ownerBin, "-socket", sock, "-journal", journal, "-fingerprint", hex.EncodeToString(testFP[:]))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	childproc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 4 || f[0] != "execowner" || f[1] != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("execowner did not start: %q, %v", line, err)
	}
	p.inc = f[2]
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the process with SIGTERM (a clean close) and waits.
func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("execowner ignored SIGTERM")
	}
}

func (p *proc) waitDied(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("execowner did not die")
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("execowner ended %v, want SIGKILL", p.cmd.ProcessState)
	}
}

func dial(t *testing.T, sock string, sink execowner.FactSink) *execowner.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := execowner.Dial(ctx, sock, sink)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// The Dial client of a separate cmd/execowner passes the conformance
// suite; a restart is a SIGTERM and a new process on the same journal, the
// crash a real SIGKILL of the process right after the intent.
func TestConformanceSeparateProcess(t *testing.T) {
	ownertest.Run(t, func(t *testing.T) *ownertest.Harness {
		dir := shortDir(t)
		sock, journal := filepath.Join(dir, "s", "owner.sock"), filepath.Join(dir, "journal")
		p := startProc(t, sock, journal)
		cl := dial(t, sock, nil)
		h := &ownertest.Harness{Group: execowner.DefaultGroup, Adapter: cl}
		startsDir(t, h)
		h.Ref = func(req coordserver.SpawnRequest, res coordserver.SpawnResult) coordwire.TerminalBindingRef {
			return coordwire.TerminalBindingRef{BindingID: req.PendingBinding, WorkSessionID: req.WorkSession,
				OwnerAuthorityFingerprint: cl.Fingerprint(), OwnerIncarnation: cl.Incarnation(), ResourceID: res.ResourceID}
		}
		h.Restart = func(t *testing.T) {
			cl.Close()
			p.stop(t)
			p = startProc(t, sock, journal)
			old := cl.Incarnation()
			cl = dial(t, sock, nil)
			h.Adapter = cl
			if cl.Incarnation() == old {
				t.Fatal("a restarted execowner kept its incarnation")
			}
		}
		h.CrashAfterIntent = func(t *testing.T, req coordserver.SpawnRequest) {
			cl.Close()
			p.stop(t)
			p = startProc(t, sock, journal, "PHUX_EXECOWNER_CRASH=intent:"+hex.EncodeToString(req.Key.ID[:]))
			cl = dial(t, sock, nil)
			if _, err := cl.Spawn(context.Background(), req); !errors.Is(err, execowner.ErrConnLost) {
				t.Fatalf("Spawn into a crash: %v, want ErrConnLost", err)
			}
			p.waitDied(t)
			cl.Close()
			p = startProc(t, sock, journal)
			cl = dial(t, sock, nil)
			h.Adapter = cl
		}
		return h
	})
}

// Facts stream over the socket with the exact sequence; a coordinator
// that refuses (transiently) and disconnects loses nothing: the next
// connection gets the same facts, from sequence 1.
func TestFactsAcrossReconnect(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "s", "owner.sock")
	startProc(t, sock, filepath.Join(dir, "journal"))
	var mu sync.Mutex
	refused := 0
	first := dial(t, sock, func(context.Context, coordwire.TerminalSourceFact) error {
		mu.Lock()
		refused++
		mu.Unlock()
		return coordwire.NewError(coordwire.NotFound, "binding.not_active")
	})
	req := spawnReq(1, doc(t, "sh", "-c", "echo hi; exit 3"))
	res, err := first.Spawn(context.Background(), req)
	if err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := refused
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fact reached the first client")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.Close()
	rec := newRecorder()
	second := dial(t, sock, rec.sink)
	fs := rec.waitClosed(t, req.PendingBinding)
	if len(fs) != 3 || fs[0].Source.Sequence != 1 || fs[2].Source.Sequence != 3 {
		t.Fatalf("facts after reconnect: %v", kinds(fs))
	}
	if fs[0].Source.OwnerIncarnation.String() != hexInc(second) {
		t.Errorf("fact incarnation %s, HELLO %s", fs[0].Source.OwnerIncarnation, hexInc(second))
	}
	if c := payload(t, fs[2]); c.ExitStatus != 3 {
		t.Errorf("CLOSED %+v", c)
	}
}

func hexInc(cl *execowner.Client) string { i := cl.Incarnation(); return hex.EncodeToString(i[:]) }

// The journal's crash safety with a real SIGKILL after the spawn started
// and before its result was durable: the child dies with its owner, the
// restarted owner answers ErrOutcomeUnprovable for that key and the stored
// result for the spawn completed before.
func TestCrashAfterSpawnBeforeResult(t *testing.T) {
	dir := shortDir(t)
	sock, journal := filepath.Join(dir, "s", "owner.sock"), filepath.Join(dir, "journal")
	p := startProc(t, sock, journal)
	cl := dial(t, sock, nil)
	done := spawnReq(1, doc(t, "true"))
	dres, err := cl.Spawn(context.Background(), done)
	if err != nil || dres.Rejected {
		t.Fatalf("Spawn: %+v, %v", dres, err)
	}
	cl.Close()
	p.stop(t)

	// The child may die with its owner before it runs a line, so it is
	// found by a unique argument instead of a pid it reports. Nine digits
	// always: a shorter one would be found inside another run's marker.
	marker := fmt.Sprintf("600.%09d", time.Now().UnixNano()%1e9)
	crash := spawnReq(2, doc(t, "sh", "-c", "exec sleep "+marker))
	p = startProc(t, sock, journal, "PHUX_EXECOWNER_CRASH=spawn:"+hex.EncodeToString(crash.Key.ID[:]))
	cl = dial(t, sock, nil)
	if _, err := cl.Spawn(context.Background(), crash); !errors.Is(err, execowner.ErrConnLost) {
		t.Fatalf("Spawn into a crash: %v", err)
	}
	p.waitDied(t)
	cl.Close()
	deadline := time.Now().Add(5 * time.Second)
	for withArg(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the spawned child outlived its SIGKILLed owner")
		}
		time.Sleep(10 * time.Millisecond)
	}

	startProc(t, sock, journal)
	cl = dial(t, sock, nil)
	if _, err := cl.Outcome(context.Background(), crash.Key); !errors.Is(err, coordserver.ErrOutcomeUnprovable) {
		t.Errorf("Outcome after the crash: %v, want ErrOutcomeUnprovable", err)
	}
	if _, err := cl.Spawn(context.Background(), crash); !errors.Is(err, coordserver.ErrOutcomeUnprovable) {
		t.Errorf("duplicate Spawn after the crash: %v, want ErrOutcomeUnprovable", err)
	}
	out, err := cl.Outcome(context.Background(), done.Key)
	if err != nil || out.Kind != coordwire.EffectSpawn || string(out.Spawn.ResourceID) != string(dres.ResourceID) {
		t.Errorf("Outcome of the completed spawn = %+v, %v; want %+v", out, err, dres)
	}
}
