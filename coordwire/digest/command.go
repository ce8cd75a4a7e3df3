package digest

import "github.com/phuxcoord/coord/coordwire"

// OperationFromCommand returns the operation digest of a COORD_COMMAND:
// its typed payload is decoded strictly for its kind and re-encoded
// canonically with its unknown fields (coordwire.CanonicalCommandPayload),
// then hashed with the command's preconditions and envelope extensions by
// Operation. RequestID, the AuthorityGuard and the OperationID are not part
// of the digest, so a retry after reconnect or an epoch change keeps it.
func OperationFromCommand(c *coordwire.CoordCommand) ([32]byte, error) {
	payload, err := coordwire.CanonicalCommandPayload(c.Kind, c.Payload)
	if err != nil {
		return [32]byte{}, err
	}
	return Operation(c.Kind, payload, c.Preconditions, c.Extensions)
}
