//go:build linux

package childproc_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

// A child started with DieWithParent dies when its parent does: the test
// starts an intermediate shell that starts a long sleep with the
// parent-death signal set, kills the shell, and the sleep is gone.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("PHUX_CHILDPROC_CHILD") == "1" {
		cmd := exec.Command("sleep", "60")
		childproc.DieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		cmd.Wait()
		os.Exit(0)
	}
	mid := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	mid.Env = append(os.Environ(), "PHUX_CHILDPROC_CHILD=1")
	out, err := mid.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := mid.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("no child pid: %q", buf[:n])
	}
	mid.Process.Kill()
	mid.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the grandchild outlived its parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
