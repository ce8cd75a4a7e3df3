package workload

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"net"
	"os"

	"github.com/phuxcoord/coord/coordwire"
)

// ErrNoChannelBinding is returned (wrapped) when a channel binding cannot
// be derived: a TLS session below 1.3 or without exporter support, or a
// Unix socket whose peer credentials the platform cannot supply. Such a
// channel cannot carry a paired handshake (ADDENDUM A.1, B.4).
var ErrNoChannelBinding = errors.New("workload: no channel binding for this connection")

// bindingError wraps ErrNoChannelBinding with a constant description.
type bindingError struct{ what string }

// Error returns the constant description.
func (e *bindingError) Error() string { return "workload: no channel binding: " + e.what }

// Unwrap returns ErrNoChannelBinding.
func (e *bindingError) Unwrap() error { return ErrNoChannelBinding }

// TLSContext returns the exporter context of the TLS_EXPORTER binding
// (ADDENDUM B.4): SHA-256("phux-workload/v1\0tls-context\0" ||
// V16(service) || U16(major) || U16(minor)).
func TLSContext(service string, major, minor uint16) [32]byte {
	b := make([]byte, 0, len(tlsContextDomain)+2+len(service)+4)
	b = append(b, tlsContextDomain...)
	b = appendV16(b, service)
	b = coordwire.AppendU16(b, major)
	b = coordwire.AppendU16(b, minor)
	return sha256.Sum256(b)
}

// TLSBinding derives the TLS_EXPORTER channel binding of the very TLS
// session cs describes, for service "phux-coordinator" and this
// implementation's protocol major.minor: the 32-byte TLS exporter output
// with label "phux-workload/v1" and context TLSContext. A session below
// TLS 1.3, an unfinished handshake, or a state without exporter is refused
// with an error wrapping ErrNoChannelBinding.
func TLSBinding(cs *tls.ConnectionState) ([32]byte, error) {
	return tlsBinding(cs, Service, coordwire.ProtocolMajor, coordwire.ProtocolMinor)
}

func tlsBinding(cs *tls.ConnectionState, service string, major, minor uint16) ([32]byte, error) {
	var out [32]byte
	if cs == nil || !cs.HandshakeComplete {
		return out, &bindingError{"TLS handshake not complete"}
	}
	if cs.Version < tls.VersionTLS13 {
		return out, &bindingError{"TLS version below 1.3"}
	}
	ctx := TLSContext(service, major, minor)
	km, err := cs.ExportKeyingMaterial(TLSExporterLabel, ctx[:], len(out))
	if err != nil || len(km) != len(out) {
		return out, &bindingError{"TLS exporter unavailable"}
	}
	copy(out[:], km)
	return out, nil
}

// UDSPeerBinding derives the UDS_PEER channel binding (ADDENDUM B.4):
// SHA-256("phux-workload/v1\0uds-peer\0" || server_nonce[32] || U64(uid) ||
// U64(gid) || U64(pid)). The server passes the peer credentials the kernel
// reports (PeerCred); the client passes its own (SelfCred), so the two
// agree only when the server sees exactly this process.
func UDSPeerBinding(serverNonce [32]byte, uid, gid, pid uint64) [32]byte {
	b := make([]byte, 0, len(udsPeerDomain)+32+24)
	b = append(b, udsPeerDomain...)
	b = append(b, serverNonce[:]...)
	b = coordwire.AppendU64(b, uid)
	b = coordwire.AppendU64(b, gid)
	b = coordwire.AppendU64(b, pid)
	return sha256.Sum256(b)
}

// SelfCred returns this process's uid, gid and pid, the values a client
// compares (through UDSPeerBinding) with what the server's kernel reports.
func SelfCred() (uid, gid, pid uint64) {
	return uint64(os.Getuid()), uint64(os.Getgid()), uint64(os.Getpid())
}

// Binding is the channel binding of one connection, as one side derives
// it: its kind and a function of the server nonce (the UDS_PEER binding
// depends on it; the TLS_EXPORTER binding does not).
type Binding struct {
	// Kind is the channel binding kind; it must be a defined one.
	Kind coordwire.ChannelBindingKind
	// Derive returns the binding for a server nonce. A nil Derive has no
	// binding, which fails every handshake closed.
	Derive func(serverNonce [32]byte) ([32]byte, error)
}

// derive evaluates b for a nonce; a nil or failing Derive reports !ok.
func (b Binding) derive(serverNonce [32]byte) (v [32]byte, ok bool) {
	if b.Derive == nil || !b.Kind.Valid() {
		return v, false
	}
	v, err := b.Derive(serverNonce)
	return v, err == nil
}

// TLSConnBinding returns the TLS_EXPORTER Binding of a TLS session, for
// either side; it fails now (wrapping ErrNoChannelBinding) if TLSBinding
// would.
func TLSConnBinding(cs *tls.ConnectionState) (Binding, error) {
	v, err := TLSBinding(cs)
	if err != nil {
		return Binding{}, err
	}
	return Binding{Kind: coordwire.BindingTLSExporter, Derive: func([32]byte) ([32]byte, error) { return v, nil }}, nil
}

// UDSServerBinding returns the server's UDS_PEER Binding for an accepted
// Unix-socket connection, from the peer's uid, gid and pid as the kernel
// reports them (PeerCred). It fails (wrapping ErrNoChannelBinding) when the
// platform cannot supply all three.
func UDSServerBinding(conn *net.UnixConn) (Binding, error) {
	uid, gid, pid, err := PeerCred(conn)
	if err != nil {
		return Binding{}, err
	}
	return udsBinding(uid, gid, pid), nil
}

// UDSClientBinding returns the client's UDS_PEER Binding: its own uid, gid
// and pid (SelfCred).
func UDSClientBinding() Binding { return udsBinding(SelfCred()) }

func udsBinding(uid, gid, pid uint64) Binding {
	return Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
		return UDSPeerBinding(n, uid, gid, pid), nil
	}}
}
