//go:build linux || darwin

package coordclient_test

import (
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// revChecker is a Handler that requires every object's revisions to rise
// strictly by add/update (no duplicate, no regression) between
// replacements, and keeps the view the handler was given.
type revChecker struct {
	mu   sync.Mutex
	view map[coordwire.ObjectRef]coordwire.ObjectRevision
	errs []string
}

func (r *revChecker) handler() coordclient.Handler {
	r.view = map[coordwire.ObjectRef]coordwire.ObjectRevision{}
	return coordclient.Handler{
		OnAdd: func(o coordclient.Object, _ bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if _, dup := r.view[o.Ref()]; dup {
				r.errs = append(r.errs, "add of a present object")
			}
			r.view[o.Ref()] = o.Revision()
		},
		OnUpdate: func(old, new coordclient.Object) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.view[old.Ref()] != old.Revision() || new.Revision() <= old.Revision() {
				r.errs = append(r.errs, "update not from the held revision upwards")
			}
			r.view[new.Ref()] = new.Revision()
		},
		OnDelete: func(last coordclient.Object) {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.view, last.Ref())
		},
	}
}

// A rapid interleaving of creates, updates, bursts that overflow a tiny
// queue (GAP, healed by replay or snapshot), explicit resyncs (a
// disconnect and a fresh snapshot) and stalls, against the real server:
// the Mirror always converges to a fresh snapshot, byte for byte, and a
// handler never sees a duplicated or regressing revision.
func TestMirrorRapidConvergence(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	e.edit = func(c *coordserver.Config) {
		c.Quotas.QueueFramesPerSubscription = 4
		c.Capabilities |= coordwire.CapEventReplay
	}
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	// Each check dials, syncs a Mirror and converges (≈ 0.1–1 s): the
	// normal suite runs 15 unless -rapid.checks or PHUX_MIRROR_RAPID_CHECKS
	// says otherwise.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		n := os.Getenv("PHUX_MIRROR_RAPID_CHECKS")
		if n == "" {
			n = "15"
		}
		_ = f.Value.Set(n)
		t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
	}
	rapid.Check(t, func(rt *rapid.T) {
		cfg := e.config()
		if rapid.Bool().Draw(rt, "replay") {
			cfg.OfferedCapabilities = coordwire.CapEventReplay
		}
		c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer c.Close()
		m := coordclient.NewMirror(c, coordclient.MirrorConfig{
			CreditCount: uint32(rapid.IntRange(1, 8).Draw(rt, "credit")),
			BackoffMin:  time.Millisecond, BackoffMax: 20 * time.Millisecond,
		})
		defer m.Close()
		rc := &revChecker{}
		m.AddHandler(rc.handler())
		if err := m.WaitSynced(tctx(t)); err != nil {
			rt.Fatal(err)
		}
		var objs []coordwire.ObjectiveID
		revs := map[coordwire.ObjectiveID]uint64{}
		for range rapid.IntRange(1, 12).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, "action") {
			case 0: // create
				id := coordwire.NewObjectiveID()
				if _, err := c.Command(tctx(t), coordclient.CreateObjective(id, 1, []byte("c"))); err != nil {
					rt.Fatal(err)
				}
				objs, revs[id] = append(objs, id), 1
			case 1: // update
				if len(objs) == 0 {
					continue
				}
				id := objs[rapid.IntRange(0, len(objs)-1).Draw(rt, "which")]
				if _, err := c.Command(tctx(t), coordclient.UpdateObjective(id, 1, []byte("u"), coordclient.ObjectiveAt(id, revs[id]))); err != nil {
					rt.Fatal(err)
				}
				revs[id]++
			case 2: // burst: overflows the 4-frame queue at small credit
				var wg sync.WaitGroup
				for range 12 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("b")))
					}()
				}
				wg.Wait()
			case 3: // disconnect and fresh snapshot
				if err := m.Resync(tctx(t)); err != nil {
					rt.Fatal(err)
				}
			case 4: // stall
				time.Sleep(time.Duration(rapid.IntRange(0, 20).Draw(rt, "ms")) * time.Millisecond)
			}
		}
		converged(t, c, m)
		waitFor(t, "handler view", func() bool {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			recs := mirrorRecords(m)
			if len(recs) != len(rc.view) {
				return false
			}
			for _, r := range recs {
				if rc.view[r.Object] != r.Revision {
					return false
				}
			}
			return true
		})
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.errs) > 0 {
			rt.Fatalf("handler saw: %v", rc.errs)
		}
	})
}
