package witness_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/witness"
)

// peerEnv selects the test binary's peer mode (peerMain): it then runs
// first-use ACTIVATEs against a witness instead of the tests, so that a
// test can run a peer under another uid.
const peerEnv = "PHUX_WITNESS_TEST_PEER"

// peerMain, when peerEnv is "activate ADDR PINHEX N", sends N ACTIVATEs,
// each for a fresh CoordinatorId with a fresh key on its own connection,
// prints "granted G busy B other O" and reports true (the caller exits).
func peerMain() bool {
	spec := os.Getenv(peerEnv)
	if spec == "" {
		return false
	}
	var addr, pinHex string
	var n int
	if _, err := fmt.Sscanf(spec, "activate %s %s %d", &addr, &pinHex, &n); err != nil {
		fmt.Println("bad peer spec")
		os.Exit(2)
	}
	pin, _ := hex.DecodeString(pinHex)
	var granted, busy, other int
	for range n {
		c, err := witness.NewClient(witness.ClientConfig{Address: addr, WitnessPublicKey: pin,
			CoordinatorID: coordwire.NewCoordinatorID(), Authority: newSigner(nilTB{})})
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		_, err = c.Activate(context.Background(), 1, coordwire.NewIncarnationID())
		c.Close()
		switch {
		case err == nil:
			granted++
		case errors.Is(err, witness.Busy):
			busy++
		default:
			other++
		}
	}
	fmt.Printf("granted %d busy %d other %d\n", granted, busy, other)
	return true
}

// runPeerAs runs the test binary's peer mode under uid (and gid) and
// returns its counts. The binary is copied where that uid can run it.
func runPeerAs(t *testing.T, uid int, addr string, pin []byte, n int) (granted, busy, other int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := sockDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "peer")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"=activate "+addr+" "+hex.EncodeToString(pin)+" "+strconv.Itoa(n))
	childproc.DieWithParent(cmd)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("peer as uid %d: %v\n%s", uid, err, out)
	}
	if _, err := fmt.Sscanf(string(out), "granted %d busy %d other %d", &granted, &busy, &other); err != nil {
		t.Fatalf("peer output %q: %v", out, err)
	}
	return granted, busy, other
}
