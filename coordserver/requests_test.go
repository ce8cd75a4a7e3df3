package coordserver_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// holdStore is a real store whose Update waits while held, without
// limiting how many wait.
type holdStore struct {
	coordstore.Store
	mu      sync.Mutex
	held    chan struct{} // nil: not held
	waiting int
}

func (h *holdStore) hold() { h.mu.Lock(); h.held = make(chan struct{}); h.mu.Unlock() }
func (h *holdStore) release() {
	h.mu.Lock()
	close(h.held)
	h.held = nil
	h.mu.Unlock()
}
func (h *holdStore) count() int { h.mu.Lock(); defer h.mu.Unlock(); return h.waiting }

func (h *holdStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	h.mu.Lock()
	ch := h.held
	if ch != nil {
		h.waiting++
	}
	h.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return h.Store.Update(ctx, fn)
}

// At most 256 requests of a connection are outstanding: the 257th is
// refused request-scoped RESOURCE_EXHAUSTED; an id reused while outstanding
// is fatal MALFORMED_MESSAGE. COORD_PING is answered meanwhile.
func TestOutstandingBounds(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	st := &holdStore{Store: mem}
	_, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	st.hold()
	for i := 1; i <= 256; i++ {
		if err := c.fw.WriteFrame(createCmd(uint32(i), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "o")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.count() < 256 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests in flight", st.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.fw.WriteFrame(&coordwire.CoordPing{Nonce: 42}); err != nil {
		t.Fatal(err)
	}
	if f, err := c.next(5 * time.Second); err != nil {
		t.Fatal(err)
	} else if p, ok := f.(*coordwire.CoordPong); !ok || p.Nonce != 42 {
		t.Fatalf("ping answered with %#v", f)
	}
	if err := c.fw.WriteFrame(createCmd(257, c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "o")); err != nil {
		t.Fatal(err)
	}
	f, err := c.next(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := f.(*coordwire.CoordError); !ok || e.Code != coordwire.ResourceExhausted || e.RequestID != 257 {
		t.Fatalf("257th request: %#v", f)
	}
	// Reuse of an outstanding id.
	if err := c.fw.WriteFrame(createCmd(7, c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "o")); err != nil {
		t.Fatal(err)
	}
	st.release()
	// 256 held commits drain before the fatal error; under a loaded
	// machine (the crash test runs beside this one) that takes seconds.
	last, err := c.waitClosed(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if last == nil || last.Code != coordwire.MalformedMessage {
		t.Fatalf("reused id: %+v", last)
	}
}

// Storage pressure (coordstore.ErrFull) refuses new mutations with a
// request-scoped RESOURCE_EXHAUSTED; the connection and reads go on.
func TestStoreFullRefusesMutations(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st, err := boltstore.Open(filepath.Join(shortDir(t), "s.db"), boltstore.Config{MaxFileSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	doc := strings.Repeat("d", 100<<10)
	var first coordwire.OperationID
	full := false
	for i := 0; i < 40 && !full; i++ {
		op := coordwire.NewOperationID()
		_, err := c.command(createCmd(c.reqID(), c.guard, op, coordwire.NewObjectiveID(), doc))
		switch {
		case err == nil:
			if i == 0 {
				first = op
			}
		case codeOf(err) == coordwire.ResourceExhausted:
			full = true
			if r, err := c.lookup(op); err != nil || r.Tag != coordwire.OperationUnknown {
				t.Fatalf("a refused command left a result: %+v %v", r, err)
			}
		default:
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("store never filled")
	}
	if r, err := c.lookup(first); err != nil || r.Tag != coordwire.OperationSucceeded {
		t.Fatalf("earlier result after ErrFull: %+v %v", r, err)
	}
}

// The retention sweeper runs on the injected clock: a result older than
// the retention becomes TOMBSTONED, a younger one stays.
func TestSweeperInjectedClock(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	var mu sync.Mutex
	offset := time.Duration(0)
	cfg := e.config(st)
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) }
	cfg.SweepInterval = 20 * time.Millisecond
	_, path := e.serve(cfg)
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	old := coordwire.NewOperationID()
	if _, err := c.command(createCmd(c.reqID(), c.guard, old, coordwire.NewObjectiveID(), "old")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if r, _ := c.lookup(old); r.Tag != coordwire.OperationSucceeded {
		t.Fatalf("swept before its retention: %+v", r)
	}
	// 29 days later: still kept. (On this clock the connection's grant
	// has expired, so the result is read from the store directly.)
	mu.Lock()
	offset = 29 * 24 * time.Hour
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	tag := func(id coordwire.OperationID) coordwire.OperationTag {
		var op coordstore.Operation
		err := st.View(context.Background(), func(tx coordstore.ReadTx) error {
			var err error
			op, err = tx.Operation(id)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var r coordwire.OperationResult
		if err := r.Decode(op.Result); err != nil {
			t.Fatal(err)
		}
		return r.Tag
	}
	if g := tag(old); g != coordwire.OperationSucceeded {
		t.Fatalf("swept at 29 days: %v", g)
	}
	mu.Lock()
	offset = 31 * 24 * time.Hour
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for tag(old) != coordwire.OperationTombstoned {
		if time.Now().After(deadline) {
			t.Fatal("not tombstoned after 31 days")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CHANGE_RETENTION over the wire: an ADMIN principal with ADMINISTRATION
// negotiated sets it; a later HELLO_OK advertises the new value; the
// sweeper applies its event_bytes; a WORK_COMMAND principal is refused.
func TestChangeRetention(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	cfg := e.config(st)
	cfg.SweepInterval = 20 * time.Millisecond
	_, path := e.serve(cfg)
	admin := e.addKey(coordwire.ScopeAdmin|coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	a, err := e.dial(path, admin, dialOpts{scope: coordwire.ScopeAdmin | coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, caps: coordwire.CapAdministration})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	for range 5 {
		if _, err := a.command(createCmd(a.reqID(), a.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "e")); err != nil {
			t.Fatal(err)
		}
	}
	ret := coordwire.ChangeRetention{OperationResultSecs: 40 * 24 * 3600, EventBytes: 1}
	cmd := &coordwire.CoordCommand{RequestID: a.reqID(), Guard: a.guard, OperationID: coordwire.NewOperationID(),
		Kind: coordwire.CommandChangeRetention, Payload: ret.AppendTLV(nil)}
	r, err := a.command(cmd)
	if err != nil || r.Tag != coordwire.OperationSucceeded {
		t.Fatalf("CHANGE_RETENTION: %+v %v", r, err)
	}
	a2, err := e.dial(path, admin, dialOpts{scope: coordwire.ScopeAdmin})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.close()
	if a2.ok.OperationResultRetentionSecs != ret.OperationResultSecs {
		t.Fatalf("HELLO_OK advertises %d", a2.ok.OperationResultRetentionSecs)
	}
	// event_bytes 1: the sweeper prunes every event but none is needed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var oldest, last uint64
		st.View(context.Background(), func(tx coordstore.ReadTx) error {
			oldest, _ = tx.OldestRetainedSequence()
			last, _ = tx.LastSequence()
			return nil
		})
		if oldest > last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events not pruned: oldest %d last %d", oldest, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Without ADMIN scope: SCOPE_DENIED (request-scoped).
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	w, err := e.dial(path, k, dialOpts{caps: coordwire.CapAdministration})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	cmd.RequestID, cmd.Guard, cmd.OperationID = w.reqID(), w.guard, coordwire.NewOperationID()
	if _, err := w.command(cmd); codeOf(err) != coordwire.ScopeDenied {
		t.Fatalf("without ADMIN: %v", err)
	}
	if _, err := w.lookup(coordwire.NewOperationID()); err != nil {
		t.Fatalf("connection did not go on: %v", err)
	}
}
