package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
)

// The runner's own plumbing: selection, outcomes, the three report
// formats and the catalogue's coverage of the error codes.

func TestSelectionAndReports(t *testing.T) {
	tests := []Test[int]{
		{Name: "coord/1/a", Level: MUST, Desc: "passes", Run: func(context.Context, int) error { return nil }},
		{Name: "coord/1/b", Level: MUST, Desc: "fails", Run: func(context.Context, int) error { return failf("saw X") }},
		{Name: "coord/2/c", Level: SHOULD, Desc: "fails softly", Run: func(context.Context, int) error { return failf("saw Y") }},
		{Name: "coord/2/d", Level: MUST, Desc: "skips", Run: func(context.Context, int) error { return skipf("needs --key2") }},
		{Name: "coord/3/e", Level: MUST, Desc: "panics", Run: func(context.Context, int) error { panic("boom") }},
	}
	checkRegistry(tests)
	rs := runTests(context.Background(), tests, Selection{Run: []string{"coord/1/", "coord/2/"}, Skip: []string{"coord/1/a"}}, 0, time.Second, nil)
	got := map[string]Outcome{}
	for _, r := range rs {
		got[r.Name] = r.Outcome
	}
	if d := cmp.Diff(map[string]Outcome{"coord/1/b": Fail, "coord/2/c": Fail, "coord/2/d": Skip}, got); d != "" {
		t.Fatalf("outcomes (-want +got):\n%s", d)
	}
	if s := summarize(rs); s.MustFail != 1 || s.Fail != 2 || s.Skip != 1 {
		t.Fatalf("summary %+v", s)
	}
	if r := runTests(context.Background(), tests, Selection{Run: []string{"coord/3/"}}, 0, time.Second, nil); r[0].Outcome != Fail {
		t.Fatalf("a panicking test: %v", r[0].Outcome)
	}

	var js bytes.Buffer
	if err := writeJSON(&js, "server", rs); err != nil {
		t.Fatal(err)
	}
	var rep jsonReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Format != JSONFormat || rep.MustFail != 1 || len(rep.Results) != 3 || rep.Results[0].Detail != "saw X" {
		t.Fatalf("JSON report %+v", rep)
	}

	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := writeJUnit(path, "server", rs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var js2 junitSuite
	if err := xml.Unmarshal(b, &js2); err != nil {
		t.Fatal(err)
	}
	if js2.Tests != 3 || js2.Failures != 2 || js2.Skipped != 1 || js2.Cases[0].Failure == nil || js2.Cases[2].Skipped == nil {
		t.Fatalf("JUnit report %+v", js2)
	}

	var human bytes.Buffer
	writeHuman(&human, "server", rs)
	for _, want := range []string{"FAIL MUST coord/1/b", "-> saw X", "SKIP MUST coord/2/d", "2 failed (1 MUST)"} {
		if !strings.Contains(human.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, human.String())
		}
	}
}

// TestCatalogue: names are unique and well-formed, and every ErrorCode
// the server can send but INTERNAL (which no client can provoke) is the
// expected outcome of some server test.
func TestCatalogue(t *testing.T) {
	ts := serverTests() // checkRegistry panics on a bad entry
	all := ""
	for _, x := range ts {
		all += x.Desc + "\n"
	}
	for c := coordwire.ErrorCode(1); c < 256; c++ {
		if !c.Valid() || c == coordwire.Internal {
			continue
		}
		if !strings.Contains(all, c.String()) {
			t.Errorf("no server test names %v", c)
		}
	}
	if n := len(ts); n < 100 {
		t.Errorf("%d server tests", n)
	}
	if n := len(clientTests()); n < 20 {
		t.Errorf("%d client tests", n)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"server"}, {"server", "--address", "x"}, {"client"}, {"client", "--listen", "tcp:x"}} {
		var o, e bytes.Buffer
		if code := run(context.Background(), args, &o, &e); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (%s)", args, code, exitUsage, e.String())
		}
	}
}
