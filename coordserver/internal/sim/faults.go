package sim

import (
	"fmt"
	"time"
)

// faultTick draws the faults of the next 100 ms of simulated time. To add
// a fault: give it a constant and a name (world.go), a rate (rates), and a
// branch here that injects it; the invariants need no change.
func (w *World) faultTick() {
	w.after(100*time.Millisecond, nil, "faults", func() {
		w.injectFaults()
		w.faultTick()
	})
}

func (w *World) injectFaults() {
	r := &w.rates
	if len(w.coords) > 0 && w.chance(r.coordCrash) {
		// A stalled process is left to resume: the stall is its fault.
		if c := w.coords[w.intn(len(w.coords))]; c.p.pausedUntil <= w.now {
			c.crash("at random")
		}
	}
	if !w.wit.p.dead && w.chance(r.witnessCrash) {
		w.wit.crash()
	}
	if !w.owner.p.dead && w.chance(r.ownerCrash) {
		w.owner.crash("at random")
	}
	if w.chance(r.clientCrash) {
		w.clients[w.intn(len(w.clients))].crash()
	}
	if c := w.listener; c != nil && w.chance(r.pause) {
		// SIGSTOP past the lease, as a paused primary: a standby starts,
		// waits for the lease to end and takes over; the stalled process
		// resumes with its commits still in flight, which the store's
		// writer fencing must refuse. Half the stalls begin inside a
		// commit: the process stops after its transaction began and
		// before it landed (as pgstore's TestPausedWriterProcess does).
		w.tally.Faults[faultPause]++
		d := w.between(leaseLifetime+5*time.Second, 3*leaseLifetime)
		switch r := w.rng.Float64(); {
		case r < 0.5:
			c.pauseInCommit = d
		case r < 0.8:
			c.pause(d)
		default:
			c.pause(w.between(100*time.Millisecond, leaseLifetime/4)) // a short stall, within the lease
		}
	}
	if w.chance(r.partition) {
		w.tally.Faults[faultPartition]++
		d := w.between(time.Second, 80*time.Second)
		w.wit.partitionedUntil = max(w.wit.partitionedUntil, w.now+int64(d))
		w.trace("witness unreachable")
	}
	if w.chance(r.drop) {
		cl := w.clients[w.intn(len(w.clients))]
		if cl.link != nil {
			w.tally.Faults[faultDrop]++
			l, s := cl.link, cl.sess
			w.closeLink(l, cl.linkDown(l), func() { s.onClientGone() })
		}
	}
	if c := w.listener; c != nil && w.chance(r.relinquish) {
		w.tally.Faults[faultRelinquish]++
		c.shutdown()
	}
	if !w.owner.p.dead && w.chance(r.ownerStall) {
		w.tally.Faults[faultOwnerStall]++
		w.owner.p.pausedUntil = w.now + int64(w.between(time.Second, effectTimeout+20*time.Second))
	}
	if w.chance(r.idle) {
		// Everything idles past the 30-day retention floor: leases expire,
		// and the next sweep tombstones the results.
		w.tally.Faults[faultIdle]++
		w.trace("idle 31 days")
		w.idle(31 * 24 * time.Hour)
	}
}

// idle jumps the clock: every event due in the next d runs at its end,
// in order (nothing happened in between).
func (w *World) idle(d time.Duration) {
	end := w.now + int64(d)
	// The clock itself jumps: what this step schedules from now on is
	// scheduled after the idle time.
	defer func() { w.now = end }()
	for _, e := range w.queue {
		if e.at < end {
			e.at = end
		}
	}
	// The heap order is (at, seq) and every moved event now shares one
	// time: re-heapify.
	q := w.queue
	w.queue = nil
	for _, e := range q {
		w.push(e)
	}
	for _, c := range w.coords {
		c.p.pausedUntil = min(c.p.pausedUntil, end)
	}
}

// pause stalls c for d (SIGSTOP, then SIGCONT): its events wait; a stall
// past the lease starts a standby beside it.
func (c *coordProc) pause(d time.Duration) {
	w := c.w
	c.p.pausedUntil = w.now + int64(d)
	w.trace(fmt.Sprintf("%s paused for %v", c.p.name, d))
	if d > leaseLifetime && len(w.coords) < 2 {
		w.startCoordinator(w.between(0, time.Second))
	}
}
