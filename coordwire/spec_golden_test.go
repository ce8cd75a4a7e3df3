package coordwire_test

// Spec golden tests: every frame, nested type and digest checked against
// bytes written by hand from coordinator.txt and ADDENDUM.md, field by
// field. Nothing here uses the package's encoders to build an expectation:
// the hex literals are the spec's layout, each commented with its field id
// and width. Every top-level TLV field is `id varint || 04 (BYTES) ||
// length varint || value` (ADDENDUM B.1); inside a value everything is
// positional big-endian (§3.3).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	cw "github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// gdHex decodes hex written in pieces with spaces.
func gdHex(parts ...string) []byte {
	s := strings.Join(parts, "")
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("gdHex: " + err.Error())
	}
	return b
}

// gdRep repeats one hex byte n times.
func gdRep(h string, n int) string { return strings.Repeat(h, n) }

func gdID[T ~[16]byte](b byte) T {
	var a [16]byte
	for i := range a {
		a[i] = b
	}
	return T(a)
}

func gd32(b byte) (a [32]byte) {
	for i := range a {
		a[i] = b
	}
	return a
}

func gd64(b byte) (a [64]byte) {
	for i := range a {
		a[i] = b
	}
	return a
}

// Fixed identities (16 bytes each, one repeated byte).
var (
	hCoord = gdRep("c1", 16) // CoordinatorId
	hInc   = gdRep("1c", 16) // IncarnationId
	hOp    = gdRep("0b", 16) // OperationId
	hObj   = gdRep("11", 16) // ObjectiveId
	hRun   = gdRep("22", 16) // RunId
	hWS    = gdRep("33", 16) // WorkSessionId
	hBind  = gdRep("44", 16) // BindingId
	hPB    = gdRep("55", 16) // PendingBindingId
	hArt   = gdRep("66", 16) // ArtifactId
	hSig   = gdRep("77", 16) // SignalId
	hEv    = gdRep("e1", 16) // EventId
	hEA    = gdRep("ea", 16) // EffectAttemptId
	hSnap  = gdRep("5a", 16) // SnapshotId
	hRep   = gdRep("7a", 16) // ReplayId
	hSub   = gdRep("5b", 16) // SubscriptionId
	hWit   = gdRep("3a", 16) // ActivationWitnessId

	// "phux-workload/v1", 16 ASCII bytes.
	hProfile = "70 68 75 78 2d 77 6f 72 6b 6c 6f 61 64 2f 76 31"
	// "phux-coordinator", 16 ASCII bytes.
	hService = "70 68 75 78 2d 63 6f 6f 72 64 69 6e 61 74 6f 72"

	// request_id field (id 1, u32 5).
	fRID = "01 04 04 00000005"

	// AuthorityGuard image, 64 bytes (§4).
	hGuard = hCoord + // coordinator_id bytes16
		"0000000000000002" + // authority_epoch u64 = 2
		"0000000000000003" + // activation_sequence u64 = 3
		gdRep("7e", 32) // fencing_token_sha256 bytes32

	// ActivationCertificate image, 209 bytes (§12).
	hCertSigned = "01" + // version u8 = 1
		hWit + // witness_id bytes16
		hCoord + // coordinator_id bytes16
		"0000000000000003" + // activation_sequence u64
		"0000000000000002" + // authority_epoch u64
		hInc + // incarnation_id bytes16
		gdRep("f7", 32) + // fencing_token bytes32
		"00000000000003e8" + // issued_at u64 = 1000
		"0000000000000406" + // expires_at u64 = 1030
		gdRep("3b", 32) // witness_key_id bytes32
	hCert = hCertSigned + gdRep("5e", 64) // signature bytes64

	// TerminalBindingRef image, 87 bytes (§11).
	hBindRef = hBind + hWS + // BindingId, WorkSessionId
		gdRep("af", 32) + // owner_authority_fingerprint bytes32
		hInc + // owner_incarnation bytes16
		"00000003 726964" // resource_id_len u32 = 3, "rid"

	// SnapshotRecord images (§7).
	hRec1 = "0001" + hObj + // ObjectKind OBJECTIVE, id
		"0000000000000001" + // revision u64
		"0001" + // schema_version u16
		"00000003 010203" // payload_len u32, payload (35 bytes total)
	hRec2 = "0002" + hRun + "0000000000000002" + "0001" + "00000000" // RUN, empty payload (32 bytes)
	// A record used as an event payload: OBJECTIVE rev 2, empty payload (32 bytes).
	hEvRec = "0001" + hObj + "0000000000000002" + "0001" + "00000000"

	// ReplayEvent image (§10), 58 + 32 = 90 bytes.
	hEv1 = "000000000000000a" + // event_sequence u64 = 10
		hEv + // event_id bytes16
		"0001" + // event_kind u16 OBJECTIVE_CHANGED
		"0001" + hObj + // object ObjectRef
		"0000000000000002" + // object_revision u64
		"0001" + // schema u16
		"00000020" + hEvRec // payload_len u32 = 32, payload

	// OperationResult PENDING image, 17 bytes (§8).
	hOpPending = "00" + // tag PENDING
		"0000000000000002" + // admitted_epoch u64
		"0000000000000010" // admitted_event_sequence u64
	// STARTED payload with binding, 49 bytes (§7).
	hStarted = hRun + hWS + "01" + hBind
	// OperationResult SUCCEEDED/STARTED, 64 bytes.
	hOpSucceeded = "01" + // tag SUCCEEDED
		"0000000000000011" + // completed_event_sequence u64
		"0002" + // result_kind u16 STARTED
		"00000031" + hStarted // payload_len u32 = 49, payload

	// EffectTarget PENDING_SPAWN image, 72 bytes (§8).
	hTargetSpawn = "00" + hPB + gdRep("af", 32) + hInc + "00000003 677270" // tag 0, PendingBindingId, fp, incarnation, group_len, "grp"
	// EffectTarget ACTIVE_BINDING image, 88 bytes.
	hTargetActive = "01" + hBindRef
	// EffectPayload SPAWN image, 24 bytes.
	hSpawn = hWS + "0001" + "00000002 7b7d" // work_session_id, executor_schema u16, document_len u32, "{}"

	// TerminalSourceRef image, 72 bytes (§11).
	hSrcRef = hBind + gdRep("af", 32) + hInc + "0000000000000007" // sequence u64 = 7
	// OUTPUT_RANGE payload, 56 bytes.
	hOutRange = "0000000000000001" + "0000000000000004" + "0000000000000100" + gdRep("c5", 32)
	// TerminalSourceFact image: ref || kind OUTPUT_RANGE || schema 1 || len 56 || payload.
	hFact = hSrcRef + "0005" + "0001" + "00000038" + hOutRange

	// Artifact manifest document schema 1 (ADDENDUM C.6), 78 bytes.
	hManifest = "01 04 10" + hWS + // 1 work_session_id bytes16
		"02 04 0a 746578742f706c61696e" + // 2 media_type str "text/plain"
		"03 04 08 0000000000000005" + // 3 size u64
		"04 04 20" + gdRep("c5", 32) // 4 content_sha256 bytes32

	// CANCEL_RUN payload (A.6), 19 bytes.
	hCancel = "01 04 10" + hRun
)

// Values matching the hex above.
var (
	vGuard = cw.AuthorityGuard{
		CoordinatorID:      gdID[cw.CoordinatorID](0xc1),
		AuthorityEpoch:     2,
		ActivationSequence: 3,
		FencingTokenSHA256: gd32(0x7e),
	}
	vCert = cw.ActivationCertificate{
		Version:            1,
		WitnessID:          gdID[cw.ActivationWitnessID](0x3a),
		CoordinatorID:      gdID[cw.CoordinatorID](0xc1),
		ActivationSequence: 3,
		AuthorityEpoch:     2,
		IncarnationID:      gdID[cw.IncarnationID](0x1c),
		FencingToken:       gd32(0xf7),
		IssuedAt:           1000,
		ExpiresAt:          1030,
		WitnessKeyID:       gd32(0x3b),
		Signature:          gd64(0x5e),
	}
	vBindRef = cw.TerminalBindingRef{
		BindingID:                 gdID[cw.BindingID](0x44),
		WorkSessionID:             gdID[cw.WorkSessionID](0x33),
		OwnerAuthorityFingerprint: gd32(0xaf),
		OwnerIncarnation:          gdID[cw.IncarnationID](0x1c),
		ResourceID:                []byte("rid"),
	}
	vRec1 = cw.SnapshotRecord{Object: cw.ObjectRef{Kind: cw.ObjectKindObjective, ID: gdID[[16]byte](0x11)}, Revision: 1, SchemaVersion: 1, Payload: []byte{1, 2, 3}}
	vRec2 = cw.SnapshotRecord{Object: cw.ObjectRef{Kind: cw.ObjectKindRun, ID: gdID[[16]byte](0x22)}, Revision: 2, SchemaVersion: 1}
	vEv1  = cw.ReplayEvent{
		EventSequence: 10, EventID: gdID[cw.EventID](0xe1), EventKind: cw.EventObjectiveChanged,
		Object: cw.ObjectRef{Kind: cw.ObjectKindObjective, ID: gdID[[16]byte](0x11)}, ObjectRevision: 2, Schema: 1,
		Payload: gdHex(hEvRec),
	}
	vOpPending   = cw.OperationResult{Tag: cw.OperationPending, AdmittedEpoch: 2, AdmittedEventSequence: 0x10}
	vOpSucceeded = cw.OperationResult{Tag: cw.OperationSucceeded, CompletedEventSequence: 0x11, ResultKind: cw.ResultStarted, ResultPayload: gdHex(hStarted)}
	vPre         = []cw.Precondition{
		{Object: cw.ObjectRef{Kind: cw.ObjectKindRun, ID: gdID[[16]byte](0x22)}, ExpectedRevision: 7},
		{Object: cw.ObjectRef{Kind: cw.ObjectKindObjective, ID: gdID[[16]byte](0x11)}, ExpectedRevision: 0},
	}
	vExt = []cw.RawField{
		{ID: 9, Raw: gdHex("09 00 05")},        // id 9, wire VARINT, value 5
		{ID: 200, Raw: gdHex("c801 04 01 ff")}, // id 200 (varint c8 01), BYTES, len 1
	}
	vTargetSpawn = cw.EffectTarget{Tag: cw.TargetPendingSpawn, PendingBindingID: gdID[cw.PendingBindingID](0x55),
		OwnerAuthorityFingerprint: gd32(0xaf), OwnerIncarnation: gdID[cw.IncarnationID](0x1c), Group: []byte("grp")}
	vTargetActive = cw.EffectTarget{Tag: cw.TargetActiveBinding, Binding: vBindRef}
	vSrcRef       = cw.TerminalSourceRef{BindingID: gdID[cw.BindingID](0x44), OwnerAuthorityFingerprint: gd32(0xaf),
		OwnerIncarnation: gdID[cw.IncarnationID](0x1c), Sequence: 7}
	vLimits = cw.Limits{MaxFrameBytes: 512 << 10, MaxPageBytes: 256 << 10, MaxPageRecords: 512,
		MaxTypedPayloadBytes: 128 << 10, MaxEventCreditCount: 1024, MaxEventCreditBytes: 4 << 20}
)

type gdFrameCase struct {
	name  string
	typ   byte         // type byte of A.5, by hand
	role  cw.Role      // receiving role
	state cw.ConnState // receiving state
	frame cw.Frame     // decoded value
	body  string       // hand-written body hex
}

func gdFrameCases() []gdFrameCase {
	limitsHex := func(first int) string {
		id := func(i int) string { return hex.EncodeToString([]byte{byte(first + i)}) }
		return id(0) + "04 04 00080000" + // max_frame_bytes u32 = 512 KiB
			id(1) + "04 04 00040000" + // max_page_bytes u32 = 256 KiB
			id(2) + "04 02 0200" + // max_page_records u16 = 512
			id(3) + "04 04 00020000" + // max_typed_payload_bytes u32 = 128 KiB
			id(4) + "04 04 00000400" + // max_event_credit_count u32 = 1024
			id(5) + "04 04 00400000" // max_event_credit_bytes u32 = 4 MiB
	}
	return []gdFrameCase{
		{"COORD_HELLO", 0x01, cw.RoleServer, cw.StateHandshake, &cw.CoordHello{
			ProtocolMajor: 0, ProtocolMinor: 1, ProtocolPatch: 0, ClientName: "cli",
			OfferedCapabilities: 0x1f, RequiredCapabilities: 0x01, Limits: vLimits,
			WorkloadOffer: cw.WorkloadOffer{ClientNonce: gd32(0xab)},
		}, "01 04 02 0000" + // 1 protocol_major u16
			"02 04 02 0001" + // 2 protocol_minor u16
			"03 04 02 0000" + // 3 protocol_patch u16
			"04 04 03 636c69" + // 4 client_name str "cli"
			"05 04 08 000000000000001f" + // 5 offered_capabilities u64
			"06 04 08 0000000000000001" + // 6 required_capabilities u64
			limitsHex(7) + // 7..12
			"0d 04 34 00000010" + hProfile + gdRep("ab", 32)}, // 13 workload_offer: U32(16) profile nonce[32]
		{"WORKLOAD_RESPONSE", 0x04, cw.RoleServer, cw.StateHandshake, &cw.WorkloadResponse{
			KeyID: gd32(0x4b), RequestedScope: gdHex("0000000000000003"), RequestedExpiry: 1000, WorkloadProof: gd64(0x50),
		}, "01 04 20" + gdRep("4b", 32) + // 1 key_id [32]
			"02 04 0c 00000008 0000000000000003" + // 2 requested_scope U32(8) || u64
			"03 04 08 00000000000003e8" + // 3 requested_expiry U64
			"04 04 40" + gdRep("50", 64)}, // 4 workload_proof [64]
		{"COORD_COMMAND", 0x10, cw.RoleServer, cw.StateActive, &cw.CoordCommand{
			RequestID: 5, Guard: vGuard, OperationID: gdID[cw.OperationID](0x0b), Kind: cw.CommandCancelRun,
			Payload: gdHex(hCancel), Preconditions: vPre, Extensions: vExt,
		}, fRID + // 1 request_id u32
			"02 04 40" + hGuard + // 2 authority_guard (64)
			"03 04 10" + hOp + // 3 operation_id bytes16
			"04 04 02 0004" + // 4 command_kind u16 CANCEL_RUN
			"05 04 13" + hCancel + // 5 payload bytes (19)
			"06 04 36 0002" + // 6 preconditions: count u16 = 2 (54 bytes)
			"0002" + hRun + "0000000000000007" + // RUN, rev 7 (wire order kept)
			"0001" + hObj + "0000000000000000" + // OBJECTIVE, rev 0 (absent)
			"09 00 05" + // extension id 9 (VARINT 5)
			"c801 04 01 ff"}, // extension id 200 (BYTES ff)
		{"GET_OPERATION_RESULT", 0x11, cw.RoleServer, cw.StateActive, &cw.GetOperationResult{
			RequestID: 5, Guard: vGuard, OperationID: gdID[cw.OperationID](0x0b),
		}, fRID + "02 04 40" + hGuard + "03 04 10" + hOp},
		{"OPEN_SNAPSHOT", 0x20, cw.RoleServer, cw.StateActive, &cw.OpenSnapshot{
			RequestID: 5, Guard: vGuard, ReserveSubscription: true, ReplacePausedSubscription: gdID[cw.SubscriptionID](0x5b),
		}, fRID + "02 04 40" + hGuard +
			"03 04 01 00" + // 3 selector: WholeAuthoritySelector tag 0
			"04 04 01 01" + // 4 reserve_subscription bool
			"05 04 10" + hSub}, // 5 replace_paused_subscription bytes16
		{"SNAPSHOT_NEXT", 0x21, cw.RoleServer, cw.StateActive, &cw.SnapshotNext{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), Cursor: []byte("cur"),
		}, fRID + "02 04 10" + hSnap + "03 04 03 637572"},
		{"SNAPSHOT_APPLIED", 0x22, cw.RoleServer, cw.StateActive, &cw.SnapshotApplied{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), SubscriptionID: gdID[cw.SubscriptionID](0x5b),
			InitialCreditCount: 16, InitialCreditBytes: 0x10000,
		}, fRID + "02 04 10" + hSnap + "03 04 10" + hSub +
			"04 04 04 00000010" + // 4 initial_credit_count u32
			"05 04 04 00010000"}, // 5 initial_credit_bytes u32
		{"SUBSCRIBE", 0x23, cw.RoleServer, cw.StateActive, &cw.Subscribe{
			RequestID: 5, Guard: vGuard, AfterEventSequence: 9, InitialCreditCount: 16, InitialCreditBytes: 0x10000,
		}, fRID + "02 04 40" + hGuard + "03 04 08 0000000000000009" + "04 04 04 00000010" + "05 04 04 00010000"},
		{"CREDIT", 0x24, cw.RoleServer, cw.StateActive, &cw.Credit{
			SubscriptionID: gdID[cw.SubscriptionID](0x5b), AddCount: 1, AddBytes: 0x100,
		}, "01 04 10" + hSub + "02 04 04 00000001" + "03 04 04 00000100"},
		{"OPEN_REPLAY", 0x25, cw.RoleServer, cw.StateActive, &cw.OpenReplay{
			RequestID: 5, Guard: vGuard, SubscriptionID: gdID[cw.SubscriptionID](0x5b), AfterEventSequence: 9,
		}, fRID + "02 04 40" + hGuard + "03 04 10" + hSub + "04 04 08 0000000000000009"},
		{"REPLAY_NEXT", 0x26, cw.RoleServer, cw.StateActive, &cw.ReplayNext{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), Cursor: []byte("cur"),
		}, fRID + "02 04 10" + hRep + "03 04 03 637572"},
		{"REPLAY_APPLIED", 0x27, cw.RoleServer, cw.StateActive, &cw.ReplayApplied{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), SubscriptionID: gdID[cw.SubscriptionID](0x5b),
			InitialCreditCount: 16, InitialCreditBytes: 0x10000,
		}, fRID + "02 04 10" + hRep + "03 04 10" + hSub + "04 04 04 00000010" + "05 04 04 00010000"},
		{"COORD_PING", 0x7f, cw.RoleServer, cw.StateHandshake, &cw.CoordPing{Nonce: 0x0102030405060708},
			"01 04 08 0102030405060708"},
		{"COORD_HELLO_OK", 0x80, cw.RoleClient, cw.StateHandshake, &cw.CoordHelloOK{
			ProtocolMajor: 0, ProtocolMinor: 1, ProtocolPatch: 0, NegotiatedCapabilities: 0x1f,
			CoordinatorID: gdID[cw.CoordinatorID](0xc1), AuthorityEpoch: 2, IncarnationID: gdID[cw.IncarnationID](0x1c),
			Limits: vLimits,
			WorkloadGrant: cw.WorkloadGrant{KeyID: gd32(0x4b), AuthorityFingerprint: gd32(0xaf), ExpiresAt: 4000,
				EffectiveScope: cw.ScopeWorkRead | cw.ScopeWorkCommand},
			OperationResultRetentionSecs: 2_592_000,
			ActivationCertificate:        vCert,
		}, "01 04 02 0000" + "02 04 02 0001" + "03 04 02 0000" + // 1..3 version
			"04 04 08 000000000000001f" + // 4 negotiated_capabilities u64
			"05 04 10" + hCoord + // 5 coordinator_id
			"06 04 08 0000000000000002" + // 6 authority_epoch u64
			"07 04 10" + hInc + // 7 incarnation_id
			limitsHex(8) + // 8..13
			"0e 04 54" + gdRep("4b", 32) + gdRep("af", 32) + // 14 workload_grant (84): key_id, authority_fingerprint
			"0000000000000fa0" + "00000008" + "0000000000000003" + // expires_at U64, U32(8), scope u64
			"0f 04 08 0000000000278d00" + // 15 operation_result_retention_secs u64 = 2,592,000
			"10 04 d101" + hCert}, // 16 activation_certificate (209 = varint d1 01)
		{"ACK", 0x82, cw.RoleClient, cw.StateActive, &cw.Ack{RequestID: 5}, fRID},
		{"COORD_AUTHORITY_RENEWED", 0x83, cw.RoleClient, cw.StateActive, &cw.CoordAuthorityRenewed{Certificate: vCert},
			"01 04 d101" + hCert},
		{"WORKLOAD_CHALLENGE", 0x84, cw.RoleClient, cw.StateHandshake, &cw.WorkloadChallenge{
			Service: "phux-coordinator", NegotiatedMajor: 0, NegotiatedMinor: 1,
			ClientNonce: gd32(0xab), ServerNonce: gd32(0xcd), ServerIncarnation: gdID[cw.IncarnationID](0x1c),
			ChannelBindingKind: cw.BindingUDSPeer, ChannelBinding: gd32(0xcb),
			AuthorityPublicKey: gd32(0xa5), AuthorityProof: gd64(0xa9),
		}, "01 04 14 00000010" + hProfile + // 1 profile U32(16) || "phux-workload/v1"
			"02 04 14 00000010" + hService + // 2 service U32(len) || "phux-coordinator"
			"03 04 02 0000" + "04 04 02 0001" + // 3, 4 negotiated major/minor U16
			"05 04 20" + gdRep("ab", 32) + // 5 client_nonce
			"06 04 20" + gdRep("cd", 32) + // 6 server_nonce
			"07 04 10" + hInc + // 7 server_incarnation
			"08 04 01 01" + // 8 channel_binding_kind UDS_PEER
			"09 04 20" + gdRep("cb", 32) + // 9 channel_binding
			"0a 04 20" + gdRep("a5", 32) + // 10 authority_public_key
			"0b 04 40" + gdRep("a9", 64)}, // 11 authority_proof
		{"COORD_COMMAND_RESULT", 0x90, cw.RoleClient, cw.StateActive, &cw.CoordCommandResult{RequestID: 5, Operation: vOpPending},
			fRID + "02 04 11" + hOpPending},
		{"OPERATION_RESULT", 0x91, cw.RoleClient, cw.StateActive, &cw.OperationResultFrame{RequestID: 5, Operation: vOpSucceeded},
			fRID + "02 04 40" + hOpSucceeded},
		{"SNAPSHOT_BEGIN", 0xa0, cw.RoleClient, cw.StateActive, &cw.SnapshotBegin{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), Guard: vGuard, BaseEventSequence: 9,
			FirstCursor: []byte("cur"), SubscriptionID: gdID[cw.SubscriptionID](0x5b), LeaseExpiresAt: 1060,
		}, fRID + "02 04 10" + hSnap + "03 04 40" + hGuard +
			"04 04 08 0000000000000009" + // 4 base_event_sequence EventCut
			"05 04 03 637572" + // 5 first_cursor "cur"
			"06 04 10" + hSub + // 6 subscription_id
			"07 04 08 0000000000000424"}, // 7 lease_expires_at u64 = 1060
		{"SNAPSHOT_PAGE", 0xa1, cw.RoleClient, cw.StateActive, &cw.SnapshotPage{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), Cursor: []byte("cur"), PageIndex: 0,
			Records: []cw.SnapshotRecord{vRec1, vRec2}, NextCursor: []byte("nxt"),
		}, fRID + "02 04 10" + hSnap + "03 04 03 637572" +
			"04 04 04 00000000" + // 4 page_index u32
			"05 04 45 0002" + hRec1 + hRec2 + // 5 records: count 2, 35 + 32 bytes
			"06 04 03 6e7874"}, // 6 next_cursor "nxt"
		{"SNAPSHOT_END", 0xa2, cw.RoleClient, cw.StateActive, &cw.SnapshotEnd{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), PageCount: 1, RecordCount: 2, CanonicalSHA256: gd32(0xd5),
		}, fRID + "02 04 10" + hSnap + "03 04 04 00000001" + "04 04 08 0000000000000002" + "05 04 20" + gdRep("d5", 32)},
		{"SUBSCRIBED", 0xa3, cw.RoleClient, cw.StateActive, &cw.Subscribed{
			RequestID: 5, SubscriptionID: gdID[cw.SubscriptionID](0x5b), NextDeliverySequence: 1,
		}, fRID + "02 04 10" + hSub + "03 04 08 0000000000000001"},
		{"REPLAY_BEGIN", 0xa4, cw.RoleClient, cw.StateActive, &cw.ReplayBegin{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), SubscriptionID: gdID[cw.SubscriptionID](0x5b),
			FirstEvent: 10, ReplayCut: 12, FirstCursor: []byte("cur"), LeaseExpiresAt: 1060,
		}, fRID + "02 04 10" + hRep + "03 04 10" + hSub +
			"04 04 08 000000000000000a" + // 4 first_event EventSequence
			"05 04 08 000000000000000c" + // 5 replay_cut EventCut
			"06 04 03 637572" + // 6 first_cursor
			"07 04 08 0000000000000424"}, // 7 lease_expires_at
		{"REPLAY_PAGE", 0xa5, cw.RoleClient, cw.StateActive, &cw.ReplayPage{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), Cursor: []byte("cur"), PageIndex: 1,
			Events: []cw.ReplayEvent{vEv1},
		}, fRID + "02 04 10" + hRep + "03 04 03 637572" + "04 04 04 00000001" +
			"05 04 5c 0001" + hEv1}, // 5 events: count 1, 90 bytes; no next_cursor
		{"REPLAY_END", 0xa6, cw.RoleClient, cw.StateActive, &cw.ReplayEnd{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), PageCount: 2, EventCount: 1, CanonicalSHA256: gd32(0xd5),
		}, fRID + "02 04 10" + hRep + "03 04 04 00000002" + "04 04 08 0000000000000001" + "05 04 20" + gdRep("d5", 32)},
		{"COORD_EVENT", 0xb0, cw.RoleClient, cw.StateActive, &cw.CoordEvent{
			SubscriptionID: gdID[cw.SubscriptionID](0x5b), DeliverySequence: 1, EventSequence: 10,
			EventID: gdID[cw.EventID](0xe1), EventKind: cw.EventObjectiveChanged,
			Object: cw.ObjectRef{Kind: cw.ObjectKindObjective, ID: gdID[[16]byte](0x11)}, ObjectRevision: 2, Schema: 1,
			Payload: gdHex(hEvRec),
		}, "01 04 10" + hSub + // 1 subscription_id
			"02 04 08 0000000000000001" + // 2 delivery_sequence
			"03 04 08 000000000000000a" + // 3 event_sequence
			"04 04 10" + hEv + // 4 event_id
			"05 04 02 0001" + // 5 event_kind u16
			"06 04 12 0001" + hObj + // 6 object ObjectRef (18)
			"07 04 08 0000000000000002" + // 7 object_revision
			"08 04 02 0001" + // 8 schema u16
			"09 04 20" + hEvRec}, // 9 payload bytes (a SnapshotRecord, 32)
		{"GAP", 0xb1, cw.RoleClient, cw.StateActive, &cw.Gap{
			SubscriptionID: gdID[cw.SubscriptionID](0x5b), ObservedEvent: 11, Reason: cw.GapSourceGap,
		}, "01 04 10" + hSub + "02 04 08 0000000000000000" + "03 04 08 0000000000000000" +
			"04 04 08 000000000000000b" + // 4 observed_event
			"05 04 01 03"}, // 5 reason u8 SOURCE_GAP
		{"COORD_ERROR", 0xc0, cw.RoleClient, cw.StateActive, &cw.CoordError{RequestID: 5, Code: cw.MalformedMessage, Message: "bad"},
			fRID + "02 04 02 0003" + "03 04 03 626164"},
		{"COORD_PONG", 0xff, cw.RoleClient, cw.StateHandshake, &cw.CoordPong{Nonce: 0x0102030405060708},
			"01 04 08 0102030405060708"},
		// Optional-absent variants.
		{"GAP/no_observed", 0xb1, cw.RoleClient, cw.StateActive, &cw.Gap{
			SubscriptionID: gdID[cw.SubscriptionID](0x5b), LastContiguousDelivery: 4, LastContiguousEvent: 9,
		}, "01 04 10" + hSub + "02 04 08 0000000000000004" + "03 04 08 0000000000000009" + "05 04 01 00"},
		{"COORD_ERROR/no_request", 0xc0, cw.RoleServer, cw.StateHandshake, &cw.CoordError{Code: cw.NotFound},
			"02 04 02 000e" + "03 04 00"},
		{"COORD_COMMAND/bare", 0x10, cw.RoleServer, cw.StateActive, &cw.CoordCommand{
			RequestID: 5, Guard: vGuard, OperationID: gdID[cw.OperationID](0x0b), Kind: cw.CommandCancelRun, Payload: gdHex(hCancel),
		}, fRID + "02 04 40" + hGuard + "03 04 10" + hOp + "04 04 02 0004" + "05 04 13" + hCancel},
		{"OPEN_SNAPSHOT/no_replace", 0x20, cw.RoleServer, cw.StateActive, &cw.OpenSnapshot{RequestID: 5, Guard: vGuard},
			fRID + "02 04 40" + hGuard + "03 04 01 00" + "04 04 01 00"},
		{"SNAPSHOT_BEGIN/empty", 0xa0, cw.RoleClient, cw.StateActive, &cw.SnapshotBegin{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), Guard: vGuard, LeaseExpiresAt: 1060,
		}, fRID + "02 04 10" + hSnap + "03 04 40" + hGuard + "04 04 08 0000000000000000" + "07 04 08 0000000000000424"},
		{"SNAPSHOT_APPLIED/no_subscription", 0x22, cw.RoleServer, cw.StateActive, &cw.SnapshotApplied{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a),
		}, fRID + "02 04 10" + hSnap + "04 04 04 00000000" + "05 04 04 00000000"},
		{"REPLAY_BEGIN/empty", 0xa4, cw.RoleClient, cw.StateActive, &cw.ReplayBegin{
			RequestID: 5, ReplayID: gdID[cw.ReplayID](0x7a), SubscriptionID: gdID[cw.SubscriptionID](0x5b), ReplayCut: 9, LeaseExpiresAt: 1060,
		}, fRID + "02 04 10" + hRep + "03 04 10" + hSub + "05 04 08 0000000000000009" + "07 04 08 0000000000000424"},
		{"SNAPSHOT_PAGE/empty_final", 0xa1, cw.RoleClient, cw.StateActive, &cw.SnapshotPage{
			RequestID: 5, SnapshotID: gdID[cw.SnapshotID](0x5a), Cursor: []byte("cur"), PageIndex: 3,
		}, fRID + "02 04 10" + hSnap + "03 04 03 637572" + "04 04 04 00000003" + "05 04 02 0000"},
	}
}

// TestSpecGoldenFrames checks every one of the 30 frame types: the encoder
// writes the hand-written body, the whole frame is u32 length || type ||
// body, and a receiver of the right role and state decodes the frame back
// to the value.
func TestSpecGoldenFrames(t *testing.T) {
	seen := map[cw.FrameType]bool{}
	for _, c := range gdFrameCases() {
		t.Run(c.name, func(t *testing.T) {
			body := gdHex(c.body)
			if got := byte(c.frame.Type()); got != c.typ {
				t.Fatalf("Type() = %#x, want %#x", got, c.typ)
			}
			seen[c.frame.Type()] = true
			if got := c.frame.AppendBody(nil); !bytes.Equal(got, body) {
				t.Fatalf("AppendBody:\n got %x\nwant %x", got, body)
			}
			wire := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
			wire = append(append(wire, c.typ), body...)
			if got := cw.AppendFrame(nil, c.frame); !bytes.Equal(got, wire) {
				t.Fatalf("AppendFrame:\n got %x\nwant %x", got, wire)
			}
			rc := cw.Receiver{Role: c.role, State: c.state, Limits: cw.HardLimits()}
			f, err := rc.DecodeMessage(wire)
			if err != nil {
				t.Fatalf("DecodeMessage: %v", err)
			}
			if d := cmp.Diff(c.frame, f); d != "" {
				t.Fatalf("decoded value differs (-want +got):\n%s", d)
			}
		})
	}
	if got, want := len(seen), 30; got != want {
		t.Fatalf("golden cases cover %d frame types, want %d", got, want)
	}
	for _, ft := range cw.FrameTypes() {
		if !seen[ft] {
			t.Errorf("no golden case for %v", ft)
		}
	}
}

// TestSpecGoldenPeekHelloVersion reads the version of the golden
// COORD_HELLO without the rest.
func TestSpecGoldenPeekHelloVersion(t *testing.T) {
	body := gdHex(gdFrameCases()[0].body)
	major, minor, err := cw.PeekHelloVersion(body)
	if err != nil || major != 0 || minor != 1 {
		t.Fatalf("PeekHelloVersion = %d, %d, %v; want 0, 1, nil", major, minor, err)
	}
}

type gdNestedCase struct {
	name string
	wire string
	enc  func() []byte
	dec  func([]byte) (any, error)
	want any
}

// gdNested builds a case for a pointer type with Append and Decode.
func gdNested[T any, P interface {
	*T
	Append([]byte) []byte
	Decode([]byte) error
}](name, wire string, v T) gdNestedCase {
	return gdNestedCase{name: name, wire: wire,
		enc:  func() []byte { return P(&v).Append(nil) },
		dec:  func(b []byte) (any, error) { var x T; err := P(&x).Decode(b); return x, err },
		want: v}
}

// gdTLV builds a case for a command or record payload.
func gdTLV[T any, P interface {
	*T
	AppendTLV([]byte) []byte
	DecodeTLV([]byte) error
}](name, wire string, v T) gdNestedCase {
	return gdNestedCase{name: name, wire: wire,
		enc:  func() []byte { return P(&v).AppendTLV(nil) },
		dec:  func(b []byte) (any, error) { var x T; err := P(&x).DecodeTLV(b); return x, err },
		want: v}
}

func gdEffectPayload(name, wire string, v cw.EffectPayload) gdNestedCase {
	return gdNestedCase{name: name, wire: wire,
		enc:  func() []byte { return v.Append(nil) },
		dec:  func(b []byte) (any, error) { var x cw.EffectPayload; err := x.DecodeAs(v.Kind, b); return x, err },
		want: v}
}

func gdSourcePayload(name, wire string, v cw.SourceFactPayload) gdNestedCase {
	return gdNestedCase{name: name, wire: wire,
		enc:  func() []byte { return v.Append(nil) },
		dec:  func(b []byte) (any, error) { var x cw.SourceFactPayload; err := x.DecodeAs(v.Kind, b); return x, err },
		want: v}
}

func gdNestedCases() []gdNestedCase {
	return []gdNestedCase{
		gdNested("AuthorityGuard", hGuard, vGuard),
		gdNested("ObjectRef", "0006"+hSig, cw.ObjectRef{Kind: cw.ObjectKindSignal, ID: gdID[[16]byte](0x77)}),
		gdNested("Precondition", "0003"+hWS+"0000000000000004", // ObjectKind WORK_SESSION, id, expected_revision u64
			cw.Precondition{Object: cw.ObjectRef{Kind: cw.ObjectKindWorkSession, ID: gdID[[16]byte](0x33)}, ExpectedRevision: 4}),
		gdNested("WholeAuthoritySelector", "00", cw.WholeAuthoritySelector{}),
		gdNested("SnapshotRecord", hRec1, vRec1),
		gdNested("OperationResult/PENDING", hOpPending, vOpPending),
		gdNested("OperationResult/SUCCEEDED", hOpSucceeded, vOpSucceeded),
		gdNested("OperationResult/REJECTED", "02"+ // tag
			"0000000000000012"+ // completed_event_sequence u64
			"000b"+ // error_code u16 REVISION_CONFLICT
			"00000003 626164", // message str: u32 len, "bad"
			cw.OperationResult{Tag: cw.OperationRejected, CompletedEventSequence: 0x12, ErrorCode: cw.RevisionConflict, Message: "bad"}),
		gdNested("OperationResult/INDETERMINATE", "03"+ // tag
			"01"+ // reason u8 TARGET_DEDUPE_UNAVAILABLE
			"01"+hEA, // optional<EffectAttemptId> present
			cw.OperationResult{Tag: cw.OperationIndeterminate, IndeterminateReason: cw.IndeterminateTargetDedupeUnavailable,
				EffectAttemptID: gdID[cw.EffectAttemptID](0xea)}),
		gdNested("OperationResult/INDETERMINATE_no_effect", "03 00 00",
			cw.OperationResult{Tag: cw.OperationIndeterminate}),
		gdNested("OperationResult/TOMBSTONED", "04"+gdRep("d1", 32)+"02", // command_digest bytes32, final_state u8 REJECTED
			cw.OperationResult{Tag: cw.OperationTombstoned, CommandDigest: gd32(0xd1), FinalState: cw.OperationRejected}),
		gdNested("OperationResult/UNKNOWN", "05", cw.OperationResult{Tag: cw.OperationUnknown}),
		gdNested("Result/NONE", "", cw.NoneResult{}),
		gdNested("Result/OBJECT_REF", "0001"+hObj, cw.ObjectRefResult{Object: cw.ObjectRef{Kind: cw.ObjectKindObjective, ID: gdID[[16]byte](0x11)}}),
		gdNested("Result/STARTED", hStarted, cw.StartedResult{RunID: gdID[cw.RunID](0x22), WorkSessionID: gdID[cw.WorkSessionID](0x33), BindingID: gdID[cw.BindingID](0x44)}),
		gdNested("Result/STARTED_no_binding", hRun+hWS+"00", cw.StartedResult{RunID: gdID[cw.RunID](0x22), WorkSessionID: gdID[cw.WorkSessionID](0x33)}),
		gdNested("Result/DOCUMENT", "0001 00000002 7b7d", cw.DocumentResult{Schema: 1, Payload: []byte("{}")}),
		gdNested("ReplayEvent", hEv1, vEv1),
		gdNested("ActivationCertificate", hCert, vCert),
		gdNested("EffectTarget/PENDING_SPAWN", hTargetSpawn, vTargetSpawn),
		gdNested("EffectTarget/ACTIVE_BINDING", hTargetActive, vTargetActive),
		gdEffectPayload("EffectPayload/SPAWN", hSpawn, cw.EffectPayload{Kind: cw.EffectSpawn, WorkSessionID: gdID[cw.WorkSessionID](0x33),
			ExecutorSchema: 1, ExecutorDocument: []byte("{}")}),
		gdEffectPayload("EffectPayload/KILL", "", cw.EffectPayload{Kind: cw.EffectKill}),
		gdEffectPayload("EffectPayload/PROCESS_SIGNAL", "01", cw.EffectPayload{Kind: cw.EffectProcessSignal, Signal: cw.SignalTerminate}),
		gdNested("EffectAttempt/SPAWN", hEA+hOp+ // EffectAttemptId, OperationId
			"01"+hTargetSpawn+ // EffectKind SPAWN, EffectTarget
			gdRep("ed", 32)+ // effect_digest bytes32
			"00000018"+hSpawn+ // payload_len u32 = 24, payload
			"01", // EffectState DISPATCHED
			cw.EffectAttempt{ID: gdID[cw.EffectAttemptID](0xea), OperationID: gdID[cw.OperationID](0x0b), Kind: cw.EffectSpawn,
				Target: vTargetSpawn, EffectDigest: gd32(0xed), Payload: gdHex(hSpawn), State: cw.EffectDispatched}),
		gdNested("EffectAttempt/KILL", hEA+hOp+"02"+hTargetActive+gdRep("ed", 32)+"00000000"+"04",
			cw.EffectAttempt{ID: gdID[cw.EffectAttemptID](0xea), OperationID: gdID[cw.OperationID](0x0b), Kind: cw.EffectKill,
				Target: vTargetActive, EffectDigest: gd32(0xed), State: cw.EffectIndeterminate}),
		gdNested("TerminalBindingRef", hBindRef, vBindRef),
		gdNested("TerminalSourceRef", hSrcRef, vSrcRef),
		gdNested("TerminalSourceFact", hFact, cw.TerminalSourceFact{Source: vSrcRef, Kind: cw.SourceOutputRange, Schema: 1, Payload: gdHex(hOutRange)}),
		gdSourcePayload("SourceFact/OPENED", "", cw.SourceFactPayload{Kind: cw.SourceOpened}),
		gdSourcePayload("SourceFact/CLOSED", "01 ffffffff", cw.SourceFactPayload{Kind: cw.SourceClosed, HasExitStatus: true, ExitStatus: -1}),
		gdSourcePayload("SourceFact/CLOSED_no_status", "00", cw.SourceFactPayload{Kind: cw.SourceClosed}),
		gdSourcePayload("SourceFact/INPUT_RESULT", hEA+"01", cw.SourceFactPayload{Kind: cw.SourceInputResult, EffectAttemptID: gdID[cw.EffectAttemptID](0xea), InputResult: cw.InputRejected}),
		gdSourcePayload("SourceFact/SIGNAL_RESULT", hEA+"02", cw.SourceFactPayload{Kind: cw.SourceSignalResult, EffectAttemptID: gdID[cw.EffectAttemptID](0xea), SignalResult: cw.SignalUnknown}),
		gdSourcePayload("SourceFact/OUTPUT_RANGE", hOutRange, cw.SourceFactPayload{Kind: cw.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 4, ByteCount: 0x100, ContentSHA256: gd32(0xc5)}),
		gdSourcePayload("SourceFact/ATTENTION", "0002", cw.SourceFactPayload{Kind: cw.SourceAttention, Attention: cw.AttentionBlocked}),
		gdNested("SOURCE_GAP", hBind+"0000000000000003"+"0000000000000005"+"00", // binding_id, expected u64, observed u64, reason Jump
			cw.SourceGapPayload{BindingID: gdID[cw.BindingID](0x44), ExpectedSource: 3, ObservedSource: 5, Reason: cw.SourceGapJump}),
		gdNested("WorkloadOffer", "00000010"+hProfile+gdRep("ab", 32), cw.WorkloadOffer{ClientNonce: gd32(0xab)}),
		gdNested("WorkloadGrant", gdRep("4b", 32)+gdRep("af", 32)+"0000000000000fa0"+"00000008"+"0000000000000003",
			cw.WorkloadGrant{KeyID: gd32(0x4b), AuthorityFingerprint: gd32(0xaf), ExpiresAt: 4000, EffectiveScope: 3}),

		// Command payloads (ADDENDUM A.6).
		gdTLV("CREATE_OBJECTIVE", "01 04 10"+hObj+"02 04 02 0001"+"03 04 02 7b7d",
			cw.CreateObjective{ObjectiveID: gdID[cw.ObjectiveID](0x11), Schema: 1, Document: []byte("{}")}),
		gdTLV("UPDATE_OBJECTIVE", "01 04 10"+hObj+"02 04 02 0001"+"03 04 02 7b7d",
			cw.UpdateObjective{ObjectiveID: gdID[cw.ObjectiveID](0x11), Schema: 1, Document: []byte("{}")}),
		gdTLV("START_RUN", "01 04 10"+hObj+ // 1 objective_id
			"02 04 10"+hRun+ // 2 run_id
			"03 04 10"+hWS+ // 3 work_session_id
			"04 04 02 0001"+ // 4 executor_schema u16
			"05 04 02 7b7d"+ // 5 executor_document bytes
			"06 04 10"+hPB+ // 6 pending_binding_id
			"07 04 20"+gdRep("af", 32)+ // 7 owner_authority_fingerprint
			"08 04 10"+hInc+ // 8 owner_incarnation
			"09 04 03 677270", // 9 terminal_group "grp"
			cw.StartRun{ObjectiveID: gdID[cw.ObjectiveID](0x11), RunID: gdID[cw.RunID](0x22), WorkSessionID: gdID[cw.WorkSessionID](0x33),
				ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: gdID[cw.PendingBindingID](0x55),
				OwnerAuthorityFingerprint: gd32(0xaf), OwnerIncarnation: gdID[cw.IncarnationID](0x1c), TerminalGroup: []byte("grp")}),
		gdTLV("CANCEL_RUN", hCancel, cw.CancelRun{RunID: gdID[cw.RunID](0x22)}),
		gdTLV("PAUSE_RUN", hCancel, cw.PauseRun{RunID: gdID[cw.RunID](0x22)}),
		gdTLV("RESUME_RUN", hCancel, cw.ResumeRun{RunID: gdID[cw.RunID](0x22)}),
		gdTLV("ACK_SIGNAL", "01 04 10"+hSig+"02 04 02 6f6b", cw.AckSignal{SignalID: gdID[cw.SignalID](0x77), Note: "ok"}),
		gdTLV("SUPPRESS_SIGNAL", "01 04 10"+hSig, cw.SuppressSignal{SignalID: gdID[cw.SignalID](0x77)}),
		gdTLV("REGISTER_ARTIFACT_MANIFEST", "01 04 10"+hArt+"02 04 08 0000000000000001"+"03 04 02 0001"+"04 04 4e"+hManifest,
			cw.RegisterArtifactManifest{ArtifactID: gdID[cw.ArtifactID](0x66), Revision: 1, Schema: 1, Manifest: gdHex(hManifest)}),
		gdTLV("END_BINDING", "01 04 10"+hBind+"02 04 01 02", cw.EndBinding{BindingID: gdID[cw.BindingID](0x44), Reason: cw.EndCancelled}),
		gdTLV("CHANGE_RETENTION", "01 04 08 0000000000278d00"+"02 04 08 0000000000100000"+"03 04 08 0000000040000000",
			cw.ChangeRetention{OperationResultSecs: 2_592_000, EventBytes: 1 << 20, ArtifactBytes: 1 << 30}),
		gdTLV("CANCEL_RUN/unknown_kept", hCancel+"05 00 07"+"0a 04 01 ee",
			cw.CancelRun{RunID: gdID[cw.RunID](0x22), Unknown: []cw.RawField{{ID: 5, Raw: gdHex("05 00 07")}, {ID: 10, Raw: gdHex("0a 04 01 ee")}}}),

		// Snapshot-record payloads, schema 1 (ADDENDUM A.7).
		gdTLV("OBJECTIVE", "01 04 02 0001"+"02 04 02 7b7d"+"03 04 01 01",
			cw.ObjectiveRecord{DocumentSchema: 1, Document: []byte("{}"), State: cw.ObjectiveCompleted}),
		gdTLV("RUN", "01 04 10"+hObj+"02 04 04 00000001"+"03 04 01 01"+"04 04 02 6f6b",
			cw.RunRecord{ObjectiveID: gdID[cw.ObjectiveID](0x11), Attempt: 1, State: cw.RunRunning, Outcome: []byte("ok")}),
		gdTLV("RUN/no_outcome", "01 04 10"+hObj+"02 04 04 00000002"+"03 04 01 00",
			cw.RunRecord{ObjectiveID: gdID[cw.ObjectiveID](0x11), Attempt: 2, State: cw.RunPlanned}),
		gdTLV("WORK_SESSION", "01 04 10"+hRun+"02 04 01 00"+"03 04 10"+hBind,
			cw.WorkSessionRecord{RunID: gdID[cw.RunID](0x22), State: cw.WorkSessionActive, ActiveBinding: gdID[cw.BindingID](0x44)}),
		gdTLV("BINDING", "01 04 57"+hBindRef+"02 04 01 01"+"03 04 01 01",
			cw.BindingRecord{Binding: vBindRef, State: cw.BindingEnded, HasEndReason: true, EndReason: cw.EndOwnerLost}),
		gdTLV("BINDING/active", "01 04 57"+hBindRef+"02 04 01 00",
			cw.BindingRecord{Binding: vBindRef, State: cw.BindingActive}),
		gdTLV("ARTIFACT", "01 04 10"+hWS+"02 04 08 0000000000000002",
			cw.ArtifactRecord{WorkSessionID: gdID[cw.WorkSessionID](0x33), LatestRevision: 2}),
		gdTLV("ARTIFACT_MANIFEST", "01 04 10"+hArt+"02 04 08 0000000000000001"+"03 04 02 0001"+"04 04 4e"+hManifest,
			cw.ArtifactManifestRecord{ArtifactID: gdID[cw.ArtifactID](0x66), Revision: 1, Schema: 1, Manifest: gdHex(hManifest)}),
		gdTLV("SIGNAL", "01 04 10"+hWS+"02 04 02 0002"+"03 04 01 00"+"04 04 04 6661696c",
			cw.SignalRecord{WorkSessionID: gdID[cw.WorkSessionID](0x33), Kind: cw.SignalExecutionFailed, State: cw.SignalOpen, Message: "fail"}),
		gdTLV("OPERATION", "01 04 20"+gdRep("4b", 32)+"02 04 11"+hOpPending,
			cw.OperationRecord{PrincipalKeyID: gd32(0x4b), Result: vOpPending}),
		gdTLV("EVIDENCE", "01 04 10"+hWS+"02 04 10"+hArt+"03 04 20"+gdRep("e5", 32),
			cw.EvidenceRecord{WorkSessionID: gdID[cw.WorkSessionID](0x33), ArtifactID: gdID[cw.ArtifactID](0x66), SealSHA256: gd32(0xe5)}),
		gdTLV("ADMIN", "01 04 02 0002"+"02 04 03 010203", cw.AdminRecord{AdminKind: cw.AdminRetention, Payload: []byte{1, 2, 3}}),
		gdTLV("ManifestDoc", hManifest, cw.ArtifactManifestDoc{WorkSessionID: gdID[cw.WorkSessionID](0x33), MediaType: "text/plain",
			Size: 5, ContentSHA256: gd32(0xc5)}),
		gdTLV("ManifestDoc/locator", hManifest+"05 04 02 7333", cw.ArtifactManifestDoc{WorkSessionID: gdID[cw.WorkSessionID](0x33),
			MediaType: "text/plain", Size: 5, ContentSHA256: gd32(0xc5), Locator: "s3"}),
	}
}

// TestSpecGoldenNested checks every nested type, result payload, command
// payload and record payload against its hand-written image.
func TestSpecGoldenNested(t *testing.T) {
	for _, c := range gdNestedCases() {
		t.Run(c.name, func(t *testing.T) {
			wire := gdHex(c.wire)
			if got := c.enc(); !bytes.Equal(got, wire) {
				t.Fatalf("encode:\n got %x\nwant %x", got, wire)
			}
			got, err := c.dec(wire)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Fatalf("decoded value differs (-want +got):\n%s", d)
			}
			// A nested value consumes its field exactly: one more byte
			// is trailing, one fewer truncated.
			if _, err := c.dec(append(wire[:len(wire):len(wire)], 0)); err == nil {
				t.Fatalf("decode accepted a trailing byte")
			}
			if len(wire) > 0 {
				if _, err := c.dec(wire[:len(wire)-1]); err == nil {
					t.Fatalf("decode accepted a truncated image")
				}
			}
		})
	}
}

// TestSpecGoldenCertificatePreimage checks the Ed25519 preimage of §12:
// the ASCII domain, exactly one zero byte, then every field before the
// signature.
func TestSpecGoldenCertificatePreimage(t *testing.T) {
	domain := []byte("phux-coordinator-activation/v1\x00")
	if len(domain) != 31 {
		t.Fatalf("domain length %d", len(domain))
	}
	want := append(domain, gdHex(hCertSigned)...)
	if got := vCert.AppendPreimage(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendPreimage:\n got %x\nwant %x", got, want)
	}
	if got := len(gdHex(hCert)); got != 209 {
		t.Fatalf("certificate image is %d bytes, want 209", got)
	}
	if cw.ActivationCertificateSize != 209 {
		t.Fatalf("ActivationCertificateSize = %d, want 209", cw.ActivationCertificateSize)
	}
}

func gdSum(parts ...[]byte) [32]byte { return sha256.Sum256(bytes.Join(parts, nil)) }

// TestSpecGoldenDigests builds each digest preimage by hand and hashes it
// with crypto/sha256. Each domain string is its ASCII text followed by
// exactly one zero byte (ADDENDUM B.1).
func TestSpecGoldenDigests(t *testing.T) {
	t.Run("operation", func(t *testing.T) {
		want := gdSum([]byte("phux-coordinator-operation/v1\x00"),
			gdHex("0000"),                           // protocol_major u16 = 0
			gdHex("0001"),                           // protocol_minor u16 = 1
			gdHex("0004"),                           // command_kind u16 CANCEL_RUN
			gdHex("00000013", hCancel),              // canonical_payload_len u32 = 19, payload
			gdHex("0002"),                           // precondition_count u16
			gdHex("0001", hObj, "0000000000000000"), // sorted: OBJECTIVE first
			gdHex("0002", hRun, "0000000000000007"), // then RUN
			gdHex("00000008"),                       // extension_bytes_len u32
			gdHex("090005 c8010401ff"),              // unknown envelope fields, ascending id
		)
		got, err := digest.Operation(cw.CommandCancelRun, gdHex(hCancel), vPre, vExt)
		if err != nil || got != want {
			t.Fatalf("Operation = %x, %v; want %x", got, err, want)
		}
		cmd := gdFrameCases()[2].frame.(*cw.CoordCommand)
		if got, err := digest.OperationFromCommand(cmd); err != nil || got != want {
			t.Fatalf("OperationFromCommand = %x, %v; want %x", got, err, want)
		}
		// Absent preconditions and extensions: count zero, length zero.
		want = gdSum([]byte("phux-coordinator-operation/v1\x00"),
			gdHex("0000 0001 0004 00000013", hCancel, "0000 00000000"))
		if got, err := digest.Operation(cw.CommandCancelRun, gdHex(hCancel), nil, nil); err != nil || got != want {
			t.Fatalf("Operation(bare) = %x, %v; want %x", got, err, want)
		}
		if got, _ := digest.Operation(cw.CommandCancelRun, gdHex(hCancel), []cw.Precondition{}, []cw.RawField{}); got != want {
			t.Fatalf("present-empty preconditions hash differently from absent")
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		want := gdSum([]byte("phux-coordinator-snapshot/v1\x00"),
			gdHex(hCoord),             // coordinator_id bytes16
			gdHex("0000000000000002"), // epoch u64
			gdHex("0000000000000003"), // activation_sequence u64
			gdHex("0000000000000009"), // base_event_cut u64
			gdHex("0000000000000002"), // record_count u64
			gdHex(hRec1, hRec2),       // each record
		)
		got := digest.Snapshot(gdID[cw.CoordinatorID](0xc1), 2, 3, 9, []cw.SnapshotRecord{vRec1, vRec2})
		if got != want {
			t.Fatalf("Snapshot = %x, want %x", got, want)
		}
		want = gdSum([]byte("phux-coordinator-snapshot/v1\x00"), gdHex(hCoord, "0000000000000002 0000000000000003 0000000000000000 0000000000000000"))
		if got := digest.Snapshot(gdID[cw.CoordinatorID](0xc1), 2, 3, 0, nil); got != want {
			t.Fatalf("empty Snapshot = %x, want %x", got, want)
		}
	})
	t.Run("replay", func(t *testing.T) {
		want := gdSum([]byte("phux-coordinator-replay/v1\x00"),
			gdHex(hCoord),             // coordinator_id
			gdHex("0000000000000002"), // epoch
			gdHex("0000000000000003"), // activation_sequence
			gdHex(hSub),               // subscription_id
			gdHex("0000000000000009"), // after_event_cut
			gdHex("000000000000000c"), // replay_cut
			gdHex("0000000000000001"), // event_count
			gdHex(hEv1),               // each ReplayEvent
		)
		got := digest.Replay(gdID[cw.CoordinatorID](0xc1), 2, 3, gdID[cw.SubscriptionID](0x5b), 9, 12, []cw.ReplayEvent{vEv1})
		if got != want {
			t.Fatalf("Replay = %x, want %x", got, want)
		}
		want = gdSum([]byte("phux-coordinator-replay/v1\x00"), gdHex(hCoord, "0000000000000002 0000000000000003", hSub,
			"0000000000000009 0000000000000009 0000000000000000"))
		if got := digest.Replay(gdID[cw.CoordinatorID](0xc1), 2, 3, gdID[cw.SubscriptionID](0x5b), 9, 9, nil); got != want {
			t.Fatalf("empty Replay = %x, want %x", got, want)
		}
	})
	t.Run("effect", func(t *testing.T) {
		want := gdSum([]byte("phux-coordinator-effect/v1\x00"),
			gdHex("01"),                     // EffectKind u8 SPAWN
			gdHex("00000048", hTargetSpawn), // u32 target_len = 72, canonical EffectTarget
			gdHex("00000018", hSpawn),       // u32 payload_len = 24, canonical payload
		)
		if got := digest.Effect(cw.EffectSpawn, gdHex(hTargetSpawn), gdHex(hSpawn)); got != want {
			t.Fatalf("Effect = %x, want %x", got, want)
		}
		want = gdSum([]byte("phux-coordinator-effect/v1\x00"), gdHex("02 00000058", hTargetActive, "00000000"))
		if got := digest.Effect(cw.EffectKill, gdHex(hTargetActive), nil); got != want {
			t.Fatalf("Effect(KILL) = %x, want %x", got, want)
		}
	})
	t.Run("evidence", func(t *testing.T) {
		want := gdSum([]byte("phux-coordinator-evidence/v1\x00"),
			gdHex(hBind),               // binding_id bytes16
			gdHex("0000000000000002"),  // fact_count u64
			gdHex(hFact), gdHex(hFact), // each canonical TerminalSourceFact
		)
		if got := digest.Evidence(gdID[cw.BindingID](0x44), [][]byte{gdHex(hFact), gdHex(hFact)}); got != want {
			t.Fatalf("Evidence = %x, want %x", got, want)
		}
	})
	t.Run("domains", func(t *testing.T) {
		for _, d := range []string{digest.DomainOperation, digest.DomainSnapshot, digest.DomainReplay, digest.DomainEffect, digest.DomainEvidence} {
			if strings.Count(d, "\x00") != 1 || !strings.HasSuffix(d, "/v1\x00") || strings.Contains(d, `\`) {
				t.Errorf("domain %q is not ASCII text plus exactly one zero byte", d)
			}
		}
	})
}

// gdErr asserts err carries code and reason.
func gdErr(t *testing.T, err error, code cw.ErrorCode, reason string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %v", err, code)
	}
	var e *cw.Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("got %v, want reason %q", err, reason)
	}
}
