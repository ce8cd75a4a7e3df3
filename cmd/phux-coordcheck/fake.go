package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/workload"
)

// The fake coordinator of client mode: a small, correct coordinator over
// the real handshake (workload.ServerHandshake) that keeps Objectives,
// operation results and an event log in memory and serves commands,
// lookups, snapshots, subscriptions, credit, GAP and replay — with a
// tamper point at each frame it sends, through which a scenario
// misbehaves. Every frame the client sends, and every connection opened
// and closed, is reported to the scenario's judge (obs).

// obs is one observation of the client under test.
type obs struct {
	conn   int  // connection number, from 1
	opened bool // the handshake completed (hello is the HELLO_OK sent)
	hello  *coordwire.CoordHelloOK
	closed bool            // the connection ended (err says how)
	f      coordwire.Frame // a frame the client sent
	err    error
}

// activation is the authority the fake presents.
type activation struct {
	coord       coordwire.CoordinatorID
	epoch       coordwire.AuthorityEpoch
	seq         coordwire.ActivationSequence
	incarnation coordwire.IncarnationID
	token       [32]byte
	witnessID   coordwire.ActivationWitnessID
}

func (a activation) guard() coordwire.AuthorityGuard {
	return coordwire.AuthorityGuard{CoordinatorID: a.coord, AuthorityEpoch: a.epoch, ActivationSequence: a.seq, FencingTokenSHA256: cert.TokenHash(a.token)}
}

// script is a scenario's misbehaviour; every field is optional.
type script struct {
	// limits is the server's limit offer (zero: reference limits).
	limits coordwire.Limits
	// caps is the capability offer (zero: every known capability).
	caps coordwire.Capabilities
	// helloOK tampers with COORD_HELLO_OK (conn is its number).
	helloOK func(conn int, ok *coordwire.CoordHelloOK, f *fake)
	// command runs before a COORD_COMMAND is answered; drop closes the
	// connection instead (a bare close mid-command, after the commit).
	command func(c *fconn, m *coordwire.CoordCommand) (drop bool)
	// snapshotPage, snapshotEnd, replayPage, replayEnd tamper with the
	// frame before it is sent.
	snapshotPage func(p *coordwire.SnapshotPage)
	snapshotEnd  func(e *coordwire.SnapshotEnd)
	replayPage   func(p *coordwire.ReplayPage)
	replayEnd    func(e *coordwire.ReplayEnd)
	// applied runs after the ACK of SNAPSHOT_APPLIED or REPLAY_APPLIED.
	applied func(c *fconn, s *fsub, replay bool)
	// snapshotBegin tampers with SNAPSHOT_BEGIN.
	snapshotBegin func(b *coordwire.SnapshotBegin)
	// pageRecords, when nonzero, paginates snapshots by this many
	// records instead of the negotiated cap.
	pageRecords int
	// setup prepares the fake's state; activation its authority.
	setup      func(f *fake)
	activation func(a *activation)
	// exchange plays a recorded exchange at OPEN_SNAPSHOT instead.
	exchange *recorded
}

// fake is one scenario's coordinator: its state is shared by the
// scenario's connections.
type fake struct {
	x      *clientTarget
	sc     *script
	obs    chan obs
	mu     sync.Mutex
	act    activation
	ops    map[coordwire.OperationID]coordwire.OperationResult
	recs   map[coordwire.ObjectRef]coordwire.SnapshotRecord
	events []coordwire.ReplayEvent // sequence i+1 at index i
	conns  int
}

func newFake(x *clientTarget, sc *script) *fake {
	f := &fake{x: x, sc: sc, obs: make(chan obs, 4096), ops: map[coordwire.OperationID]coordwire.OperationResult{},
		recs: map[coordwire.ObjectRef]coordwire.SnapshotRecord{}}
	f.act = activation{coord: coordwire.NewCoordinatorID(), epoch: 5, seq: 3, incarnation: coordwire.NewIncarnationID(), witnessID: coordwire.ActivationWitnessID{7}}
	_, _ = rand.Read(f.act.token[:])
	if sc.activation != nil {
		sc.activation(&f.act)
	}
	if sc.setup != nil {
		sc.setup(f)
	}
	return f
}

func (f *fake) report(o obs) {
	select {
	case f.obs <- o:
	default: // a judge that stopped reading
	}
}

// certificate issues a certificate of act signed by the runner's witness
// key, valid from now for 60 s.
func (f *fake) certificate(act activation, key ed25519.PrivateKey) coordwire.ActivationCertificate {
	c, err := cert.Issue(cert.Grant{WitnessID: act.witnessID, CoordinatorID: act.coord, ActivationSequence: act.seq,
		AuthorityEpoch: act.epoch, IncarnationID: act.incarnation, FencingToken: act.token}, uint64(time.Now().Unix()), 60, key)
	if err != nil {
		panic(err)
	}
	return c
}

// serve accepts connections on l until ctx ends.
func (f *fake) serve(ctx context.Context, l net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	context.AfterFunc(ctx, func() { l.Close() })
	for {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		n := f.conns
		f.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := context.AfterFunc(ctx, func() { nc.Close() })
			defer stop()
			defer nc.Close()
			c := &fconn{f: f, n: n, Conn: rawframe.Wrap(nc, coordwire.RoleServer), subs: map[coordwire.SubscriptionID]*fsub{}}
			err := c.serve(ctx)
			f.report(obs{conn: n, closed: true, err: err})
		}()
	}
}

// fconn is one connection of the fake.
type fconn struct {
	*rawframe.Conn
	f      *fake
	n      int
	limits coordwire.Limits
	caps   coordwire.Capabilities
	act    activation
	subs   map[coordwire.SubscriptionID]*fsub
	snaps  map[string]*fpages // by cursor
	// exchange playback state
	xi   int
	xreq map[uint32]uint32
}

// fsub is one subscription of a connection.
type fsub struct {
	id        coordwire.SubscriptionID
	live      bool
	paused    bool
	credN     uint64
	credB     uint64
	deliv     uint64 // last delivery sequence sent
	lastEvent uint64 // last contiguous event cut
}

// fpages is the pages left of a snapshot or replay.
type fpages struct {
	snapshot bool
	id       [16]byte
	sub      *fsub
	reqIndex uint32
	pages    [][]byte // record or event images per page
	index    int
	cursors  [][]byte
	end      coordwire.Frame
}

func (c *fconn) serve(ctx context.Context) error {
	f := c.f
	f.mu.Lock()
	act := f.act
	f.mu.Unlock()
	c.act = act
	lim := f.sc.limits
	if lim == (coordwire.Limits{}) {
		lim = coordwire.ReferenceLimits()
	}
	caps := f.sc.caps
	if caps == 0 {
		caps = coordwire.KnownCapabilities
	}
	reg := workload.RegistryFunc(func(id [32]byte) (workload.RegistryEntry, bool) {
		if id != edstrict.KeyID(f.x.clientPub) {
			return workload.RegistryEntry{}, false
		}
		return workload.RegistryEntry{PublicKey: f.x.clientPub, Ceiling: coordwire.KnownScopes, Expires: time.Now().Add(24 * time.Hour)}, true
	})
	var sent *coordwire.CoordHelloOK
	res, err := c.ServeHandshake(workload.ServerConfig{AuthorityKey: f.x.authority, Incarnation: act.incarnation, Registry: reg, Limits: lim, Capabilities: caps},
		func(r *workload.ServerResult) *coordwire.CoordHelloOK {
			ok := r.HelloOK(act.coord, act.epoch, coordwire.MinOperationResultRetentionSecs, f.certificate(act, f.x.witnessPriv))
			if f.sc.helloOK != nil {
				f.sc.helloOK(c.n, ok, f)
			}
			sent = ok
			return ok
		}, f.x.wait)
	if err != nil {
		return err
	}
	c.limits, c.caps = res.Limits, res.Capabilities
	c.snaps = map[string]*fpages{}
	f.report(obs{conn: c.n, opened: true, hello: sent})
	for {
		m, err := c.Next(time.Hour)
		if err != nil {
			return err
		}
		f.report(obs{conn: c.n, f: m})
		if err := c.handle(m); err != nil {
			return err
		}
	}
}

// errDone ends a connection on purpose.
type errDone struct{ why string }

func (e *errDone) Error() string { return e.why }

func (c *fconn) refuse(code coordwire.ErrorCode, req uint32, fatal bool) error {
	_ = c.Send(&coordwire.CoordError{RequestID: req, Code: code, Message: "phux-coordcheck fake coordinator refused"})
	if fatal {
		return &errDone{"refused " + code.String()}
	}
	return nil
}

func (c *fconn) handle(m coordwire.Frame) error {
	f := c.f
	switch m := m.(type) {
	case *coordwire.CoordPing:
		return c.Send(&coordwire.CoordPong{Nonce: m.Nonce})
	case *coordwire.CoordPong, *coordwire.CoordError:
		return nil
	case *coordwire.CoordCommand:
		if m.Guard != c.act.guard() {
			return c.refuse(coordwire.StaleAuthority, m.RequestID, true)
		}
		r := f.commit(m)
		if f.sc.command != nil && f.sc.command(c, m) {
			return &errDone{"dropped mid-command"}
		}
		if err := c.Send(&coordwire.CoordCommandResult{RequestID: m.RequestID, Operation: r}); err != nil {
			return err
		}
		return c.pump()
	case *coordwire.GetOperationResult:
		if m.Guard != c.act.guard() {
			return c.refuse(coordwire.StaleAuthority, m.RequestID, true)
		}
		f.mu.Lock()
		r, ok := f.ops[m.OperationID]
		f.mu.Unlock()
		if !ok {
			r = coordwire.OperationResult{Tag: coordwire.OperationUnknown}
		}
		return c.Send(&coordwire.OperationResultFrame{RequestID: m.RequestID, Operation: r})
	case *coordwire.OpenSnapshot:
		if m.Guard != c.act.guard() {
			return c.refuse(coordwire.StaleAuthority, m.RequestID, true)
		}
		if f.sc.exchange != nil {
			return c.playExchange(m)
		}
		return c.openSnapshot(m)
	case *coordwire.SnapshotNext:
		if f.sc.exchange != nil {
			return c.playExchange(m)
		}
		return c.next(m.RequestID, m.Cursor, true)
	case *coordwire.ReplayNext:
		return c.next(m.RequestID, m.Cursor, false)
	case *coordwire.SnapshotApplied:
		if f.sc.exchange != nil {
			return c.playExchange(m)
		}
		s := c.subs[m.SubscriptionID]
		if s == nil || s.live {
			return c.refuse(coordwire.ProtocolError, m.RequestID, true)
		}
		s.live, s.credN, s.credB = true, uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes)
		if err := c.Send(&coordwire.Ack{RequestID: m.RequestID}); err != nil {
			return err
		}
		if f.sc.applied != nil {
			f.sc.applied(c, s, false)
		}
		return c.pump()
	case *coordwire.Subscribe:
		if m.Guard != c.act.guard() {
			return c.refuse(coordwire.StaleAuthority, m.RequestID, true)
		}
		s := &fsub{id: coordwire.SubscriptionID(coordwire.NewOperationID()), live: true, credN: uint64(m.InitialCreditCount), credB: uint64(m.InitialCreditBytes), lastEvent: uint64(m.AfterEventSequence)}
		c.subs[s.id] = s
		if err := c.Send(&coordwire.Subscribed{RequestID: m.RequestID, SubscriptionID: s.id, NextDeliverySequence: 1}); err != nil {
			return err
		}
		return c.pump()
	case *coordwire.Credit:
		if s := c.subs[m.SubscriptionID]; s != nil && s.live {
			s.credN += uint64(m.AddCount)
			s.credB += uint64(m.AddBytes)
		}
		return c.pump()
	case *coordwire.OpenReplay:
		return c.openReplay(m)
	case *coordwire.ReplayApplied:
		s := c.subs[m.SubscriptionID]
		if s == nil || !s.paused {
			return c.refuse(coordwire.ProtocolError, m.RequestID, true)
		}
		s.paused, s.live, s.credN, s.credB = false, true, uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes)
		if err := c.Send(&coordwire.Ack{RequestID: m.RequestID}); err != nil {
			return err
		}
		if f.sc.applied != nil {
			f.sc.applied(c, s, true)
		}
		return c.pump()
	}
	return c.refuse(coordwire.ProtocolError, 0, true)
}

// commit stores a command's outcome: an Objective created or updated
// (with its OBJECTIVE_CHANGED event) and SUCCEEDED; an exact duplicate
// returns the stored result.
func (f *fake) commit(m *coordwire.CoordCommand) coordwire.OperationResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.ops[m.OperationID]; ok {
		return r
	}
	r := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, ResultKind: coordwire.ResultNone}
	if p, err := coordwire.DecodeCommandPayload(m.Kind, m.Payload); err == nil {
		var id coordwire.ObjectiveID
		var doc []byte
		var schema uint16
		switch p := p.(type) {
		case *coordwire.CreateObjective:
			id, doc, schema = p.ObjectiveID, p.Document, p.Schema
		case *coordwire.UpdateObjective:
			id, doc, schema = p.ObjectiveID, p.Document, p.Schema
		}
		if id != (coordwire.ObjectiveID{}) {
			ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}
			rec := f.recs[ref]
			rec.Object, rec.Revision, rec.SchemaVersion = ref, rec.Revision+1, coordwire.RecordSchemaVersion
			rec.Payload = (&coordwire.ObjectiveRecord{DocumentSchema: schema, Document: doc}).AppendTLV(nil)
			f.recs[ref] = rec
			f.appendLocked(coordwire.EventObjectiveChanged, rec)
			r.ResultKind, r.ResultPayload = coordwire.ResultObjectRef, ref.Append(nil)
		}
	}
	r.CompletedEventSequence = coordwire.EventSequence(len(f.events))
	if r.CompletedEventSequence == 0 {
		f.appendLocked(coordwire.EventObjectiveChanged, f.anyRecordLocked())
		r.CompletedEventSequence = coordwire.EventSequence(len(f.events))
	}
	f.ops[m.OperationID] = r
	return r
}

func (f *fake) anyRecordLocked() coordwire.SnapshotRecord {
	for _, r := range f.recs {
		return r
	}
	return newObjectiveRecord(1, []byte("phux-coordcheck"))
}

func newObjectiveRecord(rev uint64, doc []byte) coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: coordwire.NewObjectiveID()},
		Revision: coordwire.ObjectRevision(rev), SchemaVersion: coordwire.RecordSchemaVersion,
		Payload: (&coordwire.ObjectiveRecord{DocumentSchema: 1, Document: doc}).AppendTLV(nil)}
}

// addObjective stores a fresh Objective with its event (for scenarios
// that need events after a cut).
func (f *fake) addObjective() {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := newObjectiveRecord(1, []byte("phux-coordcheck event"))
	f.recs[rec.Object] = rec
	f.appendLocked(coordwire.EventObjectiveChanged, rec)
}

func (f *fake) appendLocked(kind coordwire.EventKind, rec coordwire.SnapshotRecord) {
	f.events = append(f.events, coordwire.ReplayEvent{EventSequence: coordwire.EventSequence(len(f.events) + 1), EventID: coordwire.NewEventID(),
		EventKind: kind, Object: rec.Object, ObjectRevision: rec.Revision, Schema: rec.SchemaVersion, Payload: rec.Payload})
}

func (f *fake) cut() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.events))
}

// pump sends the events each live subscription has credit for.
func (c *fconn) pump() error {
	f := c.f
	for _, s := range c.subs {
		for s.live {
			f.mu.Lock()
			if s.lastEvent >= uint64(len(f.events)) {
				f.mu.Unlock()
				break
			}
			e := f.events[s.lastEvent]
			f.mu.Unlock()
			ev := &coordwire.CoordEvent{SubscriptionID: s.id, DeliverySequence: coordwire.DeliverySequence(s.deliv + 1), EventSequence: e.EventSequence,
				EventID: e.EventID, EventKind: e.EventKind, Object: e.Object, ObjectRevision: e.ObjectRevision, Schema: e.Schema, Payload: e.Payload}
			n := uint64(len(rawframe.Frame(ev)))
			if s.credN < 1 || s.credB < n {
				break
			}
			s.credN--
			s.credB -= n
			if err := c.Send(ev); err != nil {
				return err
			}
			s.deliv++
			s.lastEvent = uint64(e.EventSequence)
		}
	}
	return nil
}

// gap pauses s with GAP (reason QUEUE_OVERFLOW unless given).
func (c *fconn) gap(s *fsub, reason coordwire.GapReason) error {
	s.live, s.paused = false, true
	return c.Send(&coordwire.Gap{SubscriptionID: s.id, LastContiguousDelivery: coordwire.DeliveryCut(s.deliv),
		LastContiguousEvent: coordwire.EventCut(s.lastEvent), Reason: reason})
}

func newCursor() []byte {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return b
}

// paginate splits images into pages of at most records items and
// pageBytes bytes.
func paginate(images [][]byte, records int, pageBytes int) [][][]byte {
	var out [][][]byte
	var cur [][]byte
	size := 0
	for _, im := range images {
		if len(cur) > 0 && (len(cur)+1 > records || size+len(im) > pageBytes-64) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, im)
		size += len(im)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (c *fconn) openSnapshot(m *coordwire.OpenSnapshot) error {
	f := c.f
	f.mu.Lock()
	recs := make([]coordwire.SnapshotRecord, 0, len(f.recs))
	for _, r := range f.recs {
		recs = append(recs, r)
	}
	base := uint64(len(f.events))
	f.mu.Unlock()
	slices.SortFunc(recs, func(a, b coordwire.SnapshotRecord) int { return a.Object.Compare(b.Object) })
	var sub *fsub
	if m.ReplacePausedSubscription != (coordwire.SubscriptionID{}) {
		old := c.subs[m.ReplacePausedSubscription]
		if old == nil || !old.paused {
			return c.refuse(coordwire.ProtocolError, m.RequestID, true)
		}
		delete(c.subs, old.id)
	}
	if m.ReserveSubscription {
		sub = &fsub{id: coordwire.SubscriptionID(coordwire.NewOperationID()), lastEvent: base}
		c.subs[sub.id] = sub
	}
	g := c.act.guard()
	sum := digest.Snapshot(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, coordwire.EventCut(base), recs)
	images := make([][]byte, len(recs))
	for i := range recs {
		images[i] = recs[i].Append(nil)
	}
	perPage := int(c.limits.MaxPageRecords)
	if f.sc.pageRecords != 0 {
		perPage = f.sc.pageRecords
	}
	p := &fpages{snapshot: true, id: coordwire.NewOperationID(), sub: sub, pages: flatten(paginate(images, perPage, int(c.limits.MaxPageBytes)))}
	p.end = &coordwire.SnapshotEnd{SnapshotID: coordwire.SnapshotID(p.id), PageCount: uint32(len(p.pages)), RecordCount: uint64(len(recs)), CanonicalSHA256: sum}
	b := &coordwire.SnapshotBegin{RequestID: m.RequestID, SnapshotID: coordwire.SnapshotID(p.id), Guard: g, BaseEventSequence: coordwire.EventCut(base),
		LeaseExpiresAt: uint64(time.Now().Add(60 * time.Second).Unix())}
	if sub != nil {
		b.SubscriptionID = sub.id
	}
	if len(p.pages) > 0 {
		b.FirstCursor = newCursor()
		c.snaps[string(b.FirstCursor)] = p
	}
	if f.sc.snapshotBegin != nil {
		f.sc.snapshotBegin(b)
	}
	if err := c.Send(b); err != nil {
		return err
	}
	if len(p.pages) == 0 {
		e := *p.end.(*coordwire.SnapshotEnd)
		e.RequestID = m.RequestID
		if f.sc.snapshotEnd != nil {
			f.sc.snapshotEnd(&e)
		}
		return c.Send(&e)
	}
	return nil
}

// flatten turns pages of images into per-page concatenated images
// prefixed by their count (decoded again in next).
func flatten(pages [][][]byte) [][]byte {
	out := make([][]byte, len(pages))
	for i, p := range pages {
		b := binary.BigEndian.AppendUint16(nil, uint16(len(p)))
		for _, im := range p {
			b = binary.BigEndian.AppendUint32(b, uint32(len(im)))
			b = append(b, im...)
		}
		out[i] = b
	}
	return out
}

func unflatten(b []byte) [][]byte {
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	out := make([][]byte, 0, n)
	for range n {
		l := binary.BigEndian.Uint32(b)
		out = append(out, b[4:4+l])
		b = b[4+l:]
	}
	return out
}

func (c *fconn) next(req uint32, cursor []byte, snapshot bool) error {
	f := c.f
	p := c.snaps[string(cursor)]
	if p == nil || p.snapshot != snapshot {
		return c.refuse(coordwire.CursorInvalid, req, false)
	}
	delete(c.snaps, string(cursor))
	items := unflatten(p.pages[p.index])
	var nextCursor []byte
	if p.index+1 < len(p.pages) {
		nextCursor = newCursor()
		c.snaps[string(nextCursor)] = p
	}
	if snapshot {
		pg := &coordwire.SnapshotPage{RequestID: req, SnapshotID: coordwire.SnapshotID(p.id), Cursor: cursor, PageIndex: uint32(p.index), NextCursor: nextCursor}
		for _, im := range items {
			var r coordwire.SnapshotRecord
			if err := r.Decode(im); err != nil {
				return err
			}
			pg.Records = append(pg.Records, r)
		}
		if f.sc.snapshotPage != nil {
			f.sc.snapshotPage(pg)
		}
		if err := c.Send(pg); err != nil {
			return err
		}
	} else {
		pg := &coordwire.ReplayPage{RequestID: req, ReplayID: coordwire.ReplayID(p.id), Cursor: cursor, PageIndex: uint32(p.index), NextCursor: nextCursor}
		for _, im := range items {
			var e coordwire.ReplayEvent
			if err := e.Decode(im); err != nil {
				return err
			}
			pg.Events = append(pg.Events, e)
		}
		if f.sc.replayPage != nil {
			f.sc.replayPage(pg)
		}
		if err := c.Send(pg); err != nil {
			return err
		}
	}
	p.index++
	if nextCursor != nil {
		return nil
	}
	switch e := p.end.(type) {
	case *coordwire.SnapshotEnd:
		end := *e
		end.RequestID = req
		if f.sc.snapshotEnd != nil {
			f.sc.snapshotEnd(&end)
		}
		return c.Send(&end)
	case *coordwire.ReplayEnd:
		end := *e
		end.RequestID = req
		if f.sc.replayEnd != nil {
			f.sc.replayEnd(&end)
		}
		return c.Send(&end)
	}
	return nil
}

func (c *fconn) openReplay(m *coordwire.OpenReplay) error {
	f := c.f
	if m.Guard != c.act.guard() {
		return c.refuse(coordwire.StaleAuthority, m.RequestID, true)
	}
	if !c.caps.Has(coordwire.CapEventReplay) {
		return c.refuse(coordwire.CapabilityRequired, m.RequestID, false)
	}
	s := c.subs[m.SubscriptionID]
	if s == nil || !s.paused {
		return c.refuse(coordwire.ProtocolError, m.RequestID, true)
	}
	if uint64(m.AfterEventSequence) != s.lastEvent {
		return c.refuse(coordwire.MalformedMessage, m.RequestID, true)
	}
	f.mu.Lock()
	evs := slices.Clone(f.events[s.lastEvent:])
	f.mu.Unlock()
	replayCut := s.lastEvent + uint64(len(evs))
	g := c.act.guard()
	sum := digest.Replay(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, s.id, m.AfterEventSequence, coordwire.EventCut(replayCut), evs)
	images := make([][]byte, len(evs))
	for i := range evs {
		images[i] = evs[i].Append(nil)
	}
	p := &fpages{id: coordwire.NewOperationID(), sub: s, pages: flatten(paginate(images, int(c.limits.MaxPageRecords), int(c.limits.MaxPageBytes)))}
	p.end = &coordwire.ReplayEnd{ReplayID: coordwire.ReplayID(p.id), PageCount: uint32(len(p.pages)), EventCount: uint64(len(evs)), CanonicalSHA256: sum}
	b := &coordwire.ReplayBegin{RequestID: m.RequestID, ReplayID: coordwire.ReplayID(p.id), SubscriptionID: s.id, ReplayCut: coordwire.EventCut(replayCut),
		LeaseExpiresAt: uint64(time.Now().Add(60 * time.Second).Unix())}
	if len(evs) > 0 {
		b.FirstEvent = evs[0].EventSequence
		b.FirstCursor = newCursor()
		c.snaps[string(b.FirstCursor)] = p
	}
	s.lastEvent = replayCut
	if err := c.Send(b); err != nil {
		return err
	}
	if len(evs) == 0 {
		e := *p.end.(*coordwire.ReplayEnd)
		e.RequestID = m.RequestID
		if f.sc.replayEnd != nil {
			f.sc.replayEnd(&e)
		}
		return c.Send(&e)
	}
	return nil
}
