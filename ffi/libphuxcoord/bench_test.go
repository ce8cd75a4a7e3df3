//go:build cgo && (linux || darwin)

package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

// costFigure is one measured rate: count operations in secs.
type costFigure struct {
	name, via string
	count     int
	secs      float64
}

// TestFFICost measures, in one run against one coordinator, the rate of
// commands (sequential, and from 8 threads) and of Mirror notification
// delivery through the Go client, the C ABI (testdata/bench.c) and the
// stdio bridge (phux-coordctl bridge driven over its pipes by
// testdata/bridgebench, and by testdata/bridgebench.js when node is
// installed), each client in a process of its own, in rotating rounds
// (PHUX_FFI_BENCH_ROUNDS, 3 by default), and reports each figure's
// median round. PHUX_FFI_BENCH_EVENTS sets the objectives whose
// notifications are drained (1500 by default: few enough that a Mirror
// handle has encoded them all before the clock starts, see docs/ffi.md)
// and PHUX_FFI_BENCH_COMMANDS the commands of each command figure (400
// by default: the test kit's memory store copies its whole state per
// commit, so a coordinator holding thousands of objectives commits more
// slowly and the bridge's own cost becomes a smaller share), and
// PHUX_FFI_BENCH_STORE=pebble puts each coordinator on a pebble store, as
// phux-coordd's default is, instead of the kit's memory store;
// PHUX_FFI_BENCH_VIAS runs a comma-separated subset of c, c-into,
// bridge, node (c-into: the C ABI's notifications alone, polled with
// phux_mirror_next_into). PHUX_FFI_BENCH_BASE names a directory holding
// a libphuxcoord.so and a phux-coordctl built from another commit, and
// adds c-base, c-into-base, bridge-base and node-base: the same programs
// on the baseline's library and bridge, in the same rounds (node-base
// runs the directory's bridgebench.js when it holds one; docs/ffi.md,
// "Cost").
// It measures only with PHUX_FFI_BENCH=1 (docs/ffi.md, "Cost", has the
// figures):
//
//	PHUX_FFI_BENCH=1 go test -run TestFFICost -v ./ffi/libphuxcoord
//
// Without it (and without -short) it runs one short round of every client
// (16 commands, 100 objectives) and checks that each reported every
// figure with every count, so that a driver that hangs or miscounts
// fails the suite; no rate is judged.
func TestFFICost(t *testing.T) {
	smoke := os.Getenv("PHUX_FFI_BENCH") == ""
	if smoke && testing.Short() {
		t.Skip("-short: set PHUX_FFI_BENCH=1 to measure")
	}
	n, threads, events, rounds := 400, 8, 1500, 3
	if smoke {
		n, events, rounds = 16, 100, 1
	} else {
		if v, _ := strconv.Atoi(os.Getenv("PHUX_FFI_BENCH_EVENTS")); v > 0 {
			events = v
		}
		if v, err := strconv.Atoi(os.Getenv("PHUX_FFI_BENCH_COMMANDS")); err == nil && v >= threads {
			n = v
		}
		if v, err := strconv.Atoi(os.Getenv("PHUX_FFI_BENCH_ROUNDS")); err == nil && v > 0 {
			rounds = v
		}
	}
	cc := tool(t, "cc", "PHUX_REQUIRE_CC")
	dir := sharedLib(t)
	bridgeBin := filepath.Join(t.TempDir(), "phux-coordctl")
	if out, err := exec.Command("go", "build", "-o", bridgeBin, "github.com/phuxcoord/coord/cmd/phux-coordctl").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Each client kind gets a fresh coordinator: a store that grew under
	// the previous one's commands and events would make the later ones
	// look slower.
	var c *coordtest.Coordinator
	// PHUX_FFI_BENCH_STORE=pebble runs each coordinator on a pebble store
	// of its own (phux-coordd's default: every commit synced) instead of
	// the kit's memory store. The kit's faults, which need its store, are
	// not used here.
	store := os.Getenv("PHUX_FFI_BENCH_STORE")
	if store != "" && store != "memory" && store != "pebble" {
		t.Fatalf("PHUX_FFI_BENCH_STORE=%q: want memory or pebble", store)
	}
	fresh := func() {
		cfg := coordtest.Config{Lifetime: 60 * time.Second}
		if store == "pebble" {
			st, err := pebblestore.Open(t.TempDir(), pebblestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			cfg.Server = func(sc *coordserver.Config) { sc.Store = st }
		}
		c = coordtest.Start(t, cfg)
	}
	// Each round of every client takes about a minute at 6000 objectives.
	budget := time.Duration(rounds)*2*time.Minute + 5*time.Minute
	if smoke {
		budget = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var seq atomic.Uint32
	produce := func() { // events objectives from the kit's client, 16 at a time
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < events; i += 16 {
					var id coordwire.ObjectiveID
					copy(id[:], fmt.Sprintf("p%07d%08d", seq.Add(1), i))
					if _, err := c.Client().Command(ctx, coordclient.CreateObjective(id, 1, []byte("bench"))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		time.Sleep(time.Second) // the notifications reach the consumer's queue
	}
	type figure = costFigure
	var figs []figure
	rate := func(f figure) float64 { return float64(f.count) / f.secs }

	// The Go client and the C ABI, each in a process of its own.
	gobench := filepath.Join(t.TempDir(), "gobench")
	bridgebench := filepath.Join(t.TempDir(), "bridgebench")
	for bin, pkg := range map[string]string{gobench: "./testdata/gobench", bridgebench: "./testdata/bridgebench"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	goEnv := func() []string {
		fp := c.AuthorityFingerprint()
		return []string{"PHUX_KEY_FILE=" + c.KeyFile(), "PHUX_ADDRESS=" + c.DirectAddress(),
			"PHUX_FP=" + hex.EncodeToString(fp[:]), "PHUX_WITNESS=" + hex.EncodeToString(c.WitnessPublicKey())}
	}
	cEnv := func() []string { return []string{"PHUX_CONFIG=" + config(t, c, true)} }
	bin := compile(t, cc, dir, filepath.Join("testdata", "bench.c"))
	runChild := func(via, bin string, env, args []string) {
		p := exec.CommandContext(ctx, bin, append(args, strconv.Itoa(n), strconv.Itoa(threads), strconv.Itoa(events))...)
		p.Env = append(os.Environ(), env...)
		childproc.DieWithParent(p)
		stdin, _ := p.StdinPipe()
		stdout, _ := p.StdoutPipe()
		p.Stderr = os.Stderr
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 1 && f[0] == "ready" {
				produce()
				io.WriteString(stdin, "go\n")
				continue
			}
			if len(f) == 3 {
				cnt, _ := strconv.Atoi(f[1])
				secs, _ := strconv.ParseFloat(f[2], 64)
				figs = append(figs, figure{f[0], via, cnt, secs})
			}
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("%s: %v", via, err)
		}
	}

	// The bridge is driven twice: by a Go process (bridgebench) and, when
	// node is installed, by Node.js, the runtime of the plugins the bridge
	// is for (testdata/bridgebench.js, one event-loop thread).
	// "c-into" is the C ABI's notifications alone, polled with
	// phux_mirror_next_into into one buffer (bench.c, PHUX_BENCH_INTO).
	vias := []string{"go", "c", "c-into", "bridge"}
	node, nodeErr := exec.LookPath("node")
	if nodeErr == nil {
		vias = append(vias, "node")
	} else {
		t.Logf("no node (%v): the bridge is driven from Go only", nodeErr)
	}
	// A baseline to compare with in the same run: a directory holding a
	// libphuxcoord.so and a phux-coordctl built from another commit.
	base := os.Getenv("PHUX_FFI_BENCH_BASE")
	if base != "" {
		vias = append(vias, "c-base", "c-into-base", "bridge-base")
		if nodeErr == nil {
			vias = append(vias, "node-base")
		}
	}
	if only := os.Getenv("PHUX_FFI_BENCH_VIAS"); only != "" {
		// A comma-separated subset of the clients ("go" is always kept:
		// the shares are of its figures).
		keep, want := []string{"go"}, strings.Split(only, ",")
		for _, v := range vias {
			if v != "go" && slices.Contains(want, v) {
				keep = append(keep, v)
			}
		}
		vias = keep
	}
	nodeScript, err := filepath.Abs(filepath.Join("testdata", "bridgebench.js"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Abs(filepath.Join("..", "..", "coordclient", "coordjson", "testdata"))
	if err != nil {
		t.Fatal(err)
	}

	// Rounds of every client, each on a fresh coordinator, in a rotating
	// order; the best rate of each figure is reported (the machine is
	// shared: a slow round measures the neighbours).
	for round := 0; round < rounds; round++ {
		for i := range vias {
			via := vias[(round+i)%len(vias)]
			if v := os.Getenv("PHUX_FFI_BENCH_VIA"); v != "" && !slices.Contains(strings.Split(v, ","), via) {
				continue
			}
			fresh()
			// A "-base" client is the same program on the baseline's
			// library (RUNPATH yields to LD_LIBRARY_PATH) or bridge.
			// A baseline directory holding a bridgebench.js of its own
			// runs that script as node-base, so that a change to the
			// Node driver is measured against it too.
			env, bridge, script := cEnv(), "PHUX_BRIDGE="+bridgeBin, nodeScript
			kind, isBase := strings.CutSuffix(via, "-base")
			if isBase {
				env = append(env, "LD_LIBRARY_PATH="+base)
				bridge = "PHUX_BRIDGE=" + filepath.Join(base, "phux-coordctl")
				if s := filepath.Join(base, "bridgebench.js"); fileExists(s) {
					script = s
				}
			}
			switch kind {
			case "go":
				runChild(via, gobench, goEnv(), nil)
			case "c":
				runChild(via, bin, env, nil)
			case "c-into":
				runChild(via, bin, append(env, "PHUX_BENCH_INTO=1"), nil)
			case "bridge":
				runChild(via, bridgebench, append(env, bridge), nil)
			case "node":
				runChild(via, node, append(env, bridge, "PHUX_GOLDEN="+golden), []string{script})
			}
		}
	}
	// The median round of each figure is reported, with every round's
	// rate beside it: a slow round measures the neighbours on a shared
	// machine, and one fast round is not a rate a plugin can count on.
	byKey := map[[2]string][]figure{}
	var order [][2]string
	for _, f := range figs {
		k := [2]string{f.name, f.via}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], f)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i][0] < order[j][0] })
	median := func(k [2]string) (figure, bool) {
		fs := slices.Clone(byKey[k])
		if len(fs) == 0 {
			return figure{}, false
		}
		slices.SortFunc(fs, func(a, b figure) int { return cmp.Compare(rate(a), rate(b)) })
		return fs[len(fs)/2], true
	}

	if smoke {
		// Every client reported every figure, and counted what it was
		// given: all commands, and the notifications up to the last
		// objective's (the C program stops at it, which may be before
		// its OPERATION record's).
		for _, via := range vias {
			want := map[string][2]int{"events": {2*events - 1, 2 * events}}
			if !strings.HasPrefix(via, "c-into") {
				want["commands_seq"] = [2]int{n, n}
				want["commands_par"] = [2]int{n / threads * threads, n / threads * threads}
			}
			for name, r := range want {
				fs := byKey[[2]string{name, via}]
				if len(fs) != 1 || fs[0].count < r[0] || fs[0].count > r[1] || !(fs[0].secs > 0) {
					t.Errorf("%s %s: %+v, want one figure counting %d to %d", via, name, fs, r[0], r[1])
				}
			}
		}
	}
	if smoke {
		t.Logf("a smoke run (PHUX_FFI_BENCH unset): these rates are not figures")
	}
	t.Logf("median of %d rounds; load average %s", rounds, loadAvg())
	t.Logf("%-13s %-7s %8s %10s %8s  %s", "figure", "via", "count", "per sec", "of Go", "rounds (per sec)")
	for _, k := range order {
		f, _ := median(k)
		pct := "-"
		if g, ok := median([2]string{k[0], "go"}); ok {
			pct = fmt.Sprintf("%.0f%%", 100*rate(f)/rate(g))
		}
		var each []string
		for _, r := range byKey[k] {
			each = append(each, fmt.Sprintf("%.0f", rate(r)))
		}
		t.Logf("%-13s %-7s %8d %10.0f %8s  %s", f.name, f.via, f.count, rate(f), pct, strings.Join(each, ", "))
	}
}

// fileExists reports whether name is a regular file.
func fileExists(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

// loadAvg is the first field of /proc/loadavg, if any.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
