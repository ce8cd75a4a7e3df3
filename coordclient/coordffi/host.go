// Package coordffi is the call layer the client's foreign-language
// projections share: the C ABI (ffi/libphuxcoord) and the stdio bridge
// (phux-coordctl bridge). A Host keeps opaque integer handles to Clients
// and Mirrors and runs named methods whose parameters and results are
// JSON in the coordjson projection (schema coordjson.SchemaJSON), so that
// every language sees the same calls and the same shapes.
//
// Handles are integers, never pointers: a handle used after its close is
// recognised and refused ("handle.closed") instead of touching freed
// memory. A Host is safe for concurrent use; every method may be called
// from any thread.
//
// A Mirror is consumed by polling: MirrorNext returns the next
// notification (coordjson "mirror_event") or nothing after a timeout. No
// callback ever runs foreign code. Object changes are queued up to
// QueueLimit and then wait (the Mirror's own registration queue merges
// further changes per object meanwhile, so nothing is lost and memory
// stays bounded by the state); state changes and GAPs never wait.
package coordffi

import (
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordwire"
)

// QueueLimit is how many object changes a Mirror handle queues before
// its registration waits for MirrorNext.
const QueueLimit = 4096

// maxTransitions bounds the queued state changes and GAPs of one Mirror
// handle: a Mirror that changed state this often without being polled
// drops the newer ones (its status still tells the current state).
const maxTransitions = 4096

// DefaultTimeout bounds a call that takes no timeout_ms (0).
const DefaultTimeout = 30 * time.Second

// Host holds the handles of one process (the C library has one; the
// bridge one per stream).
type Host struct {
	mu      sync.Mutex
	next    uint64
	clients map[uint64]*client
	mirrors map[uint64]*mirror
	closed  map[uint64]bool // handles closed in this Host
	dl      deadlines       // the calls' timeouts
}

type client struct {
	c       *coordclient.Client
	mirrors map[uint64]*mirror
}

// NewHost returns an empty Host.
func NewHost() *Host {
	return &Host{next: 1, clients: map[uint64]*client{}, mirrors: map[uint64]*mirror{}, closed: map[uint64]bool{}}
}

func local(op, reason string) *coordjson.LocalError {
	return &coordjson.LocalError{Op: op, Reason: reason}
}

func malformed(op, reason, field string) *coordjson.LocalError {
	return &coordjson.LocalError{Op: op, Code: coordwire.MalformedMessage, Reason: reason, Field: field}
}

// handleErr is the refusal of an unknown or closed handle.
func (h *Host) handleErr(op string, id uint64) error {
	if h.closed[id] {
		return local(op, "handle.closed")
	}
	return local(op, "handle.unknown")
}

func (h *Host) client(op string, id uint64) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.clients[id]
	if !ok {
		return nil, h.handleErr(op, id)
	}
	return c, nil
}

func (h *Host) mirror(op string, id uint64) (*mirror, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.mirrors[id]
	if !ok {
		return nil, h.handleErr(op, id)
	}
	return m, nil
}

// Open dials a client from a JSON config (coordjson "config") and, if
// seed is not nil, the 32-byte workload key seed (instead of key_file).
// Open does not keep seed; the caller wipes it. The dial is bounded by
// timeout (0: DefaultTimeout).
func (h *Host) Open(config []byte, seed []byte, timeout time.Duration) (uint64, error) {
	v, err := coordjson.Parse("open", config)
	if err != nil {
		return 0, err
	}
	return h.open(v, seed, timeout)
}

func (h *Host) open(v any, seed []byte, timeout time.Duration) (uint64, error) {
	addr, cfg, err := coordjson.DecodeConfig("open", v, seed)
	if err != nil {
		return 0, err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	c, err := coordclient.Dial(ctx, addr, cfg)
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	id := h.next
	h.next++
	h.clients[id] = &client{c: c, mirrors: map[uint64]*mirror{}}
	h.mu.Unlock()
	return id, nil
}

// CloseClient closes a client and its Mirrors. A second close is
// "handle.closed".
func (h *Host) CloseClient(id uint64) error {
	h.mu.Lock()
	c, ok := h.clients[id]
	if !ok {
		err := h.handleErr("close", id)
		h.mu.Unlock()
		return err
	}
	delete(h.clients, id)
	h.closed[id] = true
	ms := make([]*mirror, 0, len(c.mirrors))
	for mid, m := range c.mirrors {
		delete(h.mirrors, mid)
		h.closed[mid] = true
		ms = append(ms, m)
	}
	h.mu.Unlock()
	for _, m := range ms {
		m.close()
	}
	return c.c.Close()
}

// CloseAll closes every handle (the bridge at end of input).
func (h *Host) CloseAll() {
	h.mu.Lock()
	ids := make([]uint64, 0, len(h.clients))
	for id := range h.clients {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.CloseClient(id)
	}
	h.dl.stop()
}

// Command decodes a JSON command (coordjson "command"), submits it and
// returns its coordjson "result" (with the error its tag calls for inside
// it). A refusal without a result (a request-scoped COORD_ERROR, a lost
// connection, a malformed command) is the error.
func (h *Host) Command(id uint64, command []byte, timeout time.Duration) ([]byte, error) {
	v, err := coordjson.Parse("command", command)
	if err != nil {
		return nil, err
	}
	return h.command(id, v, timeout)
}

func (h *Host) command(id uint64, v any, timeout time.Duration) ([]byte, error) {
	c, err := h.client("command", id)
	if err != nil {
		return nil, err
	}
	cmd, err := coordjson.DecodeCommand("command", v)
	if err != nil {
		return nil, err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	r, err := c.c.Command(ctx, cmd)
	if r == nil {
		return nil, err
	}
	return coordjson.Marshal(coordjson.Result(cmd.OperationID(), r, err)), nil
}

// Lookup looks an operation up by its id (32 hex digits); wait makes it
// wait until the operation leaves PENDING (WaitFinal).
func (h *Host) Lookup(id uint64, opID string, wait bool, timeout time.Duration) ([]byte, error) {
	c, err := h.client("lookup", id)
	if err != nil {
		return nil, err
	}
	v, err := coordjson.Hex16("lookup", map[string]any{"operation_id": opID}, "", "operation_id")
	if err != nil {
		return nil, err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	oid := coordwire.OperationID(v)
	var r *coordclient.Result
	if wait {
		r, err = c.c.WaitFinal(ctx, oid)
	} else {
		r, err = c.c.OperationResult(ctx, oid)
	}
	if r == nil {
		return nil, err
	}
	return coordjson.Marshal(coordjson.Result(oid, r, err)), nil
}

// Snapshot takes a verified snapshot (coordjson "snapshot").
func (h *Host) Snapshot(id uint64, timeout time.Duration) ([]byte, error) {
	c, err := h.client("snapshot", id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	s, err := c.c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return coordjson.Marshal(coordjson.Snapshot(s)), nil
}

// Session describes the client's connection (coordjson "session").
func (h *Host) Session(id uint64) ([]byte, error) {
	c, err := h.client("session", id)
	if err != nil {
		return nil, err
	}
	return coordjson.Marshal(coordjson.Session(c.c.Session())), nil
}

// Ping sends COORD_PING and waits for its PONG.
func (h *Host) Ping(id uint64, timeout time.Duration) error {
	c, err := h.client("ping", id)
	if err != nil {
		return err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	return c.c.Ping(ctx)
}

// MirrorOpen starts a Mirror on a client. config is null or a JSON object
// with credit_count and credit_bytes (zero: the negotiated maxima).
func (h *Host) MirrorOpen(id uint64, config []byte) (uint64, error) {
	var v any
	if len(config) > 0 {
		var err error
		if v, err = coordjson.Parse("mirror_open", config); err != nil {
			return 0, err
		}
	}
	return h.mirrorOpen(id, v)
}

func (h *Host) mirrorOpen(id uint64, v any) (uint64, error) {
	var mc coordclient.MirrorConfig
	if v != nil {
		m, err := coordjson.Members("mirror_open", v, "", "credit_count", "credit_bytes")
		if err != nil {
			return 0, err
		}
		n, err := coordjson.Uint("mirror_open", m, "", "credit_count", 1<<32-1, true)
		if err != nil {
			return 0, err
		}
		b, err := coordjson.Uint("mirror_open", m, "", "credit_bytes", 1<<32-1, true)
		if err != nil {
			return 0, err
		}
		mc.CreditCount, mc.CreditBytes = uint32(n), uint32(b)
	}
	h.mu.Lock()
	c, ok := h.clients[id]
	if !ok {
		err := h.handleErr("mirror_open", id)
		h.mu.Unlock()
		return 0, err
	}
	mid := h.next
	h.next++
	m := newMirror(c.c, mc)
	h.mirrors[mid] = m
	c.mirrors[mid] = m
	h.mu.Unlock()
	return mid, nil
}

// MirrorClose stops a Mirror (its client stays open).
func (h *Host) MirrorClose(id uint64) error {
	h.mu.Lock()
	m, ok := h.mirrors[id]
	if !ok {
		err := h.handleErr("mirror_close", id)
		h.mu.Unlock()
		return err
	}
	delete(h.mirrors, id)
	h.closed[id] = true
	for _, c := range h.clients {
		delete(c.mirrors, id)
	}
	h.mu.Unlock()
	m.close()
	return nil
}

// MirrorNext returns the next notification of a Mirror (coordjson
// "mirror_event"), waiting at most timeout (0: return at once); nil and
// no error when none came in time.
func (h *Host) MirrorNext(id uint64, timeout time.Duration) ([]byte, error) {
	m, err := h.mirror("mirror_next", id)
	if err != nil {
		return nil, err
	}
	return m.next(timeout)
}

// MirrorNextInto is MirrorNext into the caller's dst: the next
// notification is copied into dst and taken when it fits (n its length,
// ok); one that does not fit stays queued, and n is the length it needs
// (not ok). Nothing in time: 0, not ok, and no error. It lets a foreign
// caller poll into one buffer of its own instead of a buffer the library
// allocates and frees per notification.
func (h *Host) MirrorNextInto(id uint64, timeout time.Duration, dst []byte) (n int, ok bool, err error) {
	m, err := h.mirror("mirror_next_into", id)
	if err != nil {
		return 0, false, err
	}
	return m.nextInto(timeout, dst)
}

// MirrorStatus returns the Mirror's status (coordjson "status").
func (h *Host) MirrorStatus(id uint64) ([]byte, error) {
	m, err := h.mirror("mirror_status", id)
	if err != nil {
		return nil, err
	}
	return coordjson.Marshal(coordjson.Status(m.m.Status(), m.m.HasSynced())), nil
}

// MirrorWait waits until the Mirror has synced and its published cut is
// at least cut (0: synced only).
func (h *Host) MirrorWait(id uint64, cut uint64, timeout time.Duration) error {
	m, err := h.mirror("mirror_wait", id)
	if err != nil {
		return err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	if err := m.m.WaitSynced(ctx); err != nil {
		return err
	}
	return m.m.WaitForCut(ctx, coordwire.EventCut(cut))
}

// MirrorResync asks for a fresh snapshot and waits for it.
func (h *Host) MirrorResync(id uint64, timeout time.Duration) error {
	m, err := h.mirror("mirror_resync", id)
	if err != nil {
		return err
	}
	ctx, cancel := h.dl.start(timeout)
	defer cancel()
	return m.m.Resync(ctx)
}

// MirrorGet returns the record at ref ({"kind", "id"}), or JSON null.
func (h *Host) MirrorGet(id uint64, ref any) ([]byte, error) {
	m, err := h.mirror("mirror_get", id)
	if err != nil {
		return nil, err
	}
	r, err := coordjson.DecodeRef("mirror_get", ref, "ref")
	if err != nil {
		return nil, err
	}
	o, ok := m.m.Get(r)
	if !ok {
		return []byte("null"), nil
	}
	return coordjson.Marshal(coordjson.Object(o)), nil
}

// MirrorList returns every record of a kind (its spec name), ascending by
// id.
func (h *Host) MirrorList(id uint64, kind string) ([]byte, error) {
	m, err := h.mirror("mirror_list", id)
	if err != nil {
		return nil, err
	}
	k, err := coordjson.ObjectKindOf("mirror_list", kind, "kind")
	if err != nil {
		return nil, err
	}
	objs := m.m.List(k)
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = coordjson.Object(o)
	}
	return coordjson.Marshal(out), nil
}

// mirror is one Mirror handle: the Mirror, its registration, and the
// queue MirrorNext reads.
type mirror struct {
	m   *coordclient.Mirror
	reg *coordclient.Registration

	mu       sync.Mutex
	cond     *sync.Cond // changes wait on it when the queue is full
	q        [][]byte
	changes  int // object changes in q
	trans    int // transitions in q
	done     bool
	wake     chan struct{} // closed and replaced by a push that a next waits for
	waiting  bool          // a next took wake and may wait on it
	lastAuth coordclient.AuthorityState

	arena []byte // see free; the registration's goroutine's alone
}

func newMirror(c *coordclient.Client, cfg coordclient.MirrorConfig) *mirror {
	x := &mirror{wake: make(chan struct{})}
	x.cond = sync.NewCond(&x.mu)
	cfg.OnTransition = func(t coordclient.MirrorTransition) {
		x.pushTransition(coordjson.Transition(t), t.State == coordclient.Live)
	}
	x.m = coordclient.NewMirror(c, cfg)
	x.reg = x.m.AddHandler(coordclient.Handler{
		OnAdd: func(o coordclient.Object, initial bool) {
			x.pushChange(x.encoded(coordjson.AppendAdd(x.free(), o, initial)))
		},
		OnUpdate: func(old, new coordclient.Object) {
			x.pushChange(x.encoded(coordjson.AppendUpdate(x.free(), old, new)))
		},
		OnDelete: func(last coordclient.Object) {
			x.pushChange(x.encoded(coordjson.AppendDelete(x.free(), last)))
		},
		OnReplaced: func(cut coordwire.EventCut, reason coordclient.ReplaceReason) {
			x.pushChange(coordjson.Marshal(coordjson.Replaced(cut, reason)))
		},
	})
	return x
}

// arenaSize is the size of the blocks a Mirror handle encodes its object
// changes into, one after another: one allocation per block, not one per
// change. A block is garbage once every change in it has been taken.
const arenaSize = 64 << 10

// free returns the unused tail of the arena, empty, for the next change
// to be appended to (only the registration's goroutine calls it).
func (x *mirror) free() []byte {
	if cap(x.arena)-len(x.arena) < arenaSize/16 {
		x.arena = make([]byte, 0, arenaSize)
	}
	return x.arena[len(x.arena):]
}

// encoded takes b, appended to free(), out of the arena: capped, so that
// nothing appended later can reach the next change. A change that did
// not fit has its own array and leaves the arena as it was.
func (x *mirror) encoded(b []byte) []byte {
	if tail := x.arena[len(x.arena):]; len(b) > 0 && &b[:1][0] == &tail[:1][0] {
		x.arena = x.arena[:len(x.arena)+len(b)]
	}
	return b[:len(b):len(b)]
}

// authorityAfterLive is called by next (under mu) after it handed out a
// LIVE transition: when the published authority is not the last one
// reported (the first publication, a new activation), an authority
// notification goes to the front of the queue.
func (x *mirror) authorityAfterLive() {
	a := x.m.Status().Authority
	if a == x.lastAuth || a == (coordclient.AuthorityState{}) {
		return
	}
	x.lastAuth = a
	b := append([]byte{'T'}, coordjson.Marshal(coordjson.AuthorityChange(a))...)
	x.q = append([][]byte{b}, x.q...)
	x.trans++
}

// signal wakes the next calls waiting for a notification, if any: a push
// that nobody waits for costs no channel.
func (x *mirror) signal() {
	if x.waiting {
		close(x.wake)
		x.wake = make(chan struct{})
		x.waiting = false
	}
}

// resumeAt is how few queued changes let a full queue's registration go
// on: room for a quarter of the queue, so that a consumer taking one
// change at a time does not wake it once per change.
const resumeAt = QueueLimit - QueueLimit/4

// taken is called (under mu) after object changes left the queue. (A
// Signal that finds no registration waiting costs an atomic load.)
func (x *mirror) taken() {
	if x.changes <= resumeAt {
		x.cond.Signal()
	}
}

// pushChange queues one encoded object change.
func (x *mirror) pushChange(b []byte) {
	x.mu.Lock()
	for x.changes >= QueueLimit && !x.done {
		x.cond.Wait()
	}
	if !x.done {
		x.q = append(x.q, b)
		x.changes++
		x.signal()
	}
	x.mu.Unlock()
}

func (x *mirror) pushTransition(v map[string]any, live bool) {
	b := coordjson.Marshal(v)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done {
		return
	}
	if x.trans >= maxTransitions {
		return
	}
	tag := byte('T') // tagged: counted as a transition
	if live {
		tag = 'L' // and followed by the authority, if new
	}
	x.q = append(x.q, append([]byte{tag}, b...))
	x.trans++
	x.signal()
}

// tagged reports whether queued b is a transition, whose first byte is
// its tag ('T', or 'L' for LIVE: pushTransition) and not handed out.
func tagged(b []byte) bool { return b[0] == 'T' || b[0] == 'L' }

// pop takes the front of the queue (under mu, which holds at least one).
func (x *mirror) pop() []byte {
	b := x.q[0]
	x.q[0] = nil
	x.q = x.q[1:]
	if tagged(b) {
		if b[0] == 'L' {
			x.authorityAfterLive()
		}
		x.trans--
		return b[1:]
	}
	x.changes--
	return b
}

// await waits, for at most the time left of t (started on first use),
// until something is queued or the handle closes; it reports whether the
// caller should look again (false: the time is up). Called without mu.
func (x *mirror) await(t **time.Timer, timeout time.Duration) bool {
	x.mu.Lock()
	if x.done || len(x.q) > 0 {
		x.mu.Unlock()
		return true
	}
	x.waiting = true
	wake := x.wake
	x.mu.Unlock()
	if *t == nil {
		*t = time.NewTimer(timeout)
	}
	select {
	case <-wake:
		return true
	case <-(*t).C:
		return false
	}
}

// poll waits, for at most timeout, until something is queued, then runs
// took under mu; false (and no error) when nothing came in time, and
// "handle.closed" for op when the handle closed.
func (x *mirror) poll(op string, timeout time.Duration, took func()) (bool, error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		x.mu.Lock()
		if x.done {
			x.mu.Unlock()
			return false, local(op, "handle.closed")
		}
		if len(x.q) > 0 {
			took()
			x.mu.Unlock()
			return true, nil
		}
		x.mu.Unlock()
		if timeout <= 0 || !x.await(&t, timeout) {
			return false, nil
		}
	}
}

// take waits as next does for the first notification, then takes it and
// every one queued behind it, at most max, under one hold of the lock;
// nil when none came in time.
func (x *mirror) take(max int, timeout time.Duration, into [][]byte) ([][]byte, error) {
	ok, err := x.poll("mirror_next", timeout, func() {
		for len(into) < max && len(x.q) > 0 {
			into = append(into, x.pop())
		}
		x.taken()
	})
	if !ok {
		return nil, err
	}
	return into, nil
}

// nextInto waits as next does for the first notification, then copies
// it into dst and takes it when it fits (n its length, ok); when it does
// not fit it stays queued and n is its length (not ok). Nothing in time:
// 0, not ok.
func (x *mirror) nextInto(timeout time.Duration, dst []byte) (n int, ok bool, err error) {
	_, err = x.poll("mirror_next_into", timeout, func() {
		n = len(x.q[0])
		if tagged(x.q[0]) {
			n-- // the tag is not handed out (pop)
		}
		if n <= len(dst) {
			n, ok = copy(dst, x.pop()), true
			x.taken()
		}
	})
	return n, ok, err
}

func (x *mirror) next(timeout time.Duration) ([]byte, error) {
	var one [1][]byte
	bs, err := x.take(1, timeout, one[:0])
	if len(bs) == 0 {
		return nil, err
	}
	return bs[0], nil
}

func (x *mirror) close() {
	x.mu.Lock()
	x.done = true
	x.q = nil
	x.cond.Broadcast()
	x.signal()
	x.mu.Unlock()
	x.reg.Remove()
	x.m.Close()
}
