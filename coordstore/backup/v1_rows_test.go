package backup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// v1Retention is the operation-result retention the version-1 fixture's
// meta advertises (40 days).
const v1Retention = 40 * 86400

// v1Store holds the rows of testdata/v1.backup, written by backup.Write
// at format version 1 (commit 2f83aee, before operations carried
// RetentionSecs) from this store with ret 0: a final, a pending and a
// tombstoned operation, an object and an event. Every operation has
// RetentionSecs ret.
func v1Store(t *testing.T, ret uint64) coordstore.Store {
	t.Helper()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{0x0b, 1}}
	p := [32]byte{0xa1}
	if err := st.Update(context.Background(), func(tx coordstore.Tx) error {
		errs := []error{
			tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID{0xc0, 1}, AuthorityEpoch: 3, ActivationSequence: 4,
				FencingTokenSHA256: [32]byte{7}, Retention: coordstore.Retention{OperationResultSecs: v1Retention, EventBytes: 1 << 20}}),
			tx.PutObject(coordstore.Object{Key: key, Revision: 1, Schema: 1, Payload: []byte("objective")}),
			tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID{1}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd1},
				Result: []byte{1}, AdmittedAt: 1_700_000_000, FinalizedAt: 1_700_000_000, RetentionSecs: ret}),
			tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID{2}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd2},
				Result: []byte{2}, AdmittedAt: 1_700_000_010, RetentionSecs: ret}),
			tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID{3}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd3},
				Result: []byte{3}, Tombstoned: true, AdmittedAt: 1_699_000_000, FinalizedAt: 1_699_000_000, RetentionSecs: ret}),
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID{0xe1}, Kind: coordwire.EventObjectiveChanged, Object: key, ObjectRevision: 1, Schema: 1, Payload: []byte("e")})
		return errors.Join(append(errs, err)...)
	}); err != nil {
		t.Fatal(err)
	}
	return st
}
