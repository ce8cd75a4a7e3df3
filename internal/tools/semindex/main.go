// Command semindex writes docs/semantics-index.md: every decision of
// docs/semantics.md listed under each section of the specification (and
// each conformance invariant) it cites, so that a reader looking for a
// section's decisions finds them in one step.
//
//	go run ./internal/tools/semindex          # rewrite the index
//	go run ./internal/tools/semindex -check   # exit 1 if it is stale
//
// A decision is a top-level list item of semantics.md that begins with a
// bold lead ("- **…**"); the sections it cites are every "§N" or "§N.M"
// in its text and every "invariant N" (or "invariants N and M"). The
// index links the chapter holding the decision and quotes its lead, which
// a reader then finds on that page.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// sections are the specification's section titles (coordinator.txt).
var sections = []struct{ num, title string }{
	{"1", "Scope and status"},
	{"2", "Endpoint binding and transport"},
	{"3", "Encoding and hard bounds"},
	{"3.1", "Envelope and allocation order"},
	{"3.2", "Limits and quotas"},
	{"3.3", "Canonical list and union encoding"},
	{"4", "Identity, cuts, and authority guards"},
	{"5", "Authentication, COORD_HELLO, and capabilities"},
	{"6", "Closed scopes and total read visibility"},
	{"7", "Frame and nested-type allocation"},
	{"8", "Commands, digest identity, and delegated effects"},
	{"9", "Whole-authority snapshots"},
	{"10", "Subscription, GAP, replay, and healing"},
	{"11", "Terminal binding and source admission"},
	{"12", "External activation witness and split brain"},
	{"13", "Errors and request completion"},
	{"14", "Conformance invariants"},
	{"15", "Implementation dependency order"},
	{"16", "Coordinator protocol history"},
}

// chapterSections files a decision that cites no section under the
// sections its chapter of semantics.md is about (matched by the
// chapter heading's prefix).
var chapterSections = []struct {
	prefix string
	nums   []string
}{
	{"Encoding", []string{"3.1", "3.3"}},
	{"Negotiation", []string{"3.2", "5"}},
	{"Strict Ed25519", []string{"5"}},
	{"Key material", []string{"5"}},
	{"Workload handshake", []string{"5"}},
	{"Snapshots, streams and records", []string{"7", "9", "10"}},
	{"Handshake and command frames", []string{"5", "7", "8"}},
	{"Digests and conformance vectors", []string{"8", "9", "14"}},
	{"Activation certificates and the witness", []string{"12"}},
	{"The store", []string{"8", "12"}},
	{"Commands and operation results", []string{"8"}},
	{"The server kit", []string{"2", "12", "13"}},
	{"The read side", []string{"9", "10"}},
	{"The reference daemon", []string{"2", "12"}},
	{"The client read side", []string{"9", "10"}},
	{"The client", []string{"5", "8", "13"}},
	{"Source facts", []string{"11"}},
	{"Runs and the effect outbox", []string{"8"}},
	{"The terminal owner", []string{"11"}},
	{"The conformance runner", []string{"13", "14"}},
	{"The FFI projections", []string{"13", "15"}},
}

// entry is one decision of semantics.md.
type entry struct {
	chapter string // the "## " heading above it
	lead    string // its bold lead, markdown as written
	cites   map[string]bool
	// byChapter: it cites no section and is filed under its chapter's.
	byChapter bool
}

var (
	sectionRef   = regexp.MustCompile(`§\s?(\d+(?:\.\d+)?)`)
	invariantRef = regexp.MustCompile(`(?i)invariants?\s+((?:\d+(?:\s*(?:,|and|-|–)\s*)?)+)`)
	number       = regexp.MustCompile(`\d+`)
)

func main() {
	check := flag.Bool("check", false, "exit 1 if the index is stale instead of writing it")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	src, err := os.ReadFile(filepath.Join(*root, "docs", "semantics.md"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "semindex:", err, "(run it from the repository's root, or give -root)")
		os.Exit(2)
	}
	out := Render(Parse(src))
	path := filepath.Join(*root, "docs", "semantics-index.md")
	if *check {
		old, _ := os.ReadFile(path)
		if !bytes.Equal(old, out) {
			fmt.Fprintln(os.Stderr, "semindex: docs/semantics-index.md is stale: run go run ./internal/tools/semindex")
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "semindex:", err)
		os.Exit(2)
	}
}

// Parse reads the decisions of semantics.md.
func Parse(src []byte) []entry {
	var (
		out     []entry
		chapter string
		cur     *entry
		text    strings.Builder
	)
	flush := func() {
		if cur == nil {
			return
		}
		t := text.String()
		for _, m := range sectionRef.FindAllStringSubmatch(t, -1) {
			cur.cites[normalise(m[1])] = true
		}
		for _, m := range invariantRef.FindAllStringSubmatch(t, -1) {
			for _, n := range number.FindAllString(m[1], -1) {
				if v, err := strconv.Atoi(n); err == nil && v >= 1 && v <= 16 {
					cur.cites["inv-"+n] = true
				}
			}
		}
		if len(cur.cites) == 0 {
			for _, c := range chapterSections {
				if strings.HasPrefix(cur.chapter, c.prefix) {
					for _, n := range c.nums {
						cur.cites[n] = true
					}
					cur.byChapter = true
					break
				}
			}
		}
		out = append(out, *cur)
		cur = nil
		text.Reset()
	}
	for line := range strings.SplitSeq(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			chapter = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "- **"):
			flush()
			rest := strings.TrimPrefix(line, "- **")
			lead := rest
			for end := strings.Index(rest, "**"); end >= 0; end = -1 {
				lead = rest[:end]
			}
			cur = &entry{chapter: chapter, lead: strings.TrimSpace(lead), cites: map[string]bool{}}
			text.WriteString(line)
		case cur != nil && (strings.HasPrefix(line, "  ") || line == ""):
			text.WriteString(" " + strings.TrimSpace(line))
		default:
			flush()
		}
	}
	flush()
	return out
}

// normalise maps a cited section to one the index lists: a subsection
// the list does not hold ("§8.4") is filed under its section.
func normalise(s string) string {
	for _, sec := range sections {
		if sec.num == s {
			return s
		}
	}
	if i := strings.IndexByte(s, '.'); i > 0 {
		return s[:i]
	}
	return s
}

// anchor is GitHub's anchor for a heading.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Render writes the index.
func Render(entries []entry) []byte {
	var b bytes.Buffer
	b.WriteString("# Index of the decisions, by section of the specification\n\n")
	b.WriteString("Every decision in [semantics.md](semantics.md), under each section of\n")
	b.WriteString("`coordinator.txt` and each conformance invariant (§14) it cites; a decision\n")
	b.WriteString("citing several is listed under each. Each line links the chapter that holds the\n")
	b.WriteString("decision and quotes its bold lead; \"(by chapter)\" marks a decision that cites no\n")
	b.WriteString("section and is filed under the sections its chapter is about. Generated by\n")
	b.WriteString("`go run ./internal/tools/semindex`\n")
	b.WriteString("(a test fails when this file is stale); do not edit by hand.\n")
	line := func(e entry) {
		mark := ""
		if e.byChapter {
			mark = " (by chapter)"
		}
		fmt.Fprintf(&b, "- [%s](semantics.md#%s): **%s**%s\n", e.chapter, anchor(e.chapter), e.lead, mark)
	}
	group := func(title string, key string) {
		var n int
		for _, byChapter := range []bool{false, true} { // cited first
			for _, e := range entries {
				if e.cites[key] && e.byChapter == byChapter {
					if n == 0 {
						fmt.Fprintf(&b, "\n## %s\n\n", title)
					}
					n++
					line(e)
				}
			}
		}
	}
	for _, s := range sections {
		group("§"+s.num+" "+s.title, s.num)
	}
	for i := 1; i <= 16; i++ {
		group(fmt.Sprintf("Invariant %d (§14)", i), "inv-"+strconv.Itoa(i))
	}
	var none []entry
	for _, e := range entries {
		if len(e.cites) == 0 {
			none = append(none, e)
		}
	}
	if len(none) > 0 {
		b.WriteString("\n## Other decisions\n\n")
		b.WriteString("The tools, the test kit and further readings, where a decision cites no section.\n\n")
		for _, e := range none {
			line(e)
		}
	}
	return b.Bytes()
}
