package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// result is one system's figures for one workload.
type result struct {
	System string        // "phuxcoord", "etcd", "NATS core"
	Ops    int           // operations (or delivered events, or records) counted
	Took   time.Duration // wall time of the measured part
	P50    time.Duration // per-operation latency; 0 when the workload has none
	P99    time.Duration
	Note   string
	Err    error
}

// rate is operations per second.
func (r result) rate() float64 {
	if r.Took <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Took.Seconds()
}

// workload is one row group of the table.
type workload struct {
	Name    string
	Unit    string // what Ops counts: "puts", "events", "records"
	Results []result
	// Targets are phuxcoord's target ratio to each peer (by System).
	Targets map[string]float64
}

// medianRound is the round of median rate among rs (the lower middle one
// for an even count; a failed round wins: its error is reported); with
// more than one round its note lists every round's rate.
func medianRound(rs []result) result {
	if len(rs) == 1 {
		return rs[0]
	}
	for _, r := range rs {
		if r.Err != nil {
			return r
		}
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
	m := sorted[(len(sorted)-1)/2]
	rates := make([]string, len(rs))
	for i, r := range rs {
		rates[i] = fmtRate(r.rate())
	}
	note := fmt.Sprintf("median of %d rounds: %s /s", len(rs), strings.Join(rates, ", "))
	if m.Note != "" {
		note = m.Note + "; " + note
	}
	m.Note = note
	return m
}

// latencies collects per-operation latencies from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// quantiles returns p50 and p99 (nearest rank).
func (l *latencies) quantiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0
	}
	slices.Sort(l.d)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(l.d))+0.5) - 1
		return l.d[max(0, min(i, len(l.d)-1))]
	}
	return at(0.50), at(0.99)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2f M", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1f k", r/1e3)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

// writeTable prints the Markdown table: one row per (workload, system),
// with phuxcoord's ratio to each peer on the peer's row.
func writeTable(w io.Writer, ws []workload) {
	fmt.Fprintln(w, "| Workload | System | Count | Rate (/s) | p50 | p99 | phuxcoord ÷ peer | Target | Met |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|:-:|")
	for _, wl := range ws {
		var phux *result
		for i := range wl.Results {
			if wl.Results[i].System == "phuxcoord" && wl.Results[i].Err == nil {
				phux = &wl.Results[i]
			}
		}
		for _, r := range wl.Results {
			ratio, target, met := "", "", ""
			if r.System != "phuxcoord" && phux != nil && r.Err == nil && r.rate() > 0 {
				x := phux.rate() / r.rate()
				ratio = fmt.Sprintf("%.2f×", x)
				if t, ok := wl.Targets[r.System]; ok {
					target = fmt.Sprintf("≥ %.1f×", t)
					met = "no"
					if x >= t {
						met = "yes"
					}
				}
			}
			if r.Err != nil {
				fmt.Fprintf(w, "| %s | %s | — | failed: %s | | | | | |\n", wl.Name, r.System, oneLine(r.Err.Error()))
				continue
			}
			name := r.System
			if r.Note != "" {
				name += " (" + r.Note + ")"
			}
			fmt.Fprintf(w, "| %s | %s | %d %s | %s | %s | %s | %s | %s | %s |\n",
				wl.Name, name, r.Ops, wl.Unit, fmtRate(r.rate()), fmtDur(r.P50), fmtDur(r.P99), ratio, target, met)
		}
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
