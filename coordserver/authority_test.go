package coordserver_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// Every renewal reaches every connection as COORD_AUTHORITY_RENEWED before
// the previous certificate expires, and each one is a valid continuation.
func TestRenewalReachesEveryConnection(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	_, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	const n = 5
	type got struct {
		certs []coordwire.ActivationCertificate
		times []time.Time
	}
	results := make([]got, n)
	var wg sync.WaitGroup
	for i := range n {
		c, err := e.dial(path, k, dialOpts{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		results[i].certs = []coordwire.ActivationCertificate{c.ok.ActivationCertificate}
		results[i].times = []time.Time{time.Now()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(4500 * time.Millisecond)
			c.nc.SetReadDeadline(deadline)
			for time.Now().Before(deadline) {
				f, err := c.fr.ReadFrame()
				if err != nil {
					return
				}
				if r, ok := f.(*coordwire.CoordAuthorityRenewed); ok {
					results[i].certs = append(results[i].certs, r.Certificate)
					results[i].times = append(results[i].times, time.Now())
				}
			}
		}()
	}
	wg.Wait()
	for i, g := range results {
		if len(g.certs) < 3 {
			t.Fatalf("connection %d: %d renewals in 4.5 s with a 3 s lifetime", i, len(g.certs)-1)
		}
		for j := 1; j < len(g.certs); j++ {
			prev, next := &g.certs[j-1], &g.certs[j]
			if err := cert.CheckRenewal(prev, next); err != nil {
				t.Fatalf("connection %d renewal %d: %v", i, j, err)
			}
			if err := cert.Verify(next, e.w.id.PublicKey, e.w.id.KeyID, g.times[j]); err != nil {
				t.Fatalf("connection %d renewal %d does not verify: %v", i, j, err)
			}
			if !g.times[j].Before(time.Unix(int64(prev.ExpiresAt), 0)) {
				t.Fatalf("connection %d renewal %d arrived at %v, after the previous expiry %d", i, j, g.times[j], prev.ExpiresAt)
			}
		}
	}
}

// Stopping the real witness daemon mid-run while clients keep writing: no
// commit is acknowledged after the certificate's expires_at, and every
// connection closes with AUTHORITY_FENCED.
func TestWitnessLostFences(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	const n = 4
	type outcome struct {
		acks     int
		lastAck  time.Time
		expiry   time.Time // the latest expires_at this client was given
		fenced   bool
		err      error
		lastCode coordwire.ErrorCode
	}
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		c, err := e.dial(path, k, dialOpts{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			o.expiry = time.Unix(int64(c.ok.ActivationCertificate.ExpiresAt), 0)
			c.nc.SetDeadline(time.Now().Add(15 * time.Second))
			for j := 0; ; j++ {
				if j == 3 {
					started <- struct{}{}
				}
				cmd := createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "w")
				writeErr := c.fw.WriteFrame(cmd)
				for {
					f, err := c.fr.ReadFrame()
					if err != nil {
						return // closed
					}
					if writeErr != nil {
						if m, ok := f.(*coordwire.CoordError); ok {
							o.lastCode = m.Code
							o.fenced = m.Code == coordwire.AuthorityFenced
						}
						continue // drain to the close
					}
					switch m := f.(type) {
					case *coordwire.CoordAuthorityRenewed:
						o.expiry = time.Unix(int64(m.Certificate.ExpiresAt), 0)
						continue
					case *coordwire.CoordCommandResult:
						now := time.Now()
						if !now.Before(o.expiry) {
							o.err = errors.New("acknowledged after expires_at")
						}
						o.acks++
						o.lastAck = now
					case *coordwire.CoordError:
						o.lastCode = m.Code
						o.fenced = m.Code == coordwire.AuthorityFenced
					}
					break
				}
			}
		}()
	}
	for range n {
		<-started
	}
	e.w.kill()
	killed := time.Now()
	wg.Wait()
	select {
	case <-s.Fenced():
	default:
		t.Fatal("server not fenced after losing its witness")
	}
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("client %d: %v", i, o.err)
		}
		if !o.fenced {
			t.Fatalf("client %d: closed without AUTHORITY_FENCED (last code %v)", i, o.lastCode)
		}
		if o.acks < 3 {
			t.Fatalf("client %d: only %d acks", i, o.acks)
		}
		if o.lastAck.After(o.expiry) {
			t.Fatalf("client %d: ack at %v after expiry %v", i, o.lastAck, o.expiry)
		}
	}
	t.Logf("fenced %v after the witness was killed", time.Since(killed).Round(time.Millisecond))
	// A new connection is refused while fenced.
	if _, err := e.dial(path, k, dialOpts{}); err == nil {
		t.Fatal("a fenced server accepted a connection")
	} else if codeOf(err) != coordwire.AuthorityFenced {
		t.Logf("dial after fencing: %v", err)
	}
}

// afterCommitHold holds an armed Update after its commit, until released.
type afterCommitHold struct {
	coordstore.Store
	armed     atomic.Bool
	committed chan struct{}
	resume    chan struct{}
}

func (h *afterCommitHold) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	err := h.Store.Update(ctx, fn)
	if err == nil && h.armed.CompareAndSwap(true, false) {
		close(h.committed)
		<-h.resume
	}
	return err
}

// A command committed while the lease still held, whose reply would leave
// after the lease fenced, is not acknowledged — and the fatal
// AUTHORITY_FENCED is addressed to no request: addressed to the command,
// it would read as its refusal (§8), although the command is durable.
// (The robustness history check found a client told "fenced" for an
// update it later found admitted.)
func TestFencedAfterCommitIsNoRefusal(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	st := &afterCommitHold{Store: memstore.New(memstore.Config{}), committed: make(chan struct{}), resume: make(chan struct{})}
	defer st.Close()
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	op, obj := coordwire.NewOperationID(), coordwire.NewObjectiveID()
	st.armed.Store(true)
	if err := c.fw.WriteFrame(createCmd(c.reqID(), c.guard, op, obj, "committed, then fenced")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.committed:
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not commit")
	}
	e.w.kill()
	select {
	case <-s.Fenced():
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not fence after losing its witness")
	}
	close(st.resume)
	f, err := c.next(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ce, ok := f.(*coordwire.CoordError)
	if !ok || ce.Code != coordwire.AuthorityFenced {
		t.Fatalf("after the fence: %T %+v, want COORD_ERROR AUTHORITY_FENCED", f, f)
	}
	if ce.RequestID != 0 {
		t.Fatalf("the fatal AUTHORITY_FENCED is addressed to request %d, whose command is durable", ce.RequestID)
	}
	if err := st.View(ctxT(t), func(tx coordstore.ReadTx) error {
		_, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: [16]byte(op)})
		return err
	}); err != nil {
		t.Fatalf("the command is not durable: %v", err)
	}
}

// An event-sequence overflow fences the writer (§4): the command is not
// acknowledged, every connection closes with AUTHORITY_FENCED and the
// server's lease is fenced.
func TestSequenceOverflowFences(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	at := func(seq uint64) coordstore.Store {
		st := memstore.New(memstore.Config{})
		t.Cleanup(func() { st.Close() })
		err := st.Update(ctxT(t), func(tx coordstore.Tx) error {
			return tx.AppendEventAt(coordstore.Event{Sequence: seq, ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged,
				Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: coordwire.NewObjectiveID()}, ObjectRevision: 1, Schema: 1})
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// The activation appends ADMIN_CHANGED events (docs/semantics.md): a
	// store whose sequence is exhausted cannot activate.
	_, err := coordserver.New(ctxT(t), e.config(at(math.MaxUint64)))
	var ae *coordserver.ActivationError
	if !errors.As(err, &ae) || ae.Step != coordserver.StepInstall || !errors.Is(err, coordstore.ErrSequenceOverflow) {
		t.Fatalf("activation at the sequence limit: %v", err)
	}
	// The activation's ACTIVATION and RETENTION records and the CREDENTIAL
	// records of newEnv's key and of k take the last four sequences.
	st := at(math.MaxUint64 - 4)
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c1, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.close()
	c2, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.close()
	op := coordwire.NewOperationID()
	if _, err := c1.command(createCmd(c1.reqID(), c1.guard, op, coordwire.NewObjectiveID(), "x")); codeOf(err) != coordwire.AuthorityFenced {
		t.Fatalf("command at the sequence limit: %v", err)
	}
	if last, _ := c2.waitClosed(5 * time.Second); last == nil || last.Code != coordwire.AuthorityFenced {
		t.Fatalf("other connection: %+v", last)
	}
	select {
	case <-s.Fenced():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not fenced")
	}
	var found bool
	st.View(ctxT(t), func(tx coordstore.ReadTx) error {
		_, err := tx.Operation(op)
		found = err == nil
		return nil
	})
	if found {
		t.Fatal("the overflowing command was stored")
	}
}
