package execowner_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

// warnings is a slog.Handler that keeps the messages of records at Warn
// and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (h *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnings) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *warnings) WithGroup(string) slog.Handler            { return h }
func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		h.msgs = append(h.msgs, r.Message)
		h.mu.Unlock()
	}
	return nil
}

func (h *warnings) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// lossyPort is the coordinator side of the facts: the real owner port,
// except that the reply to the first CLOSED it admits is lost (the sink
// answers a transient error after the commit), as when the connection
// to a coordinator drops after the commit.
type lossyPort struct {
	port   atomic.Pointer[coordserver.Owner]
	mu     sync.Mutex
	lost   bool
	closed []error // the port's answer to every CLOSED call
}

func (p *lossyPort) sink(ctx context.Context, f coordwire.TerminalSourceFact) error {
	o := p.port.Load()
	if o == nil {
		return coordwire.NewError(coordwire.NotFound, "owner.not_registered")
	}
	_, err := o.AdmitSourceFact(ctx, f)
	if f.Kind != coordwire.SourceClosed {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = append(p.closed, err)
	if err == nil && !p.lost {
		p.lost = true
		return errors.New("lossyPort: the reply was lost")
	}
	return err
}

func (p *lossyPort) closedCalls() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.closed...)
}

// TestClosedRetriedAfterEndIsFinal: a CLOSED whose admission's reply was
// lost is retried with the same sequence; the binding has ended by then,
// so a real coordinator refuses the retry REVISION_CONFLICT
// "source.binding_ended" (§11 "every fact after binding end is refused").
// The owner takes that as the end of the binding's facts: no further
// retry, no warning and nothing killed, and the Run stays Completed — in
// process, with a Permanent that would retry every error, and over the
// socket of the separate-process form.
func TestClosedRetriedAfterEndIsFinal(t *testing.T) {
	for _, form := range []string{"in_process", "in_process_retry_everything", "socket"} {
		t.Run(form, func(t *testing.T) {
			dir := shortDir(t)
			warn := &warnings{}
			log := slog.New(warn)
			lp := &lossyPort{}
			var reg coordserver.OwnerRegistration
			switch form {
			case "socket":
				srv, err := execowner.NewServer(execowner.Config{Journal: filepath.Join(dir, "j"), Fingerprint: testFP, Logger: log})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { srv.Close() })
				ln, err := execowner.Listen(filepath.Join(dir, "s", "o.sock"))
				if err != nil {
					t.Fatal(err)
				}
				go srv.Serve(ln)
				cl := dial(t, ln.Addr().String(), lp.sink)
				reg = coordserver.OwnerRegistration{Fingerprint: cl.Fingerprint(), Incarnation: cl.Incarnation(), Adapter: cl}
			default:
				cfg := execowner.Config{Sink: lp.sink, Logger: log}
				if form == "in_process_retry_everything" {
					cfg.Permanent = func(error) bool { return false }
				}
				o := newOwner(t, filepath.Join(dir, "j"), cfg)
				reg = coordserver.OwnerRegistration{Fingerprint: o.Fingerprint(), Incarnation: o.Incarnation(), Adapter: o}
			}
			c := coordtest.Start(t, coordtest.Config{Server: func(cfg *coordserver.Config) { r := reg; cfg.Owner = &r }})
			lp.port.Store(c.Server().Owner())

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			obj := coordwire.NewObjectiveID()
			if _, err := c.Client().Command(ctx, coordclient.CreateObjective(obj, 1, []byte("closed retry"))); err != nil {
				t.Fatal(err)
			}
			p := coordwire.StartRun{ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
				ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: doc(t, "true"), PendingBindingID: coordwire.NewPendingBindingID(),
				OwnerAuthorityFingerprint: reg.Fingerprint, OwnerIncarnation: reg.Incarnation, TerminalGroup: execowner.DefaultGroup}
			cmd := coordclient.StartRun(p)
			res, err := c.Client().Command(ctx, cmd)
			if err == nil && res.Tag() == coordwire.OperationPending {
				res, err = c.Client().WaitFinal(ctx, cmd.OperationID())
			}
			if err != nil {
				t.Fatalf("START_RUN: %v", err)
			}
			if _, ok := res.Started(); !ok {
				t.Fatalf("START_RUN %v, want STARTED", res.Tag())
			}

			deadline := time.Now().Add(10 * time.Second)
			for len(lp.closedCalls()) < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("CLOSED calls %v: the lost CLOSED was not retried", lp.closedCalls())
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // a retry loop would call again within 20 ms
			calls := lp.closedCalls()
			var e *coordwire.Error
			if len(calls) != 2 || calls[0] != nil || !errors.As(calls[1], &e) || e.Code != coordwire.RevisionConflict || e.Reason != "source.binding_ended" {
				t.Fatalf("CLOSED calls %v, want admitted then refused source.binding_ended once", calls)
			}
			if w := warn.all(); len(w) != 0 {
				t.Fatalf("the owner warned %q about a CLOSED refused after its binding ended", w)
			}
			var run coordwire.RunRecord
			if err := c.Store().View(ctx, func(tx coordstore.ReadTx) error {
				o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: p.RunID})
				if err != nil {
					return err
				}
				return run.DecodeTLV(o.Payload)
			}); err != nil {
				t.Fatal(err)
			}
			if run.State != coordwire.RunCompleted {
				t.Fatalf("run %+v, want Completed", run)
			}
		})
	}
}
