//go:build unix

package keystore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
)

func Example() {
	base, _ := os.MkdirTemp("", "keystore-example")
	defer os.RemoveAll(base)
	stateDir := filepath.Join(base, "state")

	authority, err := keystore.InitAuthority(stateDir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fp := keystore.FormatFingerprint(authority.Fingerprint())
	fmt.Println(strings.HasPrefix(fp, "sha256:"), len(fp))
	// The key type never prints its secret.
	fmt.Println(fmt.Sprintf("%x", authority) == "AuthorityKey("+fp+")")

	client, err := keystore.GenerateWorkloadKey(filepath.Join(base, "client", "client.key"))
	if err != nil {
		fmt.Println(err)
		return
	}
	entry, err := keystore.AddKey(stateDir, client.Public(),
		coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(30*24*time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(entry.Ceiling, entry.KeyID == client.KeyID())

	w, err := keystore.NewWatcher(context.Background(), stateDir, keystore.WatcherConfig{Interval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	reg := w.Current()
	e, ok := reg.Lookup(client.KeyID())
	fmt.Println(reg.Generation(), ok, e.Usable(time.Now()))

	if _, err := keystore.RevokeKey(stateDir, client.KeyID(), time.Time{}); err != nil {
		fmt.Println(err)
		return
	}
	reg, _ = w.Wait(context.Background(), reg.Generation())
	e, _ = reg.Lookup(client.KeyID())
	fmt.Println(reg.Generation(), e.Usable(time.Now()))
	// Output:
	// true 71
	// true
	// work_read,work_command true
	// 1 true true
	// 2 false
}
