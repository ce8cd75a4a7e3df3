package sim

import (
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// leaseLifetime is the certificate lifetime the simulated witness grants
// (§12 allows at most 60 s): short, so that an episode of a few simulated
// minutes sees leases end, standbys take over and stalled writers resume.
const leaseLifetime = 15 * time.Second

// witness is the simulated external activation witness (§12): for the
// one CoordinatorId of the episode it keeps (last_authority_epoch,
// activation_sequence, active_lease) in crash-durable state that never
// rolls back, grants one unexpired fencing token at a time, renews only
// the exact current lease, and accepts the holder's relinquishment.
// A crash loses only the requests in flight.
type witness struct {
	w         *World
	p         *proc
	lastEpoch uint64
	seq       uint64
	lease     *wlease
	// partitionedUntil: until then every request and reply is lost.
	partitionedUntil int64
	// grants is every granted (epoch, sequence), checked to rise.
	lastGrant [2]uint64
}

type wlease struct {
	token     [32]byte
	inc       coordwire.IncarnationID
	issuedAt  uint64
	expiresAt uint64
}

// cert is what a grant or renewal returns.
type cert struct {
	epoch, seq          uint64
	token               [32]byte
	inc                 coordwire.IncarnationID
	issuedAt, expiresAt uint64
}

// The witness's refusals.
type wrefusal string

const (
	wLeaseHeld       wrefusal = "lease-held"
	wEpochNotGreater wrefusal = "epoch-not-greater"
	wNoLease         wrefusal = "no-lease"
)

func newWitness(w *World) *witness {
	return &witness{w: w, p: &proc{name: "witness"}}
}

func (wt *witness) reachable() bool {
	return !wt.p.dead && wt.w.now >= wt.partitionedUntil
}

// call sends req from the coordinator process c; handle runs at the
// witness, and its answer reaches c's reply unless something is lost on
// the way (the witness is down or unreachable, c died). A lost request
// simply never answers: c has its own timeout.
func (wt *witness) call(from *proc, tag string, handle func() (cert, wrefusal, bool), reply func(cert, wrefusal, bool)) {
	w := wt.w
	if !wt.reachable() {
		return
	}
	w.after(w.netDelay(), wt.p, "witness "+tag, func() {
		if !wt.reachable() {
			return
		}
		c, r, ok := handle()
		w.after(w.netDelay(), from, "witness reply "+tag, func() {
			if w.now < wt.partitionedUntil {
				return
			}
			reply(c, r, ok)
		})
	})
}

// status answers (last epoch, the lease's expiry or 0).
func (wt *witness) status() (lastEpoch uint64) { return wt.lastEpoch }

// activate grants a new activation for epoch and inc (§12): refused while
// an unexpired lease exists and for an epoch not above the last one.
func (wt *witness) activate(epoch uint64, inc coordwire.IncarnationID) (cert, wrefusal, bool) {
	w := wt.w
	now := w.unix()
	if l := wt.lease; l != nil && now < l.expiresAt {
		return cert{}, wLeaseHeld, false
	}
	if epoch <= wt.lastEpoch {
		return cert{}, wEpochNotGreater, false
	}
	wt.lastEpoch = epoch
	wt.seq++
	wt.lease = &wlease{token: [32]byte(append(w.id16b(), w.id16b()...)), inc: inc, issuedAt: now, expiresAt: now + uint64(leaseLifetime/time.Second)}
	c := wt.certOf()
	w.chk.granted(c)
	return c, "", true
}

func (wt *witness) certOf() cert {
	l := wt.lease
	return cert{epoch: wt.lastEpoch, seq: wt.seq, token: l.token, inc: l.inc, issuedAt: l.issuedAt, expiresAt: l.expiresAt}
}

// renew extends exactly the current lease while it is unexpired.
func (wt *witness) renew(c cert) (cert, wrefusal, bool) {
	now := wt.w.unix()
	l := wt.lease
	if l == nil || l.token != c.token || wt.lastEpoch != c.epoch || wt.seq != c.seq || l.inc != c.inc || now >= l.expiresAt {
		return cert{}, wNoLease, false
	}
	l.issuedAt, l.expiresAt = now, now+uint64(leaseLifetime/time.Second)
	return wt.certOf(), "", true
}

// relinquish ends the current lease when c holds it.
func (wt *witness) relinquish(c cert) (cert, wrefusal, bool) {
	if l := wt.lease; l != nil && l.token == c.token {
		wt.lease = nil
	}
	return cert{}, "", true
}

// crash loses the requests in flight; the witness restarts on its durable
// state after a while.
func (wt *witness) crash() {
	w := wt.w
	wt.p.dead = true
	w.tally.Crashes[partyWitness]++
	w.trace("witness crashed")
	w.after(w.between(200*time.Millisecond, 10*time.Second), nil, "witness restart", func() {
		wt.p = &proc{name: "witness"}
	})
}
