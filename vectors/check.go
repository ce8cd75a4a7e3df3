package vectors

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// CheckLimits are the selected limits the checker assumes for frames in
// the ACTIVE state: the reference offer of ADDENDUM A.2 (512 KiB frames,
// 256 KiB pages, 512 records, 128 KiB typed payloads), as if both peers had
// offered it. Only frame/invalid/over_negotiated_frame_cap depends on it.
func CheckLimits() coordwire.Limits { return coordwire.ReferenceLimits() }

// Check runs every vector of f through this module's codec and
// primitives and returns one error per vector that does not behave as it
// says (nil when all pass). It also refuses a file with the wrong format
// or protocol string, and duplicate vector names.
//
// What is checked, per body:
//   - frame: the wire is decoded by coordwire.Receiver{Role, State,
//     Step: handshake_step, Limits: limits or CheckLimits()}.DecodeMessage
//     (for an empty receiver, by both
//     roles), and also read as a byte stream by coordwire.FrameReader
//     (except a vector whose declared length disagrees with its bytes). A valid frame must decode, and coordwire.AppendFrame must
//     re-encode it to wire (or to canonical_wire when set, which must
//     itself round-trip); an invalid one must be refused with an error
//     that errors.Is the named ErrorCode. type_byte and frame_type must
//     agree with the wire.
//   - operation_digest: digest.Operation over the case's fields must equal
//     digest (or be refused with the code); a command_frame must decode
//     (or be refused likewise), its canonical payload must equal payload,
//     and digest.OperationFromCommand must equal digest.
//   - snapshot_digest, replay_digest: every record and event image must
//     decode strictly, and the recomputed digest must equal digest.
//   - effect_digest: CheckEffectImages must accept kind, target and
//     payload and digest.Effect must equal digest, or refuse them with the
//     code (an invalid case carries no digest).
//   - certificate: the certificate must decode, its preimage must equal
//     preimage, and cert.Verify with the case's key (pinned by its SHA-256)
//     at now must accept or refuse with the code.
//   - evidence_digest: CheckEvidenceFacts must accept the facts (each a
//     valid TerminalSourceFact of binding_id, all from the first fact's
//     owner fingerprint and incarnation, source sequences strictly
//     ascending) and digest.Evidence must equal digest, or refuse them
//     with the code.
//   - signature: edstrict.Verify must agree with valid; an invalid one
//     must name AUTHENTICATION_FAILED.
//   - transcript: edstrict.Verify(public_key, transcript, signature) must
//     agree with valid, likewise.
//   - scope: coordwire.ParseScopeImage must accept with bits; an image it
//     refuses is the handshake's AUTHENTICATION_FAILED, and the vector
//     must name exactly that.
//   - value: DecodeValue(type, image) must accept and re-encode to image,
//     or refuse with the code; a valid EffectAttempt must also carry its
//     own §8 effect digest (CheckEffectAttemptDigest).
//   - negotiation: Negotiate (version, strict decode, SelectLimits,
//     NegotiateCapabilities) must select exactly selected_limits and
//     negotiated_capabilities, or refuse with the code.
//   - hello_ok: JudgeHelloOK must accept, or refuse with the code.
//   - exchange: RunExchange must accept every step, or refuse the exchange
//     with the code (one of ExchangeRules).
//
// Every refusal must carry exactly the vector's error_code
// (coordwire.CodeOf); a different code is a failure.
func Check(f *vectorspb.VectorFile) []error {
	var errs []error
	if f.GetFormat() != Format || f.GetProtocol() != Protocol {
		errs = append(errs, fmt.Errorf("format %q protocol %q, want %q %q", f.GetFormat(), f.GetProtocol(), Format, Protocol))
	}
	seen := map[string]bool{}
	for _, v := range f.GetVectors() {
		if seen[v.GetName()] {
			errs = append(errs, fmt.Errorf("%s: duplicate vector name", v.GetName()))
		}
		seen[v.GetName()] = true
		if err := CheckVector(v); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// CheckVector checks one vector as Check does. The error names the vector.
func CheckVector(v *vectorspb.Vector) error {
	if err := checkVector(v); err != nil {
		return fmt.Errorf("%s: %w", v.GetName(), err)
	}
	return nil
}

func checkVector(v *vectorspb.Vector) error {
	if v.GetName() == "" {
		return errors.New("vector without a name")
	}
	var code coordwire.ErrorCode
	if !v.GetValid() {
		c, ok := coordwire.ParseErrorCode(v.GetErrorCode())
		if !ok {
			return fmt.Errorf("invalid vector with unknown error_code %q", v.GetErrorCode())
		}
		code = c
	} else if v.GetErrorCode() != "" {
		return fmt.Errorf("valid vector with error_code %q", v.GetErrorCode())
	}
	switch b := v.GetBody().(type) {
	case *vectorspb.Vector_Frame:
		return checkFrame(v.GetValid(), code, b.Frame)
	case *vectorspb.Vector_OperationDigest:
		return checkOperation(v.GetValid(), code, b.OperationDigest)
	case *vectorspb.Vector_SnapshotDigest:
		return checkSnapshot(v.GetValid(), b.SnapshotDigest)
	case *vectorspb.Vector_ReplayDigest:
		return checkReplay(v.GetValid(), b.ReplayDigest)
	case *vectorspb.Vector_EffectDigest:
		return checkEffect(v.GetValid(), code, b.EffectDigest)
	case *vectorspb.Vector_Certificate:
		return checkCertificate(v.GetValid(), code, b.Certificate)
	case *vectorspb.Vector_Signature:
		return checkSignature(v.GetValid(), code, b.Signature.GetPublicKey(), b.Signature.GetMessage(), b.Signature.GetSignature())
	case *vectorspb.Vector_Transcript:
		if r := b.Transcript.GetRole(); r != "server" && r != "client" {
			return fmt.Errorf("transcript role %q", r)
		}
		return checkSignature(v.GetValid(), code, b.Transcript.GetPublicKey(), b.Transcript.GetTranscript(), b.Transcript.GetSignature())
	case *vectorspb.Vector_Scope:
		return checkScope(v.GetValid(), code, b.Scope)
	case *vectorspb.Vector_EvidenceDigest:
		return checkEvidence(v.GetValid(), code, b.EvidenceDigest)
	case *vectorspb.Vector_Value:
		return checkValue(v.GetValid(), code, b.Value)
	case *vectorspb.Vector_Negotiation:
		return checkNegotiation(v.GetValid(), code, b.Negotiation)
	case *vectorspb.Vector_HelloOk:
		return checkHelloOK(v.GetValid(), code, b.HelloOk)
	case *vectorspb.Vector_Exchange:
		return checkExchange(v.GetValid(), code, b.Exchange)
	}
	return errors.New("vector without a body")
}

// refusal checks err against an expected refusal with exactly code: the
// code coordwire.CodeOf finds must be code (an error carrying several codes
// matches only the first one errors.As finds).
func refusal(err error, code coordwire.ErrorCode) error {
	if err == nil {
		return fmt.Errorf("accepted, want refusal with %v", code)
	}
	if coordwire.CodeOf(err) != code || !errors.Is(err, code) {
		return fmt.Errorf("refused with %v (%v), want %v", coordwire.CodeOf(err), err, code)
	}
	return nil
}

func checkFrame(valid bool, code coordwire.ErrorCode, c *vectorspb.FrameCase) error {
	var st coordwire.ConnState
	switch c.GetState() {
	case "HANDSHAKE":
		st = coordwire.StateHandshake
	case "ACTIVE":
		st = coordwire.StateActive
	default:
		return fmt.Errorf("state %q", c.GetState())
	}
	var roles []coordwire.Role
	switch c.GetReceiver() {
	case "SERVER":
		roles = []coordwire.Role{coordwire.RoleServer}
	case "CLIENT":
		roles = []coordwire.Role{coordwire.RoleClient}
	case "":
		roles = []coordwire.Role{coordwire.RoleServer, coordwire.RoleClient}
	default:
		return fmt.Errorf("receiver %q", c.GetReceiver())
	}
	limits, err := frameLimits(c)
	if err != nil {
		return err
	}
	if c.GetLimits() != nil && st != coordwire.StateActive {
		return errors.New("limits given for a HANDSHAKE frame")
	}
	var step coordwire.HandshakeStep
	if name := c.GetHandshakeStep(); name != "" {
		s, ok := coordwire.ParseHandshakeStep(name)
		switch {
		case !ok || s == coordwire.StepAny:
			return fmt.Errorf("handshake_step %q", name)
		case st != coordwire.StateHandshake:
			return errors.New("handshake_step given for an ACTIVE frame")
		case len(roles) != 1 || roles[0] != s.Receiver():
			return fmt.Errorf("handshake_step %v is a %v's step, receiver is %q", s, s.Receiver(), c.GetReceiver())
		}
		step = s
	}
	wire := c.GetWire()
	if len(wire) >= 5 {
		t := coordwire.FrameType(wire[4])
		if c.GetTypeByte() != uint32(t) {
			return fmt.Errorf("type_byte 0x%02x, wire has 0x%02x", c.GetTypeByte(), byte(t))
		}
		name := ""
		if t.Known() {
			name = t.String()
		}
		if c.GetFrameType() != name {
			return fmt.Errorf("frame_type %q, wire type is %q", c.GetFrameType(), name)
		}
	}
	for _, role := range roles {
		sf, err := checkStream(valid, code, coordwire.Receiver{Role: role, State: st, Step: step, Limits: limits}, wire)
		if err != nil {
			return fmt.Errorf("receiver %v, stream: %w", role, err)
		}
		rc := coordwire.Receiver{Role: role, State: st, Step: step, Limits: limits}
		f, err := rc.DecodeMessage(wire)
		if !valid {
			if err := refusal(err, code); err != nil {
				return fmt.Errorf("receiver %v: %w", role, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("receiver %v: refused (%v), want accepted", role, err)
		}
		want, label := wire, "wire"
		if cw := c.GetCanonicalWire(); len(cw) > 0 {
			want, label = cw, "canonical_wire"
			if bytes.Equal(cw, wire) {
				return errors.New("canonical_wire equals wire (leave it empty)")
			}
			g, err := rc.DecodeMessage(cw)
			if err != nil {
				return fmt.Errorf("receiver %v: canonical_wire refused: %v", role, err)
			}
			if got := coordwire.AppendFrame(nil, g); !bytes.Equal(got, cw) {
				return fmt.Errorf("receiver %v: canonical_wire does not round-trip", role)
			}
		}
		if got := coordwire.AppendFrame(nil, f); !bytes.Equal(got, want) {
			return fmt.Errorf("receiver %v: re-encoding differs from %s\n got %x\nwant %x", role, label, got, want)
		}
		if sf != nil && !bytes.Equal(coordwire.AppendFrame(nil, sf), want) {
			return fmt.Errorf("receiver %v: the stream reader's frame re-encodes differently from %s", role, label)
		}
	}
	return nil
}

// checkStream reads wire with a coordwire.FrameReader, as a byte stream
// holding exactly that frame. It applies to every vector whose wire is one
// complete frame, and to header-only vectors (5 bytes), which a stream
// reader must refuse from the header before reading further; a vector
// whose declared length disagrees with its bytes is a message-transport
// case only and is skipped.
//
// It returns the decoded frame of a valid vector (nil when skipped).
func checkStream(valid bool, code coordwire.ErrorCode, rc coordwire.Receiver, wire []byte) (coordwire.Frame, error) {
	if len(wire) < 4 {
		return nil, nil
	}
	declared := uint64(binary.BigEndian.Uint32(wire))
	if declared != uint64(len(wire)-4) && len(wire) != 5 {
		return nil, nil
	}
	fr := coordwire.NewFrameReader(bytes.NewReader(wire), rc.Role)
	fr.SetStep(rc.Step)
	if rc.State == coordwire.StateActive {
		fr.Activate(rc.Limits)
	}
	f, err := fr.ReadFrame()
	if !valid {
		return nil, refusal(err, code)
	}
	if err != nil {
		return nil, fmt.Errorf("refused (%v), want accepted", err)
	}
	if _, _, err := fr.ReadRaw(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("after the frame: %v, want io.EOF", err)
	}
	return f, nil
}

func toPreconditions(ps []*vectorspb.Precondition) ([]coordwire.Precondition, error) {
	var out []coordwire.Precondition
	for _, p := range ps {
		if p.GetObjectKind() > 0xffff || len(p.GetId()) != 16 {
			return nil, fmt.Errorf("precondition with object_kind %d and a %d-byte id", p.GetObjectKind(), len(p.GetId()))
		}
		var q coordwire.Precondition
		q.Object.Kind = coordwire.ObjectKind(p.GetObjectKind())
		copy(q.Object.ID[:], p.GetId())
		q.ExpectedRevision = p.GetExpectedRevision()
		out = append(out, q)
	}
	return out, nil
}

// splitFields splits a concatenation of TLV field images (the extensions
// of an operation digest case) into RawFields.
func splitFields(b []byte) ([]coordwire.RawField, error) {
	var out []coordwire.RawField
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		out = d.Keep(out)
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("extensions: %w", err)
	}
	return out, nil
}

func checkOperation(valid bool, code coordwire.ErrorCode, c *vectorspb.OperationDigestCase) error {
	if c.GetCommandKind() > 0xffff {
		return fmt.Errorf("command_kind %d", c.GetCommandKind())
	}
	kind := coordwire.CommandKind(c.GetCommandKind())
	pre, err := toPreconditions(c.GetPreconditions())
	if err != nil {
		return err
	}
	ext, err := splitFields(c.GetExtensions())
	if err != nil {
		return err
	}
	d, err := digest.Operation(kind, c.GetPayload(), pre, ext)
	if !valid {
		if err := refusal(err, code); err != nil {
			return fmt.Errorf("digest.Operation: %w", err)
		}
	} else {
		if err != nil {
			return fmt.Errorf("digest.Operation refused: %v", err)
		}
		if !bytes.Equal(d[:], c.GetDigest()) {
			return fmt.Errorf("digest %x, vector says %x", d, c.GetDigest())
		}
		canon, err := coordwire.CanonicalCommandPayload(kind, c.GetPayload())
		if err != nil {
			return fmt.Errorf("payload refused: %v", err)
		}
		if !bytes.Equal(canon, c.GetPayload()) {
			return errors.New("payload is not canonical")
		}
	}
	if len(c.GetCommandFrame()) == 0 {
		return nil
	}
	rc := coordwire.Receiver{Role: coordwire.RoleServer, State: coordwire.StateActive, Limits: CheckLimits()}
	f, err := rc.DecodeMessage(c.GetCommandFrame())
	if !valid {
		if err := refusal(err, code); err != nil {
			return fmt.Errorf("command_frame: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("command_frame refused: %v", err)
	}
	cmd, ok := f.(*coordwire.CoordCommand)
	if !ok {
		return fmt.Errorf("command_frame is a %v", f.Type())
	}
	if cmd.Kind != kind {
		return fmt.Errorf("command_frame kind %v, vector says %v", cmd.Kind, kind)
	}
	canon, err := coordwire.CanonicalCommandPayload(cmd.Kind, cmd.Payload)
	if err != nil || !bytes.Equal(canon, c.GetPayload()) {
		return fmt.Errorf("command_frame canonical payload differs from payload (%v)", err)
	}
	fd, err := digest.OperationFromCommand(cmd)
	if err != nil {
		return fmt.Errorf("digest.OperationFromCommand refused: %v", err)
	}
	if !bytes.Equal(fd[:], c.GetDigest()) {
		return fmt.Errorf("command_frame digest %x, vector says %x", fd, c.GetDigest())
	}
	return nil
}

func id16(b []byte, what string) ([16]byte, error) {
	var id [16]byte
	if len(b) != 16 {
		return id, fmt.Errorf("%s is %d bytes, want 16", what, len(b))
	}
	copy(id[:], b)
	return id, nil
}

func checkSnapshot(valid bool, c *vectorspb.SnapshotDigestCase) error {
	if !valid {
		return errors.New("invalid snapshot digest cases are not defined")
	}
	coord, err := id16(c.GetCoordinatorId(), "coordinator_id")
	if err != nil {
		return err
	}
	var recs []coordwire.SnapshotRecord
	for i, r := range c.GetRecords() {
		if r.GetObjectKind() > 0xffff || r.GetSchema() > 0xffff || len(r.GetId()) != 16 {
			return fmt.Errorf("record %d: field out of range", i)
		}
		var s coordwire.SnapshotRecord
		s.Object.Kind = coordwire.ObjectKind(r.GetObjectKind())
		copy(s.Object.ID[:], r.GetId())
		s.Revision = coordwire.ObjectRevision(r.GetRevision())
		s.SchemaVersion = uint16(r.GetSchema())
		s.Payload = r.GetPayload()
		var back coordwire.SnapshotRecord
		if err := back.Decode(s.Append(nil)); err != nil {
			return fmt.Errorf("record %d refused: %v", i, err)
		}
		if _, err := back.DecodePayload(); err != nil {
			return fmt.Errorf("record %d payload refused: %v", i, err)
		}
		recs = append(recs, s)
	}
	d := digest.Snapshot(coordwire.CoordinatorID(coord), coordwire.AuthorityEpoch(c.GetEpoch()), coordwire.ActivationSequence(c.GetActivationSequence()), coordwire.EventCut(c.GetBaseEventCut()), recs)
	if !bytes.Equal(d[:], c.GetDigest()) {
		return fmt.Errorf("digest %x, vector says %x", d, c.GetDigest())
	}
	return nil
}

func checkReplay(valid bool, c *vectorspb.ReplayDigestCase) error {
	if !valid {
		return errors.New("invalid replay digest cases are not defined")
	}
	coord, err := id16(c.GetCoordinatorId(), "coordinator_id")
	if err != nil {
		return err
	}
	sub, err := id16(c.GetSubscriptionId(), "subscription_id")
	if err != nil {
		return err
	}
	evs := make([]coordwire.ReplayEvent, len(c.GetEvents()))
	for i, b := range c.GetEvents() {
		if err := evs[i].Decode(b); err != nil {
			return fmt.Errorf("event %d refused: %v", i, err)
		}
	}
	d := digest.Replay(coordwire.CoordinatorID(coord), coordwire.AuthorityEpoch(c.GetEpoch()), coordwire.ActivationSequence(c.GetActivationSequence()),
		coordwire.SubscriptionID(sub), coordwire.EventCut(c.GetAfterEventCut()), coordwire.EventCut(c.GetReplayCut()), evs)
	if !bytes.Equal(d[:], c.GetDigest()) {
		return fmt.Errorf("digest %x, vector says %x", d, c.GetDigest())
	}
	return nil
}

func checkEffect(valid bool, code coordwire.ErrorCode, c *vectorspb.EffectDigestCase) error {
	err := CheckEffectImages(c.GetEffectKind(), c.GetTarget(), c.GetPayload())
	if !valid {
		if len(c.GetDigest()) != 0 {
			return errors.New("an invalid effect case carries a digest")
		}
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("refused: %v", err)
	}
	d := digest.Effect(coordwire.EffectKind(c.GetEffectKind()), c.GetTarget(), c.GetPayload())
	if !bytes.Equal(d[:], c.GetDigest()) {
		return fmt.Errorf("digest %x, vector says %x", d, c.GetDigest())
	}
	return nil
}

// CheckEffectImages judges the parts of an effect digest's preimage (§8)
// as the outbox row decoder (coordwire.EffectAttempt.Decode) does, in its
// order: kind is a valid EffectKind ("enum.effect_kind", also for a value
// that does not fit the u8), target decodes strictly as an EffectTarget,
// the target's tag is the kind's (SPAWN: PENDING_SPAWN; KILL and
// PROCESS_SIGNAL: ACTIVE_BINDING; "effect.target_kind_mismatch"), and
// payload decodes strictly as the kind's EffectPayload. Every refusal is
// MALFORMED_MESSAGE.
func CheckEffectImages(kind uint32, target, payload []byte) error {
	k := coordwire.EffectKind(kind)
	if kind > 0xff || !k.Valid() {
		return coordwire.NewError(coordwire.MalformedMessage, "enum.effect_kind")
	}
	var t coordwire.EffectTarget
	if err := t.Decode(target); err != nil {
		return err
	}
	want := coordwire.TargetActiveBinding
	if k == coordwire.EffectSpawn {
		want = coordwire.TargetPendingSpawn
	}
	if t.Tag != want {
		return coordwire.NewError(coordwire.MalformedMessage, "effect.target_kind_mismatch")
	}
	var p coordwire.EffectPayload
	return p.DecodeAs(k, payload)
}

func checkCertificate(valid bool, code coordwire.ErrorCode, c *vectorspb.CertificateCase) error {
	var ac coordwire.ActivationCertificate
	if err := ac.Decode(c.GetCertificate()); err != nil {
		if valid {
			return fmt.Errorf("certificate refused: %v", err)
		}
		return refusal(err, code)
	}
	if got := ac.AppendPreimage(nil); !bytes.Equal(got, c.GetPreimage()) {
		return fmt.Errorf("preimage differs\n got %x\nwant %x", got, c.GetPreimage())
	}
	if len(c.GetWitnessPublicKey()) != ed25519.PublicKeySize {
		return fmt.Errorf("witness_public_key is %d bytes", len(c.GetWitnessPublicKey()))
	}
	pub := ed25519.PublicKey(c.GetWitnessPublicKey())
	err := cert.Verify(&ac, pub, edstrict.KeyID(pub), time.Unix(int64(c.GetNow()), 0))
	if valid {
		if err != nil {
			return fmt.Errorf("cert.Verify refused: %v", err)
		}
		return nil
	}
	return refusal(err, code)
}

func checkSignature(valid bool, code coordwire.ErrorCode, pub, msg, sig []byte) error {
	if !valid && code != coordwire.AuthenticationFailed {
		// A strict-verification failure is AUTHENTICATION_FAILED (ADDENDUM
		// B.3) and nothing else.
		return fmt.Errorf("error_code %v, a failed verification is AUTHENTICATION_FAILED", code)
	}
	if got := edstrict.Verify(pub, msg, sig); got != valid {
		return fmt.Errorf("edstrict.Verify = %v (%s), vector says valid = %v", got, edstrict.Reason(edstrict.Check(pub, msg, sig)), valid)
	}
	return nil
}

func checkScope(valid bool, code coordwire.ErrorCode, c *vectorspb.ScopeCase) error {
	s, err := coordwire.ParseScopeImage(c.GetScope())
	if !valid {
		// A scope vector is the requested scope of WORKLOAD_RESPONSE as
		// the server's handshake judges it: any image ParseScopeImage
		// refuses is the generic AUTHENTICATION_FAILED (ADDENDUM B.2,
		// before any proof is checked), and only that code matches.
		if err != nil {
			err = errAuth
		}
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("ParseScopeImage refused: %v", err)
	}
	if uint64(s) != c.GetBits() {
		return fmt.Errorf("bits 0x%x, vector says 0x%x", uint64(s), c.GetBits())
	}
	return nil
}

func checkEvidence(valid bool, code coordwire.ErrorCode, c *vectorspb.EvidenceDigestCase) error {
	binding, err := id16(c.GetBindingId(), "binding_id")
	if err != nil {
		return err
	}
	err = CheckEvidenceFacts(coordwire.BindingID(binding), c.GetFacts())
	if !valid {
		if len(c.GetDigest()) != 0 {
			return errors.New("an invalid evidence case carries a digest")
		}
		return refusal(err, code)
	}
	if err != nil {
		return fmt.Errorf("facts refused: %v", err)
	}
	d := digest.Evidence(coordwire.BindingID(binding), c.GetFacts())
	if !bytes.Equal(d[:], c.GetDigest()) {
		return fmt.Errorf("digest %x, vector says %x", d, c.GetDigest())
	}
	return nil
}
