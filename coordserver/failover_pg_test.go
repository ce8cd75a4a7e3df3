package coordserver_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
)

// pebbleSuffix ends the name of a crash child's pebblestore directory.
const pebbleSuffix = ".pebble"

// crashOpenStore opens the crash child's store: pgstore when the config
// names PostgreSQL, a pebblestore directory when the name ends in
// pebbleSuffix, else the boltstore file.
func crashOpenStore(ctx context.Context, cfg crashChildConfig) (coordstore.Store, error) {
	if cfg.PGDSN != "" {
		return pgstore.Open(ctx, pgstore.Config{DSN: cfg.PGDSN, Schema: cfg.PGSchema, IdleTxTimeout: time.Second, LockCheckInterval: 100 * time.Millisecond})
	}
	if strings.HasSuffix(cfg.Store, pebbleSuffix) {
		return pebblestore.Open(cfg.Store, pebblestore.Config{})
	}
	return boltstore.Open(cfg.Store, boltstore.Config{})
}

// startPGChild starts a coordinator child (crashchild_test.go) of h's
// lineage on the PostgreSQL store, serving sock.
func (h *crashHarness) startPGChild(dsn, schema, sock string) *crashChild {
	t := h.t
	h.childN++
	cfg := crashChildConfig{Keys: h.keysDir, Authority: h.authDir, Witness: h.w.addr, WitnessPub: hex.EncodeToString(h.wpub),
		Socket: sock, LeaseMarginMS: int(crashLeaseMargin / time.Millisecond), PGDSN: dsn, PGSchema: schema}
	b, _ := json.Marshal(cfg)
	p := filepath.Join(h.dir, fmt.Sprintf("child%d.json", h.childN))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(h.childLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- child %d (%s)\n", h.childN, sock)
	c := h.execChild(p, logf)
	t.Cleanup(func() { c.cmd.Process.Signal(syscall.SIGKILL); <-c.exited })
	return c
}

// TestFailoverPG: two coordinator processes of one lineage (same
// CoordinatorId and authority key) on one PostgreSQL store and one
// witness. The standby waits without activating while the primary holds
// the lease; the primary is SIGKILLed and the standby activates after the
// lease expires, with a higher epoch, and answers every operation the
// primary acknowledged. Then a new standby waits, the active coordinator
// is SIGSTOPped while clients commit, the standby takes over (the
// server ends the paused session's transaction, the standby's writer
// lock ends its lock session), and the paused one, SIGCONTed, commits
// nothing and fences itself. Checked after each round: no acknowledged
// operation lost, epochs strictly increasing, no event of a superseded
// epoch after the takeover. PHUX_PG_FAILOVER_ROUNDS=N runs N rounds
// instead of 2.
func TestFailoverPG(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test: not in -short")
	}
	rounds := 2
	if v := os.Getenv("PHUX_PG_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHUX_PG_FAILOVER_ROUNDS=%q", v)
		}
		rounds = n
	}
	dsn := pgtest.Private(t)
	w := startWitness(t, crashLifetime)
	var acked, sent int
	var waits []time.Duration
	for r := range rounds {
		a, s, ws := failoverRound(t, w, dsn, r)
		acked += a
		sent += s
		waits = append(waits, ws...)
	}
	t.Logf("%d rounds: %d operations acknowledged and found after failover (%d sent); takeover waits %v", rounds, acked, sent, waits)
}

func failoverRound(t *testing.T, w *daemon, dsn string, round int) (acked, sent int, waits []time.Duration) {
	h := newCrashHarness(t, w, "coord.db")
	schema := fmt.Sprintf("csfail_%d_%d", os.Getpid(), round)
	pgtest.DropSchemaAtEnd(t, dsn, schema)
	ctx := context.Background()
	parent, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("round %d: "+format+"\nchild log:\n%s", append([]any{round}, append(args, h.childLogTail())...)...)
	}
	ready := func(c *crashChild, within time.Duration) crashReady {
		t.Helper()
		select {
		case r := <-c.ready:
			return r
		case <-c.exited:
			fail("a coordinator exited before activating")
		case <-time.After(within):
			fail("no activation within %v", within)
		}
		return crashReady{}
	}
	dial := func(sock string) *coordclient.Client {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := coordclient.Dial(dctx, "unix:"+sock, h.clientConfig(0, &coordclient.AuthorityMemory{}))
		if err != nil {
			fail("dial %s: %v", sock, err)
		}
		return c
	}
	var mu sync.Mutex
	ackedOps := map[coordwire.OperationID]string{} // → which coordinator acknowledged
	sentTo := map[coordwire.OperationID]string{}
	command := func(c *coordclient.Client, who string, d time.Duration) error {
		cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("failover"))
		mu.Lock()
		sentTo[cmd.OperationID()] = who
		mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		res, err := c.Command(cctx, cmd)
		if err != nil {
			return err
		}
		if !res.Succeeded() {
			return fmt.Errorf("command answered %v", res.Tag())
		}
		mu.Lock()
		ackedOps[cmd.OperationID()] = who
		mu.Unlock()
		return nil
	}
	sockA, sockB, sockC := filepath.Join(h.dir, "a.sock"), filepath.Join(h.dir, "b.sock"), filepath.Join(h.dir, "c.sock")

	// 1. Primary A; standby B waits.
	A := h.startPGChild(dsn, schema, sockA)
	rA := ready(A, 30*time.Second)
	B := h.startPGChild(dsn, schema, sockB)
	select {
	case <-B.ready:
		fail("the standby activated while the primary held the lease")
	case <-B.exited:
		fail("the standby exited")
	case <-time.After(crashLifetime + 500*time.Millisecond):
	}
	ca := dial(sockA)
	for range 10 {
		if err := command(ca, "A", 10*time.Second); err != nil {
			fail("command to the primary: %v", err)
		}
	}
	ca.Close()
	if m, err := parent.Meta(ctx); err != nil || m.AuthorityEpoch != rA.Epoch {
		fail("stored epoch %d (%v) while the standby waited, want the primary's %d", m.AuthorityEpoch, err, rA.Epoch)
	}

	// 2. SIGKILL the primary: the standby activates after the lease.
	killed := time.Now()
	A.kill()
	rB := ready(B, 30*time.Second)
	waits = append(waits, time.Since(killed).Round(time.Millisecond))
	if rB.Epoch <= rA.Epoch || rB.CoordinatorID != rA.CoordinatorID {
		fail("standby activation %+v after primary %+v", rB, rA)
	}
	cb := dial(sockB)
	defer cb.Close()
	mu.Lock()
	prior := make([]coordwire.OperationID, 0, len(ackedOps))
	for id := range ackedOps {
		prior = append(prior, id)
	}
	mu.Unlock()
	for _, id := range prior {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := cb.OperationResult(rctx, id)
		cancel()
		if err != nil || !res.Succeeded() {
			fail("operation %v acknowledged by the primary: after failover %v %v", id, res, err)
		}
	}

	// 3. Standby C waits; B is SIGSTOPped while a client commits.
	C := h.startPGChild(dsn, schema, sockC)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if command(cb, "B", 2*time.Second) != nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	B.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	rC := ready(C, 30*time.Second)
	waits = append(waits, time.Since(stopped).Round(time.Millisecond))
	if rC.Epoch <= rB.Epoch {
		fail("activation %+v after %+v", rC, rB)
	}
	var takeover uint64
	if err := parent.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		takeover, err = tx.LastSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	B.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-B.exited:
	case <-time.After(20 * time.Second):
		fail("the resumed coordinator did not fence itself")
	}
	if ws, ok := B.state.Sys().(syscall.WaitStatus); !ok || ws.ExitStatus() != crashExitFenced {
		fail("the resumed coordinator ended with %v, want exit %d (fenced)", B.state, crashExitFenced)
	}
	close(stop)
	wg.Wait()

	// 4. The store: every acknowledged operation is there, finalized; no
	// operation event after the takeover from an operation sent to B.
	err = parent.View(ctx, func(tx coordstore.ReadTx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		if m.AuthorityEpoch != rC.Epoch {
			return fmt.Errorf("stored epoch %d, want %d", m.AuthorityEpoch, rC.Epoch)
		}
		mu.Lock()
		defer mu.Unlock()
		for id, who := range ackedOps {
			op, err := tx.Operation(id)
			if err != nil {
				return fmt.Errorf("operation %v acknowledged by %s: %w", id, who, err)
			}
			if op.FinalizedAt == 0 {
				return fmt.Errorf("operation %v acknowledged by %s is pending", id, who)
			}
		}
		for e, err := range tx.Events(takeover) {
			if err != nil {
				return err
			}
			if e.Object.Kind == coordwire.ObjectKindOperation && sentTo[coordwire.OperationID(e.Object.ID)] == "B" {
				return fmt.Errorf("event %d of an operation sent to the superseded coordinator after the takeover at %d", e.Sequence, takeover)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, coordstore.ErrPruned) {
		fail("%v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return len(ackedOps), len(sentTo), waits
}
