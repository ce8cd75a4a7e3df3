package coordwire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

func faHelloOK(t *rapid.T) *CoordHelloOK {
	return &CoordHelloOK{
		ProtocolMajor:          rapid.Uint16().Draw(t, "major"),
		ProtocolMinor:          rapid.Uint16().Draw(t, "minor"),
		ProtocolPatch:          rapid.Uint16().Draw(t, "patch"),
		NegotiatedCapabilities: Capabilities(rapid.Uint64().Draw(t, "caps")),
		CoordinatorID:          CoordinatorID(faID(t, "coordinator")),
		AuthorityEpoch:         AuthorityEpoch(faNZ(t, "epoch")),
		IncarnationID:          IncarnationID(faID(t, "incarnation")),
		Limits: Limits{
			MaxFrameBytes:        rapid.Uint32().Draw(t, "l1"),
			MaxPageBytes:         rapid.Uint32().Draw(t, "l2"),
			MaxPageRecords:       rapid.Uint16().Draw(t, "l3"),
			MaxTypedPayloadBytes: rapid.Uint32().Draw(t, "l4"),
			MaxEventCreditCount:  rapid.Uint32().Draw(t, "l5"),
			MaxEventCreditBytes:  rapid.Uint32().Draw(t, "l6"),
		},
		WorkloadGrant:                faGrant(t),
		OperationResultRetentionSecs: rapid.Uint64Min(MinOperationResultRetentionSecs).Draw(t, "retention"),
		ActivationCertificate:        faCert(t),
	}
}

func faChallenge(t *rapid.T) *WorkloadChallenge {
	n1, n2 := faB32(t, "cn"), faB32(t, "sn")
	n1[0], n2[0] = 1, 1
	return &WorkloadChallenge{
		Service:            faStr(t, "service", 16),
		NegotiatedMajor:    rapid.Uint16().Draw(t, "major"),
		NegotiatedMinor:    rapid.Uint16().Draw(t, "minor"),
		ClientNonce:        n1,
		ServerNonce:        n2,
		ServerIncarnation:  IncarnationID(faID(t, "incarnation")),
		ChannelBindingKind: ChannelBindingKind(rapid.IntRange(0, 1).Draw(t, "cbk")),
		ChannelBinding:     faB32(t, "cb"),
		AuthorityPublicKey: faB32(t, "apk"),
		AuthorityProof:     faB64(t, "proof"),
	}
}

func faResponse(t *rapid.T) *WorkloadResponse {
	return &WorkloadResponse{
		KeyID:           faB32(t, "key_id"),
		RequestedScope:  faBytes(t, "scope", 0, 12),
		RequestedExpiry: rapid.Uint64().Draw(t, "expiry"),
		WorkloadProof:   faB64(t, "proof"),
	}
}

func TestHandshakeFramesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		faRoundTripFrame(t, faHelloOK(t), RoleClient, StateHandshake)
		faRoundTripFrame(t, faChallenge(t), RoleClient, StateHandshake)
		faRoundTripFrame(t, faResponse(t), RoleServer, StateHandshake)
		faRoundTripFrame(t, &CoordAuthorityRenewed{Certificate: faCert(t)}, RoleClient, StateActive)
	})
}

func TestHandshakeNestedRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := faGrant(t)
		faRoundTripNested(t, &g, new(WorkloadGrant))
		c := faCert(t)
		faRoundTripNested(t, &c, new(ActivationCertificate))
	})
}

func TestHandshakeDirectionAndState(t *testing.T) {
	for _, c := range []struct {
		ft    FrameType
		from  Role
		state ConnState
	}{
		{TypeCoordHelloOK, RoleServer, StateHandshake},
		{TypeWorkloadChallenge, RoleServer, StateHandshake},
		{TypeWorkloadResponse, RoleClient, StateHandshake},
		{TypeCoordAuthorityRenewed, RoleServer, StateActive},
		{TypeCoordCommand, RoleClient, StateActive},
		{TypeCoordCommandResult, RoleServer, StateActive},
		{TypeGetOperationResult, RoleClient, StateActive},
		{TypeOperationResult, RoleServer, StateActive},
	} {
		other := RoleServer
		if c.from == RoleServer {
			other = RoleClient
		}
		otherState := StateActive
		if c.state == StateActive {
			otherState = StateHandshake
		}
		if !c.ft.SentBy(c.from) || c.ft.SentBy(other) || !c.ft.LegalIn(c.state) || c.ft.LegalIn(otherState) {
			t.Errorf("%v: wrong registration", c.ft)
		}
	}
}

func TestActivationCertificateImage(t *testing.T) {
	c := ActivationCertificate{Version: 1, ActivationSequence: 2, AuthorityEpoch: 3, IssuedAt: 4, ExpiresAt: 5}
	c.WitnessID[0], c.CoordinatorID[0], c.IncarnationID[0] = 1, 1, 1
	c.Signature[63] = 0xee
	img := c.Append(nil)
	if len(img) != ActivationCertificateSize {
		t.Fatalf("size %d", len(img))
	}
	pre := c.AppendPreimage(nil)
	want := append([]byte("phux-coordinator-activation/v1\x00"), img[:ActivationCertificateSize-64]...)
	if !bytes.Equal(pre, want) {
		t.Fatalf("preimage\n%x\n%x", pre, want)
	}
	// Field offsets: version, witness, coordinator, activation seq, epoch.
	if img[0] != 1 || binary.BigEndian.Uint64(img[33:]) != 2 || binary.BigEndian.Uint64(img[41:]) != 3 {
		t.Fatalf("field order: %x", img[:49])
	}
}

func TestActivationCertificateRefusals(t *testing.T) {
	base := ActivationCertificate{Version: 1, ActivationSequence: 2, AuthorityEpoch: 3}
	base.WitnessID[0], base.CoordinatorID[0], base.IncarnationID[0] = 1, 1, 1
	img := base.Append(nil)
	mut := func(off int, v ...byte) []byte {
		b := bytes.Clone(img)
		copy(b[off:], v)
		return b
	}
	var c ActivationCertificate
	faWantErr(t, c.Decode(mut(0, 2)), MalformedMessage, "certificate.version")
	faWantErr(t, c.Decode(mut(1, 0)), MalformedMessage, "id.zero")
	faWantErr(t, c.Decode(mut(17, 0)), MalformedMessage, "id.zero")
	faWantErr(t, c.Decode(mut(33, 0, 0, 0, 0, 0, 0, 0, 0)), MalformedMessage, "seq.zero")
	faWantErr(t, c.Decode(mut(41, 0, 0, 0, 0, 0, 0, 0, 0)), MalformedMessage, "seq.zero")
	faWantErr(t, c.Decode(mut(49, 0)), MalformedMessage, "id.zero")
	faWantErr(t, c.Decode(img[:len(img)-1]), MalformedMessage, "pos.truncated")
	faWantErr(t, c.Decode(append(bytes.Clone(img), 0)), MalformedMessage, "pos.trailing_bytes")
}

func TestWorkloadGrantRefusals(t *testing.T) {
	g := WorkloadGrant{EffectiveScope: ScopeWorkRead}
	img := g.Append(nil)
	if len(img) != WorkloadGrantSize {
		t.Fatalf("size %d", len(img))
	}
	var d WorkloadGrant
	b := bytes.Clone(img)
	binary.BigEndian.PutUint32(b[72:], 9)
	faWantErr(t, d.Decode(append(b, 0)), MalformedMessage, "scope.length")
	b = bytes.Clone(img)
	binary.BigEndian.PutUint64(b[76:], 0)
	faWantErr(t, d.Decode(b), MalformedMessage, "scope.zero")
	binary.BigEndian.PutUint64(b[76:], 0x41)
	faWantErr(t, d.Decode(b), MalformedMessage, "scope.unknown_bit")
	faWantErr(t, d.Decode(img[:80]), MalformedMessage, "pos.truncated")
}

func TestCoordHelloOKRefusals(t *testing.T) {
	m := rapid.Custom(faHelloOK).Example(1)
	body := m.AppendBody(nil)
	zero16 := make([]byte, 16)
	cert := faValue(t, body, 16)
	faRunCases(t, func() Frame { return new(CoordHelloOK) }, []faCase{
		{"missing_field_15", faDrop(t, body, 15), MalformedMessage, "tlv.missing_field"},
		{"missing_field_1", faDrop(t, body, 1), MalformedMessage, "tlv.missing_field"},
		{"wrong_width_major", faSet(t, body, 1, []byte{0, 0, 1}), MalformedMessage, "pos.trailing_bytes"},
		{"short_epoch", faSet(t, body, 6, []byte{1}), MalformedMessage, "pos.truncated"},
		{"zero_coordinator", faSet(t, body, 5, zero16), MalformedMessage, "id.zero"},
		{"zero_incarnation", faSet(t, body, 7, zero16), MalformedMessage, "id.zero"},
		{"zero_epoch", faSet(t, body, 6, make([]byte, 8)), MalformedMessage, "seq.zero"},
		{"retention_floor", faSet(t, body, 15, AppendU64(nil, MinOperationResultRetentionSecs-1)), MalformedMessage, "hello_ok.retention_below_floor"},
		{"cert_trailing", faSet(t, body, 16, append(bytes.Clone(cert), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"cert_truncated", faSet(t, body, 16, cert[:len(cert)-1]), MalformedMessage, "pos.truncated"},
		{"cert_version", faSet(t, body, 16, append([]byte{9}, cert[1:]...)), MalformedMessage, "certificate.version"},
		{"duplicate", append(bytes.Clone(body), AppendFieldU64(nil, 16, 1)...), MalformedMessage, "tlv.duplicate_field"},
	})
	// An unknown field is skipped in a coordinator frame.
	var got CoordHelloOK
	if err := got.DecodeBody(append(bytes.Clone(body), AppendFieldBytes(nil, 40, []byte{1})...)); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestWorkloadChallengeRefusals(t *testing.T) {
	m := rapid.Custom(faChallenge).Example(1)
	m.Service = WorkloadService
	body := m.AppendBody(nil)
	newF := func() Frame { return new(WorkloadChallenge) }
	otherProfile := AppendLenPrefixedStr(nil, "phux-workload/v2")
	faRunCases(t, newF, []faCase{
		{"unknown_field", append(bytes.Clone(body), AppendFieldBytes(nil, 12, nil)...), MalformedMessage, "workload.unknown_field"},
		{"unknown_field_high", append(bytes.Clone(body), AppendFieldU8(nil, 200, 0)...), MalformedMessage, "workload.unknown_field"},
		{"missing_profile", faDrop(t, body, 1), MalformedMessage, "tlv.missing_field"},
		{"missing_proof", faDrop(t, body, 11), MalformedMessage, "tlv.missing_field"},
		{"duplicate_proof", append(bytes.Clone(body), AppendFieldBytes(nil, 11, make([]byte, 64))...), MalformedMessage, "tlv.duplicate_field"},
		{"other_profile", faSet(t, body, 1, otherProfile), AuthenticationFailed, "workload.profile"},
		{"profile_trailing", faSet(t, body, 1, append(AppendLenPrefixedStr(nil, WorkloadProfile), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"profile_truncated", faSet(t, body, 1, AppendLenPrefixedStr(nil, WorkloadProfile)[:10]), MalformedMessage, "pos.truncated"},
		{"service_invalid_utf8", faSet(t, body, 2, AppendLenPrefixed(nil, []byte{0xff, 0xfe})), MalformedMessage, "str.invalid_utf8"},
		{"service_too_long", faSet(t, body, 2, AppendLenPrefixed(nil, bytes.Repeat([]byte{'a'}, 65))), MalformedMessage, "bytes.too_long"},
		{"service_trailing", faSet(t, body, 2, append(AppendLenPrefixedStr(nil, WorkloadService), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"wrong_width_major", faSet(t, body, 3, []byte{1}), MalformedMessage, "pos.truncated"},
		{"wrong_width_nonce", faSet(t, body, 5, make([]byte, 33)), MalformedMessage, "pos.trailing_bytes"},
		{"zero_client_nonce", faSet(t, body, 5, make([]byte, 32)), MalformedMessage, "workload.zero_nonce"},
		{"zero_server_nonce", faSet(t, body, 6, make([]byte, 32)), MalformedMessage, "workload.zero_nonce"},
		{"zero_incarnation", faSet(t, body, 7, make([]byte, 16)), MalformedMessage, "id.zero"},
		{"unknown_channel_binding_kind", faSet(t, body, 8, []byte{2}), MalformedMessage, "enum.channel_binding_kind"},
		{"nonminimal_length", append([]byte{0x01, WireBytes, 0x94, 0x00}, body[3:]...), MalformedMessage, "tlv.nonminimal_varint"},
	})
}

func TestWorkloadResponseRefusals(t *testing.T) {
	img := ScopeWorkRead.Image()
	m := &WorkloadResponse{RequestedScope: img[:], RequestedExpiry: 99}
	m.KeyID[0] = 7
	body := m.AppendBody(nil)
	faRunCases(t, func() Frame { return new(WorkloadResponse) }, []faCase{
		{"unknown_field", append(bytes.Clone(body), AppendFieldBytes(nil, 5, []byte{1})...), MalformedMessage, "workload.unknown_field"},
		{"missing_scope", faDrop(t, body, 2), MalformedMessage, "tlv.missing_field"},
		{"wrong_width_key", faSet(t, body, 1, make([]byte, 31)), MalformedMessage, "pos.truncated"},
		{"wrong_width_expiry", faSet(t, body, 3, make([]byte, 9)), MalformedMessage, "pos.trailing_bytes"},
		{"scope_len_mismatch", faSet(t, body, 2, append(AppendU32(nil, 9), img[:]...)), MalformedMessage, "pos.truncated"},
		{"scope_trailing", faSet(t, body, 2, append(AppendLenPrefixed(nil, img[:]), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"wrong_wire_type", faJoin([]RawField{{Raw: append(AppendUvarint(nil, 1), WireFixed32, 1, 2, 3, 4)}}), MalformedMessage, "tlv.wrong_wire_type"},
	})
	// The decoder does not judge the scope image: the handshake does.
	odd := &WorkloadResponse{RequestedScope: []byte{1, 2, 3}}
	var got WorkloadResponse
	if err := got.DecodeBody(odd.AppendBody(nil)); err != nil {
		t.Fatalf("odd scope image: %v", err)
	}
}
