//go:build linux || darwin

package coordclient_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
)

// stallProxy forwards the connections of one Unix socket to another.
// While stalled it stops passing the server's bytes to the client — a
// client that stops reading, as a stalled network or a descheduled
// process would — and passes the client's bytes on as before.
type stallProxy struct {
	l      net.Listener
	mu     sync.Mutex
	resume chan struct{} // nil: not stalled; closed by unstall
}

func newStallProxy(t *testing.T, path, target string) *stallProxy {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.unstall()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("unix", target)
			if err != nil {
				cc.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, cc, sc)
			mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(sc, cc)
				sc.Close()
			}()
			go func() {
				defer wg.Done()
				defer cc.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := sc.Read(buf)
					if n > 0 {
						p.wait()
						if _, werr := cc.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *stallProxy) unstall() {
	p.mu.Lock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
	p.mu.Unlock()
}

func (p *stallProxy) wait() {
	p.mu.Lock()
	ch := p.resume
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// historyBytes is the retained event history the test builds: 100 MiB,
// or PHUX_REPLAY_HISTORY_MIB MiB (CONTRIBUTING.md).
func historyBytes(t *testing.T) uint64 {
	mib := uint64(100)
	if v := os.Getenv("PHUX_REPLAY_HISTORY_MIB"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			t.Fatalf("PHUX_REPLAY_HISTORY_MIB=%q: want a positive number of MiB", v)
		}
		mib = n
	}
	return mib << 20
}

// updates runs n UPDATE_OBJECTIVE commands with documents of size bytes
// over objs from 16 goroutines.
func updates(t *testing.T, c *coordclient.Client, objs []coordwire.ObjectiveID, n, size int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			doc := make([]byte, size)
			for i := g; i < n; i += 16 {
				doc[0], doc[1] = byte(i), byte(i>>8)
				if _, err := c.Command(tctx(t), coordclient.UpdateObjective(objs[i%len(objs)], 1, doc)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func retainedEventBytes(t *testing.T, st coordstore.Store) (bytes, last uint64) {
	t.Helper()
	if err := st.View(tctx(t), func(tx coordstore.ReadTx) (err error) {
		if bytes, err = tx.RetainedEventBytes(); err != nil {
			return err
		}
		last, err = tx.LastSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return bytes, last
}

// §10 through the Mirror's healing path, on a boltstore holding 100 MiB
// of retained event history (three times the 32 MiB pinned-byte quota,
// which OPEN_REPLAY used to charge whole, refusing it, so that the Mirror
// fell back to a full snapshot): the Mirror's connection stalls (a proxy
// stops passing the server's bytes) while 10,000 updates commit, its
// subscription overflows (GAP QUEUE_OVERFLOW), and once the connection
// flows again the Mirror heals by replay — one replay, no replacement
// snapshot, no reconnect — to exactly the store's state, the replay's
// pinned charge released.
func TestEndToEndMirrorHealsByReplayOverLargeHistory(t *testing.T) {
	const behind = 10_000
	history := historyBytes(t)
	// The stall below holds back the server's certificate renewals too:
	// under the race detector the 10,000 updates take longer than a
	// 10 s lease, and the Mirror's certificate expired before it healed
	// (a minute is the longest lifetime a certificate may have).
	e := newE2E(t, time.Minute, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	e.edit = func(c *coordserver.Config) { c.Capabilities |= coordwire.CapEventReplay }
	st, err := boltstore.Open(filepath.Join(shortDir(t), "s.db"), boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	srv := e.start(st, path)
	proxy := newStallProxy(t, filepath.Join(e.sockDir, "p.sock"), path)
	cfg := e.config()
	cfg.OfferedCapabilities = coordwire.CapEventReplay
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	objs := make([]coordwire.ObjectiveID, 16)
	for i := range objs {
		objs[i] = coordwire.NewObjectiveID()
		if _, err := c.Command(tctx(t), coordclient.CreateObjective(objs[i], 1, []byte("d"))); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for b, _ := retainedEventBytes(t, st); b < history; b, _ = retainedEventBytes(t, st) {
		updates(t, c, objs, 128, 96<<10)
	}
	t.Logf("history built in %v", time.Since(start))

	mc, err := coordclient.Dial(tctx(t), "unix:"+filepath.Join(e.sockDir, "p.sock"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	m := coordclient.NewMirror(mc, coordclient.MirrorConfig{CreditCount: 1, PingInterval: time.Minute, PingTimeout: time.Minute})
	defer m.Close()
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	from := m.Status().Cut

	proxy.stall()
	start = time.Now()
	updates(t, c, objs, behind, 1<<10)
	t.Logf("%d updates in %v", behind, time.Since(start))
	waitFor(t, "the server's GAP QUEUE_OVERFLOW", func() bool { return srv.Usage().Gaps[coordwire.GapQueueOverflow] == 1 })
	retained, last := retainedEventBytes(t, st)
	if retained < history || last-uint64(from) < behind {
		t.Fatalf("fixture: %d retained event bytes, the Mirror %d events behind", retained, last-uint64(from))
	}
	proxy.unstall()

	if err := m.WaitForCut(tctx(t), coordwire.EventCut(last)); err != nil {
		t.Fatal(err)
	}
	converged(t, c, m)
	if got := m.Stats(); got.Replays != 1 || got.Replacements != 0 || got.Reconnects != 0 || got.Gaps[coordwire.GapQueueOverflow] != 1 {
		t.Fatalf("stats %+v, last error %v: want one GAP healed by one replay", got, m.Status().Err)
	}
	waitFor(t, "the replay's charge released", func() bool {
		u := srv.Usage().Server
		return u.Leases == 0 && u.PinnedBytes == 0
	})
}
