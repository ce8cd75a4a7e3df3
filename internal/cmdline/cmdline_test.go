package cmdline

import (
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

func testFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("tool sub", flag.ContinueOnError)
	fs.String("state-dir", "", "state directory")
	fs.Int("count", 0, "how many")
	fs.Bool("force", false, "do it")
	fs.Duration("wait", 0, "how long")
	return fs
}

// Every refusal of Parse is a *UsageError naming the flag (or "flag" and
// a position), and holds no part of the text given.
func TestParseRefusalsNameTheFlag(t *testing.T) {
	s := hex.EncodeToString(leakcheck.Secret(16))
	for _, c := range []struct {
		name       string
		args       []string
		interleave bool
		field      string
	}{
		{"unknown flag", []string{"--" + s}, false, "flag"},
		{"unknown single-dash flag", []string{"-" + s}, false, "flag"},
		{"unknown flag with value", []string{"--" + s + "=" + s}, false, "flag"},
		{"triple dash", []string{"---state-dir", s}, false, "flag"},
		{"empty name", []string{"--=" + s}, false, "flag"},
		{"unknown after a positional, interleaved", []string{"x", "--" + s}, true, "flag"},
		{"missing value", []string{"--state-dir"}, false, "--state-dir"},
		{"int", []string{"--count", s}, false, "--count"},
		{"int with =", []string{"-count=" + s}, false, "--count"},
		{"bool with =", []string{"--force=" + s}, false, "--force"},
		{"duration", []string{"--wait", s}, true, "--wait"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(testFlags(), c.args, c.interleave)
			var ue *UsageError
			if !errors.As(err, &ue) || ue.Field != c.field {
				t.Fatalf("got %v, want a refusal of %s", err, c.field)
			}
			if strings.Contains(ue.Error(), s) {
				t.Fatalf("the refusal repeats the value: %q", ue.Error())
			}
		})
	}
}

// Parse returns the positional arguments: without interleave the first
// one ends the flags, with interleave only "--" does; -h and --help ask
// for help.
func TestParsePositionals(t *testing.T) {
	for _, c := range []struct {
		args       []string
		interleave bool
		pos        []string
	}{
		{[]string{"--state-dir", "d", "a", "--count", "1"}, false, []string{"a", "--count", "1"}},
		{[]string{"--state-dir", "d", "a", "--count", "1", "b"}, true, []string{"a", "b"}},
		{[]string{"--force", "a", "--", "--count"}, true, []string{"a", "--count"}},
		{[]string{"-", "--force"}, true, []string{"-"}},
		{nil, true, nil},
	} {
		pos, err := Parse(testFlags(), c.args, c.interleave)
		if err != nil || !cmp.Equal(pos, c.pos) {
			t.Errorf("%q: got %q %v, want %q", c.args, pos, err, c.pos)
		}
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		if _, err := Parse(testFlags(), []string{"--force", h}, true); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %v", h, err)
		}
	}
	fs := testFlags()
	if _, err := Parse(fs, []string{"--count=3", "--wait", "2s", "--force"}, false); err != nil {
		t.Fatal(err)
	}
	if fs.Lookup("count").Value.String() != "3" || fs.Lookup("wait").Value.(flag.Getter).Get() != 2*time.Second {
		t.Fatal("values not set")
	}
	if _, ok := fs.Lookup("count").Value.(recorded); ok {
		t.Fatal("the recording wrapper stays in place after Parse")
	}
}

// Cause keeps an error's words and drops every path, address and host
// name, whether the error is wrapped, joined or alone.
func TestCauseDropsPathsAndAddresses(t *testing.T) {
	s := hex.EncodeToString(leakcheck.Secret(16))
	dir := t.TempDir()
	missing := filepath.Join(dir, s, "x.sock")
	_, openErr := os.Open(filepath.Join(dir, s))
	_, dialErr := net.Dial("unix", missing)
	_, listenErr := net.Listen("tcp", s)
	renameErr := os.Rename(filepath.Join(dir, s), filepath.Join(dir, s+"2"))
	for _, c := range []struct {
		name  string
		err   error
		known []string
		want  string
	}{
		{"path", openErr, nil, "open: no such file or directory"},
		{"path with a known name", &fs.PathError{Op: "open", Path: filepath.Join(dir, s, "store.bolt"), Err: fs.ErrPermission}, []string{"store.bolt"},
			"open store.bolt: permission denied"},
		{"wrapped path", fmt.Errorf("keystore: authority key: %w", openErr), nil, "keystore: authority key: open: no such file or directory"},
		{"dial", dialErr, nil, "dial unix: connect: no such file or directory"},
		{"listen address", listenErr, nil, "listen tcp: address: missing port in address"},
		{"link", renameErr, nil, "rename: no such file or directory"},
		{"dns", &net.DNSError{Err: "no such host", Name: s}, nil, "lookup: no such host"},
		{"url", &url.Error{Op: "Get", URL: "http://" + s, Err: syscall.ECONNREFUSED}, nil, "Get: connection refused"},
		{"hostname", fmt.Errorf("tls: %w", x509.HostnameError{Host: s, Certificate: &x509.Certificate{}}), nil,
			"tls: x509: the certificate is not valid for the name asked for"},
		{"joined", errors.Join(errors.New("first"), openErr), nil, "first\nopen: no such file or directory"},
		{"two wrapped", fmt.Errorf("a: %w; b: %w", openErr, dialErr), nil, "a: open: no such file or directory; b: dial unix: connect: no such file or directory"},
		{"nil", nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Cause(c.err, c.known...)
			if got != c.want {
				t.Errorf("Cause = %q, want %q", got, c.want)
			}
			if strings.Contains(got, s) || strings.Contains(got, dir) {
				t.Errorf("Cause keeps a path: %q", got)
			}
		})
	}
}

// Scrub removes every argument and every piece of one from a message,
// but not the program's own words nor short pieces.
func TestScrub(t *testing.T) {
	s := hex.EncodeToString(leakcheck.Secret(16))
	args := []string{"--state-dir=/x/" + s + "/state", "--store", "postgres://" + s + "@db.example:5432/coord", "--max-count", "--" + s}
	msg := "open /x/" + s + "/state: no such file; user=" + s + " host=db.example; --max-count --state-dir; " + s
	got := Scrub(msg, args, "usage: tool --state-dir DIR\n  -max-count int\n")
	if want := "open <argument>: no such file; user=<argument> host=<argument>; --max-count --state-dir; <argument>"; got != want {
		t.Errorf("Scrub:\n got %q\nwant %q", got, want)
	}
}
