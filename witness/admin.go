package witness

import "context"

// Forget (operator, admin socket only) removes the coordinator's record
// if it never activated (no activation granted, no lease): an enrolment
// that was never used. Its epoch and activation sequence go to its floor,
// like a reclaimed record's. A coordinator that has activated is refused
// with Activated — its record is kept; it leaves the table only by
// reclamation. No record is UnknownCoordinator.
func (c *Client) Forget(ctx context.Context) error {
	f, err := c.roundTrip(ctx, &Request{Op: TypeForget})
	if err != nil {
		return err
	}
	if _, ok := f.(*AdminOK); !ok {
		return ErrUnexpectedReply
	}
	return nil
}
