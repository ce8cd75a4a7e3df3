//go:build unix

package keystore_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/phuxcoord/coord/keystore"
)

// A pipe whose writer never closes (half a seed, then silence) does not
// hang LoadWorkloadKeyFD: it fails after the deadline, matching
// os.ErrDeadlineExceeded, and the descriptor is closed.
func TestLoadWorkloadKeyFDPipeIsBoundedInTime(t *testing.T) {
	defer keystore.SetKeyFDTimeout(200 * time.Millisecond)()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	fd, err := dupFD(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := keystore.LoadWorkloadKeyFD(fd); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadWorkloadKeyFD hangs on a pipe whose writer stays open")
	}
	// The read end is closed: the writer now gets EPIPE.
	if _, err := w.Write([]byte{1}); err == nil {
		t.Error("the key descriptor was left open")
	}
}
