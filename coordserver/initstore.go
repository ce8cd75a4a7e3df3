package coordserver

import (
	"context"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// InitStore commits the CoordinatorId of a fresh store (or returns the
// one it has), as New's lineage step does, without activating: a daemon's
// "init" uses it so that the operator knows the CoordinatorId (to enrol it
// at a witness that requires enrolment) before the first activation. It
// does not contact a witness and changes nothing in a store that already
// has a CoordinatorId.
func InitStore(ctx context.Context, st coordstore.Store) (coordwire.CoordinatorID, error) {
	var id coordwire.CoordinatorID
	err := st.Update(ctx, func(tx coordstore.Tx) error {
		var err error
		id, err = core.EnsureCoordinatorID(tx)
		return err
	})
	return id, err
}
