package adminsock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/adminsock"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/memstore"
)

// WriteFile's contract: a verified stream lands at the path (0600,
// byte-identical, no temporary file left); an existing file is never
// replaced; a leftover PATH.partial is named; a stream that fails or
// does not verify leaves nothing; a server's error line stays a
// *RefusedError.
func TestWriteFile(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	defer st.Close()
	if _, err := coordserver.InitStore(ctx, st); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	want, err := backup.Write(ctx, st, &stream, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromStream := func(b []byte) func(io.Writer) (backup.Summary, error) {
		return func(dst io.Writer) (backup.Summary, error) { return adminsock.Copy(bytes.NewReader(b), dst) }
	}
	dir := t.TempDir()
	nothingLeft := func(t *testing.T, path string) {
		t.Helper()
		for _, p := range []string{path, path + ".partial"} {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s left behind (%v)", filepath.Base(p), err)
			}
		}
	}

	t.Run("written", func(t *testing.T) {
		path := filepath.Join(dir, "ok.bak")
		sum, err := adminsock.WriteFile(path, fromStream(stream.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if sum.SHA256 != want.SHA256 {
			t.Fatalf("summary %x, want %x", sum.SHA256, want.SHA256)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, stream.Bytes()) {
			t.Fatalf("file holds %d bytes (%v), want the %d of the stream", len(got), err, stream.Len())
		}
		if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
		if _, err := os.Lstat(path + ".partial"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("temporary file left (%v)", err)
		}

		// The same path again: refused, the file untouched.
		_, err = adminsock.WriteFile(path, fromStream(stream.Bytes()))
		var fe *adminsock.FileError
		if !errors.As(err, &fe) || fe.Op != "create" || fe.Path != path || !errors.Is(err, fs.ErrExist) {
			t.Fatalf("over an existing file: %v", err)
		}
		if again, _ := os.ReadFile(path); !bytes.Equal(again, got) {
			t.Fatal("existing file changed")
		}
	})
	t.Run("leftover_partial", func(t *testing.T) {
		path := filepath.Join(dir, "left.bak")
		if err := os.WriteFile(path+".partial", []byte("cut short"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := adminsock.WriteFile(path, fromStream(stream.Bytes()))
		var fe *adminsock.FileError
		if !errors.As(err, &fe) || fe.Op != "create" || fe.Path != path+".partial" || !errors.Is(err, fs.ErrExist) {
			t.Fatalf("with a leftover partial file: %v", err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal("backup installed beside a leftover partial file")
		}
	})
	t.Run("truncated_stream", func(t *testing.T) {
		path := filepath.Join(dir, "short.bak")
		_, err := adminsock.WriteFile(path, fromStream(stream.Bytes()[:stream.Len()-1]))
		if !errors.Is(err, backup.ErrFormat) {
			t.Fatalf("truncated stream: %v", err)
		}
		nothingLeft(t, path)
	})
	t.Run("corrupt_stream", func(t *testing.T) {
		path := filepath.Join(dir, "flip.bak")
		b := bytes.Clone(stream.Bytes())
		b[len(b)/2] ^= 1
		if _, err := adminsock.WriteFile(path, fromStream(b)); err == nil {
			t.Fatal("a flipped byte verified")
		}
		nothingLeft(t, path)
	})
	t.Run("refused", func(t *testing.T) {
		path := filepath.Join(dir, "refused.bak")
		_, err := adminsock.WriteFile(path, fromStream([]byte("error: store busy\n")))
		var re *adminsock.RefusedError
		if !errors.As(err, &re) || re.Reason != "store busy" {
			t.Fatalf("error line: %v", err)
		}
		nothingLeft(t, path)
	})
	t.Run("reader_failure_kept", func(t *testing.T) {
		// A broken source is ErrFormat (truncated) and still the
		// source's own error underneath.
		path := filepath.Join(dir, "broken.bak")
		boom := errors.New("connection reset")
		src := io.MultiReader(bytes.NewReader(stream.Bytes()[:40]), errReader{boom})
		_, err := adminsock.WriteFile(path, func(dst io.Writer) (backup.Summary, error) { return adminsock.Copy(src, dst) })
		if !errors.Is(err, backup.ErrFormat) || !errors.Is(err, boom) {
			t.Fatalf("broken source: %v", err)
		}
		if strings.Contains(err.Error(), "partial") {
			t.Fatalf("error names the temporary file: %v", err)
		}
		nothingLeft(t, path)
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
