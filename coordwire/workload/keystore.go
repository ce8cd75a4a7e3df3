package workload

import "github.com/phuxcoord/coord/keystore"

// The keystore's key types are the production Signers.
var (
	_ Signer = (*keystore.AuthorityKey)(nil)
	_ Signer = (*keystore.WorkloadKey)(nil)
)

// KeystoreRegistry adapts a keystore registry snapshot (for example the
// current generation of a keystore.Watcher) to KeyRegistry. A nil
// registry knows no key, so every handshake against it fails closed. The
// snapshot is immutable; pass the newest one to each new handshake.
func KeystoreRegistry(r *keystore.Registry) KeyRegistry { return keystoreRegistry{r} }

type keystoreRegistry struct{ r *keystore.Registry }

// LookupKey implements KeyRegistry.
func (k keystoreRegistry) LookupKey(keyID [32]byte) (RegistryEntry, bool) {
	if k.r == nil {
		return RegistryEntry{}, false
	}
	e, ok := k.r.Lookup(keyID)
	if !ok {
		return RegistryEntry{}, false
	}
	return RegistryEntry{PublicKey: e.PublicKey, Ceiling: e.Ceiling, Expires: e.Expires, Revoked: e.Revoked}, true
}
