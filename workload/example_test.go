package workload_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// exampleKey is a fixed-seed Signer for the example; real code uses
// keystore.AuthorityKey and keystore.WorkloadKey.
type exampleKey struct{ priv ed25519.PrivateKey }

func newExampleKey(label string) exampleKey {
	seed := sha256.Sum256([]byte(label))
	return exampleKey{ed25519.NewKeyFromSeed(seed[:])}
}

func (k exampleKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }
func (k exampleKey) Sign(msg []byte) []byte    { return ed25519.Sign(k.priv, msg) }

// A complete handshake between the two state machines, passing encoded
// frame bodies as a transport would, then a refusal.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	authority, wkey := newExampleKey("example authority"), newExampleKey("example workload")

	// The operator registered the workload key with a ceiling.
	reg := workload.RegistryFunc(func(id [32]byte) (workload.RegistryEntry, bool) {
		if id != edstrict.KeyID(wkey.Public()) {
			return workload.RegistryEntry{}, false
		}
		return workload.RegistryEntry{PublicKey: wkey.Public(), Ceiling: coordwire.ScopeWorkRead | coordwire.ScopeSignalAck,
			Expires: now.Add(24 * time.Hour)}, true
	})
	// Both ends of one Unix socket see the same peer (here: fixed values;
	// real code uses UDSServerBinding(conn) and UDSClientBinding()).
	binding := workload.Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
		return workload.UDSPeerBinding(n, 1000, 1000, 4242), nil
	}}

	srv, _ := workload.NewServerHandshake(workload.ServerConfig{
		AuthorityKey: authority, Incarnation: coordwire.NewIncarnationID(), Registry: reg, Binding: binding,
	})
	cli, _ := workload.NewClientHandshake(workload.ClientConfig{
		WorkloadKey:                wkey,
		PinnedAuthorityFingerprint: edstrict.KeyID(authority.Public()),
		RequestedScope:             coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
		RequestedExpiry:            now.Add(time.Hour),
		Binding:                    binding,
	})

	challenge, err := srv.HandleHello(cli.Hello().AppendBody(nil), now)
	if err != nil {
		fmt.Println("hello:", err)
		return
	}
	response, err := cli.HandleChallenge(challenge.AppendBody(nil), now)
	if err != nil {
		fmt.Println("challenge:", err)
		return
	}
	res, err := srv.HandleResponse(coordwire.TypeWorkloadResponse, response.AppendBody(nil), now.Add(time.Second))
	if err != nil {
		fmt.Println("response:", err)
		return
	}
	// The activation certificate comes from the witness in a real server.
	coord := coordwire.NewCoordinatorID()
	cert := coordwire.ActivationCertificate{Version: coordwire.ActivationCertificateVersion,
		WitnessID: coordwire.NewActivationWitnessID(), CoordinatorID: coord, ActivationSequence: 1,
		AuthorityEpoch: 1, IncarnationID: res.Incarnation}
	ok := res.HelloOK(coord, 1, coordwire.MinOperationResultRetentionSecs, cert)
	got, err := cli.HandleHelloOK(ok.Type(), ok.AppendBody(nil), now.Add(time.Second))
	if err != nil {
		fmt.Println("hello_ok:", err)
		return
	}
	fmt.Println("granted:", got.Scope, "until", got.ExpiresAt.Format(time.RFC3339))

	// A second response on the same connection is refused, with the one
	// generic error every authentication failure shares.
	_, err = srv.HandleResponse(coordwire.TypeWorkloadResponse, response.AppendBody(nil), now.Add(time.Second))
	fmt.Println(errors.Is(err, workload.ErrAuthenticationFailed), coordwire.CodeOf(err))
	// Output:
	// granted: work_read until 2026-01-01T01:00:00Z
	// true AUTHENTICATION_FAILED
}
