package vectors

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// pbLimits returns the schema image of l.
func pbLimits(l coordwire.Limits) *vectorspb.Limits {
	return &vectorspb.Limits{
		MaxFrameBytes: l.MaxFrameBytes, MaxPageBytes: l.MaxPageBytes, MaxPageRecords: uint32(l.MaxPageRecords),
		MaxTypedPayloadBytes: l.MaxTypedPayloadBytes, MaxEventCreditCount: l.MaxEventCreditCount, MaxEventCreditBytes: l.MaxEventCreditBytes,
	}
}

// fromPBLimits converts a schema Limits message; max_page_records must fit
// a u16.
func fromPBLimits(p *vectorspb.Limits) (coordwire.Limits, error) {
	if p.GetMaxPageRecords() > 0xffff {
		return coordwire.Limits{}, fmt.Errorf("max_page_records %d does not fit a u16", p.GetMaxPageRecords())
	}
	return coordwire.Limits{
		MaxFrameBytes: p.GetMaxFrameBytes(), MaxPageBytes: p.GetMaxPageBytes(), MaxPageRecords: uint16(p.GetMaxPageRecords()),
		MaxTypedPayloadBytes: p.GetMaxTypedPayloadBytes(), MaxEventCreditCount: p.GetMaxEventCreditCount(), MaxEventCreditBytes: p.GetMaxEventCreditBytes(),
	}, nil
}

// frameLimits returns the selected limits a frame case is judged under:
// its limits field, which must be a usable selection, or CheckLimits().
func frameLimits(c *vectorspb.FrameCase) (coordwire.Limits, error) {
	if c.GetLimits() == nil {
		return CheckLimits(), nil
	}
	l, err := fromPBLimits(c.GetLimits())
	if err != nil {
		return l, err
	}
	if _, err := coordwire.SelectLimits(l, l); err != nil {
		return l, fmt.Errorf("limits are not a usable selection: %v", err)
	}
	return l, nil
}

// ValueTypes returns the type names a ValueCase may name, sorted. See
// DecodeValue.
func ValueTypes() []string {
	var out []string
	for _, k := range commandKinds() {
		out = append(out, "CommandPayload/"+k.String())
	}
	for _, k := range objectKinds() {
		out = append(out, "RecordPayload/"+k.String())
	}
	for _, k := range adminKinds() {
		out = append(out, "AdminPayload/"+k.String())
	}
	for _, k := range []coordwire.EffectKind{coordwire.EffectSpawn, coordwire.EffectKill, coordwire.EffectProcessSignal} {
		out = append(out, "EffectPayload/"+k.String())
	}
	out = append(out, "ActivationCertificate", "ArtifactManifest", "AuthorityGuard", "EffectAttempt", "EffectTarget",
		"ObjectRef", "OperationResult", "ReplayEvent", "SnapshotRecord", "SourceGapPayload", "TerminalBindingRef",
		"TerminalSourceFact", "WorkloadChallenge/client_checks")
	return out
}

func commandKinds() []coordwire.CommandKind {
	var out []coordwire.CommandKind
	for k := coordwire.CommandKind(1); k.Valid(); k++ {
		out = append(out, k)
	}
	return out
}

func adminKinds() []coordwire.AdminKind {
	var out []coordwire.AdminKind
	for k := coordwire.AdminKind(1); k.Valid(); k++ {
		out = append(out, k)
	}
	return out
}

func objectKinds() []coordwire.ObjectKind {
	var out []coordwire.ObjectKind
	for k := coordwire.ObjectKind(1); k.Valid(); k++ {
		out = append(out, k)
	}
	return out
}

// errAuth is the generic handshake refusal the vectors name for the checks
// a workload client makes beyond decoding.
var errAuth = coordwire.NewError(coordwire.AuthenticationFailed, "vectors.client_check")

// DecodeValue strictly decodes image as the named type with this module's
// codec and returns the canonical re-encoding of the decoded value. The
// types (ValueTypes):
//
//   - CommandPayload/<CommandKind>: a typed COORD_COMMAND payload (A.6),
//     coordwire.DecodeCommandPayload.
//   - RecordPayload/<ObjectKind>: a schema-1 snapshot-record payload (A.7),
//     coordwire.DecodeRecordPayload.
//   - AdminPayload/<AdminKind>: the payload (field 2) of an ADMIN record
//     of that kind (this project's schemas, docs/semantics.md),
//     coordwire.DecodeAdminPayload.
//   - ArtifactManifest: a schema-1 artifact manifest (C.6).
//   - SnapshotRecord: a SnapshotRecord image, then its payload as the
//     consumer that applies it decodes it (SnapshotRecord.DecodePayload).
//   - ReplayEvent, TerminalSourceFact, SourceGapPayload, EffectAttempt,
//     EffectTarget, EffectPayload/<EffectKind>, OperationResult,
//     TerminalBindingRef, ObjectRef, AuthorityGuard, ActivationCertificate:
//     the positional image of that type.
//   - WorkloadChallenge/client_checks: a WORKLOAD_CHALLENGE body, decoded
//     strictly and then judged as a client judges it without its own
//     state: service "phux-coordinator" and negotiated major.minor equal to
//     the client's, else the generic AUTHENTICATION_FAILED.
func DecodeValue(typ string, image []byte) ([]byte, error) {
	kind, arg, _ := strings.Cut(typ, "/")
	switch kind {
	case "CommandPayload":
		for _, k := range commandKinds() {
			if k.String() == arg {
				p, err := coordwire.DecodeCommandPayload(k, image)
				if err != nil {
					return nil, err
				}
				return p.AppendTLV(nil), nil
			}
		}
	case "RecordPayload":
		for _, k := range objectKinds() {
			if k.String() == arg {
				p, err := coordwire.DecodeRecordPayload(k, image)
				if err != nil {
					return nil, err
				}
				return p.AppendTLV(nil), nil
			}
		}
	case "AdminPayload":
		for _, k := range adminKinds() {
			if k.String() == arg {
				p, err := coordwire.DecodeAdminPayload(k, image)
				if err != nil {
					return nil, err
				}
				return p.AppendTLV(nil), nil
			}
		}
	case "EffectPayload":
		for _, k := range []coordwire.EffectKind{coordwire.EffectSpawn, coordwire.EffectKill, coordwire.EffectProcessSignal} {
			if k.String() == arg {
				var p coordwire.EffectPayload
				if err := p.DecodeAs(k, image); err != nil {
					return nil, err
				}
				return p.Append(nil), nil
			}
		}
	case "ArtifactManifest":
		var m coordwire.ArtifactManifestDoc
		if err := m.DecodeTLV(image); err != nil {
			return nil, err
		}
		return m.AppendTLV(nil), nil
	case "SnapshotRecord":
		var s coordwire.SnapshotRecord
		if err := s.Decode(image); err != nil {
			return nil, err
		}
		if _, err := s.DecodePayload(); err != nil {
			return nil, err
		}
		return s.Append(nil), nil
	case "ReplayEvent":
		var e coordwire.ReplayEvent
		if err := e.Decode(image); err != nil {
			return nil, err
		}
		return e.Append(nil), nil
	case "TerminalSourceFact":
		var f coordwire.TerminalSourceFact
		if err := f.Decode(image); err != nil {
			return nil, err
		}
		return f.Append(nil), nil
	case "SourceGapPayload":
		var g coordwire.SourceGapPayload
		if err := g.Decode(image); err != nil {
			return nil, err
		}
		return g.Append(nil), nil
	case "EffectAttempt":
		var a coordwire.EffectAttempt
		if err := a.Decode(image); err != nil {
			return nil, err
		}
		return a.Append(nil), nil
	case "EffectTarget":
		var t coordwire.EffectTarget
		if err := t.Decode(image); err != nil {
			return nil, err
		}
		return t.Append(nil), nil
	case "OperationResult":
		var o coordwire.OperationResult
		if err := o.Decode(image); err != nil {
			return nil, err
		}
		return o.Append(nil), nil
	case "TerminalBindingRef":
		var b coordwire.TerminalBindingRef
		if err := b.Decode(image); err != nil {
			return nil, err
		}
		return b.Append(nil), nil
	case "ObjectRef":
		var o coordwire.ObjectRef
		if err := o.Decode(image); err != nil {
			return nil, err
		}
		return o.Append(nil), nil
	case "AuthorityGuard":
		var g coordwire.AuthorityGuard
		if err := g.Decode(image); err != nil {
			return nil, err
		}
		return g.Append(nil), nil
	case "ActivationCertificate":
		var c coordwire.ActivationCertificate
		if err := c.Decode(image); err != nil {
			return nil, err
		}
		return c.Append(nil), nil
	case "WorkloadChallenge":
		if arg != "client_checks" {
			break
		}
		var c coordwire.WorkloadChallenge
		if err := c.DecodeBody(image); err != nil {
			return nil, err
		}
		if c.Service != coordwire.WorkloadService || c.NegotiatedMajor != coordwire.ProtocolMajor || c.NegotiatedMinor != coordwire.ProtocolMinor {
			return nil, errAuth
		}
		return c.AppendBody(nil), nil
	}
	return nil, errUnknownType
}

var errUnknownType = errors.New("unknown value type")

func checkValue(valid bool, code coordwire.ErrorCode, c *vectorspb.ValueCase) error {
	canon, err := DecodeValue(c.GetType(), c.GetImage())
	if errors.Is(err, errUnknownType) {
		return fmt.Errorf("value type %q is not defined", c.GetType())
	}
	if !valid {
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("%s refused (%v), want accepted", c.GetType(), err)
	}
	if !bytes.Equal(canon, c.GetImage()) {
		return fmt.Errorf("%s re-encodes differently\n got %x\nwant %x", c.GetType(), canon, c.GetImage())
	}
	if c.GetType() == "EffectAttempt" {
		return CheckEffectAttemptDigest(c.GetImage())
	}
	return nil
}

// CheckEffectAttemptDigest requires a valid EffectAttempt image to carry
// its own effect digest: digest.Effect (§8) over its kind, its canonical
// target and its payload. The outbox row decoder does not recompute it;
// a vector whose row holds another digest would pin a row no conforming
// outbox writes.
func CheckEffectAttemptDigest(image []byte) error {
	var a coordwire.EffectAttempt
	if err := a.Decode(image); err != nil {
		return err
	}
	if d := digest.Effect(a.Kind, a.Target.Append(nil), a.Payload); d != a.EffectDigest {
		return fmt.Errorf("effect_digest %x is not the §8 digest of the row's kind, target and payload (%x)", a.EffectDigest, d)
	}
	return nil
}

// decodeHello decodes a whole COORD_HELLO frame as a server in the
// handshake, deciding the version first as §5 demands: a major.minor other
// than 0.1 is VERSION_INCOMPATIBLE before any other field is parsed.
func decodeHello(wire []byte) (*coordwire.CoordHello, error) {
	rc := coordwire.Receiver{Role: coordwire.RoleServer, State: coordwire.StateHandshake}
	if len(wire) >= 5 && coordwire.FrameType(wire[4]) == coordwire.TypeCoordHello {
		major, minor, err := coordwire.PeekHelloVersion(wire[5:])
		if err == nil && (major != coordwire.ProtocolMajor || minor != coordwire.ProtocolMinor) {
			return nil, coordwire.NewError(coordwire.VersionIncompatible, "vectors.version")
		}
	}
	f, err := rc.DecodeMessage(wire)
	if err != nil {
		return nil, err
	}
	h, ok := f.(*coordwire.CoordHello)
	if !ok {
		return nil, fmt.Errorf("hello is a %v", f.Type())
	}
	return h, nil
}

// Negotiate judges a COORD_HELLO as a server with the given offer does
// (§3.2, §5): the version first, then the strict decode, then
// coordwire.SelectLimits and coordwire.NegotiateCapabilities.
func Negotiate(hello []byte, server coordwire.Limits, serverCaps coordwire.Capabilities) (coordwire.Limits, coordwire.Capabilities, error) {
	h, err := decodeHello(hello)
	if err != nil {
		return coordwire.Limits{}, 0, err
	}
	l, err := coordwire.SelectLimits(h.Limits, server)
	if err != nil {
		return coordwire.Limits{}, 0, err
	}
	c, err := coordwire.NegotiateCapabilities(h.OfferedCapabilities, h.RequiredCapabilities, serverCaps)
	if err != nil {
		return coordwire.Limits{}, 0, err
	}
	return l, c, nil
}

func checkNegotiation(valid bool, code coordwire.ErrorCode, c *vectorspb.NegotiationCase) error {
	server, err := fromPBLimits(c.GetServerLimits())
	if err != nil {
		return err
	}
	if err := server.Validate(); err != nil {
		return fmt.Errorf("server_limits are not a valid offer: %v", err)
	}
	l, caps, err := Negotiate(c.GetHello(), server, coordwire.Capabilities(c.GetServerCapabilities()))
	if !valid {
		if c.GetSelectedLimits() != nil || c.GetNegotiatedCapabilities() != 0 {
			return errors.New("an invalid negotiation case names a selection")
		}
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("refused (%v), want accepted", err)
	}
	want, err := fromPBLimits(c.GetSelectedLimits())
	if err != nil {
		return err
	}
	if l != want {
		return fmt.Errorf("selected limits %+v, vector says %+v", l, want)
	}
	if uint64(caps) != c.GetNegotiatedCapabilities() {
		return fmt.Errorf("negotiated capabilities 0x%x, vector says 0x%x", uint64(caps), c.GetNegotiatedCapabilities())
	}
	return nil
}

// JudgeHelloOK judges a COORD_HELLO_OK frame as the client that sent hello
// does, apart from the checks that need the client's secret state (grant
// key id, authority pin, requested scope and expiry; see the grant and
// transcript vectors), in this order: the envelope (a client awaiting
// COORD_HELLO_OK); protocol major.minor, read from fields 1 and 2 before
// anything else is parsed, equal to the client's (VERSION_INCOMPATIBLE,
// §5); the strict decode (MALFORMED_MESSAGE, including the 30-day
// retention floor); every selected limit nonzero and within its hard cap
// (MALFORMED_MESSAGE, §3.2); then selected limits a usable selection (page
// and typed bytes at most frame − 512, credit bytes at least one maximum
// COORD_EVENT) and each within the client's offer, negotiated capabilities
// within the offer and covering the required ones — each the generic
// AUTHENTICATION_FAILED, the spec naming no code — and finally
// cert.VerifyHelloOK with the pinned witness key at now (its own codes; a
// certificate that does not name the HELLO_OK's coordinator, epoch and
// incarnation is AUTHENTICATION_FAILED).
func JudgeHelloOK(hello, helloOK []byte, witness ed25519.PublicKey, now time.Time) error {
	h, err := decodeHello(hello)
	if err != nil {
		return fmt.Errorf("the client's own hello: %w", err)
	}
	rc := coordwire.Receiver{Role: coordwire.RoleClient, State: coordwire.StateHandshake, Step: coordwire.StepAwaitHelloOK}
	if len(helloOK) >= 5 {
		if err := rc.CheckHeader(uint32(len(helloOK)-4), coordwire.FrameType(helloOK[4])); err != nil {
			return err
		}
		if coordwire.FrameType(helloOK[4]) == coordwire.TypeCoordHelloOK {
			major, minor, err := coordwire.PeekHelloVersion(helloOK[5:])
			if err == nil && (major != coordwire.ProtocolMajor || minor != coordwire.ProtocolMinor) {
				return coordwire.NewError(coordwire.VersionIncompatible, "vectors.version")
			}
		}
	}
	f, err := rc.DecodeMessage(helloOK)
	if err != nil {
		return err
	}
	m, ok := f.(*coordwire.CoordHelloOK)
	if !ok {
		return fmt.Errorf("hello_ok is a %v", f.Type())
	}
	if err := m.Limits.Validate(); err != nil {
		return err
	}
	if _, err := coordwire.SelectLimits(m.Limits, m.Limits); err != nil {
		return errAuth
	}
	sel, off := m.Limits, h.Limits
	if sel.MaxFrameBytes > off.MaxFrameBytes || sel.MaxPageBytes > off.MaxPageBytes || sel.MaxPageRecords > off.MaxPageRecords ||
		sel.MaxTypedPayloadBytes > off.MaxTypedPayloadBytes || sel.MaxEventCreditCount > off.MaxEventCreditCount ||
		sel.MaxEventCreditBytes > off.MaxEventCreditBytes {
		return errAuth
	}
	if m.NegotiatedCapabilities&^h.OfferedCapabilities != 0 || !m.NegotiatedCapabilities.Has(h.RequiredCapabilities) {
		return errAuth
	}
	return cert.VerifyHelloOK(m, witness, now)
}

func checkHelloOK(valid bool, code coordwire.ErrorCode, c *vectorspb.HelloOkCase) error {
	if len(c.GetWitnessPublicKey()) != ed25519.PublicKeySize {
		return fmt.Errorf("witness_public_key is %d bytes", len(c.GetWitnessPublicKey()))
	}
	err := JudgeHelloOK(c.GetHello(), c.GetHelloOk(), ed25519.PublicKey(c.GetWitnessPublicKey()), time.Unix(int64(c.GetNow()), 0))
	if !valid {
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("refused (%v), want accepted", err)
	}
	return nil
}

// CheckEvidenceFacts judges the input of an evidence seal (ADDENDUM C.7):
// every fact must decode as a TerminalSourceFact of binding, all from the
// first fact's owner fingerprint and incarnation (§11 admits facts only
// from the bound owner incarnation), and their source sequences must
// strictly ascend (admission order, no repeat). A foreign fact, a fact of
// another owner or one out of order is MALFORMED_MESSAGE
// ("evidence.foreign_fact", "evidence.foreign_owner",
// "evidence.fact_order"): this project's reading, since the seal covers
// exactly one binding's admitted facts in order.
func CheckEvidenceFacts(binding coordwire.BindingID, facts [][]byte) error {
	var last coordwire.SourceSequence
	var owner [32]byte
	var inc coordwire.IncarnationID
	for i, b := range facts {
		var f coordwire.TerminalSourceFact
		if err := f.Decode(b); err != nil {
			return fmt.Errorf("fact %d: %w", i, err)
		}
		if f.Source.BindingID != binding {
			return coordwire.NewError(coordwire.MalformedMessage, "evidence.foreign_fact")
		}
		if i > 0 && (f.Source.OwnerAuthorityFingerprint != owner || f.Source.OwnerIncarnation != inc) {
			return coordwire.NewError(coordwire.MalformedMessage, "evidence.foreign_owner")
		}
		owner, inc = f.Source.OwnerAuthorityFingerprint, f.Source.OwnerIncarnation
		if i > 0 && f.Source.Sequence <= last {
			return coordwire.NewError(coordwire.MalformedMessage, "evidence.fact_order")
		}
		last = f.Source.Sequence
	}
	return nil
}
