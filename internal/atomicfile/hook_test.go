//go:build unix

package atomicfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

var allStages = []atomicfile.Stage{atomicfile.StageTempWritten, atomicfile.StageTempSynced, atomicfile.StageRenamed}

// tempFiles lists the temporary files of target "f" in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".f.tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// dirNames lists every entry of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func readF(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := atomicfile.ReadFile(dir, "f", 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The hook sees the stages in order, and at each one the directory is in
// the state the stage documents.
func TestHookStagesInOrder(t *testing.T) {
	for _, useUpdate := range []bool{false, true} {
		t.Run(fmt.Sprintf("update=%v", useUpdate), func(t *testing.T) {
			dir := stateDir(t)
			old, newData := []byte("old content"), []byte("new content, longer")
			if err := atomicfile.WriteFile(dir, "f", old); err != nil {
				t.Fatal(err)
			}
			var got []atomicfile.Stage
			hook := func(s atomicfile.Stage) {
				got = append(got, s)
				temps := tempFiles(t, dir)
				wantContent, wantTemps := old, 1
				if s == atomicfile.StageRenamed {
					wantContent, wantTemps = newData, 0
				}
				if c := readF(t, dir); !bytes.Equal(c, wantContent) {
					t.Errorf("%s: content %q, want %q", s, c, wantContent)
				}
				if len(temps) != wantTemps {
					t.Errorf("%s: temporary files %v, want %d", s, temps, wantTemps)
				}
				if wantTemps == 1 {
					b, err := os.ReadFile(filepath.Join(dir, temps[0]))
					if err != nil || !bytes.Equal(b, newData) {
						t.Errorf("%s: temporary file holds %q, %v", s, b, err)
					}
				}
			}
			var err error
			if useUpdate {
				err = atomicfile.UpdateWithHook(dir, "f", 1024, func(o []byte, exists bool) ([]byte, error) {
					if !exists || !bytes.Equal(o, old) {
						t.Errorf("Update saw %q, %v", o, exists)
					}
					return newData, nil
				}, hook)
			} else {
				err = atomicfile.WriteFileWithHook(dir, "f", newData, hook)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(allStages, got); diff != "" {
				t.Fatalf("stages (-want +got):\n%s", diff)
			}
			if c := readF(t, dir); !bytes.Equal(c, newData) {
				t.Fatalf("content %q", c)
			}
		})
	}
}

// A failing update function writes nothing and calls no hook.
func TestHookNotCalledWhenUpdateAborts(t *testing.T) {
	dir := stateDir(t)
	errAbort := errors.New("abort")
	called := false
	err := atomicfile.UpdateWithHook(dir, "f", 1024, func([]byte, bool) ([]byte, error) { return nil, errAbort },
		func(atomicfile.Stage) { called = true })
	if !errors.Is(err, errAbort) || called {
		t.Fatalf("err %v, hook called %v", err, called)
	}
}

type crash struct{ stage atomicfile.Stage }

// countFDs returns the number of open descriptors, or -1 where /proc is
// not available.
func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// A hook that panics at a stage (standing for a crash there) leaves the
// old content before the rename and the new one after it, never a torn
// file; it leaks no descriptor and no lock, and the next write removes
// the temporary file the "crash" left.
func TestHookPanicAtEachStage(t *testing.T) {
	for _, stage := range allStages {
		t.Run(string(stage), func(t *testing.T) {
			dir := stateDir(t)
			old := bytes.Repeat([]byte("o"), 5000)
			newData := bytes.Repeat([]byte("N"), 70000)
			if err := atomicfile.WriteFile(dir, "f", old); err != nil {
				t.Fatal(err)
			}
			fds := countFDs()
			func() {
				defer func() {
					if r := recover(); r != (crash{stage}) {
						t.Fatalf("recovered %v", r)
					}
				}()
				atomicfile.WriteFileWithHook(dir, "f", newData, func(s atomicfile.Stage) {
					if s == stage {
						panic(crash{stage})
					}
				})
				t.Fatal("hook did not panic")
			}()
			if n := countFDs(); n != fds {
				t.Errorf("descriptors: %d before, %d after", fds, n)
			}
			want, wantTemps := old, 1
			if stage == atomicfile.StageRenamed {
				want, wantTemps = newData, 0
			}
			if c := readF(t, dir); !bytes.Equal(c, want) {
				t.Fatalf("content: %d bytes %q…", len(c), c[:1])
			}
			if temps := tempFiles(t, dir); len(temps) != wantTemps {
				t.Fatalf("temporary files %v, want %d", temps, wantTemps)
			}
			// The lock was released (a leaked flock would block this).
			done := make(chan error, 1)
			go func() { done <- atomicfile.WriteFile(dir, "f", []byte("next")) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("lock still held after the panic")
			}
			if diff := cmp.Diff([]string{".f.lock", "f"}, dirNames(t, dir)); diff != "" {
				t.Fatalf("directory after the next write (-want +got):\n%s", diff)
			}
		})
	}
}

// Only this package's own temporary files of the very name written are
// removed as stale.
func TestStaleTempCleanupIsExact(t *testing.T) {
	dir := stateDir(t)
	keep := []string{
		".f.tmp-x.tmp-0123456789abcdef", // a temporary file of "f.tmp-x"
		".f.tmp-0123456789ABCDEF",       // not lower-case hex
		".f.tmp-0123456789abcde",        // too short
		".f.tmp-0123456789abcdef0",      // too long
		".g.tmp-0123456789abcdef",       // another name
		"f.tmp-0123456789abcdef",        // not hidden
	}
	stale := ".f.tmp-0123456789abcdef"
	for _, n := range append(slices.Clone(keep), stale) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := atomicfile.WriteFile(dir, "f", []byte("v")); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(keep), ".f.lock", "f")
	slices.Sort(want)
	if diff := cmp.Diff(want, dirNames(t, dir)); diff != "" {
		t.Fatalf("directory (-want +got):\n%s", diff)
	}
	// CreateFile cleans too.
	if err := os.WriteFile(filepath.Join(dir, ".h.tmp-0123456789abcdef"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.CreateFile(dir, "h", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".h.tmp-0123456789abcdef")); err == nil {
		t.Fatal("CreateFile left the stale temporary file")
	}
}

// killEnv makes the test binary a child that writes and is killed.
const killEnv = "ATOMICFILE_TEST_KILL"

// TestKillHelper is the child of TestKilledMidWrite: it writes the new
// content to dir/f and SIGKILLs itself at the requested stage.
func TestKillHelper(t *testing.T) {
	spec := os.Getenv(killEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	stage, dir, _ := strings.Cut(spec, ":")
	data := bytes.Repeat([]byte("N"), 1<<20)
	atomicfile.WriteFileWithHook(dir, "f", data, func(s atomicfile.Stage) {
		if string(s) == stage {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	})
	os.Exit(3) // not killed: the parent reports it
}

// A real process killed with SIGKILL at each stage of a write leaves the
// old or the new content, never a torn one, and the next write cleans up.
func TestKilledMidWrite(t *testing.T) {
	rounds := 2
	if os.Getenv("PHUX_LONG") != "" {
		rounds = 20
	}
	for _, stage := range allStages {
		t.Run(string(stage), func(t *testing.T) {
			dir := stateDir(t)
			old := bytes.Repeat([]byte("o"), 3000)
			newData := bytes.Repeat([]byte("N"), 1<<20)
			for r := 0; r < rounds; r++ {
				if err := atomicfile.WriteFile(dir, "f", old); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$")
				cmd.Env = append(os.Environ(), killEnv+"="+string(stage)+":"+dir)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("child: %v\n%s", err, out)
				}
				want, wantTemps := old, 1
				if stage == atomicfile.StageRenamed {
					want, wantTemps = newData, 0
				}
				if c := readF(t, dir); !bytes.Equal(c, want) {
					t.Fatalf("round %d: content of %d bytes, want %d", r, len(c), len(want))
				}
				if temps := tempFiles(t, dir); len(temps) != wantTemps {
					t.Fatalf("round %d: temporary files %v, want %d", r, temps, wantTemps)
				}
			}
			if err := atomicfile.WriteFile(dir, "f", []byte("next")); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{".f.lock", "f"}, dirNames(t, dir)); diff != "" {
				t.Fatalf("directory after the next write (-want +got):\n%s", diff)
			}
		})
	}
}

// A crash test kills the process at one stage of one write.
func ExampleWriteFileWithHook() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o700)
	var stages []atomicfile.Stage
	err := atomicfile.WriteFileWithHook(dir, "state", []byte("v1"), func(s atomicfile.Stage) {
		stages = append(stages, s) // a crash test would SIGKILL itself here
	})
	fmt.Println(err, stages)
	// Output: <nil> [temp-written temp-synced renamed]
}
