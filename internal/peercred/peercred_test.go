//go:build linux || darwin

package peercred_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/internal/peercred"
)

// Both ends of a real Unix socket see this process's uid, gid and pid.
func TestGetOverRealSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan *net.UnixConn, 1)
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	cli, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv := <-acc
	if srv == nil {
		t.Fatal("accept failed")
	}
	defer srv.Close()
	for _, c := range []*net.UnixConn{srv, cli} {
		got, err := peercred.Get(c)
		if err != nil {
			t.Fatal(err)
		}
		want := peercred.Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), PID: int32(os.Getpid())}
		if got != want {
			t.Fatalf("Get = %+v, want %+v", got, want)
		}
	}
}

func TestGetNil(t *testing.T) {
	if _, err := peercred.Get(nil); err != peercred.ErrUnavailable {
		t.Fatalf("Get(nil) = %v, want ErrUnavailable", err)
	}
}
