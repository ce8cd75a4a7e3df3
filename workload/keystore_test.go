//go:build unix

package workload_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/workload"
)

// The production key material works end to end: an authority key and a
// workload key created on disk, the key registered in the on-disk
// registry, a handshake; then the key is revoked and a new handshake with
// the reloaded registry is refused.
func TestKeystoreEndToEnd(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	auth, err := keystore.InitAuthority(state)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "client", "workload.ed25519")
	wk, err := keystore.GenerateWorkloadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(state, keystore.AuthorityKeyFile), keyPath} {
		seed, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		secret(seed)
	}
	now := time.Now()
	if _, err := keystore.AddKey(state, wk.Public(), coordwire.ScopeWorkRead|coordwire.ScopeSignalAck, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	run := func() error {
		reg, err := keystore.LoadRegistry(state)
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t)
		f.now = now
		f.srvCfg.AuthorityKey = auth
		f.srvCfg.Registry = reg
		f.cliCfg.WorkloadKey = wk
		f.cliCfg.PinnedAuthorityFingerprint = auth.Fingerprint()
		f.cliCfg.RequestedScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
		f.cliCfg.RequestedExpiry = now.Add(10 * time.Minute)
		f.hello()
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.respond(), f.now)
		if err != nil {
			record(t.Name(), err, f.srv)
			return err
		}
		if res.Scope != coordwire.ScopeWorkRead || res.KeyID != wk.KeyID() {
			t.Fatalf("scope %v", res.Scope)
		}
		_, err = f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, helloOK(res), f.now)
		return err
	}
	if err := run(); err != nil {
		t.Fatalf("handshake with keystore keys: %v", err)
	}
	if _, err := keystore.RevokeKey(state, wk.KeyID(), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := run(); !errors.Is(err, workload.ErrAuthenticationFailed) {
		t.Fatalf("revoked key: got %v, want the generic refusal", err)
	}
	if _, ok := (*keystore.Registry)(nil).LookupKey(wk.KeyID()); ok {
		t.Fatal("nil registry knows a key")
	}
}
