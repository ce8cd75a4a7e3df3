// Package ownertest is the conformance suite of coordserver.OwnerAdapter:
// the dedupe contract of the terminal-owner port (spec §8, §14 invariant 9,
// ADDENDUM C.8) checked against a real adapter. An adapter author runs it
// against their own implementation:
//
//	func TestConformance(t *testing.T) {
//		ownertest.Run(t, func(t *testing.T) *ownertest.Harness { ... })
//	}
//
// The suite spawns real work through the adapter and observes it through
// the Harness: every action counts, so "returns the stored result without
// acting again" is checked, not assumed.
package ownertest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// Harness is one adapter under test and what the suite needs to observe
// it. The function handed to Run returns a fresh one (fresh durable state)
// per subtest and owns its cleanup (t.Cleanup): stopping the adapter and
// ending whatever it started.
type Harness struct {
	// Adapter is the adapter under test; Restart and CrashAfterIntent
	// replace it.
	Adapter coordserver.OwnerAdapter
	// Group is a canonical GroupId image the adapter serves.
	Group []byte
	// Schema is the executor schema of Document and BadDocument.
	Schema uint16
	// Document returns an executor document whose process runs until it
	// is killed (at least a minute) and records every start under tag,
	// so that Starts(tag) counts them.
	Document func(tag string) []byte
	// Starts reports how many processes of Document(tag) have started.
	Starts func(tag string) int
	// BadDocument is an executor document the adapter must reject (for
	// example one with an unknown field).
	BadDocument []byte
	// Ref returns the TerminalBindingRef of a successful spawn, as the
	// coordinator records it (the adapter's current fingerprint and
	// incarnation, req.PendingBinding, req.WorkSession, res.ResourceID).
	Ref func(req coordserver.SpawnRequest, res coordserver.SpawnResult) coordwire.TerminalBindingRef
	// Restart stops the adapter and starts it again on the same durable
	// state, replacing Adapter (a new incarnation). nil skips the restart
	// checks.
	Restart func(t *testing.T)
	// CrashAfterIntent hands req to the adapter's Spawn and makes the
	// adapter lose everything but its durable state right after it
	// recorded the intent (a real or simulated crash), then starts it
	// again, replacing Adapter. Whether the process started is unknown.
	// nil skips the unprovable-outcome checks.
	CrashAfterIntent func(t *testing.T, req coordserver.SpawnRequest)
}

// Run runs the conformance suite; open returns a fresh Harness for each
// subtest.
func Run(t *testing.T, open func(t *testing.T) *Harness) {
	t.Run("ExactDuplicateSpawn", func(t *testing.T) { testDuplicateSpawn(t, open(t)) })
	t.Run("ChangedDigestConflicts", func(t *testing.T) { testConflict(t, open(t)) })
	t.Run("OutcomeNeverActs", func(t *testing.T) { testOutcome(t, open(t)) })
	t.Run("UnknownKey", func(t *testing.T) { testUnknown(t, open(t)) })
	t.Run("BadDocumentRejected", func(t *testing.T) { testBadDocument(t, open(t)) })
	t.Run("UnservedGroupRejected", func(t *testing.T) { testUnservedGroup(t, open(t)) })
	t.Run("KillDedupe", func(t *testing.T) { testKill(t, open(t)) })
	t.Run("SignalDedupe", func(t *testing.T) { testSignal(t, open(t)) })
	t.Run("UnknownBindingRejected", func(t *testing.T) { testUnknownBinding(t, open(t)) })
	t.Run("ConcurrentDuplicates", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("RestartSurvival", func(t *testing.T) { testRestart(t, open(t)) })
	t.Run("CrashAfterIntentUnprovable", func(t *testing.T) { testCrash(t, open(t)) })
}

var seq atomic.Uint64

// id returns a fresh nonzero 16-byte id.
func id() [16]byte {
	var b [16]byte
	b[0] = 0x07
	binary.BigEndian.PutUint64(b[8:], seq.Add(1))
	return b
}

func key() coordserver.EffectKey {
	k := coordserver.EffectKey{ID: id()}
	k.Digest = sha256.Sum256(k.ID[:])
	return k
}

func other(k coordserver.EffectKey) coordserver.EffectKey {
	k.Digest[0] ^= 0xff
	return k
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func spawnReq(h *Harness, tag string) coordserver.SpawnRequest {
	return coordserver.SpawnRequest{
		Key: key(), PendingBinding: id(), WorkSession: id(), Group: h.Group,
		ExecutorSchema: h.Schema, ExecutorDocument: h.Document(tag),
	}
}

func mustSpawn(t *testing.T, h *Harness, req coordserver.SpawnRequest) coordserver.SpawnResult {
	t.Helper()
	res, err := h.Adapter.Spawn(ctx(t), req)
	if err != nil || res.Rejected || len(res.ResourceID) == 0 || len(res.ResourceID) > coordwire.MaxResourceIDBytes {
		t.Fatalf("Spawn = %+v, %v; want a success with a ResourceID", res, err)
	}
	return res
}

// settle waits until Starts(tag) reaches want, then a moment more, and
// checks it stays exactly want.
func settle(t *testing.T, h *Harness, tag string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Starts(tag) < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	if got := h.Starts(tag); got != want {
		t.Fatalf("%d process starts for %q, want exactly %d", got, tag, want)
	}
}

func kill(t *testing.T, h *Harness, ref coordwire.TerminalBindingRef) {
	t.Helper()
	if r, err := h.Adapter.Kill(ctx(t), coordserver.KillRequest{Key: key(), Binding: ref}); err != nil || r.Rejected {
		t.Errorf("cleanup Kill = %+v, %v", r, err)
	}
}

func testDuplicateSpawn(t *testing.T, h *Harness) {
	req := spawnReq(h, "dup")
	res := mustSpawn(t, h, req)
	settle(t, h, "dup", 1)
	again, err := h.Adapter.Spawn(ctx(t), req)
	if err != nil {
		t.Fatalf("duplicate Spawn: %v", err)
	}
	if diff := cmp.Diff(res, again); diff != "" {
		t.Errorf("duplicate Spawn result differs (-first +again):\n%s", diff)
	}
	settle(t, h, "dup", 1)
	kill(t, h, h.Ref(req, res))
}

func testConflict(t *testing.T, h *Harness) {
	req := spawnReq(h, "conflict")
	res := mustSpawn(t, h, req)
	settle(t, h, "conflict", 1)
	changed := req
	changed.Key = other(req.Key)
	if _, err := h.Adapter.Spawn(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("Spawn with a changed digest: %v, want ErrEffectConflict", err)
	}
	if _, err := h.Adapter.Outcome(ctx(t), changed.Key); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("Outcome with a changed digest: %v, want ErrEffectConflict", err)
	}
	ref := h.Ref(req, res)
	// The spawn's id used for a KILL or a signal is the same id with
	// another kind: another digest.
	if _, err := h.Adapter.Kill(ctx(t), coordserver.KillRequest{Key: changed.Key, Binding: ref}); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("Kill under the spawn's id: %v, want ErrEffectConflict", err)
	}
	if _, err := h.Adapter.ProcessSignal(ctx(t), coordserver.SignalRequest{Key: changed.Key, Binding: ref, Signal: coordwire.SignalKill}); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("ProcessSignal under the spawn's id: %v, want ErrEffectConflict", err)
	}
	settle(t, h, "conflict", 1)
	// The process was not touched by the conflicting calls: a real KILL
	// still finds it live.
	kill(t, h, ref)
}

func testOutcome(t *testing.T, h *Harness) {
	req := spawnReq(h, "outcome")
	if _, err := h.Adapter.Outcome(ctx(t), req.Key); !errors.Is(err, coordserver.ErrEffectUnknown) {
		t.Errorf("Outcome before Spawn: %v, want ErrEffectUnknown", err)
	}
	settle(t, h, "outcome", 0)
	res := mustSpawn(t, h, req)
	for range 3 {
		out, err := h.Adapter.Outcome(ctx(t), req.Key)
		if err != nil {
			t.Fatalf("Outcome: %v", err)
		}
		if diff := cmp.Diff(coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: res}, out); diff != "" {
			t.Errorf("Outcome (-want +got):\n%s", diff)
		}
	}
	settle(t, h, "outcome", 1)
	// Outcome after Outcome before Spawn did not count as receiving it:
	// the spawn above acted exactly once.
	kill(t, h, h.Ref(req, res))
}

func testUnknown(t *testing.T, h *Harness) {
	for range 3 {
		if _, err := h.Adapter.Outcome(ctx(t), key()); !errors.Is(err, coordserver.ErrEffectUnknown) {
			t.Errorf("Outcome of a never-seen key: %v, want ErrEffectUnknown", err)
		}
	}
}

func testBadDocument(t *testing.T, h *Harness) {
	req := spawnReq(h, "bad")
	req.ExecutorDocument = h.BadDocument
	res, err := h.Adapter.Spawn(ctx(t), req)
	if err != nil || !res.Rejected || res.Reason == "" || len(res.ResourceID) != 0 {
		t.Fatalf("Spawn of a bad document = %+v, %v; want Rejected with a Reason and no ResourceID", res, err)
	}
	again, err := h.Adapter.Spawn(ctx(t), req)
	if err != nil || !cmp.Equal(res, again) {
		t.Errorf("duplicate of a rejection = %+v, %v; want the stored %+v", again, err, res)
	}
	out, err := h.Adapter.Outcome(ctx(t), req.Key)
	if err != nil || !cmp.Equal(coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: res}, out) {
		t.Errorf("Outcome of a rejection = %+v, %v", out, err)
	}
	wrong := spawnReq(h, "bad")
	wrong.ExecutorSchema ^= 0x7fff
	if r, err := h.Adapter.Spawn(ctx(t), wrong); err != nil || !r.Rejected {
		t.Errorf("Spawn with an unknown executor schema = %+v, %v; want Rejected", r, err)
	}
	settle(t, h, "bad", 0)
}

func testUnservedGroup(t *testing.T, h *Harness) {
	g := append([]byte("ownertest-unserved/"), h.Group...)
	if h.Adapter.ServesGroup(g) {
		t.Skip("the adapter serves every group")
	}
	if !h.Adapter.ServesGroup(h.Group) {
		t.Fatalf("ServesGroup(Harness.Group) = false")
	}
	req := spawnReq(h, "unserved")
	req.Group = g
	if r, err := h.Adapter.Spawn(ctx(t), req); err != nil || !r.Rejected {
		t.Errorf("Spawn in an unserved group = %+v, %v; want Rejected", r, err)
	}
	settle(t, h, "unserved", 0)
}

func testKill(t *testing.T, h *Harness) {
	req := spawnReq(h, "kill")
	res := mustSpawn(t, h, req)
	settle(t, h, "kill", 1)
	kreq := coordserver.KillRequest{Key: key(), Binding: h.Ref(req, res)}
	first, err := h.Adapter.Kill(ctx(t), kreq)
	if err != nil || first.Rejected {
		t.Fatalf("Kill of a live binding = %+v, %v", first, err)
	}
	// The process is gone now: acting again would be a rejection, so an
	// equal answer is the stored one.
	time.Sleep(100 * time.Millisecond)
	for range 2 {
		again, err := h.Adapter.Kill(ctx(t), kreq)
		if err != nil || again != first {
			t.Errorf("duplicate Kill = %+v, %v; want the stored %+v", again, err, first)
		}
	}
	out, err := h.Adapter.Outcome(ctx(t), kreq.Key)
	if err != nil || !cmp.Equal(coordserver.EffectOutcome{Kind: coordwire.EffectKill, Effect: first}, out) {
		t.Errorf("Outcome of the Kill = %+v, %v", out, err)
	}
	changed := kreq
	changed.Key = other(kreq.Key)
	if _, err := h.Adapter.Kill(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("Kill with a changed digest: %v, want ErrEffectConflict", err)
	}
	// A new KILL of the ended binding is a stored rejection.
	late := coordserver.KillRequest{Key: key(), Binding: kreq.Binding}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := h.Adapter.Kill(ctx(t), late)
		if err != nil {
			t.Fatalf("Kill of an ended binding: %v", err)
		}
		if r.Rejected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kill of a killed binding keeps succeeding")
		}
		late.Key = key()
		time.Sleep(20 * time.Millisecond)
	}
}

func testSignal(t *testing.T, h *Harness) {
	req := spawnReq(h, "signal")
	res := mustSpawn(t, h, req)
	settle(t, h, "signal", 1)
	sreq := coordserver.SignalRequest{Key: key(), Binding: h.Ref(req, res), Signal: coordwire.SignalTerminate}
	first, err := h.Adapter.ProcessSignal(ctx(t), sreq)
	if err != nil || first.Rejected {
		t.Fatalf("ProcessSignal Terminate of a live binding = %+v, %v", first, err)
	}
	time.Sleep(100 * time.Millisecond)
	again, err := h.Adapter.ProcessSignal(ctx(t), sreq)
	if err != nil || again != first {
		t.Errorf("duplicate ProcessSignal = %+v, %v; want the stored %+v", again, err, first)
	}
	out, err := h.Adapter.Outcome(ctx(t), sreq.Key)
	if err != nil || !cmp.Equal(coordserver.EffectOutcome{Kind: coordwire.EffectProcessSignal, Effect: first}, out) {
		t.Errorf("Outcome of the signal = %+v, %v", out, err)
	}
	changed := sreq
	changed.Key = other(sreq.Key)
	if _, err := h.Adapter.ProcessSignal(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("ProcessSignal with a changed digest: %v, want ErrEffectConflict", err)
	}
	changed = sreq
	changed.Signal = coordwire.SignalKill
	changed.Key = other(sreq.Key)
	if _, err := h.Adapter.ProcessSignal(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("ProcessSignal Kill under the Terminate's id: %v, want ErrEffectConflict", err)
	}
	settle(t, h, "signal", 1)
}

func testUnknownBinding(t *testing.T, h *Harness) {
	req := spawnReq(h, "unknown-binding")
	res := mustSpawn(t, h, req)
	settle(t, h, "unknown-binding", 1)
	ref := h.Ref(req, res)
	mutations := map[string]func(*coordwire.TerminalBindingRef){
		"binding":     func(r *coordwire.TerminalBindingRef) { r.BindingID = id() },
		"worksession": func(r *coordwire.TerminalBindingRef) { r.WorkSessionID = id() },
		"fingerprint": func(r *coordwire.TerminalBindingRef) { r.OwnerAuthorityFingerprint[31] ^= 1 },
		"incarnation": func(r *coordwire.TerminalBindingRef) { r.OwnerIncarnation[15] ^= 1 },
		"resource": func(r *coordwire.TerminalBindingRef) {
			r.ResourceID = append(append([]byte(nil), r.ResourceID...), 'x')
		},
	}
	for name, mutate := range mutations {
		bad := ref
		bad.ResourceID = append([]byte(nil), ref.ResourceID...)
		mutate(&bad)
		if r, err := h.Adapter.Kill(ctx(t), coordserver.KillRequest{Key: key(), Binding: bad}); err != nil || !r.Rejected {
			t.Errorf("Kill with another %s = %+v, %v; want Rejected", name, r, err)
		}
		if r, err := h.Adapter.ProcessSignal(ctx(t), coordserver.SignalRequest{Key: key(), Binding: bad, Signal: coordwire.SignalKill}); err != nil || !r.Rejected {
			t.Errorf("ProcessSignal with another %s = %+v, %v; want Rejected", name, r, err)
		}
	}
	// None of them touched the process.
	kill(t, h, ref)
}

func testConcurrent(t *testing.T, h *Harness) {
	req := spawnReq(h, "concurrent")
	const n = 8
	results := make([]coordserver.SpawnResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = h.Adapter.Spawn(ctx(t), req)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent Spawn %d: %v", i, errs[i])
		}
		if diff := cmp.Diff(results[0], results[i]); diff != "" {
			t.Errorf("concurrent Spawn %d differs (-0 +%d):\n%s", i, i, diff)
		}
	}
	if results[0].Rejected {
		t.Fatalf("concurrent Spawn rejected: %s", results[0].Reason)
	}
	settle(t, h, "concurrent", 1)
	// Concurrent duplicate kills: one action, one answer.
	kreq := coordserver.KillRequest{Key: key(), Binding: h.Ref(req, results[0])}
	kres := make([]coordserver.EffectResult, n)
	for i := range n {
		wg.Go(func() { kres[i], errs[i] = h.Adapter.Kill(ctx(t), kreq) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || kres[i] != kres[0] || kres[0].Rejected {
			t.Errorf("concurrent Kill %d = %+v, %v; want the one success", i, kres[i], errs[i])
		}
	}
}

func testRestart(t *testing.T, h *Harness) {
	if h.Restart == nil {
		t.Skip("Harness.Restart is nil")
	}
	req := spawnReq(h, "restart")
	res := mustSpawn(t, h, req)
	settle(t, h, "restart", 1)
	oldRef := h.Ref(req, res)
	kreq := coordserver.KillRequest{Key: key(), Binding: oldRef}
	kres, err := h.Adapter.Kill(ctx(t), kreq)
	if err != nil || kres.Rejected {
		t.Fatalf("Kill = %+v, %v", kres, err)
	}
	bad := spawnReq(h, "restart-bad")
	bad.ExecutorDocument = h.BadDocument
	bres, err := h.Adapter.Spawn(ctx(t), bad)
	if err != nil || !bres.Rejected {
		t.Fatalf("bad Spawn = %+v, %v", bres, err)
	}

	h.Restart(t)

	again, err := h.Adapter.Spawn(ctx(t), req)
	if err != nil {
		t.Fatalf("duplicate Spawn after a restart: %v", err)
	}
	if diff := cmp.Diff(res, again); diff != "" {
		t.Errorf("duplicate Spawn after a restart differs (-before +after):\n%s", diff)
	}
	if out, err := h.Adapter.Outcome(ctx(t), req.Key); err != nil || !cmp.Equal(coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: res}, out) {
		t.Errorf("Outcome of the spawn after a restart = %+v, %v", out, err)
	}
	if r, err := h.Adapter.Kill(ctx(t), kreq); err != nil || r != kres {
		t.Errorf("duplicate Kill after a restart = %+v, %v; want %+v", r, err, kres)
	}
	if r, err := h.Adapter.Spawn(ctx(t), bad); err != nil || !cmp.Equal(r, bres) {
		t.Errorf("duplicate rejected Spawn after a restart = %+v, %v; want %+v", r, err, bres)
	}
	changed := req
	changed.Key = other(req.Key)
	if _, err := h.Adapter.Spawn(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("changed digest after a restart: %v, want ErrEffectConflict", err)
	}
	if _, err := h.Adapter.Outcome(ctx(t), key()); !errors.Is(err, coordserver.ErrEffectUnknown) {
		t.Errorf("unknown key after a restart: %v, want ErrEffectUnknown", err)
	}
	settle(t, h, "restart", 1)
	// The new incarnation does not act on the old one's binding.
	if r, err := h.Adapter.Kill(ctx(t), coordserver.KillRequest{Key: key(), Binding: oldRef}); err != nil || !r.Rejected {
		t.Errorf("Kill of the old incarnation's binding = %+v, %v; want Rejected", r, err)
	}
	// It still works.
	req2 := spawnReq(h, "restart-new")
	res2 := mustSpawn(t, h, req2)
	settle(t, h, "restart-new", 1)
	kill(t, h, h.Ref(req2, res2))
}

func testCrash(t *testing.T, h *Harness) {
	if h.CrashAfterIntent == nil {
		t.Skip("Harness.CrashAfterIntent is nil")
	}
	done := spawnReq(h, "crash-done")
	dres := mustSpawn(t, h, done)
	req := spawnReq(h, "crash")
	h.CrashAfterIntent(t, req)
	for range 2 {
		if _, err := h.Adapter.Outcome(ctx(t), req.Key); !errors.Is(err, coordserver.ErrOutcomeUnprovable) {
			t.Errorf("Outcome of an intent without a result: %v, want ErrOutcomeUnprovable", err)
		}
	}
	before := h.Starts("crash")
	if _, err := h.Adapter.Spawn(ctx(t), req); !errors.Is(err, coordserver.ErrOutcomeUnprovable) {
		t.Errorf("duplicate Spawn of an intent without a result: %v, want ErrOutcomeUnprovable", err)
	}
	settle(t, h, "crash", before)
	changed := req
	changed.Key = other(req.Key)
	if _, err := h.Adapter.Spawn(ctx(t), changed); !errors.Is(err, coordserver.ErrEffectConflict) {
		t.Errorf("changed digest of an unprovable key: %v, want ErrEffectConflict", err)
	}
	if out, err := h.Adapter.Outcome(ctx(t), done.Key); err != nil || !cmp.Equal(coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: dres}, out) {
		t.Errorf("Outcome of the completed spawn after the crash = %+v, %v", out, err)
	}
	if r, err := h.Adapter.Spawn(ctx(t), done); err != nil || !cmp.Equal(r, dres) {
		t.Errorf("duplicate of the completed spawn after the crash = %+v, %v", r, err)
	}
}
