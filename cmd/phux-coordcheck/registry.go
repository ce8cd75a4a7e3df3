package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Level is a test's RFC 2119 strength: a failed MUST fails the run, a
// failed SHOULD is reported but does not change the exit status.
type Level string

// The two levels.
const (
	MUST   Level = "MUST"
	SHOULD Level = "SHOULD"
)

// Test is one conformance requirement checked against an implementation.
// Name is stable (spec section or invariant first, e.g.
// coord/10/credit/bytes-gate); Run returns nil on a pass, a skip error
// (skipf) when the target cannot be checked for it, and any other error
// (failf) on a failure.
type Test[T any] struct {
	Name  string
	Level Level
	Desc  string
	Run   func(ctx context.Context, target T) error
}

// skipError marks a test that was not run (a hook or a key is missing).
type skipError struct{ why string }

func (e *skipError) Error() string { return e.why }

func skipf(format string, args ...any) error { return &skipError{fmt.Sprintf(format, args...)} }

func failf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Outcome of one test.
type Outcome string

// The outcomes.
const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// Result is one test's report line.
type Result struct {
	Name     string        `json:"name"`
	Level    Level         `json:"level"`
	Outcome  Outcome       `json:"outcome"`
	Detail   string        `json:"detail,omitempty"`
	Desc     string        `json:"description"`
	Duration time.Duration `json:"duration_ns"`
}

// Selection chooses tests: Run holds name prefixes (empty: all), Skip
// holds exact names or prefixes left out.
type Selection struct {
	Run  []string
	Skip []string
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (s Selection) match(name string) bool {
	for _, p := range s.Skip {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	if len(s.Run) == 0 {
		return true
	}
	for _, p := range s.Run {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// runTests runs the selected tests in order, each under its own timeout,
// and returns their results.
func runTests[T any](ctx context.Context, tests []Test[T], sel Selection, target T, perTest time.Duration, progress io.Writer) []Result {
	var out []Result
	for _, t := range tests {
		if !sel.match(t.Name) {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, perTest)
		began := time.Now()
		err := safeRun(tctx, t, target)
		cancel()
		r := Result{Name: t.Name, Level: t.Level, Desc: t.Desc, Duration: time.Since(began), Outcome: Pass}
		var se *skipError
		switch {
		case err == nil:
		case errors.As(err, &se):
			r.Outcome, r.Detail = Skip, se.why
		default:
			r.Outcome, r.Detail = Fail, err.Error()
		}
		if progress != nil {
			fmt.Fprintf(progress, "%-4s %-6s %s\n", strings.ToUpper(string(r.Outcome)), r.Level, r.Name)
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

func safeRun[T any](ctx context.Context, t Test[T], target T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the test panicked: %v", p)
		}
	}()
	return t.Run(ctx, target)
}

// checkRegistry panics on a duplicate or malformed name: names are the
// runner's interface.
func checkRegistry[T any](tests []Test[T]) {
	seen := map[string]bool{}
	for _, t := range tests {
		if seen[t.Name] || !strings.HasPrefix(t.Name, "coord/") && !strings.HasPrefix(t.Name, "client/") || t.Desc == "" ||
			(t.Level != MUST && t.Level != SHOULD) {
			panic("phux-coordcheck: bad test entry " + t.Name)
		}
		seen[t.Name] = true
	}
}

// summary counts results.
type summary struct {
	Pass, Fail, Skip, MustFail int
}

func summarize(rs []Result) summary {
	var s summary
	for _, r := range rs {
		switch r.Outcome {
		case Pass:
			s.Pass++
		case Skip:
			s.Skip++
		case Fail:
			s.Fail++
			if r.Level == MUST {
				s.MustFail++
			}
		}
	}
	return s
}

// writeHuman prints the failures with their detail and a summary line.
func writeHuman(w io.Writer, mode string, rs []Result) {
	for _, r := range rs {
		if r.Outcome == Pass {
			continue
		}
		fmt.Fprintf(w, "%s %s %s\n    %s\n", strings.ToUpper(string(r.Outcome)), r.Level, r.Name, r.Desc)
		if r.Detail != "" {
			fmt.Fprintf(w, "    -> %s\n", r.Detail)
		}
	}
	s := summarize(rs)
	fmt.Fprintf(w, "phux-coordcheck %s: %d passed, %d failed (%d MUST), %d skipped\n", mode, s.Pass, s.Fail, s.MustFail, s.Skip)
}

// jsonReport is the --json document.
type jsonReport struct {
	Format   string   `json:"format"`
	Mode     string   `json:"mode"`
	Results  []Result `json:"results"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	MustFail int      `json:"must_failed"`
	Skipped  int      `json:"skipped"`
}

// JSONFormat names the --json document's format.
const JSONFormat = "phux-coordcheck-report/1"

func writeJSON(w io.Writer, mode string, rs []Result) error {
	s := summarize(rs)
	if rs == nil {
		rs = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{Format: JSONFormat, Mode: mode, Results: rs, Passed: s.Pass, Failed: s.Fail, MustFail: s.MustFail, Skipped: s.Skip})
}

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

func writeJUnit(path, mode string, rs []Result) error {
	s := summarize(rs)
	js := junitSuite{Name: "phux-coordcheck " + mode, Tests: len(rs), Failures: s.Fail, Skipped: s.Skip}
	for _, r := range rs {
		c := junitCase{Name: r.Name, Classname: string(r.Level), Time: fmt.Sprintf("%.3f", r.Duration.Seconds())}
		switch r.Outcome {
		case Fail:
			c.Failure = &junitMessage{Message: r.Detail, Body: r.Desc}
		case Skip:
			c.Skipped = &junitMessage{Message: r.Detail}
		}
		js.Cases = append(js.Cases, c)
	}
	b, err := xml.MarshalIndent(js, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

// listTests prints the catalogue: name, level, description.
func listTests[T any](w io.Writer, tests []Test[T], sel Selection) {
	sorted := append([]Test[T](nil), tests...)
	sort.SliceStable(sorted, func(i, j int) bool { return false })
	for _, t := range sorted {
		if sel.match(t.Name) {
			fmt.Fprintf(w, "%-6s %s\n       %s\n", t.Level, t.Name, t.Desc)
		}
	}
}
