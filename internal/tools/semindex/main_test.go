package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexIsCurrent fails when docs/semantics-index.md no longer matches
// docs/semantics.md: a decision added, moved or reworded without
// `go run ./internal/tools/semindex`.
func TestIndexIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	src, err := os.ReadFile(filepath.Join(root, "docs", "semantics.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "semantics-index.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Render(Parse(src))) {
		t.Fatal("docs/semantics-index.md is stale: run go run ./internal/tools/semindex")
	}
}

// TestEveryDecisionIndexed checks that each decision of semantics.md is
// listed (a chapter renamed past chapterSections would drop its
// uncited decisions into "Other decisions", which only the tools and
// further-readings chapters should reach) and that each chapter link
// names a real heading.
func TestEveryDecisionIndexed(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "semantics.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries := Parse(src)
	if n := bytes.Count(src, []byte("\n- **")); len(entries) != n {
		t.Fatalf("parsed %d decisions, the file has %d bold-lead items", len(entries), n)
	}
	headings := map[string]bool{}
	for line := range strings.SplitSeq(string(src), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings[h] = true
		}
	}
	for _, e := range entries {
		if !headings[e.chapter] {
			t.Errorf("decision %q: chapter %q is not a heading", e.lead, e.chapter)
		}
		if len(e.cites) == 0 && !strings.HasPrefix(e.chapter, "The command-line client") &&
			!strings.HasPrefix(e.chapter, "Further readings") {
			t.Errorf("decision %q in %q is filed under no section: add its chapter to chapterSections", e.lead, e.chapter)
		}
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Departures from the spec's words":                            "departures-from-the-specs-words",
		"Key material and the registry (keystore, cmd/phux-coordkey)": "key-material-and-the-registry-keystore-cmdphux-coordkey",
		"Encoding (coordwire)":                                        "encoding-coordwire",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
