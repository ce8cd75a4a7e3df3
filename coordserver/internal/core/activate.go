package core

import (
	"crypto/sha256"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// EnsureCoordinatorID returns the store's CoordinatorId, minting one from
// crypto/rand and storing it in tx when the store is fresh (§4:
// CoordinatorId survives restart). The server runs it, committed, before
// it asks the witness for a certificate over that id, so a crash between
// the witness grant and Activate does not leave a lineage the store never
// knew.
func EnsureCoordinatorID(tx coordstore.Tx) (coordwire.CoordinatorID, error) {
	m, err := tx.Meta()
	if err != nil {
		return coordwire.CoordinatorID{}, storeErr("meta", err)
	}
	if !m.CoordinatorID.IsZero() {
		return m.CoordinatorID, nil
	}
	m.CoordinatorID = coordwire.NewCoordinatorID()
	if err := tx.PutMeta(m); err != nil {
		return coordwire.CoordinatorID{}, storeErr("put meta", err)
	}
	return m.CoordinatorID, nil
}

// Activate is Exec{}.Activate.
func Activate(tx coordstore.Tx, c *coordwire.ActivationCertificate) error {
	return Exec{}.Activate(tx, c)
}

// Activate installs a new activation in tx (step 6 of §12's activation
// order): the certificate's CoordinatorId (taken as the store's own on a
// fresh store, otherwise it must equal it), authority epoch, activation
// sequence and SHA-256 of its fencing token (ADDENDUM C.2), and on a
// store without one the default operation-result retention
// (RetentionFloorSecs). In the same transaction it writes the ACTIVATION
// ADMIN record of c (the next revision of the stored one, or the first)
// and, on a store without a RETENTION ADMIN record, the first one (the
// retention now in force), each with its ADMIN_CHANGED event
// (docs/semantics.md). It refuses, with STALE_AUTHORITY, a certificate
// for another coordinator ("activate.coordinator_mismatch"), an epoch not
// above the stored one ("activate.epoch_not_above") and an activation
// sequence not above the stored one ("activate.sequence_not_above"). The
// certificate's signature, pin and times are the caller's to verify
// (coordwire/cert) before.
func (x Exec) Activate(tx coordstore.Tx, c *coordwire.ActivationCertificate) error {
	m, err := tx.Meta()
	if err != nil {
		return storeErr("meta", err)
	}
	if c.CoordinatorID.IsZero() || c.AuthorityEpoch == 0 || c.ActivationSequence == 0 ||
		c.IncarnationID.IsZero() || c.WitnessID.IsZero() {
		return refuse(coordwire.MalformedMessage, "activate.zero_field")
	}
	if !m.CoordinatorID.IsZero() && m.CoordinatorID != c.CoordinatorID {
		return refuse(coordwire.StaleAuthority, "activate.coordinator_mismatch")
	}
	if uint64(c.AuthorityEpoch) <= m.AuthorityEpoch {
		return refuse(coordwire.StaleAuthority, "activate.epoch_not_above")
	}
	if uint64(c.ActivationSequence) <= m.ActivationSequence {
		return refuse(coordwire.StaleAuthority, "activate.sequence_not_above")
	}
	m.CoordinatorID = c.CoordinatorID
	m.AuthorityEpoch = uint64(c.AuthorityEpoch)
	m.ActivationSequence = uint64(c.ActivationSequence)
	m.FencingTokenSHA256 = sha256.Sum256(c.FencingToken[:])
	if m.Retention.OperationResultSecs < RetentionFloorSecs {
		m.Retention.OperationResultSecs = RetentionFloorSecs
	}
	if err := tx.PutMeta(m); err != nil {
		return storeErr("put meta", err)
	}
	if _, err := x.setAdmin(tx, activationPayload(c, m.FencingTokenSHA256)); err != nil {
		return err
	}
	_, found, err := findAdmin(tx, coordwire.AdminRetention)
	if err != nil || found {
		return err
	}
	_, err = x.putAdmin(tx, adminRow{}, false, retentionPayload(m.Retention))
	return err
}

// NextEpoch is the epoch to propose to the witness (§12): one above the
// greater of the store's and the witness's last epoch. At 2^64-1 it is
// coordwire.ErrSequenceOverflow: the epoch never wraps, the coordinator
// cannot activate (§4 "Wrap fences the writer").
func NextEpoch(storeEpoch, witnessEpoch uint64) (uint64, error) {
	e, err := coordwire.AuthorityEpoch(max(storeEpoch, witnessEpoch)).Next()
	if err != nil {
		return 0, fmt.Errorf("core: next epoch: %w", err)
	}
	return uint64(e), nil
}
