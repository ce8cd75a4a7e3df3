// Command peers runs the same workloads on phuxcoord, etcd and NATS in
// one invocation, on this machine, and prints a Markdown table with
// phuxcoord's ratio to each peer:
//
//	cd bench/peers && go run .            # the full run (under 10 minutes)
//	cd bench/peers && go run . -quick     # a smoke run (about a minute)
//
// Every system runs in this process: phuxcoord's server kit on pebblestore
// (-store bolt: boltstore) with its client over a Unix socket, etcd's embed server (one member,
// fsync on) with clientv3 over loopback TCP, and nats-server core with
// nats.go over loopback TCP. Each workload is bounded in count and time.
// This is a separate module so that etcd and NATS never enter the
// library's module graph.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	quick := flag.Bool("quick", false, "small counts: a smoke run that checks every workload works")
	only := flag.String("only", "", "comma-separated workloads to run (writes1, writes32, fanout, fullread, catchup); empty runs all")
	rounds := flag.Int("rounds", 1, "run every workload this many rounds, the systems back to back (the order alternating each round), and report each system's median round")
	flag.DurationVar(&phuxBatchDelay, "phux-batch-delay", 0, "MaxBatchDelay of phuxcoord's store (0: the default, 1 ms; negative: never wait), for group-commit tuning")
	flag.StringVar(&phuxStore, "store", "pebble", "phuxcoord's store engine: pebble (phux-coordd's default) or bolt")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of each phuxcoord step (only) to PREFIX-<workload>-phuxcoord.pprof (with -rounds N above 1: PREFIX-<workload>-phuxcoord-round-R-N.pprof)")
	flag.Parse()
	if phuxStore != "pebble" && phuxStore != "bolt" {
		fmt.Fprintln(os.Stderr, "peers: -store must be pebble or bolt")
		os.Exit(2)
	}
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "peers: -rounds must be at least 1")
		os.Exit(2)
	}
	sz := fullSizes
	if *quick {
		sz = quickSizes
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*rounds)*10*time.Minute)
	defer cancel()
	ws, err := runAll(ctx, sz, *only, *rounds, *cpuprofile, func(s string) { fmt.Fprintln(os.Stderr, s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	fmt.Printf("Machine: %s/%s, %d CPUs, %s. Command: `cd bench/peers && go run .%s`\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), strings.Join(append([]string{""}, os.Args[1:]...), " "))
	writeTable(os.Stdout, ws)
	for _, wl := range ws {
		for _, r := range wl.Results {
			if r.Err != nil {
				os.Exit(1)
			}
		}
	}
}

// sizes are the counts and durations of one run.
type sizes struct {
	WriteFor    time.Duration // per system, per client count
	DocBytes    int
	Subscribers int
	FanBatch    int
	FanRounds   int
	FanPayload  int
	FullObjects int
	FullPage    int // etcd Range page
	Missed      int
}

var fullSizes = sizes{
	WriteFor: 5 * time.Second, DocBytes: 200,
	Subscribers: 100, FanBatch: 256, FanRounds: 40, FanPayload: 256,
	FullObjects: 1_000_000, FullPage: 10_000,
	Missed: 10_000,
}

var quickSizes = sizes{
	WriteFor: time.Second, DocBytes: 200,
	Subscribers: 100, FanBatch: 64, FanRounds: 4, FanPayload: 256,
	FullObjects: 20_000, FullPage: 10_000,
	Missed: 1_000,
}

// system is one system's run of a workload.
type system struct {
	name string
	run  func() result
}

func runAll(ctx context.Context, sz sizes, only string, rounds int, profPrefix string, progress func(string)) ([]workload, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	known := map[string]bool{"writes1": true, "writes32": true, "fanout": true, "fullread": true, "catchup": true}
	for s := range want {
		if !known[s] {
			return nil, fmt.Errorf("unknown workload %q", s)
		}
	}
	run := func(name string) bool { return len(want) == 0 || want[name] }
	var ws []workload
	step := func(name string, fn func() result) result {
		progress("running " + name)
		if profPrefix != "" && strings.Contains(name, " phuxcoord") {
			stop, err := startProfile(profPrefix, name)
			if err != nil {
				return result{System: "phuxcoord", Err: err}
			}
			defer stop()
		}
		t0 := time.Now()
		r := fn()
		progress(fmt.Sprintf("  %s: %d in %v (err %v)", r.System, r.Ops, time.Since(t0).Round(time.Millisecond), r.Err))
		return r
	}
	// compare runs the systems of workload wl back to back, rounds times
	// (the order alternating), and returns each system's median round.
	compare := func(wl string, systems ...system) []result {
		per := make([][]result, len(systems))
		for r := range rounds {
			for k := range systems {
				i := k
				if r%2 == 1 {
					i = len(systems) - 1 - k
				}
				label := wl + " " + systems[i].name
				if rounds > 1 {
					label += fmt.Sprintf(" (round %d/%d)", r+1, rounds)
				}
				per[i] = append(per[i], step(label, systems[i].run))
			}
		}
		out := make([]result, len(systems))
		for i, rs := range per {
			out[i] = medianRound(rs)
		}
		return out
	}
	if run("writes1") {
		ws = append(ws, workload{
			Name: "durable writes, 1 client", Unit: "writes", Targets: map[string]float64{"etcd": 1.0},
			Results: compare("writes1",
				system{"phuxcoord", func() result { return phuxWrites(ctx, 1, sz.WriteFor, sz.DocBytes) }},
				system{"etcd", func() result { return etcdWrites(ctx, 1, sz.WriteFor, sz.DocBytes) }},
			),
		})
	}
	if run("writes32") {
		ws = append(ws, workload{
			Name: "durable writes, 32 clients", Unit: "writes", Targets: map[string]float64{"etcd": 1.5},
			Results: compare("writes32",
				system{"phuxcoord", func() result { return phuxWrites(ctx, 32, sz.WriteFor, sz.DocBytes) }},
				system{"etcd", func() result { return etcdWrites(ctx, 32, sz.WriteFor, sz.DocBytes) }},
			),
		})
	}
	if run("fanout") {
		ws = append(ws, workload{
			Name: fmt.Sprintf("fan-out, 1 writer → %d subscribers", sz.Subscribers), Unit: "events", Targets: map[string]float64{"NATS core": 0.5, "etcd watch": 2.0},
			Results: compare("fanout",
				system{"phuxcoord", func() result {
					return phuxFanout(ctx, sz.Subscribers, sz.FanBatch, sz.FanRounds, sz.FanPayload)
				}},
				system{"NATS", func() result {
					return natsFanout(ctx, sz.Subscribers, sz.FanBatch, sz.FanRounds, sz.FanPayload)
				}},
				system{"etcd", func() result {
					return etcdFanout(ctx, sz.Subscribers, sz.FanBatch, sz.FanRounds, sz.FanPayload)
				}},
			),
		})
	}
	if run("fullread") {
		ws = append(ws, workload{
			Name: fmt.Sprintf("full read, %d objects", sz.FullObjects), Unit: "records", Targets: map[string]float64{"etcd": 2.0},
			Results: compare("fullread",
				system{"phuxcoord", func() result { return phuxFullRead(ctx, sz.FullObjects, sz.DocBytes) }},
				system{"etcd", func() result { return etcdFullRead(ctx, sz.FullObjects, sz.DocBytes, sz.FullPage) }},
			),
		})
	}
	if run("catchup") {
		ws = append(ws, workload{
			Name: fmt.Sprintf("catch-up after %d missed events", sz.Missed), Unit: "events", Targets: map[string]float64{"etcd": 1.0},
			Results: compare("catchup",
				system{"phuxcoord", func() result { return phuxCatchUp(ctx, sz.Missed, sz.FanPayload) }},
				system{"etcd", func() result { return etcdCatchUp(ctx, sz.Missed, sz.FanPayload) }},
			),
		})
	}
	return ws, nil
}

// startProfile starts a CPU profile of one step into
// prefix-<name, spaces and slashes as dashes>.pprof.
func startProfile(prefix, name string) (stop func(), err error) {
	name = strings.NewReplacer(" ", "-", "/", "-", "(", "", ")", "").Replace(name)
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
