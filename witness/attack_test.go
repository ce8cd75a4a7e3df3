package witness_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// slotHolder is the hostile peer of finding 9.1: it keeps connections
// to the witness, each sending one STATUS for an unknown coordinator,
// signed with a throwaway key, every period (well inside the idle
// timeout), and reconnects whenever the witness closes one.
func slotHolder(ctx context.Context, addr string, period time.Duration, refused *atomic.Int64) {
	key := edSigner{newSigner(nilTB{}).priv}
	coord := coordwire.NewCoordinatorID()
	for ctx.Err() == nil {
		c, err := net.Dial("unix", addr[5:])
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := witness.ReadFrame(c)
		hello, ok := f.(*witness.Hello)
		if err == nil && ok {
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				req := signed(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: seq}, key, hello.Nonce)
				if witness.WriteFrame(c, req) != nil {
					break
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := witness.ReadFrame(c); err != nil {
					break
				}
				refused.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(period):
				}
			}
		}
		stop()
		c.Close()
		time.Sleep(50 * time.Millisecond) // a script's reconnect pause
	}
}

// enrolCLI enrols coord's key with the real binary's enrol command.
func enrolCLI(t *testing.T, dir string, coord coordwire.CoordinatorID, key edSigner) {
	t.Helper()
	out, err := exec.Command(daemonBin, "enrol", "--state-dir", dir, "--coordinator", coord.String(),
		"--fingerprint", keystore.FormatFingerprint(fingerprint(key))).CombinedOutput()
	if err != nil {
		t.Fatalf("enrol: %v %s", err, out)
	}
}

// nilTB lets newSigner run outside a test goroutine (it never fails).
type nilTB struct{ testing.TB }

func (nilTB) Fatal(...any) { panic("key generation failed") }

// Finding 9.1 against the real daemon: twice as many hostile
// connections as the daemon has slots, each refreshing itself with a
// refused STATUS well inside the idle timeout, cannot hold the slots:
// a refused or unauthenticated connection lives at most --auth-timeout
// and --unauth-refusals refusals. An honest coordinator that connects in
// the middle of the attack gets in, activates, and its lease renews
// throughout; fresh honest connections keep getting in. (Before the fix
// the hostile connections held every slot for good, and the honest one
// never got a HELLO.)
func TestDaemonSlotHoldingAttack(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	d := startDaemonArgs(t, dir, addr, 6*time.Second, []string{"--max-conns", "16", "--reserved-conns", "4",
		"--idle-timeout", "3s", "--auth-timeout", "1s", "--log-level", "info"})
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	enrolCLI(t, dir, coord, key) // the honest coordinator, before the attack

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() { defer wg.Done(); slotHolder(ctx, addr, 300*time.Millisecond, &refused) }()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the attack holds every slot it can

	// until retries op for up to 10 s while the witness answers BUSY (or
	// closes a connection that lost a race for a slot).
	until := func(what string, op func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := op()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s during the attack: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c := newClient(t, addr, id.KeyID, coord, key)
	var renewals atomic.Int64
	var lease *witness.Lease
	until("activation", func() error {
		var err error
		lease, err = c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{
			OnRenew: func(coordwire.ActivationCertificate) { renewals.Add(1) }})
		return err
	})
	defer lease.Close()
	// Fresh honest connections (a coordinator restarting, an operator's
	// signed STATUS) keep getting in.
	for i := range 4 {
		until("a fresh connection", func() error {
			fc, err := witness.NewClient(witness.ClientConfig{Address: addr, WitnessKeyID: id.KeyID, CoordinatorID: coord, Authority: key})
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			st, err := fc.Status(ctxT(t))
			if err == nil && !st.LeaseLive() {
				b, _ := os.ReadFile(d.log.Name())
				t.Fatalf("fresh connection %d: the honest lease is not live: %+v %v %d\n%s", i, st, lease.Err(), renewals.Load(), b[max(0, len(b)-5000):])
			}
			return err
		})
		time.Sleep(1500 * time.Millisecond)
	}
	if err := lease.Check(); err != nil {
		t.Fatalf("the honest lease fenced during the attack: %v", err)
	}
	if n := renewals.Load(); n < 3 {
		t.Fatalf("only %d renewals during the attack", n)
	}
	if refused.Load() < 32 {
		t.Fatalf("the attack made only %d requests; it did not run", refused.Load())
	}
	if errors.Is(lease.Err(), witness.ErrRenewalDeadline) {
		t.Fatal(lease.Err())
	}
}
