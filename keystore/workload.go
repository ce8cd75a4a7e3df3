//go:build unix

package keystore

import (
	"time"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// The keystore's key types are the production signers of the workload
// profile and the witness protocol, and a registry snapshot is the
// production workload.KeyRegistry.
var (
	_ edstrict.Signer      = (*AuthorityKey)(nil)
	_ edstrict.Signer      = (*WorkloadKey)(nil)
	_ workload.KeyRegistry = (*Registry)(nil)
)

// LookupKey implements workload.KeyRegistry, so that a registry snapshot
// (for example the current generation of a Watcher) can be handed to a
// workload handshake as it is. A nil registry knows no key, so every
// handshake against it fails closed. The snapshot is immutable; pass the
// newest one to each new handshake.
func (r *Registry) LookupKey(keyID [32]byte) (workload.RegistryEntry, bool) {
	if r == nil {
		return workload.RegistryEntry{}, false
	}
	e, ok := r.Lookup(keyID)
	if !ok {
		return workload.RegistryEntry{}, false
	}
	return workload.RegistryEntry{PublicKey: e.PublicKey, Ceiling: e.Ceiling, Expires: e.Expires, Revoked: e.Revoked}, true
}

// Usable reports whether the entry may authenticate at now. It is the
// workload profile's rule (workload.RegistryEntry.Usable) applied to this
// entry: not revoked at or before now, and now strictly before Expires.
func (e Entry) Usable(now time.Time) bool {
	w := workload.RegistryEntry{Expires: e.Expires, Revoked: e.Revoked}
	return w.Usable(now)
}
