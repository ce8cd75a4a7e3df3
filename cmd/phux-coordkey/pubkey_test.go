//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/keystore"
)

// TestKeygenOutputIsAPublicKeyFile (B.5): what workload keygen prints,
// redirected to a file as an operator does (`keygen --out client.key >
// client.pub`), is a public-key file registry add accepts, from
// --public-key-file and from standard input, and the key it registers is
// the key in the key file.
func TestKeygenOutputIsAPublicKeyFile(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if r := invoke("", "authority", "init", "--state-dir", state); r.code != 0 {
		t.Fatalf("authority init: %+v", r)
	}
	for i, via := range []string{"file", "stdin"} {
		keyPath := filepath.Join(base, "client", via+".key")
		kg := invoke("", "workload", "keygen", "--out", keyPath)
		m := keygenOut.FindStringSubmatch(kg.stdout)
		if kg.code != 0 || m == nil {
			t.Fatalf("keygen: %+v", kg)
		}
		pubFile := filepath.Join(base, via+".pub")
		if err := os.WriteFile(pubFile, []byte(kg.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"registry", "add", "--state-dir", state, "--scopes", "work_read", "--expires", "1h"}
		stdin := ""
		if via == "file" {
			args = append(args, "--public-key-file", pubFile)
		} else {
			stdin = kg.stdout
		}
		add := invoke(stdin, args...)
		if add.code != 0 || !strings.HasPrefix(add.stdout, m[2]+" ") || !strings.HasSuffix(add.stdout, " public-key="+m[1]+"\n") {
			t.Fatalf("registry add of keygen's output via %s: %+v", via, add)
		}
		entries, err := keystore.ListKeys(state)
		if err != nil || len(entries) != i+1 {
			t.Fatalf("registry %v, %v", entries, err)
		}
		wk, err := keystore.LoadWorkloadKeyFile(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wk.KeyID(), entries[i].KeyID); diff != "" {
			t.Fatalf("registered key id is not the key file's (-want +got):\n%s", diff)
		}
	}
}

// TestPubkeyRecoversKeygenOutput: workload pubkey --key prints exactly
// what keygen printed for that key file, so a lost client.pub is made
// again from the key; its refusals name --key, say what to do for a
// missing or wrong file, and exit 2.
func TestPubkeyRecoversKeygenOutput(t *testing.T) {
	base := t.TempDir()
	keyPath := filepath.Join(base, "client", "client.key")
	kg := invoke("", "workload", "keygen", "--out", keyPath)
	if kg.code != 0 {
		t.Fatalf("keygen: %+v", kg)
	}
	pk := invoke("", "workload", "pubkey", "--key", keyPath)
	if pk.code != 0 || pk.stderr != "" {
		t.Fatalf("pubkey: %+v", pk)
	}
	if diff := cmp.Diff(kg.stdout, pk.stdout); diff != "" {
		t.Fatalf("pubkey output differs from keygen's (-keygen +pubkey):\n%s", diff)
	}

	loose := filepath.Join(base, "client", "loose.key")
	b, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose, b, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(base, "client", "short.key")
	if err := os.WriteFile(short, b[:31], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		hint       string // the remedy the line must carry
	}{
		{"missing", filepath.Join(base, "client", "nope.key"), "workload keygen --out FILE"},
		{"group-readable", loose, "chmod 600"},
		{"not a seed", short, "32-byte seed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := invoke("", "workload", "pubkey", "--key", c.path)
			m := errLine.FindStringSubmatch(r.stderr)
			if r.code != 2 || r.stdout != "" || m == nil || m[1] != "--key" {
				t.Fatalf("want one line naming --key, exit 2: %+v", r)
			}
			if !strings.Contains(r.stderr, c.hint) {
				t.Fatalf("the refusal does not say what to do (%q): %q", c.hint, r.stderr)
			}
		})
	}
}
