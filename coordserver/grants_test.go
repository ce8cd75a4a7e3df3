package coordserver_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
)

// setCeiling rewrites the registry with a new ceiling for one key (write a
// temporary file, rename it over the registry: what the key tool does).
func (e *env) setCeiling(id [32]byte, ceiling coordwire.Scope) {
	e.t.Helper()
	ents, err := keystore.ListKeys(e.keysDir)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range ents {
		if ents[i].KeyID == id {
			ents[i].Ceiling = ceiling
		}
	}
	b, err := keystore.EncodeRegistry(ents)
	if err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(e.keysDir, ".tmp-registry")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.keysDir, keystore.RegistryFile)); err != nil {
		e.t.Fatal(err)
	}
}

type closed struct {
	at  time.Time
	err *coordwire.CoordError
}

func (c *client) closedAsync(d time.Duration) <-chan closed {
	ch := make(chan closed, 1)
	go func() {
		e, _ := c.waitClosed(d)
		ch <- closed{time.Now(), e}
	}()
	return ch
}

// Revoking a connected key, its expiry and a narrowed ceiling each close
// that key's connections with COORD_ERROR AUTHENTICATION_FAILED within 1 s
// of the change or the expiry instant; other principals are not disturbed.
func TestLiveGrantChanges(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	_, path := e.serve(e.config(st))
	both := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	// The expiry is a whole second on the wall clock (the registry's
	// precision). Truncate drops the monotonic reading, so a wall-clock step
	// while the test runs (an NTP correction on a CI machine) would move
	// c.at.Sub(expiry); expiryMono is the same instant on the monotonic
	// clock, read now. The close is on time if it is on time by either.
	expiry := time.Now().Truncate(time.Second).Add(3 * time.Second)
	expiryMono := time.Now().Add(time.Until(expiry))
	kRevoke := e.addKey(both, time.Now().Add(time.Hour))
	kNarrow := e.addKey(both, time.Now().Add(time.Hour))
	kExpire := e.addKey(both, expiry)
	kOther := e.addKey(both, time.Now().Add(time.Hour))
	dial := func(k *keystore.WorkloadKey) *client {
		c, err := e.dial(path, k, dialOpts{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.close)
		return c
	}
	cRevoke, cRevoke2, cNarrow, cExpire, cOther := dial(kRevoke), dial(kRevoke), dial(kNarrow), dial(kExpire), dial(kOther)
	wRevoke, wRevoke2, wNarrow, wExpire := cRevoke.closedAsync(10*time.Second), cRevoke2.closedAsync(10*time.Second),
		cNarrow.closedAsync(10*time.Second), cExpire.closedAsync(10*time.Second)

	check := func(name string, w <-chan closed, since ...time.Time) {
		t.Helper()
		select {
		case c := <-w:
			if c.err == nil || c.err.Code != coordwire.AuthenticationFailed {
				t.Fatalf("%s: closed with %+v, want AUTHENTICATION_FAILED", name, c.err)
			}
			onTime, ds := false, make([]time.Duration, 0, len(since))
			for _, s := range since {
				d := c.at.Sub(s)
				ds = append(ds, d)
				onTime = onTime || (d <= time.Second && d >= -50*time.Millisecond)
			}
			if !onTime {
				t.Fatalf("%s: closed %v after the change", name, ds)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: connection not closed", name)
		}
	}
	// Revocation (both connections of the key).
	t0 := time.Now()
	if _, err := keystore.RevokeKey(e.keysDir, kRevoke.KeyID(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	check("revoked", wRevoke, t0)
	check("revoked (second connection)", wRevoke2, t0)
	// Narrowed ceiling: the connection holds WORK_COMMAND, the ceiling no
	// longer does.
	t1 := time.Now()
	e.setCeiling(kNarrow.KeyID(), coordwire.ScopeWorkRead)
	check("narrowed", wNarrow, t1)
	// Expiry: nothing changes in the file; the recheck is scheduled at
	// Registry.NextTransition.
	check("expired", wExpire, expiry, expiryMono)

	// The other principal was not disturbed.
	if _, err := cOther.command(createCmd(cOther.reqID(), cOther.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "still here")); err != nil {
		t.Fatalf("other principal disturbed: %v", err)
	}
	// A revoked key cannot connect again.
	if _, err := e.dial(path, kRevoke, dialOpts{}); codeOf(err) != coordwire.AuthenticationFailed {
		t.Fatalf("revoked key reconnect: %v", err)
	}
}
