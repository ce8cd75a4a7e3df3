package execowner_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

var testFP = [32]byte{1, 2, 3}

// recorder is a FactSink that keeps every admitted fact per binding.
type recorder struct {
	mu    sync.Mutex
	facts map[coordwire.BindingID][]coordwire.TerminalSourceFact
	fail  int // refuse this many calls first (transiently)
	calls int
}

func newRecorder() *recorder {
	return &recorder{facts: make(map[coordwire.BindingID][]coordwire.TerminalSourceFact)}
}

func (r *recorder) sink(_ context.Context, f coordwire.TerminalSourceFact) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail > 0 {
		r.fail--
		return coordwire.NewError(coordwire.NotFound, "binding.not_active")
	}
	f.Payload = append([]byte(nil), f.Payload...)
	r.facts[f.Source.BindingID] = append(r.facts[f.Source.BindingID], f)
	return nil
}

func (r *recorder) of(b coordwire.BindingID) []coordwire.TerminalSourceFact {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]coordwire.TerminalSourceFact(nil), r.facts[b]...)
}

// waitClosed waits until binding b's facts end with CLOSED.
func (r *recorder) waitClosed(t *testing.T, b coordwire.BindingID) []coordwire.TerminalSourceFact {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fs := r.of(b)
		if n := len(fs); n > 0 && fs[n-1].Kind == coordwire.SourceClosed {
			return fs
		}
		if time.Now().After(deadline) {
			t.Fatalf("binding %s: no CLOSED after 10 s; facts %v", b, kinds(fs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func kinds(fs []coordwire.TerminalSourceFact) []coordwire.SourceFactKind {
	var k []coordwire.SourceFactKind
	for _, f := range fs {
		k = append(k, f.Kind)
	}
	return k
}

func payload(t *testing.T, f coordwire.TerminalSourceFact) coordwire.SourceFactPayload {
	t.Helper()
	var p coordwire.SourceFactPayload
	if err := p.DecodeAs(f.Kind, f.Payload); err != nil {
		t.Fatalf("fact %d payload: %v", f.Source.Sequence, err)
	}
	return p
}

func newOwner(t *testing.T, journal string, cfg execowner.Config) *execowner.Owner {
	t.Helper()
	cfg.Journal, cfg.Fingerprint = journal, testFP
	o, err := execowner.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func doc(t *testing.T, argv ...string) []byte {
	t.Helper()
	x := execowner.Executor{Argv: argv}
	b, err := x.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func id16(n byte) [16]byte { return [16]byte{0xee, n} }

func spawnReq(n byte, document []byte) coordserver.SpawnRequest {
	return coordserver.SpawnRequest{
		Key:            coordserver.EffectKey{ID: id16(n), Digest: sha256.Sum256([]byte{n})},
		PendingBinding: id16(n + 100), WorkSession: id16(n + 50),
		Group: execowner.DefaultGroup, ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: document,
	}
}

func refOf(o *execowner.Owner, req coordserver.SpawnRequest, res coordserver.SpawnResult) coordwire.TerminalBindingRef {
	return coordwire.TerminalBindingRef{
		BindingID: req.PendingBinding, WorkSessionID: req.WorkSession,
		OwnerAuthorityFingerprint: o.Fingerprint(), OwnerIncarnation: o.Incarnation(), ResourceID: res.ResourceID,
	}
}

// sh -c 'echo hi; exit 3': OPENED, one OUTPUT_RANGE attesting "hi\n", CLOSED 3,
// sequences 1..3, each fact a canonical TerminalSourceFact of this owner.
// The sink refuses the first calls NOT_FOUND (the spawn not yet recorded)
// and the same sequences are retried.
func TestEchoExit3(t *testing.T) {
	rec := newRecorder()
	rec.fail = 3
	var out []byte
	var outMu sync.Mutex
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: rec.sink, Output: func(_ coordwire.BindingID, p []byte) {
		outMu.Lock()
		out = append(out, p...)
		outMu.Unlock()
	}})
	req := spawnReq(1, doc(t, "sh", "-c", "echo hi; exit 3"))
	res, err := o.Spawn(context.Background(), req)
	if err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	fs := rec.waitClosed(t, req.PendingBinding)
	if diff := cmp.Diff([]coordwire.SourceFactKind{coordwire.SourceOpened, coordwire.SourceOutputRange, coordwire.SourceClosed}, kinds(fs)); diff != "" {
		t.Fatalf("facts (-want +got):\n%s", diff)
	}
	for i, f := range fs {
		want := coordwire.TerminalSourceRef{BindingID: req.PendingBinding, OwnerAuthorityFingerprint: testFP,
			OwnerIncarnation: o.Incarnation(), Sequence: coordwire.SourceSequence(i + 1)}
		if diff := cmp.Diff(want, f.Source); diff != "" {
			t.Errorf("fact %d ref (-want +got):\n%s", i, diff)
		}
		var back coordwire.TerminalSourceFact
		if err := back.Decode(f.Append(nil)); err != nil {
			t.Errorf("fact %d does not round-trip: %v", i, err)
		}
	}
	r := payload(t, fs[1])
	want := coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 1,
		ByteCount: 3, ContentSHA256: sha256.Sum256([]byte("hi\n"))}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("OUTPUT_RANGE (-want +got):\n%s", diff)
	}
	if c := payload(t, fs[2]); !c.HasExitStatus || c.ExitStatus != 3 {
		t.Errorf("CLOSED = %+v, want exit status 3", c)
	}
	outMu.Lock()
	if string(out) != "hi\n" {
		t.Errorf("Output got %q", out)
	}
	outMu.Unlock()
	if rec.calls < 6 {
		t.Errorf("sink calls = %d, want the 3 refused ones retried", rec.calls)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pidOf reads the pid a child wrote as its first output.
func pidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			var pid int
			for _, c := range b[:len(b)-1] {
				pid = pid*10 + int(c-'0')
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// KILL of a long sleep kills the whole process group: the shell leader and
// the sleep it started in the background are both gone, CLOSED reports
// −9, and a duplicate KILL returns the stored result without acting.
func TestKillGroup(t *testing.T) {
	rec := newRecorder()
	dir := t.TempDir()
	o := newOwner(t, filepath.Join(dir, "j"), execowner.Config{Sink: rec.sink})
	pf := filepath.Join(dir, "pid")
	req := spawnReq(2, doc(t, "sh", "-c", "sleep 60 & echo $! > "+pf+"; wait"))
	res, err := o.Spawn(context.Background(), req)
	if err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	leader := o.Live(req.PendingBinding)
	sleeper := pidFile(t, pf)
	if leader == 0 || !alive(sleeper) {
		t.Fatalf("leader %d sleeper %d not running", leader, sleeper)
	}
	kreq := coordserver.KillRequest{Key: coordserver.EffectKey{ID: id16(200), Digest: [32]byte{9}}, Binding: refOf(o, req, res)}
	kres, err := o.Kill(context.Background(), kreq)
	if err != nil || kres.Rejected {
		t.Fatalf("Kill: %+v, %v", kres, err)
	}
	waitGone(t, leader)
	waitGone(t, sleeper)
	fs := rec.waitClosed(t, req.PendingBinding)
	if c := payload(t, fs[len(fs)-1]); !c.HasExitStatus || c.ExitStatus != -int32(syscall.SIGKILL) {
		t.Errorf("CLOSED = %+v, want −9", c)
	}
	again, err := o.Kill(context.Background(), kreq)
	if err != nil || again != kres {
		t.Errorf("duplicate Kill = %+v, %v; want the stored %+v", again, err, kres)
	}
	// A new KILL for the ended binding is a rejection.
	kreq2 := kreq
	kreq2.Key = coordserver.EffectKey{ID: id16(201), Digest: [32]byte{9}}
	if r, err := o.Kill(context.Background(), kreq2); err != nil || !r.Rejected {
		t.Errorf("Kill of an ended binding = %+v, %v; want rejected", r, err)
	}
}

// PROCESS_SIGNAL Terminate reaches the group, is reported as SIGNAL_RESULT
// Delivered before CLOSED −15.
func TestSignalTerminate(t *testing.T) {
	rec := newRecorder()
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: rec.sink})
	req := spawnReq(3, doc(t, "sleep", "60"))
	res, err := o.Spawn(context.Background(), req)
	if err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	sreq := coordserver.SignalRequest{Key: coordserver.EffectKey{ID: id16(210), Digest: [32]byte{7}}, Binding: refOf(o, req, res), Signal: coordwire.SignalTerminate}
	if r, err := o.ProcessSignal(context.Background(), sreq); err != nil || r.Rejected {
		t.Fatalf("ProcessSignal: %+v, %v", r, err)
	}
	fs := rec.waitClosed(t, req.PendingBinding)
	if diff := cmp.Diff([]coordwire.SourceFactKind{coordwire.SourceOpened, coordwire.SourceSignalResult, coordwire.SourceClosed}, kinds(fs)); diff != "" {
		t.Fatalf("facts (-want +got):\n%s", diff)
	}
	if p := payload(t, fs[1]); p.EffectAttemptID != sreq.Key.ID || p.SignalResult != coordwire.SignalDelivered {
		t.Errorf("SIGNAL_RESULT = %+v", p)
	}
	if c := payload(t, fs[2]); c.ExitStatus != -int32(syscall.SIGTERM) {
		t.Errorf("CLOSED = %+v, want −15", c)
	}
	// A signal for a ref of another incarnation is rejected.
	other := sreq
	other.Key.ID = id16(211)
	other.Binding.OwnerIncarnation = coordwire.IncarnationID{5}
	if r, err := o.ProcessSignal(context.Background(), other); err != nil || !r.Rejected || r.Reason != "binding.other_owner" {
		t.Errorf("foreign ref = %+v, %v", r, err)
	}
}

// Output larger than one range is attested in order, whole, with the
// digest of each range's bytes; a BEL byte raises ATTENTION Bell.
func TestOutputRangesAndBell(t *testing.T) {
	rec := newRecorder()
	var out []byte
	var mu sync.Mutex
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: rec.sink, OutputRangeBytes: 1000,
		Output: func(_ coordwire.BindingID, p []byte) { mu.Lock(); out = append(out, p...); mu.Unlock() }})
	req := spawnReq(4, doc(t, "sh", "-c", `head -c 200000 /dev/zero; printf '\a'`))
	if res, err := o.Spawn(context.Background(), req); err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	fs := rec.waitClosed(t, req.PendingBinding)
	mu.Lock()
	defer mu.Unlock()
	var total, next uint64 = 0, 1
	var bell bool
	for _, f := range fs[1 : len(fs)-1] {
		p := payload(t, f)
		switch f.Kind {
		case coordwire.SourceOutputRange:
			if p.FirstOwnerSeq != next || p.LastOwnerSeq < p.FirstOwnerSeq {
				t.Fatalf("range %d..%d after %d", p.FirstOwnerSeq, p.LastOwnerSeq, next-1)
			}
			next = p.LastOwnerSeq + 1
			if got := sha256.Sum256(out[total : total+p.ByteCount]); got != p.ContentSHA256 {
				t.Fatalf("range %d..%d digest mismatch", p.FirstOwnerSeq, p.LastOwnerSeq)
			}
			total += p.ByteCount
		case coordwire.SourceAttention:
			bell = bell || p.Attention == coordwire.AttentionBell
		default:
			t.Fatalf("unexpected %v", f.Kind)
		}
	}
	if total != 200001 || uint64(len(out)) != total || !bell {
		t.Errorf("attested %d bytes of %d, bell %v", total, len(out), bell)
	}
}

// A spawn the owner cannot run is a stored rejection, not an error.
func TestSpawnRejections(t *testing.T) {
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{})
	cases := []struct {
		name   string
		mutate func(*coordserver.SpawnRequest)
		reason string
	}{
		{"group", func(r *coordserver.SpawnRequest) { r.Group = []byte("other") }, "group.not_served"},
		{"schema", func(r *coordserver.SpawnRequest) { r.ExecutorSchema = 2 }, "executor.schema"},
		{"unknown field", func(r *coordserver.SpawnRequest) { r.ExecutorDocument = append(r.ExecutorDocument, 4, 4, 0) }, "executor.unknown_field"},
		{"empty doc", func(r *coordserver.SpawnRequest) { r.ExecutorDocument = nil }, "executor.tlv.missing_field"},
		{"not found", func(r *coordserver.SpawnRequest) { r.ExecutorDocument = doc(t, "/nonexistent/prog") }, "spawn.not_found"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := spawnReq(byte(20+i), doc(t, "true"))
			c.mutate(&req)
			res, err := o.Spawn(context.Background(), req)
			if err != nil || !res.Rejected || res.Reason != c.reason || res.ResourceID != nil {
				t.Fatalf("Spawn = %+v, %v; want rejected %q", res, err, c.reason)
			}
			again, err := o.Spawn(context.Background(), req)
			if err != nil || !cmp.Equal(again, res) {
				t.Errorf("duplicate = %+v, %v", again, err)
			}
		})
	}
}

// Close kills live process groups and waits for the owner's goroutines.
func TestCloseKillsChildren(t *testing.T) {
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{})
	req := spawnReq(5, doc(t, "sleep", "60"))
	if res, err := o.Spawn(context.Background(), req); err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	pid := o.Live(req.PendingBinding)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, err := o.Spawn(context.Background(), spawnReq(6, doc(t, "true"))); !errors.Is(err, execowner.ErrClosed) {
		t.Errorf("Spawn after Close: %v", err)
	}
}

// A present env is exactly the child's environment, and dir its working
// directory.
func TestEnvAndDir(t *testing.T) {
	var out []byte
	var mu sync.Mutex
	rec := newRecorder()
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: rec.sink,
		Output: func(_ coordwire.BindingID, p []byte) { mu.Lock(); out = append(out, p...); mu.Unlock() }})
	x := execowner.Executor{Argv: []string{"/bin/sh", "-c", `echo "$FOO:$HOME"; pwd`}, HasEnv: true, Env: []string{"FOO=bar"}, Dir: "/"}
	b, err := x.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req := spawnReq(7, b)
	if res, err := o.Spawn(context.Background(), req); err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	rec.waitClosed(t, req.PendingBinding)
	mu.Lock()
	defer mu.Unlock()
	if string(out) != "bar:\n/\n" {
		t.Errorf("output %q, want %q", out, "bar:\n/\n")
	}
}

// A permanent refusal of a fact stops the binding's facts and kills its
// process group: no process runs that nobody attests. A transient one
// (NOT_FOUND) is retried with the same sequence.
func TestPermanentRefusalKills(t *testing.T) {
	var mu sync.Mutex
	var seen []coordwire.SourceSequence
	refuse := func(_ context.Context, f coordwire.TerminalSourceFact) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, f.Source.Sequence)
		if len(seen) < 3 {
			return coordwire.NewError(coordwire.NotFound, "binding.not_found")
		}
		return coordwire.NewError(coordwire.RevisionConflict, "source.binding_ended")
	}
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: refuse})
	req := spawnReq(8, doc(t, "sleep", "60"))
	if res, err := o.Spawn(context.Background(), req); err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	pid := o.Live(req.PendingBinding)
	waitGone(t, pid)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]coordwire.SourceSequence{1, 1, 1}, seen); diff != "" {
		t.Errorf("sink calls (-want +got):\n%s", diff)
	}
}

// Close waits for every goroutine of the owner.
func TestCloseWaitsForGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	o, err := execowner.New(execowner.Config{Journal: filepath.Join(t.TempDir(), "j"), Fingerprint: testFP, Sink: newRecorder().sink})
	if err != nil {
		t.Fatal(err)
	}
	for n := byte(30); n < 34; n++ {
		if res, err := o.Spawn(context.Background(), spawnReq(n, doc(t, "sh", "-c", "echo x; sleep 60"))); err != nil || res.Rejected {
			t.Fatalf("Spawn: %+v, %v", res, err)
		}
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A KILL is answered at once even while the binding's fact queue is full
// because the coordinator does not admit facts.
func TestKillWithFullFactQueue(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	blocked := func(ctx context.Context, _ coordwire.TerminalSourceFact) error {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return coordwire.NewError(coordwire.NotFound, "binding.not_found")
	}
	defer close(release)
	o := newOwner(t, filepath.Join(t.TempDir(), "j"), execowner.Config{Sink: blocked, OutputRangeBytes: 1})
	req := spawnReq(9, doc(t, "sh", "-c", "while :; do echo x; done"))
	res, err := o.Spawn(context.Background(), req)
	if err != nil || res.Rejected {
		t.Fatalf("Spawn: %+v, %v", res, err)
	}
	pid := o.Live(req.PendingBinding)
	time.Sleep(300 * time.Millisecond) // the queue fills: the sink holds the first fact
	done := make(chan error, 1)
	go func() {
		r, err := o.Kill(context.Background(), coordserver.KillRequest{Key: coordserver.EffectKey{ID: id16(220), Digest: [32]byte{1}}, Binding: refOf(o, req, res)})
		if err == nil && r.Rejected {
			err = errors.New(r.Reason)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Kill: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Kill blocked behind the full fact queue")
	}
	waitGone(t, pid)
	if calls.Load() != 1 {
		t.Errorf("%d sink calls, want the one held", calls.Load())
	}
}
