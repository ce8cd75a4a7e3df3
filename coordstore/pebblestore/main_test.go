package pebblestore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

const (
	envLockChild  = "PHUX_PEBBLESTORE_LOCK_CHILD"
	envCrashChild = "PHUX_PEBBLESTORE_CRASH_CHILD"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envLockChild); dir != "" {
		lockChild(dir)
		return
	}
	if dir := os.Getenv(envCrashChild); dir != "" {
		storetest.CrashChild(dir, crashEngine)
		return
	}
	os.Exit(m.Run())
}

// lockChild tries to open the store and prints the error class.
func lockChild(dir string) {
	start := time.Now()
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err == nil {
		s.Close()
	}
	fmt.Printf("class=%s elapsed=%d\n", storetest.ErrClass(err), time.Since(start).Milliseconds())
	os.Exit(0)
}

func tempPath(t *testing.T) string { return filepath.Join(t.TempDir(), "coord") }
