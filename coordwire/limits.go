package coordwire

// Protocol version implemented by this package (§1).
const (
	ProtocolMajor = 0
	ProtocolMinor = 1
	ProtocolPatch = 0
)

// ALPN is the TLS application-layer protocol identifier of coordinator
// protocol 0.1.0 on the remote transport (§2, ADDENDUM A.1): TLS 1.3 over
// TCP or QUIC with ALPN "phux-coordinator/1" and the TLS_EXPORTER channel
// binding. Both ends put exactly this string, and no other, in
// tls.Config.NextProtos; a connection that did not negotiate it is not a
// coordinator connection. Its major version "1" names the ALPN binding,
// not the protocol version (ProtocolMajor).
const ALPN = "phux-coordinator/1"

// Hard caps of ADDENDUM A.2. Nothing a peer offers can raise them.
const (
	// HardMaxFrameBytes caps the outer frame length (type + payload).
	HardMaxFrameBytes = 1 << 20
	// HandshakeMaxFrameBytes caps every frame before COORD_HELLO_OK.
	HandshakeMaxFrameBytes = 16 << 10
	// HardMaxPageBytes caps a snapshot or replay page's records/events.
	HardMaxPageBytes = 512 << 10
	// HardMaxPageRecords caps records or events per page.
	HardMaxPageRecords = 1024
	// HardMaxTypedPayloadBytes caps a command or event typed payload.
	HardMaxTypedPayloadBytes = 256 << 10
	// HardMaxEventCreditCount and HardMaxEventCreditBytes cap a
	// subscription's credit balance.
	HardMaxEventCreditCount = 4096
	HardMaxEventCreditBytes = 8 << 20
	// MaxCursorBytes caps an opaque snapshot or replay cursor.
	MaxCursorBytes = 4 << 10
	// MaxNameBytes caps a name such as client_name.
	MaxNameBytes = 128
	// MaxDiagnosticBytes caps a COORD_ERROR message.
	MaxDiagnosticBytes = 1024
	// MaxPreconditions caps the preconditions of one command.
	MaxPreconditions = 64
	// MaxResourceIDBytes caps a canonical L1 ResourceId or GroupId (§8, §11).
	MaxResourceIDBytes = 4 << 10
	// LimitOverheadBytes is the room selected page and typed-payload caps
	// must leave under the selected frame cap (§3.2).
	LimitOverheadBytes = 512
	// MinOperationResultRetentionSecs is the 30-day floor of §5.
	MinOperationResultRetentionSecs = 2_592_000
	// MaxCertificateLifetimeSecs caps an activation certificate (§12).
	MaxCertificateLifetimeSecs = 60
	// LeaseSecs is the snapshot and replay lease duration (§9).
	LeaseSecs = 60
)

// Limits are the per-connection limits negotiated by COORD_HELLO (§3.2).
// The zero value is not a valid offer; use ReferenceLimits or HardLimits.
type Limits struct {
	MaxFrameBytes        uint32
	MaxPageBytes         uint32
	MaxPageRecords       uint16
	MaxTypedPayloadBytes uint32
	MaxEventCreditCount  uint32
	MaxEventCreditBytes  uint32
}

// HardLimits returns the hard caps of ADDENDUM A.2 as an offer.
func HardLimits() Limits {
	return Limits{
		MaxFrameBytes:        HardMaxFrameBytes,
		MaxPageBytes:         HardMaxPageBytes,
		MaxPageRecords:       HardMaxPageRecords,
		MaxTypedPayloadBytes: HardMaxTypedPayloadBytes,
		MaxEventCreditCount:  HardMaxEventCreditCount,
		MaxEventCreditBytes:  HardMaxEventCreditBytes,
	}
}

// ReferenceLimits returns the reference offer of ADDENDUM A.2.
func ReferenceLimits() Limits {
	return Limits{
		MaxFrameBytes:        512 << 10,
		MaxPageBytes:         256 << 10,
		MaxPageRecords:       512,
		MaxTypedPayloadBytes: 128 << 10,
		MaxEventCreditCount:  1024,
		MaxEventCreditBytes:  4 << 20,
	}
}

// Validate checks one side's offer: every limit nonzero and within its
// hard cap. A failure is MALFORMED_MESSAGE ("limits.zero" or
// "limits.over_hard_cap").
func (l Limits) Validate() error {
	type lim struct{ v, hard uint64 }
	for _, x := range [...]lim{
		{uint64(l.MaxFrameBytes), HardMaxFrameBytes},
		{uint64(l.MaxPageBytes), HardMaxPageBytes},
		{uint64(l.MaxPageRecords), HardMaxPageRecords},
		{uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes},
		{uint64(l.MaxEventCreditCount), HardMaxEventCreditCount},
		{uint64(l.MaxEventCreditBytes), HardMaxEventCreditBytes},
	} {
		if x.v == 0 {
			return malformed("limits.zero")
		}
		if x.v > x.hard {
			return malformed("limits.over_hard_cap")
		}
	}
	return nil
}

// MaxEventFrameBytes returns the outer length (4-byte length prefix
// included) of the largest COORD_EVENT the limits allow: a typed payload
// of MaxTypedPayloadBytes plus every other field at its widest. Selected
// event credit bytes must cover at least this (§3.2).
func (l Limits) MaxEventFrameBytes() uint64 {
	// subscription_id, delivery_sequence, event_sequence, event_id,
	// event_kind, object, object_revision, schema: fixed-width fields,
	// each 1 id byte + 1 wire byte + 1 length byte + value.
	fixed := uint64(3+16) + (3 + 8) + (3 + 8) + (3 + 16) + (3 + 2) + (3 + 18) + (3 + 8) + (3 + 2)
	p := uint64(l.MaxTypedPayloadBytes)
	payload := 2 + uint64(uvarintLen(p)) + p
	return 4 + 1 + fixed + payload
}

// SelectLimits applies §3.2 to a client offer and a server offer: each
// offer must be valid, each selected limit is min(client, server), the
// selected page and typed-payload caps must be at most the selected frame
// cap minus 512, and the selected event credit bytes must fit at least one
// maximum-sized COORD_EVENT. Failures are MALFORMED_MESSAGE.
func SelectLimits(client, server Limits) (Limits, error) {
	if err := client.Validate(); err != nil {
		return Limits{}, err
	}
	if err := server.Validate(); err != nil {
		return Limits{}, err
	}
	s := Limits{
		MaxFrameBytes:        min(client.MaxFrameBytes, server.MaxFrameBytes),
		MaxPageBytes:         min(client.MaxPageBytes, server.MaxPageBytes),
		MaxPageRecords:       min(client.MaxPageRecords, server.MaxPageRecords),
		MaxTypedPayloadBytes: min(client.MaxTypedPayloadBytes, server.MaxTypedPayloadBytes),
		MaxEventCreditCount:  min(client.MaxEventCreditCount, server.MaxEventCreditCount),
		MaxEventCreditBytes:  min(client.MaxEventCreditBytes, server.MaxEventCreditBytes),
	}
	if s.MaxFrameBytes <= LimitOverheadBytes ||
		s.MaxPageBytes > s.MaxFrameBytes-LimitOverheadBytes ||
		s.MaxTypedPayloadBytes > s.MaxFrameBytes-LimitOverheadBytes {
		return Limits{}, malformed("limits.page_or_payload_over_frame")
	}
	if uint64(s.MaxEventCreditBytes) < s.MaxEventFrameBytes() {
		return Limits{}, malformed("limits.credit_below_one_event")
	}
	return s, nil
}

// NegotiateCapabilities applies §5: the negotiated set is the intersection
// of the offers (unknown bits included only when both offer them, which
// the plain intersection already guarantees), and every required bit must
// be in the client's offer and in the intersection. A failure is
// MALFORMED_MESSAGE ("capabilities.required_not_offered": the client
// requires what it does not offer) or CAPABILITY_REQUIRED
// ("capabilities.required_not_supported").
func NegotiateCapabilities(clientOffered, clientRequired, serverOffered Capabilities) (Capabilities, error) {
	if clientRequired&^clientOffered != 0 {
		return 0, malformed("capabilities.required_not_offered")
	}
	n := clientOffered & serverOffered
	if clientRequired&^n != 0 {
		return 0, &Error{Code: CapabilityRequired, Reason: "capabilities.required_not_supported"}
	}
	return n, nil
}
