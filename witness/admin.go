package witness

import "context"

// Forget (operator, admin socket only) removes the coordinator's record
// if it never activated (activation sequence 0, no lease): an enrolment
// or pin that was never used. A coordinator that has activated is
// refused with Activated — its record is kept for good, because
// forgetting it would let its epoch start again from zero. No record is
// UnknownCoordinator.
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
