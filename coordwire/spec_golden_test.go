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

	// ADMIN record payloads (docs/semantics.md). ACTIVATION, 156 bytes.
	hActivation = "01 04 08 0000000000000003" + // 1 authority_epoch u64
		"02 04 08 0000000000000007" + // 2 activation_sequence u64
		"03 04 10" + gdRep("77", 16) + // 3 incarnation_id bytes16
		"04 04 10" + gdRep("88", 16) + // 4 witness_id bytes16
		"05 04 20" + gdRep("99", 32) + // 5 witness_key_id bytes32
		"06 04 20" + gdRep("aa", 32) + // 6 fencing_token_sha256 bytes32
		"07 04 08 0000000065000000" + // 7 issued_at u64
		"08 04 08 000000006500003c" // 8 expires_at u64
	// RETENTION, 33 bytes: the floor, no byte limits.
	hRetention = "01 04 08 0000000000278d00" + // 1 operation_result_secs u64 = 2,592,000
		"02 04 08 0000000000000000" + // 2 event_bytes u64
		"03 04 08 0000000000000000" // 3 artifact_bytes u64
	// CREDENTIAL of a REVOKED key without its field 5 (revoked_at).
	hCredential = "01 04 20" + gdRep("4b", 32) + // 1 key_id bytes32
		"02 04 08 0000000000000021" + // 2 scope_ceiling u64 = WORK_READ|ADMIN
		"03 04 08 0000000077000000" + // 3 expires_at u64
		"04 04 01 01" // 4 state u8 = REVOKED

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
			if !strings.Contains(c.name, "/") {
				if got := c.frame.Type().String(); got != c.name {
					t.Fatalf("Type().String() = %q, want the spec name %q", got, c.name)
				}
				if ft, ok := cw.ParseFrameType(c.name); !ok || ft != c.frame.Type() {
					t.Fatalf("ParseFrameType(%q) = %v, %v", c.name, ft, ok)
				}
			}
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
		gdTLV("ADMIN", "01 04 02 0002"+"02 04 21"+hRetention, cw.AdminRecord{AdminKind: cw.AdminRetention, Payload: gdHex(hRetention)}),
		gdTLV("AdminPayload/ACTIVATION", hActivation, cw.AdminActivationPayload{AuthorityEpoch: 3, ActivationSequence: 7,
			IncarnationID: gdID[cw.IncarnationID](0x77), WitnessID: gdID[cw.ActivationWitnessID](0x88), WitnessKeyID: gd32(0x99),
			FencingTokenSHA256: gd32(0xaa), IssuedAt: 0x65000000, ExpiresAt: 0x6500003c}),
		gdTLV("AdminPayload/RETENTION", hRetention, cw.AdminRetentionPayload{OperationResultSecs: 2_592_000}),
		gdTLV("AdminPayload/CREDENTIAL", hCredential+"05 04 08 0000000066000000", cw.AdminCredentialPayload{KeyID: gd32(0x4b),
			ScopeCeiling: cw.ScopeWorkRead | cw.ScopeAdmin, ExpiresAt: 0x77000000, State: cw.CredentialRevoked, RevokedAt: 0x66000000}),
		gdTLV("AdminPayload/CREDENTIAL/present", "01 04 20"+gdRep("4b", 32)+"02 04 08 0000000000000021"+"03 04 08 0000000077000000"+"04 04 01 00",
			cw.AdminCredentialPayload{KeyID: gd32(0x4b), ScopeCeiling: cw.ScopeWorkRead | cw.ScopeAdmin, ExpiresAt: 0x77000000}),
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

// Strictness audit: refusals. Each body is written by hand; the expected
// code and stable reason are asserted with errors.Is / errors.As.

type gdRefusal struct {
	name   string
	typ    cw.FrameType
	role   cw.Role
	state  cw.ConnState
	body   string
	code   cw.ErrorCode
	reason string
}

func gdFrameRefusals() []gdRefusal {
	S, C := cw.RoleServer, cw.RoleClient
	H, A := cw.StateHandshake, cw.StateActive
	M := cw.MalformedMessage
	guard := "02 04 40" + hGuard
	helloHead := "01 04 02 0000 02 04 02 0001 03 04 02 0000 04 04 03 636c69 05 04 08 000000000000001f 06 04 08 0000000000000001" +
		"07 04 04 00080000 08 04 04 00040000 09 04 02 0200 0a 04 04 00020000 0b 04 04 00000400 0c 04 04 00400000"
	helloOKHead := "01 04 02 0000 02 04 02 0001 03 04 02 0000 04 04 08 000000000000001f 05 04 10" + hCoord +
		"06 04 08 0000000000000002 07 04 10" + hInc +
		"08 04 04 00080000 09 04 04 00040000 0a 04 02 0200 0b 04 04 00020000 0c 04 04 00000400 0d 04 04 00400000"
	grant := func(scope string) string {
		return "0e 04 54" + gdRep("4b", 32) + gdRep("af", 32) + "0000000000000fa0" + scope
	}
	helloOKTail := "0f 04 08 0000000000278d00 10 04 d101" + hCert
	challenge := func(f8, f6 string) string {
		return "01 04 14 00000010" + hProfile + "02 04 14 00000010" + hService + "03 04 02 0000 04 04 02 0001" +
			"05 04 20" + gdRep("ab", 32) + "06 04 20" + f6 + "07 04 10" + hInc + "08 04 01 " + f8 +
			"09 04 20" + gdRep("cb", 32) + "0a 04 20" + gdRep("a5", 32) + "0b 04 40" + gdRep("a9", 64)
	}
	cmd := func(kind, payload, pre string) string {
		return fRID + guard + "03 04 10" + hOp + "04 04 02 " + kind + payload + pre
	}
	cancelField := "05 04 13" + hCancel
	pre1 := "0001" + hObj + "0000000000000001"
	rec := func(kind, id, rev string) string { return kind + id + rev + "0001 00000000" }
	page := func(n, recs string, size string) string {
		return fRID + "02 04 10" + hSnap + "03 04 03 637572 04 04 04 00000000 05 04 " + size + n + recs
	}
	ev := func(seq string) string {
		return seq + hEv + "0001 0001" + hObj + "0000000000000002 0001 00000000"
	}
	return []gdRefusal{
		// TLV rules (B.1, §3.1), on the smallest frame.
		{"tlv/empty_body", cw.TypeAck, C, A, "", M, "tlv.missing_field"},
		{"tlv/request_id_zero", cw.TypeAck, C, A, "01 04 04 00000000", M, "request_id.zero"},
		{"tlv/wrong_wire_type", cw.TypeAck, C, A, "01 00 05", M, "tlv.wrong_wire_type"},
		{"tlv/nonminimal_length", cw.TypeAck, C, A, "01 04 8400 00000005", M, "tlv.nonminimal_varint"},
		{"tlv/nonminimal_id", cw.TypeAck, C, A, "8100 04 04 00000005", M, "tlv.nonminimal_varint"},
		{"tlv/field_id_zero", cw.TypeAck, C, A, "00 04 00", M, "tlv.field_id_zero"},
		{"tlv/duplicate", cw.TypeAck, C, A, fRID + fRID, M, "tlv.duplicate_field"},
		{"tlv/out_of_order", cw.TypeAck, C, A, "02 04 00" + fRID, M, "tlv.field_order"},
		{"tlv/short_value", cw.TypeAck, C, A, "01 04 03 000005", M, "pos.truncated"},
		{"tlv/long_value", cw.TypeAck, C, A, "01 04 05 0000000005", M, "pos.trailing_bytes"},
		{"tlv/truncated_field", cw.TypeAck, C, A, "01 04 04 0000", M, "tlv.truncated"},
		{"tlv/unknown_wire_type", cw.TypeAck, C, A, fRID + "02 08", M, "tlv.unknown_wire_type"},
		{"tlv/varint_overflow", cw.TypeAck, C, A, fRID + "02 00 ffffffffffffffffff7f", M, "tlv.varint_overflow"},

		// COORD_HELLO and the workload profile frames.
		{"hello/missing_offer", cw.TypeCoordHello, S, H, helloHead, M, "tlv.missing_field"},
		{"hello/other_profile", cw.TypeCoordHello, S, H, helloHead + "0d 04 34 00000010 706875782d776f726b6c6f61642f7632" + gdRep("ab", 32),
			cw.AuthenticationFailed, "workload.profile"},
		{"hello/zero_nonce", cw.TypeCoordHello, S, H, helloHead + "0d 04 34 00000010" + hProfile + gdRep("00", 32), M, "workload.zero_nonce"},
		{"hello/offer_trailing", cw.TypeCoordHello, S, H, helloHead + "0d 04 35 00000010" + hProfile + gdRep("ab", 33), M, "pos.trailing_bytes"},
		{"hello/name_too_long", cw.TypeCoordHello, S, H, "01 04 02 0000 02 04 02 0001 03 04 02 0000 04 04 8101" + gdRep("61", 129), M, "str.too_long"},
		{"hello/name_not_utf8", cw.TypeCoordHello, S, H, "01 04 02 0000 02 04 02 0001 03 04 02 0000 04 04 01 ff", M, "str.invalid_utf8"},
		{"challenge/unknown_field", cw.TypeWorkloadChallenge, C, H, challenge("01", gdRep("cd", 32)) + "0c 04 00", M, "workload.unknown_field"},
		{"challenge/binding_kind", cw.TypeWorkloadChallenge, C, H, challenge("02", gdRep("cd", 32)), M, "enum.channel_binding_kind"},
		{"challenge/zero_server_nonce", cw.TypeWorkloadChallenge, C, H, challenge("01", gdRep("00", 32)), M, "workload.zero_nonce"},
		{"challenge/missing_proof", cw.TypeWorkloadChallenge, C, H, strings.SplitN(challenge("01", gdRep("cd", 32)), "0b 04 40", 2)[0], M, "tlv.missing_field"},
		{"response/unknown_field", cw.TypeWorkloadResponse, S, H, "01 04 20" + gdRep("4b", 32) + "02 04 0c 00000008 0000000000000003" +
			"03 04 08 00000000000003e8 04 04 40" + gdRep("50", 64) + "05 04 00", M, "workload.unknown_field"},
		{"response/scope_len_mismatch", cw.TypeWorkloadResponse, S, H, "01 04 20" + gdRep("4b", 32) + "02 04 0c 00000009 0000000000000003" +
			"03 04 08 00000000000003e8 04 04 40" + gdRep("50", 64), M, "pos.truncated"},
		{"hello_ok/retention_floor", cw.TypeCoordHelloOK, C, H, helloOKHead + grant("00000008 0000000000000003") +
			"0f 04 08 0000000000278cff 10 04 d101" + hCert, M, "hello_ok.retention_below_floor"},
		{"hello_ok/zero_epoch", cw.TypeCoordHelloOK, C, H, strings.Replace(helloOKHead, "06 04 08 0000000000000002", "06 04 08 0000000000000000", 1) +
			grant("00000008 0000000000000003") + helloOKTail, M, "seq.zero"},
		{"hello_ok/scope_unknown_bit", cw.TypeCoordHelloOK, C, H, helloOKHead + grant("00000008 0000000000000040") + helloOKTail, M, "scope.unknown_bit"},
		{"hello_ok/scope_zero", cw.TypeCoordHelloOK, C, H, helloOKHead + grant("00000008 0000000000000000") + helloOKTail, M, "scope.zero"},
		{"hello_ok/scope_length", cw.TypeCoordHelloOK, C, H, helloOKHead + "0e 04 54" + gdRep("4b", 32) + gdRep("af", 32) +
			"0000000000000fa0" + "00000004 00000003 00000000" + helloOKTail, M, "scope.length"},
		{"hello_ok/cert_version", cw.TypeCoordHelloOK, C, H, helloOKHead + grant("00000008 0000000000000003") +
			"0f 04 08 0000000000278d00 10 04 d101 02" + hCert[2:], M, "certificate.version"},
		{"renewed/cert_zero_witness", cw.TypeCoordAuthorityRenewed, C, A, "01 04 d101 01" + gdRep("00", 16) + hCert[34:], M, "id.zero"},
		{"renewed/cert_short", cw.TypeCoordAuthorityRenewed, C, A, "01 04 d001" + hCert[:len(hCert)-2], M, "pos.truncated"},

		// COORD_COMMAND (§8).
		{"command/kind_zero", cw.TypeCoordCommand, S, A, cmd("0000", cancelField, ""), M, "enum.command_kind"},
		{"command/kind_12", cw.TypeCoordCommand, S, A, cmd("000c", cancelField, ""), M, "enum.command_kind"},
		{"command/payload_of_other_kind", cw.TypeCoordCommand, S, A, cmd("0003", cancelField, ""), M, "tlv.missing_field"},
		{"command/zero_operation", cw.TypeCoordCommand, S, A, fRID + guard + "03 04 10" + gdRep("00", 16) + "04 04 02 0004" + cancelField, M, "id.zero"},
		{"command/guard_zero_epoch", cw.TypeCoordCommand, S, A, fRID + "02 04 40" + hCoord + "0000000000000000 0000000000000003" + gdRep("7e", 32) +
			"03 04 10" + hOp + "04 04 02 0004" + cancelField, M, "seq.zero"},
		{"command/guard_zero_coordinator", cw.TypeCoordCommand, S, A, fRID + "02 04 40" + gdRep("00", 16) + "0000000000000002 0000000000000003" + gdRep("7e", 32) +
			"03 04 10" + hOp + "04 04 02 0004" + cancelField, M, "id.zero"},
		{"command/guard_short", cw.TypeCoordCommand, S, A, fRID + "02 04 3f" + hGuard[:126] + "03 04 10" + hOp + "04 04 02 0004" + cancelField, M, "pos.truncated"},
		{"command/duplicate_precondition", cw.TypeCoordCommand, S, A, cmd("0004", cancelField,
			"06 04 36 0002"+pre1+"0001"+hObj+"0000000000000002"), M, "preconditions.duplicate"},
		{"command/precondition_kind", cw.TypeCoordCommand, S, A, cmd("0004", cancelField, "06 04 1c 0001 000b"+hObj+"0000000000000001"), M, "enum.object_kind"},
		{"command/precondition_zero_id", cw.TypeCoordCommand, S, A, cmd("0004", cancelField, "06 04 1c 0001 0001"+gdRep("00", 16)+"0000000000000001"), M, "id.zero"},
		{"command/precondition_count_short", cw.TypeCoordCommand, S, A, cmd("0004", cancelField, "06 04 1c 0002"+pre1), M, "pos.truncated"},
		{"command/precondition_trailing", cw.TypeCoordCommand, S, A, cmd("0004", cancelField, "06 04 1d 0001"+pre1+"00"), M, "pos.trailing_bytes"},
		{"command/precondition_count_65", cw.TypeCoordCommand, S, A, cmd("0004", cancelField, "06 04 02 0041"), M, "list.too_many"},
		{"command/payload_bad_end_reason", cw.TypeCoordCommand, S, A, cmd("000a", "05 04 17 010410"+hBind+"020401 04", ""), M, "enum.end_reason"},
		{"get_operation/zero_operation", cw.TypeGetOperationResult, S, A, fRID + guard + "03 04 10" + gdRep("00", 16), M, "id.zero"},
		{"command_result/tag_6", cw.TypeCoordCommandResult, C, A, fRID + "02 04 01 06", M, "enum.operation_tag"},
		{"operation_result/missing_operation", cw.TypeOperationResult, C, A, fRID, M, "tlv.missing_field"},
		{"operation_result/trailing", cw.TypeOperationResult, C, A, fRID + "02 04 02 05 00", M, "pos.trailing_bytes"},

		// Snapshots (§9).
		{"open_snapshot/selector_tag", cw.TypeOpenSnapshot, S, A, fRID + guard + "03 04 01 01 04 04 01 00", M, "selector.unknown_tag"},
		{"open_snapshot/selector_trailing", cw.TypeOpenSnapshot, S, A, fRID + guard + "03 04 02 0000 04 04 01 00", M, "pos.trailing_bytes"},
		{"open_snapshot/selector_missing", cw.TypeOpenSnapshot, S, A, fRID + guard + "04 04 01 00", M, "tlv.missing_field"},
		{"open_snapshot/bool_2", cw.TypeOpenSnapshot, S, A, fRID + guard + "03 04 01 00 04 04 01 02", M, "bool.invalid"},
		{"open_snapshot/replace_zero", cw.TypeOpenSnapshot, S, A, fRID + guard + "03 04 01 00 04 04 01 01 05 04 10" + gdRep("00", 16), M, "id.zero"},
		{"snapshot_next/empty_cursor", cw.TypeSnapshotNext, S, A, fRID + "02 04 10" + hSnap + "03 04 00", M, "cursor.empty"},
		{"snapshot_next/cursor_4097", cw.TypeSnapshotNext, S, A, fRID + "02 04 10" + hSnap + "03 04 8120" + gdRep("63", 4097), M, "cursor.too_long"},
		{"snapshot_begin/zero_snapshot", cw.TypeSnapshotBegin, C, A, fRID + "02 04 10" + gdRep("00", 16) + "03 04 40" + hGuard +
			"04 04 08 0000000000000000 07 04 08 0000000000000424", M, "id.zero"},
		{"snapshot_page/order", cw.TypeSnapshotPage, C, A, page("0002", rec("0002", hRun, "0000000000000001")+rec("0001", hObj, "0000000000000001"), "42"), M, "page.order"},
		{"snapshot_page/duplicate", cw.TypeSnapshotPage, C, A, page("0002", rec("0001", hObj, "0000000000000001")+rec("0001", hObj, "0000000000000002"), "42"), M, "page.order"},
		{"snapshot_page/zero_revision", cw.TypeSnapshotPage, C, A, page("0001", rec("0001", hObj, "0000000000000000"), "22"), M, "seq.zero"},
		{"snapshot_page/object_kind_0", cw.TypeSnapshotPage, C, A, page("0001", rec("0000", hObj, "0000000000000001"), "22"), M, "enum.object_kind"},
		{"snapshot_page/count_over_field", cw.TypeSnapshotPage, C, A, page("0002", rec("0001", hObj, "0000000000000001"), "22"), M, "pos.truncated"},
		{"snapshot_page/count_1025", cw.TypeSnapshotPage, C, A, page("0401", "", "02"), M, "list.too_many"},
		{"snapshot_end/short_digest", cw.TypeSnapshotEnd, C, A, fRID + "02 04 10" + hSnap + "03 04 04 00000001 04 04 08 0000000000000000 05 04 1f" + gdRep("d5", 31), M, "pos.truncated"},
		{"snapshot_applied/zero_subscription", cw.TypeSnapshotApplied, S, A, fRID + "02 04 10" + hSnap + "03 04 10" + gdRep("00", 16) +
			"04 04 04 00000000 05 04 04 00000000", M, "id.zero"},

		// Subscriptions, GAP, replay (§10).
		{"subscribed/zero_delivery", cw.TypeSubscribed, C, A, fRID + "02 04 10" + hSub + "03 04 08 0000000000000000", M, "seq.zero"},
		{"credit/zero_subscription", cw.TypeCredit, S, A, "01 04 10" + gdRep("00", 16) + "02 04 04 00000001 03 04 04 00000001", M, "id.zero"},
		{"gap/reason_8", cw.TypeGap, C, A, "01 04 10" + hSub + "02 04 08 0000000000000000 03 04 08 0000000000000000 05 04 01 08", M, "enum.gap_reason"},
		{"gap/observed_zero", cw.TypeGap, C, A, "01 04 10" + hSub + "02 04 08 0000000000000000 03 04 08 0000000000000000 04 04 08 0000000000000000 05 04 01 00", M, "seq.zero"},
		{"gap/missing_reason", cw.TypeGap, C, A, "01 04 10" + hSub + "02 04 08 0000000000000000 03 04 08 0000000000000000", M, "tlv.missing_field"},
		{"event/kind_0", cw.TypeCoordEvent, C, A, "01 04 10" + hSub + "02 04 08 0000000000000001 03 04 08 000000000000000a 04 04 10" + hEv +
			"05 04 02 0000 06 04 12 0001" + hObj + "07 04 08 0000000000000002 08 04 02 0001 09 04 00", M, "enum.event_kind"},
		{"event/kind_16", cw.TypeCoordEvent, C, A, "01 04 10" + hSub + "02 04 08 0000000000000001 03 04 08 000000000000000a 04 04 10" + hEv +
			"05 04 02 0010 06 04 12 0001" + hObj + "07 04 08 0000000000000002 08 04 02 0001 09 04 00", M, "enum.event_kind"},
		{"event/zero_delivery", cw.TypeCoordEvent, C, A, "01 04 10" + hSub + "02 04 08 0000000000000000 03 04 08 000000000000000a 04 04 10" + hEv +
			"05 04 02 0001 06 04 12 0001" + hObj + "07 04 08 0000000000000002 08 04 02 0001 09 04 00", M, "seq.zero"},
		{"event/object_trailing", cw.TypeCoordEvent, C, A, "01 04 10" + hSub + "02 04 08 0000000000000001 03 04 08 000000000000000a 04 04 10" + hEv +
			"05 04 02 0001 06 04 13 0001" + hObj + "00 07 04 08 0000000000000002 08 04 02 0001 09 04 00", M, "pos.trailing_bytes"},
		{"replay_begin/first_event_zero", cw.TypeReplayBegin, C, A, fRID + "02 04 10" + hRep + "03 04 10" + hSub +
			"04 04 08 0000000000000000 05 04 08 0000000000000009 07 04 08 0000000000000424", M, "seq.zero"},
		{"replay_page/order", cw.TypeReplayPage, C, A, fRID + "02 04 10" + hRep + "03 04 03 637572 04 04 04 00000000 05 04 76 0002" +
			ev("000000000000000b") + ev("000000000000000a"), M, "page.order"},
		{"replay_page/equal_sequence", cw.TypeReplayPage, C, A, fRID + "02 04 10" + hRep + "03 04 03 637572 04 04 04 00000000 05 04 76 0002" +
			ev("000000000000000a") + ev("000000000000000a"), M, "page.order"},
		{"replay_applied/zero_replay", cw.TypeReplayApplied, S, A, fRID + "02 04 10" + gdRep("00", 16) + "03 04 10" + hSub +
			"04 04 04 00000000 05 04 04 00000000", M, "id.zero"},
		{"error/code_0", cw.TypeCoordError, C, A, "02 04 02 0000 03 04 00", M, "enum.error_code"},
		{"error/code_16", cw.TypeCoordError, C, A, "02 04 02 0010 03 04 00", M, "enum.error_code"},
		{"error/message_1025", cw.TypeCoordError, C, A, "02 04 02 0003 03 04 8108" + gdRep("61", 1025), M, "str.too_long"},
		{"error/missing_message", cw.TypeCoordError, C, A, "02 04 02 0003", M, "tlv.missing_field"},
	}
}

// TestSpecRefusalsFrames checks the refusal of malformed frame bodies.
func TestSpecRefusalsFrames(t *testing.T) {
	for _, c := range gdFrameRefusals() {
		t.Run(c.name, func(t *testing.T) {
			body := gdHex(c.body)
			wire := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
			wire = append(append(wire, byte(c.typ)), body...)
			rc := cw.Receiver{Role: c.role, State: c.state, Limits: cw.HardLimits()}
			f, err := rc.DecodeMessage(wire)
			if f != nil {
				t.Fatalf("decoded %#v", f)
			}
			gdErr(t, err, c.code, c.reason)
		})
	}
}

type gdNestedRefusal struct {
	name   string
	dec    func([]byte) error
	wire   string
	reason string
}

func gdDecNested[T any, P interface {
	*T
	Decode([]byte) error
}]() func([]byte) error {
	return func(b []byte) error { var x T; return P(&x).Decode(b) }
}

func gdDecTLV[T any, P interface {
	*T
	DecodeTLV([]byte) error
}]() func([]byte) error {
	return func(b []byte) error { var x T; return P(&x).DecodeTLV(b) }
}

func gdDecSource(k cw.SourceFactKind) func([]byte) error {
	return func(b []byte) error { var x cw.SourceFactPayload; return x.DecodeAs(k, b) }
}

func gdDecEffect(k cw.EffectKind) func([]byte) error {
	return func(b []byte) error { var x cw.EffectPayload; return x.DecodeAs(k, b) }
}

func gdNestedRefusals() []gdNestedRefusal {
	opRes := gdDecNested[cw.OperationResult]()
	target := gdDecNested[cw.EffectTarget]()
	attempt := gdDecNested[cw.EffectAttempt]()
	fact := gdDecNested[cw.TerminalSourceFact]()
	g4097 := "00001001" + gdRep("67", 4097)
	return []gdNestedRefusal{
		{"ObjectRef/kind_0", gdDecNested[cw.ObjectRef](), "0000" + hObj, "enum.object_kind"},
		{"ObjectRef/kind_11", gdDecNested[cw.ObjectRef](), "000b" + hObj, "enum.object_kind"},
		{"ObjectRef/zero_id", gdDecNested[cw.ObjectRef](), "0001" + gdRep("00", 16), "id.zero"},
		{"AuthorityGuard/zero_activation", gdDecNested[cw.AuthorityGuard](), hCoord + "0000000000000002 0000000000000000" + gdRep("7e", 32), "seq.zero"},
		{"Selector/empty", gdDecNested[cw.WholeAuthoritySelector](), "", "pos.truncated"},
		{"SnapshotRecord/payload_over_cap", gdDecNested[cw.SnapshotRecord](), "0001" + hObj + "0000000000000001 0001 00040001", "bytes.too_long"},
		{"SnapshotRecord/payload_len_over_image", gdDecNested[cw.SnapshotRecord](), "0001" + hObj + "0000000000000001 0001 00000004 0102", "pos.truncated"},
		{"ReplayEvent/zero_sequence", gdDecNested[cw.ReplayEvent](), "0000000000000000" + hEv + "0001 0001" + hObj + "0000000000000002 0001 00000000", "seq.zero"},
		{"ReplayEvent/zero_event_id", gdDecNested[cw.ReplayEvent](), "000000000000000a" + gdRep("00", 16) + "0001 0001" + hObj + "0000000000000002 0001 00000000", "id.zero"},
		{"ReplayEvent/kind_16", gdDecNested[cw.ReplayEvent](), "000000000000000a" + hEv + "0010 0001" + hObj + "0000000000000002 0001 00000000", "enum.event_kind"},
		{"ReplayEvent/zero_revision", gdDecNested[cw.ReplayEvent](), "000000000000000a" + hEv + "0001 0001" + hObj + "0000000000000000 0001 00000000", "seq.zero"},
		{"OperationResult/tag_6", opRes, "06", "enum.operation_tag"},
		{"OperationResult/empty", opRes, "", "pos.truncated"},
		{"OperationResult/PENDING_zero_epoch", opRes, "00 0000000000000000 0000000000000001", "seq.zero"},
		{"OperationResult/PENDING_zero_sequence", opRes, "00 0000000000000002 0000000000000000", "seq.zero"},
		{"OperationResult/SUCCEEDED_kind_4", opRes, "01 0000000000000001 0004 00000000", "enum.result_kind"},
		{"OperationResult/SUCCEEDED_NONE_payload", opRes, "01 0000000000000001 0000 00000001 00", "pos.trailing_bytes"},
		{"OperationResult/SUCCEEDED_OBJECT_REF_short", opRes, "01 0000000000000001 0001 00000011 0001" + gdRep("11", 15), "pos.truncated"},
		{"OperationResult/SUCCEEDED_STARTED_presence_2", opRes, "01 0000000000000001 0002 00000021" + hRun + hWS + "02", "optional.invalid_presence"},
		{"OperationResult/SUCCEEDED_STARTED_zero_binding", opRes, "01 0000000000000001 0002 00000031" + hRun + hWS + "01" + gdRep("00", 16), "id.zero"},
		{"OperationResult/REJECTED_code_0", opRes, "02 0000000000000001 0000 00000000", "enum.error_code"},
		{"OperationResult/REJECTED_bad_utf8", opRes, "02 0000000000000001 0003 00000001 ff", "str.invalid_utf8"},
		{"OperationResult/INDETERMINATE_reason_3", opRes, "03 03 00", "enum.indeterminate_reason"},
		{"OperationResult/INDETERMINATE_presence_2", opRes, "03 00 02", "optional.invalid_presence"},
		{"OperationResult/INDETERMINATE_zero_effect", opRes, "03 00 01" + gdRep("00", 16), "id.zero"},
		{"OperationResult/TOMBSTONED_final_0", opRes, "04" + gdRep("d1", 32) + "00", "enum.final_state"},
		{"OperationResult/TOMBSTONED_final_4", opRes, "04" + gdRep("d1", 32) + "04", "enum.final_state"},
		{"OperationResult/UNKNOWN_trailing", opRes, "05 00", "pos.trailing_bytes"},
		{"Result/DOCUMENT_len_over_image", gdDecNested[cw.DocumentResult](), "0001 00000003 7b7d", "pos.truncated"},
		{"Certificate/zero_epoch", gdDecNested[cw.ActivationCertificate](), "01" + hWit + hCoord + "0000000000000003 0000000000000000" + hCert[98:], "seq.zero"},
		{"Certificate/zero_incarnation", gdDecNested[cw.ActivationCertificate](), hCert[:98] + gdRep("00", 16) + hCert[130:], "id.zero"},
		{"EffectTarget/tag_2", target, "02", "enum.effect_target_tag"},
		{"EffectTarget/empty_group", target, "00" + hPB + gdRep("af", 32) + hInc + "00000000", "effect.empty_group"},
		{"EffectTarget/group_4097", target, "00" + hPB + gdRep("af", 32) + hInc + g4097, "bytes.too_long"},
		{"EffectTarget/zero_pending", target, "00" + gdRep("00", 16) + gdRep("af", 32) + hInc + "00000003 677270", "id.zero"},
		{"EffectTarget/binding_empty_resource", target, "01" + hBind + hWS + gdRep("af", 32) + hInc + "00000000", "binding.empty_resource_id"},
		{"EffectTarget/binding_resource_4097", target, "01" + hBind + hWS + gdRep("af", 32) + hInc + g4097, "bytes.too_long"},
		{"EffectPayload/signal_3", gdDecEffect(cw.EffectProcessSignal), "03", "enum.process_signal"},
		{"EffectPayload/KILL_nonempty", gdDecEffect(cw.EffectKill), "00", "pos.trailing_bytes"},
		{"EffectPayload/kind_4", gdDecEffect(4), "", "enum.effect_kind"},
		{"EffectPayload/SPAWN_zero_session", gdDecEffect(cw.EffectSpawn), gdRep("00", 16) + "0001 00000000", "id.zero"},
		{"EffectAttempt/kind_0", attempt, hEA + hOp + "00" + hTargetActive + gdRep("ed", 32) + "00000000 00", "enum.effect_kind"},
		{"EffectAttempt/SPAWN_active_target", attempt, hEA + hOp + "01" + hTargetActive + gdRep("ed", 32) + "00000018" + hSpawn + "00", "effect.target_kind_mismatch"},
		{"EffectAttempt/KILL_spawn_target", attempt, hEA + hOp + "02" + hTargetSpawn + gdRep("ed", 32) + "00000000 00", "effect.target_kind_mismatch"},
		{"EffectAttempt/state_5", attempt, hEA + hOp + "02" + hTargetActive + gdRep("ed", 32) + "00000000 05", "enum.effect_state"},
		{"EffectAttempt/payload_not_kind", attempt, hEA + hOp + "03" + hTargetActive + gdRep("ed", 32) + "00000000 00", "pos.truncated"},
		{"TerminalSourceRef/zero_sequence", gdDecNested[cw.TerminalSourceRef](), hBind + gdRep("af", 32) + hInc + "0000000000000000", "seq.zero"},
		{"TerminalSourceFact/kind_7", fact, hSrcRef + "0007 0001 00000000", "enum.source_fact_kind"},
		{"TerminalSourceFact/schema_2", fact, hSrcRef + "0001 0002 00000000", "source_fact.schema"},
		{"TerminalSourceFact/payload_not_kind", fact, hSrcRef + "0001 0001 00000001 00", "pos.trailing_bytes"},
		{"TerminalSourceFact/payload_over_cap", fact, hSrcRef + "0005 0001 00000039" + hOutRange + "00", "bytes.too_long"},
		{"SourceFact/CLOSED_presence_2", gdDecSource(cw.SourceClosed), "02", "optional.invalid_presence"},
		{"SourceFact/CLOSED_short", gdDecSource(cw.SourceClosed), "01 000000", "pos.truncated"},
		{"SourceFact/INPUT_RESULT_3", gdDecSource(cw.SourceInputResult), hEA + "03", "enum.input_result"},
		{"SourceFact/INPUT_RESULT_zero_id", gdDecSource(cw.SourceInputResult), gdRep("00", 16) + "00", "id.zero"},
		{"SourceFact/SIGNAL_RESULT_3", gdDecSource(cw.SourceSignalResult), hEA + "03", "enum.signal_result"},
		{"SourceFact/OUTPUT_RANGE_order", gdDecSource(cw.SourceOutputRange), "0000000000000005 0000000000000004 0000000000000000" + gdRep("c5", 32), "source_fact.range_order"},
		{"SourceFact/ATTENTION_0", gdDecSource(cw.SourceAttention), "0000", "enum.attention_kind"},
		{"SourceFact/ATTENTION_4", gdDecSource(cw.SourceAttention), "0004", "enum.attention_kind"},
		{"SourceFact/OPENED_nonempty", gdDecSource(cw.SourceOpened), "00", "pos.trailing_bytes"},
		{"SOURCE_GAP/reason_3", gdDecNested[cw.SourceGapPayload](), hBind + "0000000000000003 0000000000000005 03", "enum.source_gap_reason"},
		{"SOURCE_GAP/zero_binding", gdDecNested[cw.SourceGapPayload](), gdRep("00", 16) + "0000000000000003 0000000000000005 00", "id.zero"},
		{"WorkloadGrant/trailing", gdDecNested[cw.WorkloadGrant](), gdRep("4b", 32) + gdRep("af", 32) + "0000000000000fa0 00000008 0000000000000003 00", "pos.trailing_bytes"},

		// Command payloads.
		{"CREATE_OBJECTIVE/zero_id", gdDecTLV[cw.CreateObjective](), "01 04 10" + gdRep("00", 16) + "02 04 02 0001 03 04 00", "id.zero"},
		{"CREATE_OBJECTIVE/missing_document", gdDecTLV[cw.CreateObjective](), "01 04 10" + hObj + "02 04 02 0001", "tlv.missing_field"},
		{"START_RUN/empty_group", gdDecTLV[cw.StartRun](), "01 04 10" + hObj + "02 04 10" + hRun + "03 04 10" + hWS + "04 04 02 0001 05 04 00 06 04 10" + hPB +
			"07 04 20" + gdRep("af", 32) + "08 04 10" + hInc + "09 04 00", "start_run.empty_terminal_group"},
		{"START_RUN/zero_pending_binding", gdDecTLV[cw.StartRun](), "01 04 10" + hObj + "02 04 10" + hRun + "03 04 10" + hWS + "04 04 02 0001 05 04 00 06 04 10" + gdRep("00", 16) +
			"07 04 20" + gdRep("af", 32) + "08 04 10" + hInc + "09 04 03 677270", "id.zero"},
		{"START_RUN/missing_group", gdDecTLV[cw.StartRun](), "01 04 10" + hObj + "02 04 10" + hRun + "03 04 10" + hWS + "04 04 02 0001 05 04 00 06 04 10" + hPB +
			"07 04 20" + gdRep("af", 32) + "08 04 10" + hInc, "tlv.missing_field"},
		{"CANCEL_RUN/zero_run", gdDecTLV[cw.CancelRun](), "01 04 10" + gdRep("00", 16), "id.zero"},
		{"ACK_SIGNAL/empty_note", gdDecTLV[cw.AckSignal](), "01 04 10" + hSig + "02 04 00", "signal.empty_note"},
		{"ACK_SIGNAL/note_not_utf8", gdDecTLV[cw.AckSignal](), "01 04 10" + hSig + "02 04 01 ff", "str.invalid_utf8"},
		{"REGISTER_ARTIFACT_MANIFEST/zero_revision", gdDecTLV[cw.RegisterArtifactManifest](), "01 04 10" + hArt + "02 04 08 0000000000000000 03 04 02 0001 04 04 00", "seq.zero"},
		{"END_BINDING/reason_4", gdDecTLV[cw.EndBinding](), "01 04 10" + hBind + "02 04 01 04", "enum.end_reason"},
		{"CHANGE_RETENTION/missing", gdDecTLV[cw.ChangeRetention](), "01 04 08 0000000000278d00 02 04 08 0000000000000000", "tlv.missing_field"},
		{"payload/wrong_wire_type", gdDecTLV[cw.CancelRun](), "01 05 10" + hRun, "tlv.wrong_wire_type"},

		// Record payloads.
		{"OBJECTIVE/state_3", gdDecTLV[cw.ObjectiveRecord](), "01 04 02 0001 02 04 00 03 04 01 03", "enum.objective_state"},
		{"RUN/attempt_0", gdDecTLV[cw.RunRecord](), "01 04 10" + hObj + "02 04 04 00000000 03 04 01 00", "run.zero_attempt"},
		{"RUN/state_6", gdDecTLV[cw.RunRecord](), "01 04 10" + hObj + "02 04 04 00000001 03 04 01 06", "enum.run_state"},
		{"RUN/empty_outcome", gdDecTLV[cw.RunRecord](), "01 04 10" + hObj + "02 04 04 00000001 03 04 01 00 04 04 00", "run.empty_outcome"},
		{"WORK_SESSION/state_2", gdDecTLV[cw.WorkSessionRecord](), "01 04 10" + hRun + "02 04 01 02", "enum.work_session_state"},
		{"WORK_SESSION/zero_binding", gdDecTLV[cw.WorkSessionRecord](), "01 04 10" + hRun + "02 04 01 00 03 04 10" + gdRep("00", 16), "id.zero"},
		{"BINDING/state_2", gdDecTLV[cw.BindingRecord](), "01 04 57" + hBindRef + "02 04 01 02", "enum.binding_state"},
		{"BINDING/end_reason_4", gdDecTLV[cw.BindingRecord](), "01 04 57" + hBindRef + "02 04 01 01 03 04 01 04", "enum.end_reason"},
		{"BINDING/ref_trailing", gdDecTLV[cw.BindingRecord](), "01 04 58" + hBindRef + "00 02 04 01 01", "pos.trailing_bytes"},
		{"ARTIFACT/zero_revision", gdDecTLV[cw.ArtifactRecord](), "01 04 10" + hWS + "02 04 08 0000000000000000", "seq.zero"},
		{"ARTIFACT_MANIFEST/zero_id", gdDecTLV[cw.ArtifactManifestRecord](), "01 04 10" + gdRep("00", 16) + "02 04 08 0000000000000001 03 04 02 0001 04 04 00", "id.zero"},
		{"SIGNAL/kind_5", gdDecTLV[cw.SignalRecord](), "01 04 10" + hWS + "02 04 02 0005 03 04 01 00 04 04 00", "enum.signal_kind"},
		{"SIGNAL/state_4", gdDecTLV[cw.SignalRecord](), "01 04 10" + hWS + "02 04 02 0001 03 04 01 04 04 04 00", "enum.signal_state"},
		{"SIGNAL/missing_message", gdDecTLV[cw.SignalRecord](), "01 04 10" + hWS + "02 04 02 0001 03 04 01 00", "tlv.missing_field"},
		{"OPERATION/bad_result", gdDecTLV[cw.OperationRecord](), "01 04 20" + gdRep("4b", 32) + "02 04 01 07", "enum.operation_tag"},
		{"EVIDENCE/zero_artifact", gdDecTLV[cw.EvidenceRecord](), "01 04 10" + hWS + "02 04 10" + gdRep("00", 16) + "03 04 20" + gdRep("e5", 32), "id.zero"},
		{"ADMIN/kind_4", gdDecTLV[cw.AdminRecord](), "01 04 02 0004 02 04 00", "enum.admin_kind"},
		{"ADMIN/payload_of_another_kind", gdDecTLV[cw.AdminRecord](), "01 04 02 0001 02 04 21" + hRetention, "seq.zero"},
		{"ADMIN/empty_payload", gdDecTLV[cw.AdminRecord](), "01 04 02 0002 02 04 00", "tlv.missing_field"},
		{"AdminPayload/ACTIVATION/zero_epoch", gdDecTLV[cw.AdminActivationPayload](), "01 04 08 0000000000000000" + hActivation[len("01 04 08 0000000000000003"):], "seq.zero"},
		{"AdminPayload/ACTIVATION/zero_incarnation", gdDecTLV[cw.AdminActivationPayload](), "01 04 08 0000000000000003 02 04 08 0000000000000007 03 04 10" + gdRep("00", 16), "id.zero"},
		{"AdminPayload/RETENTION/below_floor", gdDecTLV[cw.AdminRetentionPayload](), "01 04 08 0000000000278cff 02 04 08 0000000000000000 03 04 08 0000000000000000", "retention.below_floor"},
		{"AdminPayload/CREDENTIAL/state_3", gdDecTLV[cw.AdminCredentialPayload](), hCredential[:len(hCredential)-2] + "03", "enum.credential_state"},
		{"AdminPayload/CREDENTIAL/zero_ceiling", gdDecTLV[cw.AdminCredentialPayload](), "01 04 20" + gdRep("4b", 32) + "02 04 08 0000000000000000", "scope.zero"},
		{"AdminPayload/CREDENTIAL/unknown_scope_bit", gdDecTLV[cw.AdminCredentialPayload](), "01 04 20" + gdRep("4b", 32) + "02 04 08 0000000000000040", "scope.unknown_bit"},
		{"AdminPayload/CREDENTIAL/revoked_without_time", gdDecTLV[cw.AdminCredentialPayload](), hCredential, "credential.revoked_at"},
		{"AdminPayload/CREDENTIAL/present_with_time", gdDecTLV[cw.AdminCredentialPayload](), hCredential[:len(hCredential)-2] + "00 05 04 08 0000000066000000", "credential.revoked_at"},
		{"AdminPayload/CREDENTIAL/zero_time", gdDecTLV[cw.AdminCredentialPayload](), hCredential + "05 04 08 0000000000000000", "credential.revoked_at"},
		{"ManifestDoc/empty_media_type", gdDecTLV[cw.ArtifactManifestDoc](), "01 04 10" + hWS + "02 04 00 03 04 08 0000000000000005 04 04 20" + gdRep("c5", 32), "manifest.empty_media_type"},
		{"ManifestDoc/empty_locator", gdDecTLV[cw.ArtifactManifestDoc](), hManifest + "05 04 00", "manifest.empty_locator"},
	}
}

// TestSpecRefusalsNested checks the refusals of nested types and payloads.
func TestSpecRefusalsNested(t *testing.T) {
	for _, c := range gdNestedRefusals() {
		t.Run(c.name, func(t *testing.T) {
			gdErr(t, c.dec(gdHex(c.wire)), cw.MalformedMessage, c.reason)
		})
	}
}

// TestSpecUnknownFieldsSkipped checks that unknown fields of every wire
// type are skipped by length (§3.1) on an ordinary frame.
func TestSpecUnknownFieldsSkipped(t *testing.T) {
	for _, tail := range []string{"02 00 7f", "02 01 01", "02 02 00000000", "02 03 0000000000000000", "02 04 00", "02 05 01 00", "02 06 00", "02 07 02 0000", "ff7f 04 00"} {
		body := gdHex(fRID, tail)
		var a cw.Ack
		if err := a.DecodeBody(body); err != nil || a.RequestID != 5 {
			t.Errorf("ACK with unknown field %q: %v", tail, err)
		}
	}
}

// gdLegal is the registration table of ADDENDUM A.5 with the states of
// docs/semantics.md: for each receiving role and state, the frame types a
// receiver accepts. Everything else is PROTOCOL_ERROR before the payload.
var gdLegal = map[cw.Role]map[cw.ConnState][]byte{
	cw.RoleServer: {
		// COORD_HELLO, WORKLOAD_RESPONSE, COORD_PING, COORD_ERROR.
		cw.StateHandshake: {0x01, 0x04, 0x7f, 0xc0},
		// Every C→S frame of the active state, PING/PONG both ways, ERROR.
		cw.StateActive: {0x10, 0x11, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x7f, 0xc0, 0xff},
	},
	cw.RoleClient: {
		// WORKLOAD_CHALLENGE, COORD_HELLO_OK, COORD_PONG, COORD_ERROR.
		cw.StateHandshake: {0x84, 0x80, 0xff, 0xc0},
		cw.StateActive:    {0x7f, 0x82, 0x83, 0x90, 0x91, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xb0, 0xb1, 0xc0, 0xff},
	},
}

// TestSpecRegistration checks the direction and state of every type byte
// for both roles and both states (ADDENDUM A.5, docs/semantics.md).
func TestSpecRegistration(t *testing.T) {
	for role, states := range gdLegal {
		for state, legal := range states {
			for tb := 0; tb < 256; tb++ {
				ft := cw.FrameType(tb)
				want := bytes.IndexByte(legal, byte(tb)) >= 0
				rc := cw.Receiver{Role: role, State: state}
				err := rc.CheckHeader(5, ft)
				key := role.String() + "/" + state.String() + "/" + ft.String()
				if (err == nil) != want {
					t.Errorf("%s: CheckHeader = %v, want legal=%v", key, err, want)
					continue
				}
				if !want && !errors.Is(err, cw.ProtocolError) {
					t.Errorf("%s: refusal %v, want PROTOCOL_ERROR", key, err)
				}
			}
		}
	}
}

// TestSpecZeroLimitsMeanHardCaps: docs/semantics.md says a zero field in
// Receiver.Limits means the hard cap for the frame cap and every narrower
// cap alike, so a zero-valued Limits is the most permissive legal receiver.
func TestSpecZeroLimitsMeanHardCaps(t *testing.T) {
	for _, c := range gdFrameCases() {
		if c.state != cw.StateActive {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			body := gdHex(c.body)
			wire := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
			wire = append(append(wire, c.typ), body...)
			rc := cw.Receiver{Role: c.role, State: cw.StateActive}
			if _, err := rc.DecodeMessage(wire); err != nil {
				t.Fatalf("zero Limits refused a valid frame: %v", err)
			}
		})
	}
}

// TestSpecNegotiatedTypedPayloadCap: a command payload over the selected
// typed-payload cap is FRAME_TOO_LARGE; at the cap it is accepted.
func TestSpecNegotiatedTypedPayloadCap(t *testing.T) {
	body := gdHex(gdFrameCases()[2].body) // COORD_COMMAND, 19-byte payload
	wire := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	wire = append(append(wire, 0x10), body...)
	l := cw.HardLimits()
	l.MaxTypedPayloadBytes = 19
	rc := cw.Receiver{Role: cw.RoleServer, State: cw.StateActive, Limits: l}
	if _, err := rc.DecodeMessage(wire); err != nil {
		t.Fatalf("payload at the cap refused: %v", err)
	}
	rc.Limits.MaxTypedPayloadBytes = 18
	_, err := rc.DecodeMessage(wire)
	gdErr(t, err, cw.FrameTooLarge, "limits.typed_payload")
}

// TestSpecWorkloadOfferProfile: docs/semantics.md records that a
// WorkloadOffer naming a profile other than phux-workload/v1 is
// AUTHENTICATION_FAILED, whatever its length, exactly like
// WORKLOAD_CHALLENGE's profile field.
func TestSpecWorkloadOfferProfile(t *testing.T) {
	var o cw.WorkloadOffer
	gdErr(t, o.Decode(gdHex("00000010 706875782d776f726b6c6f61642f7632", gdRep("ab", 32))), cw.AuthenticationFailed, "workload.profile")
	gdErr(t, o.Decode(gdHex("00000004 61626364", gdRep("ab", 32))), cw.AuthenticationFailed, "workload.profile")
	t.Run("longer_profile", func(t *testing.T) {
		err := o.Decode(gdHex("00000011 706875782d776f726b6c6f61642f7631 30", gdRep("ab", 32))) // "phux-workload/v10"
		gdErr(t, err, cw.AuthenticationFailed, "workload.profile")
	})
	var c cw.WorkloadChallenge
	body := gdHex(gdFrameCases()[16].body)
	body = bytes.Replace(body, gdHex("01 04 14 00000010", hProfile), gdHex("01 04 15 00000011", hProfile, "30"), 1)
	gdErr(t, c.DecodeBody(body), cw.AuthenticationFailed, "workload.profile")
}

// gdMutations returns single-byte mutations of b: each byte XORed with a
// few masks and set to 0x00 and 0xff.
func gdMutations(b []byte, f func(m []byte)) {
	m := make([]byte, len(b))
	for i := range b {
		for _, v := range []byte{b[i] ^ 0x01, b[i] ^ 0x80, b[i] ^ 0x10, 0x00, 0xff} {
			if v == b[i] {
				continue
			}
			copy(m, b)
			m[i] = v
			f(m)
		}
	}
}

// TestSpecCanonicalUnderMutation: a strict decoder accepts only canonical
// images, so every accepted single-byte mutation of a golden image must
// re-encode to exactly the mutated bytes (decode∘encode is the identity on
// everything accepted). An accepted non-canonical image would be a
// strictness gap.
func TestSpecCanonicalUnderMutation(t *testing.T) {
	// fieldIDs lists the top-level field ids of a body (nil if it is not
	// well-formed TLV).
	fieldIDs := func(b []byte) map[uint64]bool {
		ids := map[uint64]bool{}
		d := cw.NewTLVReader(b)
		for d.Next() {
			ids[d.FieldID()] = true
		}
		if d.Err() != nil {
			return nil
		}
		return ids
	}
	for _, c := range gdFrameCases() {
		body := gdHex(c.body)
		ft := cw.FrameType(c.typ)
		known := fieldIDs(body)
		gdMutations(body, func(m []byte) {
			f := cw.NewFrame(ft)
			if err := f.DecodeBody(m); err != nil {
				return
			}
			if ft != cw.TypeCoordCommand { // COORD_COMMAND keeps unknown fields
				for id := range fieldIDs(m) {
					if !known[id] {
						return // an unknown field, skipped by §3.1
					}
				}
			}
			if got := f.AppendBody(nil); !bytes.Equal(got, m) {
				t.Errorf("%s: accepted non-canonical body\n  in %x\n out %x", c.name, m, got)
			}
		})
	}
	nested := map[string]func() cw.Nested{
		"AuthorityGuard": func() cw.Nested { return new(cw.AuthorityGuard) }, "ObjectRef": func() cw.Nested { return new(cw.ObjectRef) },
		"SnapshotRecord": func() cw.Nested { return new(cw.SnapshotRecord) }, "ReplayEvent": func() cw.Nested { return new(cw.ReplayEvent) },
		"ActivationCertificate": func() cw.Nested { return new(cw.ActivationCertificate) },
		"TerminalBindingRef":    func() cw.Nested { return new(cw.TerminalBindingRef) }, "TerminalSourceFact": func() cw.Nested { return new(cw.TerminalSourceFact) },
		"WorkloadGrant": func() cw.Nested { return new(cw.WorkloadGrant) }, "SOURCE_GAP": func() cw.Nested { return new(cw.SourceGapPayload) },
	}
	for _, c := range gdNestedCases() {
		var decode func([]byte) ([]byte, error)
		switch {
		case nested[c.name] != nil:
			mk := nested[c.name]
			decode = func(b []byte) ([]byte, error) { v := mk(); err := v.Decode(b); return v.Append(nil), err }
		case strings.HasPrefix(c.name, "OperationResult/"), strings.HasPrefix(c.name, "EffectTarget/"), strings.HasPrefix(c.name, "EffectAttempt/"):
			mk := map[string]func() cw.Nested{"OperationResult": func() cw.Nested { return new(cw.OperationResult) },
				"EffectTarget": func() cw.Nested { return new(cw.EffectTarget) }, "EffectAttempt": func() cw.Nested { return new(cw.EffectAttempt) }}[strings.SplitN(c.name, "/", 2)[0]]
			decode = func(b []byte) ([]byte, error) { v := mk(); err := v.Decode(b); return v.Append(nil), err }
		default:
			continue
		}
		wire := gdHex(c.wire)
		gdMutations(wire, func(m []byte) {
			out, err := decode(m)
			if err == nil && !bytes.Equal(out, m) {
				t.Errorf("%s: accepted non-canonical image\n  in %x\n out %x", c.name, m, out)
			}
		})
	}
	checked := 0
	for kind := cw.CommandKind(1); kind <= 11; kind++ {
		for _, c := range gdNestedCases() {
			if strings.SplitN(c.name, "/", 2)[0] != kind.String() {
				continue
			}
			checked++
			gdMutations(gdHex(c.wire), func(m []byte) {
				out, err := cw.CanonicalCommandPayload(kind, m)
				if err == nil && !bytes.Equal(out, m) {
					t.Errorf("%s: accepted non-canonical payload\n  in %x\n out %x", c.name, m, out)
				}
			})
		}
	}
	if checked < 11 {
		t.Fatalf("mutated %d command payload goldens, want all 11 kinds", checked)
	}
	records := map[string]cw.ObjectKind{"OBJECTIVE": cw.ObjectKindObjective, "RUN": cw.ObjectKindRun, "WORK_SESSION": cw.ObjectKindWorkSession,
		"BINDING": cw.ObjectKindBinding, "ARTIFACT": cw.ObjectKindArtifact, "ARTIFACT_MANIFEST": cw.ObjectKindArtifactManifest,
		"SIGNAL": cw.ObjectKindSignal, "OPERATION": cw.ObjectKindOperation, "EVIDENCE": cw.ObjectKindEvidence, "ADMIN": cw.ObjectKindAdmin}
	seen := map[cw.ObjectKind]bool{}
	for _, c := range gdNestedCases() {
		kind, ok := records[strings.SplitN(c.name, "/", 2)[0]]
		if !ok {
			continue
		}
		seen[kind] = true
		wire := gdHex(c.wire)
		known := fieldIDs(wire)
		gdMutations(wire, func(m []byte) {
			p, err := cw.DecodeRecordPayload(kind, m)
			if err != nil {
				return
			}
			for id := range fieldIDs(m) {
				if !known[id] {
					return // unknown record fields are skipped (docs/semantics.md)
				}
			}
			if out := p.AppendTLV(nil); !bytes.Equal(out, m) {
				t.Errorf("%s: accepted non-canonical record payload\n  in %x\n out %x", c.name, m, out)
			}
		})
	}
	if len(seen) != 10 {
		t.Fatalf("mutated %d record kinds, want 10", len(seen))
	}
}
