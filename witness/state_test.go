package witness_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/witness"
)

func TestInitTwiceRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	id, err := witness.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := witness.Init(dir); !errors.Is(err, witness.ErrAlreadyInitialised) {
		t.Fatalf("got %v", err)
	}
	got, err := witness.ReadIdentity(dir)
	if err != nil || got.KeyID != id.KeyID || got.KeyID != sha256.Sum256(id.PublicKey) {
		t.Fatalf("identity %v %v", got, err)
	}
}

func TestOpenRefusals(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := witness.Open(witness.Config{StateDir: empty}); !errors.Is(err, witness.ErrNotInitialised) {
		t.Fatalf("empty dir: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	for _, life := range []time.Duration{61 * time.Second, 1500 * time.Millisecond, time.Hour, -time.Second} {
		if _, err := witness.Open(witness.Config{StateDir: dir, Lifetime: life}); !errors.Is(err, witness.ErrConfig) {
			t.Fatalf("lifetime %v: %v", life, err)
		}
	}
	s, err := witness.Open(witness.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := witness.Open(witness.Config{StateDir: dir}); !errors.Is(err, witness.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	s.Close()
	if err := os.Chmod(filepath.Join(dir, witness.StateFileName), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := witness.Open(witness.Config{StateDir: dir}); !errors.Is(err, atomicfile.ErrInsecurePermissions) {
		t.Fatalf("mode 0644: %v", err)
	}
}

// stateWithRecords makes a witness whose state file holds two
// coordinators (one with a live lease, one with spent tokens).
func stateWithRecords(t *testing.T) string {
	tw := startWitness(t, witness.Config{})
	ctx := ctxT(t)
	c1 := tw.client(t, coordwire.NewCoordinatorID(), newSigner(t))
	if _, err := c1.Activate(ctx, 3, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	c2 := tw.client(t, coordwire.NewCoordinatorID(), newSigner(t))
	g, err := c2.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Relinquish(ctx, g); err != nil {
		t.Fatal(err)
	}
	tw.stop()
	return tw.dir
}

func TestCorruptStateRefused(t *testing.T) {
	dir := stateWithRecords(t)
	path := filepath.Join(dir, witness.StateFileName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		if err := atomicfile.WriteFile(dir, witness.StateFileName, b); err != nil {
			t.Fatal(err)
		}
	}
	open := func() error {
		s, err := witness.Open(witness.Config{StateDir: dir})
		if err == nil {
			s.Close()
		}
		return err
	}
	// Every single-bit flip is caught (magic, version or checksum).
	for i := 0; i < len(good)*8; i += 13 {
		b := append([]byte(nil), good...)
		b[i/8] ^= 1 << (i % 8)
		write(b)
		err := open()
		if !errors.Is(err, witness.ErrStateCorrupt) && !errors.Is(err, witness.ErrStateVersion) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	// Every truncation too.
	for n := 0; n < len(good); n += 17 {
		write(good[:n])
		if err := open(); !errors.Is(err, witness.ErrStateCorrupt) && !errors.Is(err, witness.ErrStateVersion) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	// An unknown version with a correct checksum is ErrStateVersion.
	b := append([]byte(nil), good[:len(good)-32]...)
	binary.BigEndian.PutUint16(b[12:], 3)
	sum := sha256.Sum256(b)
	write(append(b, sum[:]...))
	if err := open(); !errors.Is(err, witness.ErrStateVersion) {
		t.Fatalf("version 3: %v", err)
	}
	write(good)
	if err := open(); err != nil {
		t.Fatalf("restored file: %v", err)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	g, err := tw.client(t, coord, key).Activate(ctx, 9, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	tw.stop()
	tw2 := serveWitness(t, tw.dir, witness.Config{})
	if tw2.id.KeyID != tw.id.KeyID {
		t.Fatal("witness key changed across restart")
	}
	c := tw2.client(t, coord, key)
	if _, err := c.Activate(ctx, 10, coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("lease forgotten: %v", err)
	}
	// The holder renews through the restarted witness.
	if _, err := c.Renew(ctx, g); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.LastAuthorityEpoch != 9 || st.ActivationSequence != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
}
