// Package exchange records the snapshot and replay exchange vectors of
// vectors/exchanges.json from the real server (package coordserver) over
// a real Unix socket, deterministically.
//
// Everything the frames depend on is fixed: the coordinator's store is a
// memstore whose CoordinatorId is stored before activation, the workload
// and authority keys come from published seeds, the server's Config.Rand
// and the witness's Config.Rand are a SHA-256 counter stream from a
// published label, and the server's clock (Config.Now, also the store's
// cut-lease clock) is frozen at T0 and only moved by the recording (the
// cursor-expiry step). The witness and its lease run on real time (their
// certificates appear only in the handshake, which is not recorded), as do
// the handshakes' own nonces.
package exchange

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/vectors/vectorspb"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

// T0 is the server clock of the recording: 2100-01-01T00:00:00Z, after
// any real time the recording runs at, so that the grants (which the
// client checks on real time) are unexpired on both clocks.
const T0 = 4102444800

// RandLabel is the label of the deterministic random stream: block i is
// SHA-256("phux-coordinator-vectors/rand/" + RandLabel || u64_be(i)).
const RandLabel = "exchanges"

// PageRecords is the max_page_records the server offers, so that five
// records make three pages.
const PageRecords = 2

// ID is vectors.ID: the first 16 bytes of
// SHA-256("phux-coordinator-vectors/id/" + label).
func ID(label string) [16]byte {
	h := sha256.Sum256([]byte("phux-coordinator-vectors/id/" + label))
	var id [16]byte
	copy(id[:], h[:16])
	return id
}

// Bytes32 is vectors.Bytes32: SHA-256("phux-coordinator-vectors/bytes/" + label).
func Bytes32(label string) [32]byte {
	return sha256.Sum256([]byte("phux-coordinator-vectors/bytes/" + label))
}

// stream is a deterministic io.Reader safe for concurrent use.
type stream struct {
	mu    sync.Mutex
	label string
	n     uint64
	buf   []byte
}

func (s *stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) < len(p) {
		h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("phux-coordinator-vectors/rand/"+s.label), s.n))
		s.n++
		s.buf = append(s.buf, h[:]...)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// clock is the frozen server clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const wait = 10 * time.Second

// Vector is one recorded exchange with its name, group and note.
type Vector struct {
	Name, Group, Note string
	Case              *vectorspb.ExchangeCase
}

// recorder is one recording: a witness, a server, a writer connection and
// the reader connection whose frames are recorded.
type recorder struct {
	clk   *clock
	srv   *coordserver.Server
	w, r  *rawframe.Conn
	wreq  uint32
	steps []*vectorspb.ExchangeStep
	err   error
	ops   int

	lastSub coordwire.SubscriptionID // the last reserved subscription applied
}

func (x *recorder) fail(err error) {
	if x.err == nil && err != nil {
		x.err = err
	}
}

// send sends f on the reader connection and records it.
func (x *recorder) send(f coordwire.Frame, note string) {
	if x.err != nil {
		return
	}
	wire := coordwire.AppendFrame(nil, f)
	x.steps = append(x.steps, &vectorspb.ExchangeStep{Receiver: "SERVER", Wire: wire, Now: uint64(x.clk.Now().Unix()), Note: note})
	x.fail(x.r.SendRaw(wire))
}

// recv reads the next frame the server sends the reader (background
// frames skipped), requires type t and records it.
func recv[T coordwire.Frame](x *recorder, note string) T {
	var zero T
	if x.err != nil {
		return zero
	}
	f, err := x.r.Read(wait)
	if err != nil {
		x.fail(fmt.Errorf("reading %T: %w", zero, err))
		return zero
	}
	t, body := x.r.LastBody()
	x.steps = append(x.steps, &vectorspb.ExchangeStep{Receiver: "CLIENT", Wire: rawframe.Envelope(byte(t), body), Now: uint64(x.clk.Now().Unix()), Note: note})
	m, ok := f.(T)
	if !ok {
		x.fail(fmt.Errorf("got %v, want %T", f.Type(), zero))
		return zero
	}
	return m
}

// take returns the recorded steps and starts a new exchange.
func (x *recorder) take() []*vectorspb.ExchangeStep {
	s := x.steps
	x.steps = nil
	return s
}

// create commits CREATE_OBJECTIVE on the writer connection (not recorded).
func (x *recorder) create(n int) {
	for range n {
		if x.err != nil {
			return
		}
		x.ops++
		x.wreq++
		p := coordwire.CreateObjective{ObjectiveID: ID(fmt.Sprintf("exchange/objective/%d", x.ops)), Schema: 1,
			Document: []byte(fmt.Sprintf(`{"objective":%d}`, x.ops))}
		cmd := &coordwire.CoordCommand{RequestID: x.wreq, Guard: x.w.Guard(), OperationID: ID(fmt.Sprintf("exchange/operation/%d", x.ops)),
			Kind: coordwire.CommandCreateObjective, Payload: p.AppendTLV(nil)}
		if err := x.w.Send(cmd); err != nil {
			x.fail(err)
			return
		}
		res, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](x.w, x.wreq, wait)
		if err != nil {
			x.fail(fmt.Errorf("command %d: %w", x.ops, err))
			return
		}
		if res.Operation.Tag != coordwire.OperationSucceeded {
			x.fail(fmt.Errorf("command %d: %v", x.ops, res.Operation.Tag))
		}
	}
}

// Record runs the recording and returns the exchange vectors in a fixed
// order.
func Record(ctx context.Context) (out []Vector, err error) {
	dir, err := os.MkdirTemp("", "vx")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rnd := &stream{label: RandLabel}

	// The witness, in process on a real Unix socket.
	wdir := filepath.Join(dir, "w")
	id, err := witness.Init(wdir)
	if err != nil {
		return nil, err
	}
	ws, err := witness.Open(witness.Config{StateDir: wdir, Lifetime: 60 * time.Second, Rand: rnd})
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	wl, err := net.Listen("unix", filepath.Join(dir, "w.sock"))
	if err != nil {
		return nil, err
	}
	wdone := make(chan struct{})
	go func() { _ = ws.Serve(ctx, wl); close(wdone) }()
	defer func() { cancel(); <-wdone }()

	// Keys and the registry.
	seed := func(l string) []byte { b := Bytes32(l); return b[:] }
	auth, err := keystore.AuthorityKeyFromSeed(seed("exchange/authority-key"))
	if err != nil {
		return nil, err
	}
	writerKey, err := keystore.WorkloadKeyFromSeed(seed("exchange/writer-key"))
	if err != nil {
		return nil, err
	}
	readerKey, err := keystore.WorkloadKeyFromSeed(seed("exchange/reader-key"))
	if err != nil {
		return nil, err
	}
	regDir := filepath.Join(dir, "reg")
	if err := os.Mkdir(regDir, 0o700); err != nil {
		return nil, err
	}
	expires := time.Unix(T0, 0).Add(365 * 24 * time.Hour)
	if _, err := keystore.AddKey(regDir, writerKey.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, expires); err != nil {
		return nil, err
	}
	if _, err := keystore.AddKey(regDir, readerKey.Public(), coordwire.ScopeWorkRead, expires); err != nil {
		return nil, err
	}
	watcher, err := keystore.NewWatcher(ctx, regDir, keystore.WatcherConfig{Interval: time.Second})
	if err != nil {
		return nil, err
	}
	defer watcher.Close()

	// The store, with its CoordinatorId fixed before activation.
	clk := &clock{now: time.Unix(T0, 0)}
	st := memstore.New(memstore.Config{Now: clk.Now})
	defer st.Close()
	if err := st.Update(ctx, func(tx coordstore.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		m.CoordinatorID = ID("exchange/coordinator")
		return tx.PutMeta(m)
	}); err != nil {
		return nil, err
	}

	limits := coordwire.ReferenceLimits()
	limits.MaxPageRecords = PageRecords
	srv, err := coordserver.New(ctx, coordserver.Config{
		Store:         st,
		Witness:       witness.ClientConfig{Address: "unix:" + filepath.Join(dir, "w.sock"), WitnessPublicKey: id.PublicKey},
		AuthorityKey:  auth,
		Registry:      watcher,
		Limits:        limits,
		Capabilities:  coordwire.CapEventReplay,
		Quotas:        coordserver.Quotas{QueueFramesPerSubscription: 1},
		Now:           clk.Now,
		Rand:          rnd,
		SweepInterval: -1,
	})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	sock := filepath.Join(dir, "c.sock")
	l, err := coordserver.ListenUnix(sock)
	if err != nil {
		return nil, err
	}
	go srv.Serve(l)

	dial := func(k *keystore.WorkloadKey, scope coordwire.Scope) (*rawframe.Conn, error) {
		c, err := rawframe.Dial(ctx, "unix:"+sock, rawframe.Options{})
		if err != nil {
			return nil, err
		}
		if _, err := c.Handshake(workload.ClientConfig{WorkloadKey: k, PinnedAuthorityFingerprint: auth.Fingerprint(),
			RequestedScope: scope, RequestedExpiry: time.Unix(T0, 0).Add(24 * time.Hour), OfferedCapabilities: coordwire.CapEventReplay,
			ClientName: "phux-coordinator-vectors"}, wait); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	x := &recorder{clk: clk, srv: srv}
	if x.w, err = dial(writerKey, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand); err != nil {
		return nil, fmt.Errorf("writer handshake: %w", err)
	}
	defer x.w.Close()
	if x.r, err = dial(readerKey, coordwire.ScopeWorkRead); err != nil {
		return nil, fmt.Errorf("reader handshake: %w", err)
	}
	defer x.r.Close()
	ok := x.r.HelloOK()
	lim := &vectorspb.Limits{MaxFrameBytes: ok.Limits.MaxFrameBytes, MaxPageBytes: ok.Limits.MaxPageBytes, MaxPageRecords: uint32(ok.Limits.MaxPageRecords),
		MaxTypedPayloadBytes: ok.Limits.MaxTypedPayloadBytes, MaxEventCreditCount: ok.Limits.MaxEventCreditCount, MaxEventCreditBytes: ok.Limits.MaxEventCreditBytes}
	add := func(name, note string) {
		out = append(out, Vector{Name: "exchange/" + name, Group: "exchange/" + path.Dir(name), Note: note,
			Case: &vectorspb.ExchangeCase{Limits: lim, NegotiatedCapabilities: uint64(ok.NegotiatedCapabilities), Steps: x.take(),
				ReaderKeyId: ok.WorkloadGrant.KeyID[:], ReaderScope: uint64(ok.WorkloadGrant.EffectiveScope)}})
	}
	x.record(add)
	if x.err != nil {
		return nil, x.err
	}
	if err := x.r.ExpectSilence(50 * time.Millisecond); err != nil {
		return nil, fmt.Errorf("after the last exchange: %w", err)
	}
	return out, nil
}

// record runs the exchanges in order; add closes one.
func (x *recorder) record(add func(name, note string)) {
	g := x.r.Guard()
	req := uint32(0)
	next := func() uint32 { req++; return req }

	// snapshot/empty: the store holds no record yet.
	open := next()
	x.send(&coordwire.OpenSnapshot{RequestID: open, Guard: g}, "OPEN_SNAPSHOT without a reserved subscription, on a store holding no record")
	b := recv[*coordwire.SnapshotBegin](x, "SNAPSHOT_BEGIN on the OPEN's request: no first_cursor (nothing to page), lease_expires_at = now + 60")
	recv[*coordwire.SnapshotEnd](x, "SNAPSHOT_END right after BEGIN on the same request: page_count 0, record_count 0, the digest of the header alone")
	add("snapshot/empty", "An empty snapshot recorded from the server: END follows BEGIN on the OPEN request (§9, §13).")

	// snapshot/one_page: one objective (the writer's OPERATION record is
	// not the reader's to see).
	x.create(1)
	open = next()
	x.send(&coordwire.OpenSnapshot{RequestID: open, Guard: g}, "OPEN_SNAPSHOT without a reserved subscription")
	b = recv[*coordwire.SnapshotBegin](x, "SNAPSHOT_BEGIN: the OPEN's terminal reply, with first_cursor")
	if x.err != nil {
		return
	}
	n := next()
	x.send(&coordwire.SnapshotNext{RequestID: n, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor}, "SNAPSHOT_NEXT with BEGIN's first_cursor")
	recv[*coordwire.SnapshotPage](x, "SNAPSHOT_PAGE 0, final: no next_cursor")
	recv[*coordwire.SnapshotEnd](x, "SNAPSHOT_END on the final page's request: page_count 1 and the §9 digest over the page's records")
	add("snapshot/one_page", "A one-page snapshot recorded from the server.")

	// snapshot/multi_page: five objectives, two records a page, with a
	// reserved subscription applied with zero credit (it becomes the
	// subscription the replays heal).
	x.create(4)
	x.pages(next, g, true, "multi_page")
	if x.err != nil {
		return
	}
	add("snapshot/multi_page", "A three-page snapshot (max_page_records 2) with a reserved subscription, recorded from the server: "+
		"every nonfinal page carries next_cursor and ends its NEXT request; the final page's request ends with END; "+
		"SNAPSHOT_APPLIED supplies the reserved subscription's only initial credit (zero here) and is ACKed.")
	sub := x.lastSub

	// replay/one_page: two objectives overflow the zero-credit
	// subscription (a queue of one frame) → GAP; the replay heals it.
	x.create(2)
	x.replay(next, g, sub, "one_page")
	add("replay/one_page", "A one-page replay recorded from the server: the GAP QUEUE_OVERFLOW that paused the subscription "+
		"(no event delivered: zero credit, a queue of one frame), OPEN_REPLAY after its last contiguous event, BEGIN with replay_cut, "+
		"one page of two ReplayEvents, END with the §9/§10 digest, REPLAY_APPLIED (zero credit) and its ACK.")

	// replay/multi_page: five more objectives → GAP; three pages.
	x.create(5)
	x.replay(next, g, sub, "multi_page")
	add("replay/multi_page", "A three-page replay recorded from the server, on the same subscription after its second GAP "+
		"(after_event_sequence is the previous replay's replay_cut).")

	// snapshot/cursor_expired: a reserving snapshot whose lease ends at
	// 60 s on the injected clock before its second page.
	open = next()
	x.send(&coordwire.OpenSnapshot{RequestID: open, Guard: g, ReserveSubscription: true}, "OPEN_SNAPSHOT with reserve_subscription")
	b = recv[*coordwire.SnapshotBegin](x, "SNAPSHOT_BEGIN with the reserved subscription and lease_expires_at = now + 60")
	if x.err != nil {
		return
	}
	n = next()
	x.send(&coordwire.SnapshotNext{RequestID: n, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor}, "SNAPSHOT_NEXT with first_cursor")
	p := recv[*coordwire.SnapshotPage](x, "SNAPSHOT_PAGE 0 with next_cursor")
	if x.err != nil {
		return
	}
	x.clk.advance(61 * time.Second)
	x.waitLeases()
	gap := recv[*coordwire.Gap](x, "the lease ended (60 s on the server clock): the reserved subscription is paused with GAP CURSOR_INVALID, "+
		"delivery cut 0 and the snapshot's base as event cut")
	n = next()
	x.send(&coordwire.SnapshotNext{RequestID: n, SnapshotID: b.SnapshotID, Cursor: p.NextCursor}, "SNAPSHOT_NEXT with the page's next_cursor, after the lease expired")
	e := recv[*coordwire.CoordError](x, "request-scoped COORD_ERROR CURSOR_INVALID: no data is substituted; the connection stays up")
	if x.err == nil && (e.Code != coordwire.CursorInvalid || e.RequestID != n) {
		x.fail(fmt.Errorf("expired cursor: %v request %d", e.Code, e.RequestID))
	}
	add("snapshot/cursor_expired", "A cursor used after its lease's 60 s, recorded from the server with its clock moved by 61 s: "+
		"CURSOR_INVALID for the NEXT, and the reserved subscription paused with GAP CURSOR_INVALID.")

	// replay/empty: the subscription that GAP paused has seen everything
	// up to its cut, so its replay holds no event.
	x.steps = append(x.steps, &vectorspb.ExchangeStep{Receiver: "CLIENT", Wire: coordwire.AppendFrame(nil, gap), Now: uint64(x.clk.Now().Unix()),
		Note: "the GAP CURSOR_INVALID of exchange/snapshot/cursor_expired (the same frame) that paused the reserved subscription"})
	x.replayFrom(next, g, gap, "empty")
	add("replay/empty", "An empty replay recorded from the server: the subscription paused at the snapshot's base by its lease's expiry "+
		"replays from there; nothing was committed since, so BEGIN has no first_event and no first_cursor and END follows on the OPEN request.")
}

// pages records a snapshot read to END (and, reserving, applied).
func (x *recorder) pages(next func() uint32, g coordwire.AuthorityGuard, reserve bool, name string) {
	open := next()
	x.send(&coordwire.OpenSnapshot{RequestID: open, Guard: g, ReserveSubscription: reserve}, "OPEN_SNAPSHOT with reserve_subscription")
	b := recv[*coordwire.SnapshotBegin](x, "SNAPSHOT_BEGIN: the OPEN's terminal reply, with first_cursor and the reserved subscription")
	if x.err != nil {
		return
	}
	cur := b.FirstCursor
	for i := 0; x.err == nil; i++ {
		n := next()
		x.send(&coordwire.SnapshotNext{RequestID: n, SnapshotID: b.SnapshotID, Cursor: cur}, fmt.Sprintf("SNAPSHOT_NEXT for page %d with the cursor last received", i))
		p := recv[*coordwire.SnapshotPage](x, fmt.Sprintf("SNAPSHOT_PAGE %d", i))
		if x.err != nil {
			return
		}
		if p.NextCursor == nil {
			x.steps[len(x.steps)-1].Note += ", final: no next_cursor"
			break
		}
		x.steps[len(x.steps)-1].Note += ", with next_cursor: it ends its NEXT request"
		cur = p.NextCursor
	}
	recv[*coordwire.SnapshotEnd](x, "SNAPSHOT_END on the final page's request: page_count, record_count and the §9 digest over every page's records")
	if reserve {
		a := next()
		x.send(&coordwire.SnapshotApplied{RequestID: a, SnapshotID: b.SnapshotID, SubscriptionID: b.SubscriptionID}, "SNAPSHOT_APPLIED with zero initial credit")
		recv[*coordwire.Ack](x, "ACK of SNAPSHOT_APPLIED: the reserved subscription is LIVE")
		x.lastSub = b.SubscriptionID
	}
}

// replay records the GAP that pauses sub and its replay.
func (x *recorder) replay(next func() uint32, g coordwire.AuthorityGuard, sub coordwire.SubscriptionID, name string) {
	gap := recv[*coordwire.Gap](x, "GAP QUEUE_OVERFLOW: the zero-credit subscription's one-frame queue overflowed")
	if x.err != nil {
		return
	}
	if gap.SubscriptionID != sub || gap.Reason != coordwire.GapQueueOverflow {
		x.fail(fmt.Errorf("GAP %+v", gap))
		return
	}
	x.replayFrom(next, g, gap, name)
}

func (x *recorder) replayFrom(next func() uint32, g coordwire.AuthorityGuard, gap *coordwire.Gap, name string) {
	if x.err != nil {
		return
	}
	open := next()
	x.send(&coordwire.OpenReplay{RequestID: open, Guard: g, SubscriptionID: gap.SubscriptionID, AfterEventSequence: gap.LastContiguousEvent},
		"OPEN_REPLAY of the paused subscription after the GAP's last contiguous event")
	b := recv[*coordwire.ReplayBegin](x, "REPLAY_BEGIN with replay_cut fixed at the OPEN")
	if x.err != nil {
		return
	}
	if b.FirstCursor == nil {
		x.steps[len(x.steps)-1].Note += "; no first_event and no first_cursor: END follows on the OPEN's request"
	} else {
		x.steps[len(x.steps)-1].Note += ", first_event and first_cursor: the OPEN's terminal reply"
		cur := b.FirstCursor
		for i := 0; x.err == nil; i++ {
			n := next()
			x.send(&coordwire.ReplayNext{RequestID: n, ReplayID: b.ReplayID, Cursor: cur}, fmt.Sprintf("REPLAY_NEXT for page %d with the cursor last received", i))
			p := recv[*coordwire.ReplayPage](x, fmt.Sprintf("REPLAY_PAGE %d", i))
			if x.err != nil {
				return
			}
			if p.NextCursor == nil {
				x.steps[len(x.steps)-1].Note += ", final: no next_cursor"
				break
			}
			x.steps[len(x.steps)-1].Note += ", with next_cursor: it ends its NEXT request"
			cur = p.NextCursor
		}
	}
	recv[*coordwire.ReplayEnd](x, "REPLAY_END: page_count, event_count and the §10 digest over every page's events")
	a := next()
	x.send(&coordwire.ReplayApplied{RequestID: a, ReplayID: b.ReplayID, SubscriptionID: gap.SubscriptionID}, "REPLAY_APPLIED with zero credit")
	recv[*coordwire.Ack](x, "ACK of REPLAY_APPLIED: the same subscription is LIVE again")
}

// waitLeases waits until the server's lease reaper has released every
// lease (it runs every 200 ms of real time against the injected clock),
// so that the expiry's GAP precedes the next frame the reader sends.
func (x *recorder) waitLeases() {
	deadline := time.Now().Add(wait)
	for x.srv.Usage().Server.Leases != 0 {
		if time.Now().After(deadline) {
			x.fail(errors.New("the expired lease was not reaped"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
