package coordserver_test

import (
	"bytes"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// Shutdown lets the requests in flight finish and answer, then closes the
// connection with COORD_ERROR AUTHORITY_FENCED "server.shutdown",
// relinquishes the lease (the next activation proceeds at once) and leaves
// no goroutine behind.
func TestShutdownDrains(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	st := &holdStore{Store: mem}
	base := runtime.NumGoroutine()
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	st.hold()
	const n = 20
	for i := 1; i <= n; i++ {
		if err := c.fw.WriteFrame(createCmd(uint32(i), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "in flight")); err != nil {
			t.Fatal(err)
		}
	}
	for st.count() < n {
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctxT(t)) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with requests in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	st.release()
	seen := map[uint32]bool{}
	for len(seen) < n {
		f, err := c.next(5 * time.Second)
		if err != nil {
			t.Fatalf("after %d replies: %v", len(seen), err)
		}
		r, ok := f.(*coordwire.CoordCommandResult)
		if !ok || r.Operation.Tag != coordwire.OperationSucceeded {
			t.Fatalf("after %d replies: %#v", len(seen), f)
		}
		seen[r.RequestID] = true
	}
	last, err := c.waitClosed(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if last == nil || last.Code != coordwire.AuthorityFenced || last.Message != "server.shutdown" {
		t.Fatalf("closing error %+v", last)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Relinquished: a new activation on the same store proceeds at once.
	s2, err := coordserver.New(ctxT(t), e.config(mem))
	if err != nil {
		t.Fatalf("activation after Shutdown: %v", err)
	}
	s2.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Shutdown and Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The server's logs, at debug level, never hold the fencing token, a
// document or a payload, through a whole session and a refusal.
func TestLogsHoldNoSecrets(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	var logs syncBuf
	cfg := e.config(st)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, path := e.serve(cfg)
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	doc := "secret-document-bytes-0123456789"
	op, obj := coordwire.NewOperationID(), coordwire.NewObjectiveID()
	if _, err := c.command(createCmd(c.reqID(), c.guard, op, obj, doc)); err != nil {
		t.Fatal(err)
	}
	// Same id, other document: OPERATION_CONFLICT, nothing disclosed.
	if _, err := c.command(createCmd(c.reqID(), c.guard, op, obj, doc+"x")); codeOf(err) != coordwire.OperationConflict {
		t.Fatalf("conflict: %v", err)
	} else if leakcheck.Find(err.Error(), []byte(doc)) != "" {
		t.Fatal("the refusal discloses the document")
	}
	c.close()
	token := s.Certificate().FencingToken
	s.Shutdown(ctxT(t))
	if logs.String() == "" {
		t.Fatal("no logs captured")
	}
	if where := leakcheck.Find(logs.String(), token[:], []byte(doc)); where != "" {
		t.Fatalf("logs leak a secret: %s", where)
	}
}
