package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProfileAbsolute: login stores every path of a profile absolute,
// resolved from the directory it ran in, and keeps what has no directory
// as it is: an abstract socket ("unix:@name") and a tls: address. (An
// earlier version made "unix:@name" into "unix:$PWD/@name", a file path
// no coordinator listens on.)
func TestProfileAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, address, key, ca, wantAddress string }{
		{"relative socket", "unix:run/c.sock", "k/w.key", "", "unix:" + filepath.Join(wd, "run/c.sock")},
		{"absolute socket", "unix:/run/phux/c.sock", "/k/w.key", "", "unix:/run/phux/c.sock"},
		{"abstract socket", "unix:@phux-coord", "w.key", "", "unix:@phux-coord"},
		{"tls", "tls:coord.example:7443", "w.key", "ca.pem", "tls:coord.example:7443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := profile{Address: tc.address, KeyFile: tc.key, TLSCAFile: tc.ca, Scopes: "work_read"}
			got, err := p.absolute()
			if err != nil {
				t.Fatal(err)
			}
			want := p
			want.Address = tc.wantAddress
			want.KeyFile = tc.key
			if !filepath.IsAbs(tc.key) {
				want.KeyFile = filepath.Join(wd, tc.key)
			}
			if tc.ca != "" {
				want.TLSCAFile = filepath.Join(wd, tc.ca)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("absolute (-want +got):\n%s", d)
			}
		})
	}
}
