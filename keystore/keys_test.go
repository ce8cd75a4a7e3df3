//go:build unix

package keystore_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// dupFD returns a duplicate of f's descriptor that the caller owns.
func dupFD(f interface{ Fd() uintptr }) (uintptr, error) {
	fd, err := unix.Dup(int(f.Fd()))
	return uintptr(fd), err
}

func stateDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "state")
}

func seedOf(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 32 {
		t.Fatalf("%s: %d bytes", path, len(b))
	}
	return b
}

// TestFingerprintReexports: keystore's fingerprint form is edstrict's
// (tested there, on every platform): the same text, the same parse, the
// same sentinel.
func TestFingerprintReexports(t *testing.T) {
	fp := [32]byte{1, 2, 3}
	s := keystore.FormatFingerprint(fp)
	if s != edstrict.FormatFingerprint(fp) || !strings.HasPrefix(s, keystore.FingerprintPrefix) {
		t.Fatalf("FormatFingerprint = %q", s)
	}
	if got, err := keystore.ParseFingerprint(s); err != nil || got != fp {
		t.Fatalf("ParseFingerprint = %x, %v", got, err)
	}
	if _, err := keystore.ParseFingerprint(strings.ToUpper(s)); !errors.Is(err, keystore.ErrMalformedFingerprint) {
		t.Fatalf("ParseFingerprint of the upper-case form: %v, want ErrMalformedFingerprint", err)
	}
}

func TestAuthorityInitLoad(t *testing.T) {
	dir := stateDir(t)
	k, err := keystore.InitAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode %v, %v", st.Mode(), err)
	}
	path := filepath.Join(dir, keystore.AuthorityKeyFile)
	fst, err := os.Lstat(path)
	if err != nil || fst.Mode() != 0o600 || fst.Size() != 32 {
		t.Fatalf("key file %v size %d, %v", fst.Mode(), fst.Size(), err)
	}
	seed := seedOf(t, path)
	if !bytes.Equal(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), k.Public()) {
		t.Fatal("public key does not derive from the stored seed")
	}
	if k.Fingerprint() != edstrict.KeyID(k.Public()) {
		t.Fatal("fingerprint is not SHA-256 of the public key")
	}
	l, err := keystore.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fingerprint() != k.Fingerprint() {
		t.Fatal("loaded key differs")
	}
	msg := []byte("transcript")
	if !ed25519.Verify(k.Public(), msg, l.Sign(msg)) {
		t.Fatal("signature does not verify")
	}

	// Only an explicit init creates it, and never twice.
	if _, err := keystore.InitAuthority(dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second init: err = %v, want fs.ErrExist", err)
	}
	if !bytes.Equal(seedOf(t, path), seed) {
		t.Fatal("second init changed the key")
	}
}

func TestLoadAuthorityRefusals(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		if _, err := keystore.LoadAuthority(stateDir(t)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v", err)
		}
	})
	for _, n := range []int{0, 31, 33, 64} {
		t.Run(fmt.Sprintf("size%d", n), func(t *testing.T) {
			dir := stateDir(t)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, keystore.AuthorityKeyFile), make([]byte, n), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := keystore.LoadAuthority(dir); !errors.Is(err, keystore.ErrMalformedKey) {
				t.Fatalf("err = %v, want ErrMalformedKey", err)
			}
		})
	}
	t.Run("mode0644", func(t *testing.T) {
		dir := stateDir(t)
		if _, err := keystore.InitAuthority(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, keystore.AuthorityKeyFile), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.LoadAuthority(dir); !errors.Is(err, keystore.ErrInsecurePermissions) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		real := stateDir(t)
		if _, err := keystore.InitAuthority(real); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "other")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(real, keystore.AuthorityKeyFile), filepath.Join(dir, keystore.AuthorityKeyFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.LoadAuthority(dir); !errors.Is(err, keystore.ErrSymlink) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("groupDir", func(t *testing.T) {
		dir := stateDir(t)
		if _, err := keystore.InitAuthority(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.LoadAuthority(dir); !errors.Is(err, keystore.ErrInsecurePermissions) {
			t.Fatalf("err = %v", err)
		}
		if _, err := keystore.InitAuthority(filepath.Join(dir)); !errors.Is(err, keystore.ErrInsecurePermissions) {
			t.Fatalf("init in group dir: err = %v", err)
		}
	})
}

func TestWorkloadKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	path := filepath.Join(dir, "client.key")
	k, err := keystore.GenerateWorkloadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k.KeyID() != edstrict.KeyID(k.Public()) {
		t.Fatal("key id is not SHA-256 of the public key")
	}
	if _, err := keystore.GenerateWorkloadKey(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: err = %v, want fs.ErrExist", err)
	}
	l, err := keystore.LoadWorkloadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.KeyID() != k.KeyID() {
		t.Fatal("loaded key differs")
	}
	if !ed25519.Verify(l.Public(), []byte("m"), k.Sign([]byte("m"))) {
		t.Fatal("signature does not verify")
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.LoadWorkloadKeyFile(path); !errors.Is(err, keystore.ErrInsecurePermissions) {
		t.Fatalf("0640: err = %v", err)
	}
}

func TestLoadWorkloadKeyFD(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	want, err := keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	pipeWith := func(t *testing.T, data []byte) uintptr {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Write(data); w.Close() }()
		// Hand over the descriptor: LoadWorkloadKeyFD owns and closes it.
		fd, err := dupFD(r)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		return fd
	}
	t.Run("pipe", func(t *testing.T) {
		k, err := keystore.LoadWorkloadKeyFD(pipeWith(t, seed))
		if err != nil {
			t.Fatal(err)
		}
		if k.KeyID() != want.KeyID() {
			t.Fatal("wrong key")
		}
	})
	for _, n := range []int{0, 31, 33, 100} {
		t.Run(fmt.Sprintf("pipe%d", n), func(t *testing.T) {
			if _, err := keystore.LoadWorkloadKeyFD(pipeWith(t, make([]byte, n))); !errors.Is(err, keystore.ErrMalformedKey) {
				t.Fatalf("err = %v, want ErrMalformedKey", err)
			}
		})
	}
	t.Run("regular", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "k")
		if err := os.WriteFile(p, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := dupFD(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		k, err := keystore.LoadWorkloadKeyFD(fd)
		if err != nil || k.KeyID() != want.KeyID() {
			t.Fatalf("%v %v", k, err)
		}
	})
	t.Run("regularInsecure", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "k")
		if err := os.WriteFile(p, seed, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := dupFD(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.LoadWorkloadKeyFD(fd); !errors.Is(err, keystore.ErrInsecurePermissions) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("socket", func(t *testing.T) {
		ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ln.(*net.UnixListener).File()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := dupFD(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.LoadWorkloadKeyFD(fd); !errors.Is(err, keystore.ErrNotRegular) {
			t.Fatalf("err = %v, want ErrNotRegular", err)
		}
	})
	t.Run("badFD", func(t *testing.T) {
		if _, err := keystore.LoadWorkloadKeyFD(^uintptr(0) >> 1); err == nil {
			t.Fatal("accepted a bad descriptor")
		}
	})
}

// TestRedaction formats both key types every way the program could.
func TestRedaction(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789ABCDEF")
	ak, err := keystore.AuthorityKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	wk, err := keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	type holder struct {
		A  keystore.AuthorityKey
		W  *keystore.WorkloadKey
		a  keystore.AuthorityKey
		w  keystore.WorkloadKey
		AP *keystore.AuthorityKey
	}
	h := holder{A: *ak, W: wk, a: *ak, w: *wk, AP: ak}
	var outs []string
	for _, v := range []any{ak, *ak, wk, *wk, h, &h, []any{ak, wk}, map[string]any{"k": ak}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%p"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
	}
	outs = append(outs, ak.String(), ak.GoString(), wk.String(), wk.GoString(), fmt.Sprint(ak), fmt.Sprintln(wk))
	var logBuf bytes.Buffer
	for _, hnd := range []slog.Handler{slog.NewTextHandler(&logBuf, nil), slog.NewJSONHandler(&logBuf, nil)} {
		l := slog.New(hnd)
		l.Info("keys", "authority", ak, "workload", wk, "value", *ak, "holder", h)
	}
	outs = append(outs, logBuf.String())
	for _, v := range []any{ak, wk, *ak, h} {
		b, err := json.Marshal(v)
		if err == nil {
			t.Errorf("json.Marshal(%T) succeeded: %s", v, b)
			continue
		}
		outs = append(outs, err.Error())
	}
	for _, v := range []interface{ MarshalText() ([]byte, error) }{ak, wk} {
		if b, err := v.MarshalText(); err == nil {
			t.Errorf("MarshalText(%T) succeeded: %s", v, b)
		}
	}
	var gb bytes.Buffer
	if err := gob.NewEncoder(&gb).Encode(ak); err == nil {
		t.Error("gob encoded an authority key")
	}
	outs = append(outs, gb.String())
	if want := "AuthorityKey(" + keystore.FormatFingerprint(ak.Fingerprint()) + ")"; fmt.Sprintf("%v", ak) != want {
		t.Errorf("%%v = %q, want %q", fmt.Sprintf("%v", ak), want)
	}
	if want := "WorkloadKey(" + keystore.FormatFingerprint(wk.KeyID()) + ")"; fmt.Sprintf("%x", wk) != want {
		t.Errorf("%%x = %q, want %q", fmt.Sprintf("%x", wk), want)
	}
	if form := leakcheck.Find(strings.Join(outs, "\n"), seed, priv); form != "" {
		t.Fatalf("secret leaked as %s:\n%s", form, strings.Join(outs, "\n"))
	}
}

func TestZeroKeySignPanicsWithoutSecret(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
	}()
	var k keystore.AuthorityKey
	k.Sign([]byte("x"))
}

func TestFromSeedSize(t *testing.T) {
	if _, err := keystore.AuthorityKeyFromSeed(make([]byte, 31)); !errors.Is(err, keystore.ErrMalformedKey) {
		t.Fatalf("err = %v", err)
	}
	if _, err := keystore.WorkloadKeyFromSeed(make([]byte, 33)); !errors.Is(err, keystore.ErrMalformedKey) {
		t.Fatalf("err = %v", err)
	}
}
