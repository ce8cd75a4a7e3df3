//go:build unix

package main

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// lockedBuffer collects run's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watch reports a GAP and its healing by replay at the exact cut. The
// coordtest relay serves clients in its own process only (the UDS_PEER
// binding names the relay's pid), so this test runs the command's run
// function in process rather than the binary.
func TestWatchReportsGapAndReplay(t *testing.T) {
	t.Setenv(profileEnv, filepath.Join(t.TempDir(), "none.json"))
	c := coordtest.Start(t, coordtest.Config{})
	fp := c.AuthorityFingerprint()
	args := []string{"watch", "--kind", "OBJECTIVE", "--address", c.Address(), "--key", c.KeyFile(),
		"--authority", "sha256:" + hex.EncodeToString(fp[:]), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), &out, &out) }()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), what); {
			if time.Now().After(deadline) {
				t.Fatalf("watch did not print %q:\n%s", what, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("synced at cut")
	if err := c.ForceGap(coordwire.GapInternal); err != nil {
		t.Fatal(err)
	}
	id := coordwire.NewObjectiveID()
	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer tcancel()
	if _, err := c.Client().Command(tctx, coordclient.CreateObjective(id, 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	wait("gap: INTERNAL")
	wait("replayed: gap healed by replay")
	wait("add OBJECTIVE/" + id.String())
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("watch ended with %d:\n%s", code, out.String())
	}
	done <- exitOK
}

// A revoked key ends watch with the refusal (exit 1, its code), not a
// silent reconnect loop.
func TestWatchEndsOnRevokedKey(t *testing.T) {
	t.Setenv(profileEnv, filepath.Join(t.TempDir(), "none.json"))
	c := coordtest.Start(t, coordtest.Config{})
	fp := c.AuthorityFingerprint()
	args := []string{"watch", "--address", c.Address(), "--key", c.KeyFile(),
		"--authority", "sha256:" + hex.EncodeToString(fp[:]), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), args, strings.NewReader(""), &out, &errOut) }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "synced at cut"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not synced: %s %s", out.String(), errOut.String())
		}
	}
	c.RevokeKey(c.KeyID())
	select {
	case code := <-done:
		if code != exitRefused || !strings.Contains(errOut.String(), "refused: AUTHENTICATION_FAILED") {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch still running after the revocation:\n%s", out.String())
	}
}
