//go:build unix

package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/keystore"
)

const tick = 20 * time.Millisecond

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startWatcher(t *testing.T, dir string) (*keystore.Watcher, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	w, err := keystore.NewWatcher(context.Background(), dir, keystore.WatcherConfig{
		Interval: tick,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, logs
}

// waitNext waits (bounded) for the generation after gen.
func waitNext(t *testing.T, w *keystore.Watcher, gen uint64) *keystore.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 250*tick)
	defer cancel()
	r, err := w.Wait(ctx, gen)
	if err != nil {
		t.Fatalf("no generation after %d: %v", gen, err)
	}
	return r
}

// waitFor waits (bounded) for a generation after gen that satisfies ok;
// in-place writes are not atomic, so intermediate states may be published
// first.
func waitFor(t *testing.T, w *keystore.Watcher, gen uint64, ok func(*keystore.Registry) bool) *keystore.Registry {
	t.Helper()
	for {
		r := waitNext(t, w, gen)
		if ok(r) {
			return r
		}
		gen = r.Generation()
	}
}

// assertNoChange checks that no new generation appears for a few intervals.
func assertNoChange(t *testing.T, w *keystore.Watcher, gen uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*tick)
	defer cancel()
	if r, err := w.Wait(ctx, gen); err == nil {
		t.Fatalf("unexpected generation %d (err %v)", r.Generation(), r.Err())
	}
}

func writeRaw(t *testing.T, dir string, data string) {
	t.Helper()
	// Write in place (same inode), keeping mode 0600.
	f, err := os.OpenFile(filepath.Join(dir, keystore.RegistryFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherInitialAndRename(t *testing.T) {
	dir := stateDir(t)
	p1 := newPub(t)
	exp := time.Now().Add(time.Hour)
	e1, err := keystore.AddKey(dir, p1, coordwire.ScopeWorkRead, exp)
	if err != nil {
		t.Fatal(err)
	}
	w, logs := startWatcher(t, dir)
	r := w.Current()
	if r.Generation() != 1 || r.Err() != nil || r.Len() != 1 {
		t.Fatalf("initial: gen %d err %v len %d", r.Generation(), r.Err(), r.Len())
	}
	if r0, err := w.Wait(context.Background(), 0); err != nil || r0 != r {
		t.Fatalf("Wait(0) = %v, %v", r0, err)
	}
	assertNoChange(t, w, 1)

	// AddKey replaces the file by rename.
	p2 := newPub(t)
	if _, err := keystore.AddKey(dir, p2, coordwire.ScopeAdmin, exp); err != nil {
		t.Fatal(err)
	}
	r = waitNext(t, w, 1)
	if r.Generation() != 2 || r.Len() != 2 || r.Err() != nil {
		t.Fatalf("after add: gen %d len %d err %v", r.Generation(), r.Len(), r.Err())
	}
	if _, ok := r.Lookup(edstrict.KeyID(p2)); !ok {
		t.Fatal("new key not visible")
	}

	// Revocation is observed within a few intervals.
	start := time.Now()
	if _, err := keystore.RevokeKey(dir, e1.KeyID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	r = waitNext(t, w, 2)
	e, ok := r.Lookup(e1.KeyID)
	if !ok || e.Usable(time.Now()) {
		t.Fatalf("revocation not observed: %+v", e)
	}
	// A few intervals normally; the bound is loose for loaded CI machines
	// running with -race.
	d := time.Since(start)
	t.Logf("revocation observed after %v (interval %v)", d, tick)
	if d > 100*tick {
		t.Errorf("revocation observed after %v (interval %v)", d, tick)
	}
	if !strings.Contains(logs.String(), "generation=3") {
		t.Errorf("no log line for generation 3:\n%s", logs)
	}
}

func TestWatcherSameSizeInPlaceEdit(t *testing.T) {
	dir := stateDir(t)
	p1 := newPub(t)
	if _, err := keystore.AddKey(dir, p1, coordwire.ScopeWorkRead, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, keystore.RegistryFile)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st0, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := startWatcher(t, dir)
	if w.Current().Len() != 1 {
		t.Fatal("initial load")
	}
	// Same length ceiling ("work_read" → "signal_ack" differ in length, so
	// change the expiry's last digit instead), same inode, and the mtime
	// put back: only the content hash can notice.
	edited := []byte(string(old))
	i := bytes.LastIndex(edited, []byte("Z -"))
	if edited[i-1] == '9' {
		edited[i-1] = '8'
	} else {
		edited[i-1]++
	}
	writeRaw(t, dir, string(edited))
	if err := os.Chtimes(path, st0.ModTime(), st0.ModTime()); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(path)
	if st1.Size() != st0.Size() || !st1.ModTime().Equal(st0.ModTime()) || !os.SameFile(st0, st1) {
		t.Fatal("test setup: edit changed size, mtime or inode")
	}
	e0, _ := keystore.ParseRegistry(old)
	before, _ := e0.Lookup(edstrict.KeyID(p1))
	waitFor(t, w, 1, func(r *keystore.Registry) bool {
		e, ok := r.Lookup(edstrict.KeyID(p1))
		return r.Err() == nil && ok && !e.Expires.Equal(before.Expires)
	})
}

func TestWatcherFailsClosed(t *testing.T) {
	dir := stateDir(t)
	p1 := newPub(t)
	if _, err := keystore.AddKey(dir, p1, coordwire.ScopeWorkRead, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w, logs := startWatcher(t, dir)
	path := filepath.Join(dir, keystore.RegistryFile)
	good, _ := os.ReadFile(path)

	// Corrupt: one bad record appended → empty, new generation.
	writeRaw(t, dir, string(good)+"key broken\n")
	r := waitFor(t, w, 1, func(r *keystore.Registry) bool {
		var re *keystore.RegistryError
		return errors.As(r.Err(), &re) && re.Line == 3
	})
	if r.Len() != 0 || !errors.Is(r.Err(), keystore.ErrMalformedRegistry) {
		t.Fatalf("corrupt: len %d err %v", r.Len(), r.Err())
	}
	if _, ok := r.Lookup(edstrict.KeyID(p1)); ok {
		t.Fatal("kept the last good entry")
	}
	// Staying corrupt publishes nothing new.
	assertNoChange(t, w, r.Generation())

	// Repaired.
	writeRaw(t, dir, string(good))
	r = waitFor(t, w, r.Generation(), func(r *keystore.Registry) bool { return r.Err() == nil })
	if r.Len() != 1 {
		t.Fatalf("repaired: len %d", r.Len())
	}

	// Insecure mode → empty.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r = waitNext(t, w, r.Generation())
	if r.Len() != 0 || !errors.Is(r.Err(), keystore.ErrInsecurePermissions) {
		t.Fatalf("insecure: len %d err %v", r.Len(), r.Err())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r = waitNext(t, w, r.Generation())
	if r.Len() != 1 {
		t.Fatalf("restored: len %d err %v", r.Len(), r.Err())
	}

	// Removed → empty.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r = waitNext(t, w, r.Generation())
	if r.Len() != 0 || !errors.Is(r.Err(), fs.ErrNotExist) {
		t.Fatalf("removed: len %d err %v", r.Len(), r.Err())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("failed loads not logged:\n%s", logs)
	}
}

func TestWatcherMissingAtStart(t *testing.T) {
	dir := stateDir(t)
	w, _ := startWatcher(t, dir)
	r := w.Current()
	if r.Generation() != 1 || r.Len() != 0 || !errors.Is(r.Err(), fs.ErrNotExist) {
		t.Fatalf("gen %d len %d err %v", r.Generation(), r.Len(), r.Err())
	}
	if _, err := keystore.AddKey(dir, newPub(t), coordwire.ScopeWorkRead, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The directory appears before the file, so an intermediate (still
	// empty) generation with a different error may come first.
	waitFor(t, w, 1, func(r *keystore.Registry) bool { return r.Len() == 1 && r.Err() == nil })
}

func TestWatcherWaitAndClose(t *testing.T) {
	dir := stateDir(t)
	w, _ := startWatcher(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Wait(context.Background(), 1)
		done <- err
	}()
	time.Sleep(2 * tick)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, keystore.ErrWatcherClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Wait not released by Close")
	}
	if err := w.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if w.Current() == nil {
		t.Fatal("Current nil after Close")
	}
	if _, err := keystore.NewWatcher(context.Background(), dir, keystore.WatcherConfig{Interval: -1}); err == nil {
		t.Fatal("negative interval accepted")
	}
}

func TestWatcherStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := keystore.NewWatcher(ctx, stateDir(t), keystore.WatcherConfig{Interval: tick})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
	defer wcancel()
	if _, err := w.Wait(wctx, 1); !errors.Is(err, keystore.ErrWatcherClosed) {
		t.Fatalf("Wait after ctx cancel: %v", err)
	}
	w.Close()
}
