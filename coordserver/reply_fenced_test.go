package coordserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// afterCommitStore runs hook after every Update that committed.
type afterCommitStore struct {
	coordstore.Store
	hook func()
}

func (s *afterCommitStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.hook()
	}
	return err
}

// §13, §8: a command whose transaction committed but whose reply would
// leave after the lease's deadline is not acknowledged — and its fatal
// AUTHORITY_FENCED is addressed to the connection (RequestID 0), not to
// the request. A fatal refusal naming a request says the request was
// refused before admission (coordclient returns it as "nothing was
// admitted"); this one was admitted, so the client must take it as a lost
// reply and look the OperationId up. Found by the seeded simulation
// (coordserver/internal/sim, invariant refused-admitted).
func TestSection13FencedReplyAfterCommitIsNotARefusalOfTheRequest(t *testing.T) {
	wclk := &rfClock{}
	var e *rfEnv
	var target atomic.Pointer[coordwire.OperationID]
	e = rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Witness.Now = wclk.Now
		c.Store = &afterCommitStore{Store: c.Store, hook: func() {
			id := target.Load()
			if id == nil {
				return
			}
			// The command's transaction is durable: move the lease's
			// clock past the certificate's expiry before the reply.
			err := e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
				_, err := tx.Operation(*id)
				return err
			})
			if err == nil && target.CompareAndSwap(id, nil) {
				exp := time.Unix(int64(e.srv.Certificate().ExpiresAt), 0)
				wclk.Advance(time.Until(exp) + time.Second)
			}
		}}
	}})
	w := e.connect(e.key(rwc), rwc)
	cmd, _ := w.create()
	target.Store(&cmd.OperationID)
	w.send(cmd)
	for {
		f, err := w.Read(rfWait)
		if err != nil {
			t.Fatalf("want the fatal AUTHORITY_FENCED: %v", err)
		}
		m, ok := f.(*coordwire.CoordError)
		if !ok {
			t.Fatalf("got %v, want the fatal AUTHORITY_FENCED (no acknowledgement after the deadline)", f.Type())
		}
		if m.Code != coordwire.AuthorityFenced || m.RequestID != 0 {
			t.Fatalf("COORD_ERROR %v addressed to request %d (%q); want AUTHORITY_FENCED addressed to the connection (0), the command %d was admitted",
				m.Code, m.RequestID, m.Message, cmd.RequestID)
		}
		w.checkDiag(m.Message)
		break
	}
	if err := w.ExpectClosed(rfWait); err != nil {
		t.Fatal(err)
	}
	var res coordwire.OperationResult
	err := e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
		op, err := tx.Operation(cmd.OperationID)
		if err != nil {
			return err
		}
		return res.Decode(op.Result)
	})
	if err != nil || res.Tag != coordwire.OperationSucceeded {
		t.Fatalf("the command's operation: %v, %v; want it stored SUCCEEDED", res.Tag, err)
	}
}
