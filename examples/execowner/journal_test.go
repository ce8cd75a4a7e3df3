package execowner

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

var jfp = [32]byte{1}

func jkey(n byte) coordserver.EffectKey {
	return coordserver.EffectKey{ID: [16]byte{0xaa, n}, Digest: [32]byte{n}}
}

// rejectedSpawn is a spawn the owner answers without a process (an unserved
// group): two journal records, intent and result.
func rejectedSpawn(n byte) coordserver.SpawnRequest {
	return coordserver.SpawnRequest{Key: jkey(n), PendingBinding: [16]byte{n}, WorkSession: [16]byte{n}, Group: []byte("elsewhere"), ExecutorSchema: 1}
}

// journalWith writes a journal holding two completed keys (1 and 2) and
// returns its path and bytes.
func journalWith(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	o, err := New(Config{Journal: path, Fingerprint: jfp})
	if err != nil {
		t.Fatal(err)
	}
	for n := byte(1); n <= 2; n++ {
		if r, err := o.Spawn(context.Background(), rejectedSpawn(n)); err != nil || !r.Rejected {
			t.Fatalf("Spawn: %+v, %v", r, err)
		}
	}
	o.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// recordBounds returns the offsets at which each record starts, and the end.
func recordBounds(b []byte) []int {
	off := []int{len(journalMagic)}
	for o := off[0]; o < len(b); {
		o += 8 + int(binary.BigEndian.Uint32(b[o:]))
		off = append(off, o)
	}
	return off
}

// state reopens the journal image b and reports, per key 1 and 2, "done",
// "unprovable" or "unknown".
func state(t *testing.T, path string, b []byte) ([2]string, error) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := New(Config{Journal: path, Fingerprint: jfp})
	if err != nil {
		return [2]string{}, err
	}
	defer o.Close()
	var s [2]string
	for i := range s {
		_, err := o.Outcome(context.Background(), jkey(byte(i+1)))
		switch {
		case err == nil:
			s[i] = "done"
		case errors.Is(err, coordserver.ErrOutcomeUnprovable):
			s[i] = "unprovable"
		case errors.Is(err, coordserver.ErrEffectUnknown):
			s[i] = "unknown"
		default:
			t.Fatalf("Outcome: %v", err)
		}
	}
	return s, nil
}

// A torn tail — the last record cut at any byte, or its CRC wrong, or
// zeros after the last good record — is truncated; what it held is as if
// never written: a torn intent leaves the key unknown, a torn result
// leaves it unprovable. The truncated journal then takes new records.
func TestJournalTornTail(t *testing.T) {
	path, img := journalWith(t)
	bounds := recordBounds(img)
	if len(bounds) != 5 {
		t.Fatalf("%d records, want 4", len(bounds)-1)
	}
	lastIntent, lastResult := bounds[2], bounds[3]
	for cut := lastIntent; cut < len(img); cut++ {
		want := [2]string{"done", "unknown"}
		if cut >= lastResult {
			want[1] = "unprovable"
		}
		got, err := state(t, path, img[:cut])
		if err != nil || got != want {
			t.Fatalf("cut at %d: %v, %v; want %v", cut, got, err, want)
		}
	}
	bad := append([]byte(nil), img...)
	bad[len(bad)-1] ^= 1
	if got, err := state(t, path, bad); err != nil || got != [2]string{"done", "unprovable"} {
		t.Errorf("bad CRC of the last record: %v, %v", got, err)
	}
	zeros := append(append([]byte(nil), img[:lastResult]...), make([]byte, 300)...)
	if got, err := state(t, path, zeros); err != nil || got != [2]string{"done", "unprovable"} {
		t.Errorf("zero tail: %v, %v", got, err)
	}
	// After a truncation the journal appends cleanly.
	if _, err := state(t, path, img[:lastResult+3]); err != nil {
		t.Fatal(err)
	}
	o, err := New(Config{Journal: path, Fingerprint: jfp})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := o.Spawn(context.Background(), rejectedSpawn(3)); err != nil || !r.Rejected {
		t.Fatalf("Spawn after truncation: %+v, %v", r, err)
	}
	o.Close()
	o, err = New(Config{Journal: path, Fingerprint: jfp})
	if err != nil {
		t.Fatalf("reopen after append: %v", err)
	}
	defer o.Close()
	if _, err := o.Outcome(context.Background(), jkey(3)); err != nil {
		t.Errorf("key 3 after reopen: %v", err)
	}
	if _, err := o.Outcome(context.Background(), jkey(2)); !errors.Is(err, coordserver.ErrOutcomeUnprovable) {
		t.Errorf("key 2 after reopen: %v", err)
	}
}

// reseal fixes the CRC of the record at off after its body was edited.
func reseal(b []byte, off int) {
	n := binary.BigEndian.Uint32(b[off:])
	binary.BigEndian.PutUint32(b[off+4:], crc32.Checksum(b[off+8:off+8+int(n)], crcTable))
}

// Anything but a torn tail is corruption: New refuses to open.
func TestJournalCorrupt(t *testing.T) {
	path, img := journalWith(t)
	bounds := recordBounds(img)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), img...)
		f(b)
		return b
	}
	cases := map[string][]byte{
		"bad header":          edit(func(b []byte) { b[0] = 'X' }),
		"mid-file bad CRC":    edit(func(b []byte) { b[bounds[1]+8] ^= 1 }),
		"mid-file bad length": edit(func(b []byte) { binary.BigEndian.PutUint32(b[bounds[1]:], maxRecordBytes+1) }),
		"mid-file zero length": edit(func(b []byte) {
			binary.BigEndian.PutUint32(b[bounds[1]:], 0)
		}),
		"unknown record type": edit(func(b []byte) { b[bounds[1]+8] = 9; reseal(b, bounds[1]) }),
		"unknown effect kind": edit(func(b []byte) { b[bounds[0]+8+1+16+32] = 9; reseal(b, bounds[0]) }),
		"result without intent": func() []byte {
			b := append([]byte(nil), img[:bounds[0]]...)
			return append(b, img[bounds[1]:bounds[2]]...)
		}(),
		"intent twice": func() []byte {
			b := append([]byte(nil), img[:bounds[1]]...)
			return append(b, img[bounds[0]:bounds[1]]...)
		}(),
		"result with another digest": edit(func(b []byte) { b[bounds[1]+8+1+16] ^= 1; reseal(b, bounds[1]) }),
		"spawn success without a resource id": edit(func(b []byte) {
			b[bounds[1]+8+1+16+32+1] = 0 // the rejected flag
			reseal(b, bounds[1])
		}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := state(t, path, b); !errors.Is(err, ErrJournalCorrupt) {
				t.Errorf("New: %v, want ErrJournalCorrupt", err)
			}
		})
	}
}

// One owner at a time holds a journal.
func TestJournalLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	o, err := New(Config{Journal: path, Fingerprint: jfp})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := New(Config{Journal: path, Fingerprint: jfp}); !errors.Is(err, ErrJournalLocked) {
		t.Errorf("second New: %v, want ErrJournalLocked", err)
	}
}

// A full journal refuses new keys without recording them, and still
// answers the keys it holds.
func TestJournalFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	o, err := New(Config{Journal: path, Fingerprint: jfp, MaxJournalBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.Spawn(context.Background(), rejectedSpawn(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Spawn(context.Background(), rejectedSpawn(2)); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("Spawn into a full journal: %v", err)
	}
	if _, err := o.Outcome(context.Background(), jkey(2)); !errors.Is(err, coordserver.ErrEffectUnknown) {
		t.Errorf("the refused key was recorded: %v", err)
	}
	if r, err := o.Spawn(context.Background(), rejectedSpawn(1)); err != nil || !r.Rejected {
		t.Errorf("duplicate in a full journal: %+v, %v", r, err)
	}
}

// Record images round-trip, and the decoder refuses out-of-bound fields.
func TestRecordBounds(t *testing.T) {
	r := record{typ: recResult, id: [16]byte{1}, digest: [32]byte{2}, kind: coordwire.EffectSpawn, res: stored{resource: make([]byte, coordwire.MaxResourceIDBytes)}}
	b := r.appendBody(nil)
	if len(b) > maxRecordBytes {
		t.Fatalf("largest record %d > maxRecordBytes %d", len(b), maxRecordBytes)
	}
	var back record
	if err := back.decodeBody(b); err != nil || len(back.res.resource) != coordwire.MaxResourceIDBytes {
		t.Fatalf("round trip: %v", err)
	}
	r.res.resource = make([]byte, coordwire.MaxResourceIDBytes+1)
	if err := back.decodeBody(r.appendBody(nil)); err == nil {
		t.Error("resource id over 4 KiB decoded")
	}
	r.res = stored{rejected: true, reason: string(make([]byte, MaxReasonBytes+1))}
	if err := back.decodeBody(r.appendBody(nil)); err == nil {
		t.Error("reason over the bound decoded")
	}
	if err := back.decodeBody(append(record{typ: recIntent, id: [16]byte{1}, kind: coordwire.EffectKill}.appendBodyV(), 0)); err == nil {
		t.Error("trailing byte decoded")
	}
}

func (r record) appendBodyV() []byte { return r.appendBody(nil) }
