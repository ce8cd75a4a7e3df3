package adminsock_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/adminsock"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Over a real owner-only socket: a backup request gets a stream that
// verifies and restores to the same store; any other request gets one
// error line; after Close nothing is served.
func TestFetchBackup(t *testing.T) {
	dir, err := os.MkdirTemp("", "as")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	ctx := context.Background()
	if _, err := coordserver.InitStore(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{1}}, Revision: 1, Schema: 1, Payload: []byte("doc")})
	}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.sock")
	l, err := coordserver.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	fp := [32]byte{7}
	s := adminsock.Serve(l, adminsock.Config{Store: st, AuthorityFingerprint: fp})

	var buf bytes.Buffer
	sum, err := adminsock.FetchBackup(ctx, path, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts.Objects != 1 || sum.Header.AuthorityFingerprint != fp || sum.Bytes != int64(buf.Len()) {
		t.Fatalf("summary %+v", sum)
	}
	to := memstore.New(memstore.Config{})
	defer to.Close()
	if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to); err != nil {
		t.Fatal(err)
	}
	m1, _ := st.Meta(ctx)
	m2, _ := to.Meta(ctx)
	if diff := cmp.Diff(m1, m2); diff != "" {
		t.Fatalf("restored meta:\n%s", diff)
	}

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "dump\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.HasPrefix(line, "error: unknown admin request") {
		t.Fatalf("unknown request answered %q", line)
	}
	_, err = adminsock.Copy(strings.NewReader("error: busy\n"), io.Discard)
	var re *adminsock.RefusedError
	if !errors.Is(err, adminsock.ErrRefused) || !errors.As(err, &re) || re.Reason != "busy" {
		t.Fatalf("error line: %v", err)
	}

	s.Close()
	if _, err := adminsock.FetchBackup(ctx, path, io.Discard); err == nil {
		t.Fatal("served after Close")
	}
}
