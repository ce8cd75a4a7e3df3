package core

import (
	"bytes"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// ADMIN records (§7 AdminKind, ADDENDUM A.4, A.7; the payloads and the
// ADMIN_CHANGED event are this project's, docs/semantics.md). The store
// holds one ACTIVATION record (the current activation), one RETENTION
// record (the policy in force) and one CREDENTIAL record per workload key
// id the coordinator has observed in its registry. Each is revised in
// place (revision + 1) with one ADMIN_CHANGED event carrying its complete
// SnapshotRecord, so state stays bounded; their ids are server-minted
// (C.10). They are found by scanning the ADMIN kind: the store keeps no
// index by AdminKind, and the kind holds only these records.

// adminRow is one stored ADMIN record.
type adminRow struct {
	id  [16]byte
	rev uint64
	rec coordwire.AdminRecord
}

// scanAdmin calls fn for every stored ADMIN record in key order until fn
// returns false. A record that does not decode is ErrCorrupt (the store
// holds only records this server made). rec's payload is reused between
// calls.
func scanAdmin(tx coordstore.ReadTx, fn func(r *adminRow) bool) error {
	after := coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin} // the zero id is no record's
	var r adminRow
	for o, err := range tx.Objects(&after) {
		if err != nil {
			return storeErr("admin records", err)
		}
		if o.Key.Kind != coordwire.ObjectKindAdmin {
			return nil
		}
		if o.Schema != coordwire.RecordSchemaVersion || r.rec.DecodeTLV(o.Payload) != nil {
			return fmt.Errorf("core: stored ADMIN record does not decode: %w", coordstore.ErrCorrupt)
		}
		r.id, r.rev = o.Key.ID, o.Revision
		if !fn(&r) {
			return nil
		}
	}
	return nil
}

// findAdmin returns the one ADMIN record of kind (ACTIVATION or
// RETENTION); ok is false when there is none yet.
func findAdmin(tx coordstore.ReadTx, kind coordwire.AdminKind) (row adminRow, ok bool, err error) {
	err = scanAdmin(tx, func(r *adminRow) bool {
		if r.rec.AdminKind != kind {
			return true
		}
		row, ok = *r, true
		row.rec.Payload = bytes.Clone(r.rec.Payload)
		return false
	})
	return row, ok, err
}

// putAdmin writes v as the next revision of the ADMIN record row (when
// found) or as a new ADMIN record with a fresh server id at revision 1,
// with its ADMIN_CHANGED event; it returns the event's sequence.
func (x Exec) putAdmin(tx coordstore.Tx, row adminRow, found bool, v coordwire.AdminPayload) (uint64, error) {
	rec := coordwire.NewAdminRecord(v)
	if found {
		next, err := coordwire.ObjectRevision(row.rev).Next()
		if err != nil {
			return 0, err
		}
		return x.writeRecord(tx, coordwire.ObjectKindAdmin, row.id, uint64(next), rec, coordwire.EventAdminChanged)
	}
	id, err := x.freshID(tx, coordwire.ObjectKindAdmin)
	if err != nil {
		return 0, err
	}
	return x.writeRecord(tx, coordwire.ObjectKindAdmin, id, 1, rec, coordwire.EventAdminChanged)
}

// setAdmin writes v as the one ADMIN record of its kind (ACTIVATION or
// RETENTION): a revision of the stored one, or the first.
func (x Exec) setAdmin(tx coordstore.Tx, v coordwire.AdminPayload) (uint64, error) {
	row, found, err := findAdmin(tx, v.AdminKind())
	if err != nil {
		return 0, err
	}
	return x.putAdmin(tx, row, found, v)
}

// retentionPayload is the RETENTION ADMIN payload of a stored retention.
func retentionPayload(r coordstore.Retention) *coordwire.AdminRetentionPayload {
	return &coordwire.AdminRetentionPayload{OperationResultSecs: r.OperationResultSecs, EventBytes: r.EventBytes, ArtifactBytes: r.ArtifactBytes}
}

// activationPayload is the ACTIVATION ADMIN payload of certificate c: its
// identity and times, with SHA-256 of the fencing token (C.2), never the
// token.
func activationPayload(c *coordwire.ActivationCertificate, tokenHash [32]byte) *coordwire.AdminActivationPayload {
	return &coordwire.AdminActivationPayload{
		AuthorityEpoch: c.AuthorityEpoch, ActivationSequence: c.ActivationSequence,
		IncarnationID: c.IncarnationID, WitnessID: c.WitnessID, WitnessKeyID: c.WitnessKeyID,
		FencingTokenSHA256: tokenHash, IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt,
	}
}

// Credential is one workload key of the registry as the coordinator
// observes it (ADDENDUM B.5), the input of SyncCredentials: no key
// material beyond the key id.
type Credential struct {
	KeyID     [32]byte
	Ceiling   coordwire.Scope // nonzero, defined bits only
	ExpiresAt uint64          // Unix seconds
	RevokedAt uint64          // Unix seconds; 0: not revoked
}

// payload is the CREDENTIAL payload of a key present in the registry.
func (c Credential) payload() coordwire.AdminCredentialPayload {
	p := coordwire.AdminCredentialPayload{KeyID: c.KeyID, ScopeCeiling: c.Ceiling, ExpiresAt: c.ExpiresAt, State: coordwire.CredentialPresent}
	if c.RevokedAt != 0 {
		p.State, p.RevokedAt = coordwire.CredentialRevoked, c.RevokedAt
	}
	return p
}

// SyncCredentials makes the CREDENTIAL ADMIN records match the registry
// reg (its entries in registry order, each key id once) inside tx, and
// returns how many records it wrote, each with its ADMIN_CHANGED event:
//
//   - a key of reg without a record gets a new record (fresh server id,
//     revision 1), in reg's order;
//   - a key whose record differs (ceiling, expiry, revocation, or a key
//     that was REMOVED and is back) gets the next revision;
//   - a record whose key is no longer in reg becomes REMOVED, keeping the
//     last observed ceiling, expiry and revocation time; a REMOVED record
//     is not written again while its key stays away.
//
// A record that already matches is left alone, so the function is
// idempotent: running it again after a failed commit, or after several
// registry changes, converges on reg. A key id listed twice, a zero
// ceiling or one with undefined bits, or a zero expiry is an INTERNAL
// error with nothing to commit (the registry's parser refuses all of
// them).
func (x Exec) SyncCredentials(tx coordstore.Tx, reg []Credential) (int, error) {
	want := make(map[[32]byte]int, len(reg))
	for i, c := range reg {
		if _, dup := want[c.KeyID]; dup || !c.Ceiling.Valid() || c.ExpiresAt == 0 {
			return 0, fmt.Errorf("core: invalid registry entry: %w", errInternal)
		}
		want[c.KeyID] = i
	}
	type stored struct {
		row adminRow
		p   coordwire.AdminCredentialPayload
	}
	have := map[[32]byte]stored{}
	var order [][32]byte // stored records in key order
	var derr error
	err := scanAdmin(tx, func(r *adminRow) bool {
		if r.rec.AdminKind != coordwire.AdminCredential {
			return true
		}
		var p coordwire.AdminCredentialPayload
		if err := p.DecodeTLV(r.rec.Payload); err != nil {
			derr = fmt.Errorf("core: stored CREDENTIAL record does not decode: %w", coordstore.ErrCorrupt)
			return false
		}
		if _, dup := have[p.KeyID]; dup {
			derr = fmt.Errorf("core: two CREDENTIAL records of one key: %w", coordstore.ErrCorrupt)
			return false
		}
		have[p.KeyID] = stored{row: adminRow{id: r.id, rev: r.rev}, p: p}
		order = append(order, p.KeyID)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range reg {
		p := c.payload()
		old, found := have[c.KeyID]
		if found && old.p == p {
			continue
		}
		if _, err := x.putAdmin(tx, old.row, found, &p); err != nil {
			return 0, err
		}
		n++
	}
	for _, k := range order {
		old := have[k]
		if _, present := want[k]; present || old.p.State == coordwire.CredentialRemoved {
			continue
		}
		p := old.p
		p.State = coordwire.CredentialRemoved
		if _, err := x.putAdmin(tx, old.row, true, &p); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
