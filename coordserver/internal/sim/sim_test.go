package sim

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The short run of `go test ./...`: shortSeeds episodes of episodeSteps
// steps each (seeds 1, 2, ...). The reintroduced-bug tests (bugs_test.go)
// must catch each bug within this budget.
const (
	episodeSteps = 10_000
	shortSeeds   = 30
	raceSeeds    = 3
)

func shortBudget() uint64 {
	if raceEnabled {
		return raceSeeds
	}
	return shortSeeds
}

// fewerGCs raises the GC target to 400% unless GOGC is set: the
// simulation's heap is small and short-lived (one store per episode), and
// the default target spends about half the CPU in the collector.
func fewerGCs(t *testing.T) {
	if os.Getenv("GOGC") == "" {
		old := debug.SetGCPercent(400)
		t.Cleanup(func() { debug.SetGCPercent(old) })
	}
}

// replayHint is how a failing seed is replayed.
func replayHint(seed uint64) string {
	return fmt.Sprintf("replay: PHUX_SIM_SEED=%d PHUX_SIM_TRACE=1 go test -count=1 -run 'TestSimulationReplay$' -v ./coordserver/internal/sim/", seed)
}

// runSeeds runs episodes seed, seed+1, ... on workers goroutines until
// total steps are done (or n episodes when total is 0); it returns the
// summed tally and the violations, in seed order.
func runSeeds(first, n, total uint64, workers int) (Tally, []Result) {
	return runSeedsProgress(first, n, total, workers, time.Time{}, nil)
}

// runSeedsProgress is runSeeds starting no episode after stop (when set)
// and calling progress (when set) after every 500th episode with the
// tally so far and the violations seen.
func runSeedsProgress(first, n, total uint64, workers int, stop time.Time, progress func(episodes uint64, t Tally, violations int)) (Tally, []Result) {
	var (
		mu    sync.Mutex
		tally Tally
		bad   []Result
		next  = first
		steps uint64
		done  uint64
		wg    sync.WaitGroup
	)
	take := func() (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if total > 0 && steps >= total || total == 0 && next >= first+n || !stop.IsZero() && time.Now().After(stop) {
			return 0, false
		}
		s := next
		next++
		steps += episodeSteps // reserved; an episode that stops early gives back the rest
		return s, true
	}
	for range workers {
		wg.Go(func() {
			for {
				seed, ok := take()
				if !ok {
					return
				}
				r := Run(Config{Seed: seed, Steps: episodeSteps})
				mu.Lock()
				steps -= episodeSteps - r.Tally.Steps
				tally.Add(r.Tally)
				if r.Violation != nil {
					bad = append(bad, r)
				}
				if done++; progress != nil && done%500 == 0 {
					progress(done, tally, len(bad))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(bad, func(a, b Result) int { return cmp.Compare(a.Seed, b.Seed) })
	return tally, bad
}

func reportViolations(t *testing.T, bad []Result) {
	t.Helper()
	for _, r := range bad {
		t.Errorf("seed %d: %v\n%s\n%s", r.Seed, r.Violation, r.Tally, replayHint(r.Seed))
	}
}

// TestSimulationShort runs the short budget of seeded episodes: every
// invariant of check.go holds in each (§8 one outcome and no lost
// acknowledgement, §10/§11 exact event streams and Mirrors, §12 fencing
// and epochs, C.4 Run outcomes, C.10 binding identities).
func TestSimulationShort(t *testing.T) {
	if os.Getenv("PHUX_SIM_STEPS") != "" {
		t.Skip("PHUX_SIM_STEPS set: TestSimulationLong runs instead")
	}
	fewerGCs(t)
	start := time.Now()
	tally, bad := runSeeds(1, shortBudget(), 0, 1)
	el := time.Since(start)
	t.Logf("%d episodes of %d steps in %v (%.0f steps/s)\n%s", shortBudget(), episodeSteps, el.Round(time.Millisecond), float64(tally.Steps)/el.Seconds(), tally)
	reportViolations(t, bad)
}

// TestSimulationLong is the long run: PHUX_SIM_STEPS=N runs episodes of
// episodeSteps steps from seed PHUX_SIM_FIRST_SEED (default 1) until N
// steps are done (or, with PHUX_SIM_MINUTES=M, until M minutes have
// passed), on PHUX_SIM_WORKERS goroutines (default 1), and prints the
// tallies and the rate.
func TestSimulationLong(t *testing.T) {
	v := os.Getenv("PHUX_SIM_STEPS")
	if v == "" {
		t.Skip("set PHUX_SIM_STEPS=N for the long run")
	}
	total, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("PHUX_SIM_STEPS: %v", err)
	}
	fewerGCs(t)
	first := envUint(t, "PHUX_SIM_FIRST_SEED", 1)
	workers := int(envUint(t, "PHUX_SIM_WORKERS", 1))
	start := time.Now()
	var stop time.Time
	if m := os.Getenv("PHUX_SIM_MINUTES"); m != "" {
		stop = start.Add(time.Duration(envUint(t, "PHUX_SIM_MINUTES", 0)) * time.Minute)
	}
	tally, bad := runSeedsProgress(first, 0, total, workers, stop, func(n uint64, t Tally, v int) {
		el := time.Since(start)
		fmt.Printf("%v: %d episodes, %.0f steps/s, %d violations; %s\n", el.Round(time.Second), n, float64(t.Steps)/el.Seconds(), v, t)
	})
	el := time.Since(start)
	episodes := (tally.Steps + episodeSteps - 1) / episodeSteps
	t.Logf("about %d episodes (seeds from %d) of up to %d steps in %v on %d workers, GOMAXPROCS %d: %.0f steps/s, %d violations\n%s",
		episodes, first, episodeSteps, el.Round(time.Second), workers, runtime.GOMAXPROCS(0), float64(tally.Steps)/el.Seconds(), len(bad), tally)
	reportViolations(t, bad)
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestSimulationReplay replays one seed (PHUX_SIM_SEED) and, with
// PHUX_SIM_TRACE=1, prints every step.
func TestSimulationReplay(t *testing.T) {
	v := os.Getenv("PHUX_SIM_SEED")
	if v == "" {
		t.Skip("set PHUX_SIM_SEED=S to replay a seed")
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("PHUX_SIM_SEED: %v", err)
	}
	cfg := Config{Seed: seed, Steps: envUint(t, "PHUX_SIM_EPISODE_STEPS", episodeSteps)}
	if os.Getenv("PHUX_SIM_TRACE") != "" {
		cfg.Trace = func(line string) { fmt.Println(line) }
	}
	r := Run(cfg)
	t.Logf("seed %d: hash %016x\n%s", seed, r.Hash, r.Tally)
	if r.Violation != nil {
		t.Errorf("seed %d: %v", seed, r.Violation)
	}
}

// TestSimulationDeterministic: one seed run twice gives the same trace
// hash and tally (so a printed seed replays the failure exactly), and
// another seed gives another hash.
func TestSimulationDeterministic(t *testing.T) {
	const steps = 4000
	var lines [2][]string
	var res [2]Result
	for i := range 2 {
		res[i] = Run(Config{Seed: 7, Steps: steps, Trace: func(l string) { lines[i] = append(lines[i], l) }})
	}
	if res[0].Hash != res[1].Hash || res[0].Tally != res[1].Tally {
		t.Fatalf("seed 7 twice: hash %016x and %016x, tallies\n%s\n%s", res[0].Hash, res[1].Hash, res[0].Tally, res[1].Tally)
	}
	if len(lines[0]) != len(lines[1]) {
		t.Fatalf("seed 7 twice: %d and %d trace lines", len(lines[0]), len(lines[1]))
	}
	for i := range lines[0] {
		if lines[0][i] != lines[1][i] {
			t.Fatalf("seed 7 twice: trace line %d differs:\n%s\n%s", i, lines[0][i], lines[1][i])
		}
	}
	// Tracing changes nothing.
	if r := Run(Config{Seed: 7, Steps: steps}); r.Hash != res[0].Hash {
		t.Fatalf("seed 7 without a trace: hash %016x, with one %016x", r.Hash, res[0].Hash)
	}
	if r := Run(Config{Seed: 8, Steps: steps}); r.Hash == res[0].Hash {
		t.Fatalf("seeds 7 and 8 gave the same hash %016x", r.Hash)
	}
	if res[0].Tally.Steps != steps {
		t.Fatalf("seed 7 ran %d steps, want %d", res[0].Tally.Steps, steps)
	}
}
