package main

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// Recorded exchanges (vectors/exchanges.json) played to a client under
// test: the fake coordinator answers the client's OPEN_SNAPSHOT, NEXTs
// and SNAPSHOT_APPLIED with the recorded server frames — request ids
// mapped to the client's own, the SNAPSHOT_BEGIN guard replaced by this
// activation's (the recording's CoordinatorId, epoch and activation
// sequence are kept, so the recorded §9 digests hold). A valid exchange
// must be accepted (SNAPSHOT_APPLIED for a reserving one); an exchange
// whose server frames were mutated into an invalid one must be refused.

// recorded is one exchange ready to play.
type recorded struct {
	name   string
	valid  bool
	code   string
	limits coordwire.Limits
	caps   coordwire.Capabilities
	steps  []xstep
	guard  coordwire.AuthorityGuard // of the recorded SNAPSHOT_BEGIN
}

type xstep struct {
	toServer bool // a frame the client sent in the recording
	f        coordwire.Frame
}

// loadExchanges reads path (default: vectors/exchanges.json of the module
// the working directory is in).
func loadExchanges(path string) ([]*recorded, error) {
	if path == "" {
		root, err := vectors.FindModuleRoot(".")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, "vectors", "exchanges.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var vf vectorspb.VectorFile
	if err := protojson.Unmarshal(b, &vf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []*recorded
	for _, v := range vf.Vectors {
		x := v.GetExchange()
		if x == nil {
			continue
		}
		r := &recorded{name: v.Name, valid: v.Valid, code: v.ErrorCode, caps: coordwire.Capabilities(x.NegotiatedCapabilities)}
		if l := x.Limits; l != nil {
			r.limits = coordwire.Limits{MaxFrameBytes: l.MaxFrameBytes, MaxPageBytes: l.MaxPageBytes, MaxPageRecords: uint16(l.MaxPageRecords),
				MaxTypedPayloadBytes: l.MaxTypedPayloadBytes, MaxEventCreditCount: l.MaxEventCreditCount, MaxEventCreditBytes: l.MaxEventCreditBytes}
		}
		ok := true
		for _, s := range x.Steps {
			w := s.Wire
			if len(w) < 5 {
				ok = false
				break
			}
			f, err := coordwire.DecodeFrame(coordwire.FrameType(w[4]), w[5:])
			if err != nil {
				// A mutation may make a frame undecodable: play its bytes.
				f = &rawFrame{t: coordwire.FrameType(w[4]), body: w[5:]}
			}
			if b, isB := f.(*coordwire.SnapshotBegin); isB && r.guard == (coordwire.AuthorityGuard{}) {
				r.guard = b.Guard
			}
			r.steps = append(r.steps, xstep{toServer: s.Receiver == "SERVER", f: f})
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// rawFrame is a recorded frame that does not decode (a mutation).
type rawFrame struct {
	t    coordwire.FrameType
	body []byte
}

func (r *rawFrame) Type() coordwire.FrameType    { return r.t }
func (r *rawFrame) AppendBody(dst []byte) []byte { return append(dst, r.body...) }
func (r *rawFrame) DecodeBody(b []byte) error    { r.body = b; return nil }
func (r *rawFrame) String() string               { return r.t.String() }

// clientPlayable picks the exchanges a client under test can be played:
// the reserving snapshot one (the driver contract opens a reserving
// snapshot) and those invalid exchanges that differ from it only in
// frames the server sent.
func clientPlayable(all []*recorded) []*recorded {
	var base *recorded
	for _, r := range all {
		if r.name == "exchange/snapshot/multi_page" {
			base = r
		}
	}
	if base == nil {
		return nil
	}
	out := []*recorded{base}
	for _, r := range all {
		if r.valid || len(r.steps) != len(base.steps) || r.limits != base.limits {
			continue
		}
		serverOnly, differs := true, false
		for i := range r.steps {
			a, b := r.steps[i], base.steps[i]
			same := a.toServer == b.toServer && string(frameImage(a.f)) == string(frameImage(b.f))
			if !same {
				differs = true
				if a.toServer || b.toServer {
					serverOnly = false
				}
			}
		}
		if differs && serverOnly {
			out = append(out, r)
		}
	}
	return out
}

func frameImage(f coordwire.Frame) []byte { return coordwire.AppendFrame(nil, f) }

// setRequestID rewrites a reply's request id.
func setRequestID(f coordwire.Frame, id uint32) coordwire.Frame {
	switch m := f.(type) {
	case *coordwire.SnapshotBegin:
		c := *m
		c.RequestID = id
		return &c
	case *coordwire.SnapshotPage:
		c := *m
		c.RequestID = id
		return &c
	case *coordwire.SnapshotEnd:
		c := *m
		c.RequestID = id
		return &c
	case *coordwire.Ack:
		c := *m
		c.RequestID = id
		return &c
	case *coordwire.CoordError:
		c := *m
		c.RequestID = id
		return &c
	}
	return f
}

// playExchange consumes one client frame of the recorded conversation
// and sends the recorded server frames that follow it.
func (c *fconn) playExchange(m coordwire.Frame) error {
	x := c.f.sc.exchange
	if c.xreq == nil {
		c.xreq = map[uint32]uint32{}
	}
	if c.xi >= len(x.steps) || !x.steps[c.xi].toServer || x.steps[c.xi].f.Type() != m.Type() {
		return nil // off the recording: the judge sees what the client did
	}
	if rid, ok := requestIDOf(x.steps[c.xi].f); ok {
		if cid, ok := requestIDOf(m); ok {
			c.xreq[rid] = cid
		}
	}
	c.xi++
	for c.xi < len(x.steps) && !x.steps[c.xi].toServer {
		f := x.steps[c.xi].f
		if rid, ok := requestIDOf(f); ok {
			if cid, ok := c.xreq[rid]; ok {
				f = setRequestID(f, cid)
			}
		}
		if b, ok := f.(*coordwire.SnapshotBegin); ok {
			cp := *b
			cp.Guard = c.act.guard()
			f = &cp
		}
		if err := c.Send(f); err != nil {
			return err
		}
		c.xi++
	}
	return nil
}

func requestIDOf(f coordwire.Frame) (uint32, bool) {
	switch m := f.(type) {
	case *coordwire.OpenSnapshot:
		return m.RequestID, true
	case *coordwire.SnapshotNext:
		return m.RequestID, true
	case *coordwire.SnapshotApplied:
		return m.RequestID, true
	case *coordwire.SnapshotBegin:
		return m.RequestID, true
	case *coordwire.SnapshotPage:
		return m.RequestID, true
	case *coordwire.SnapshotEnd:
		return m.RequestID, true
	case *coordwire.Ack:
		return m.RequestID, true
	case *coordwire.CoordError:
		return m.RequestID, m.RequestID != 0
	}
	return 0, false
}
