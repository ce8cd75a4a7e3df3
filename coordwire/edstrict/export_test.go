package edstrict

// Test hooks: the byte-level rules of Check, for the external tests (which
// import internal/testkit/edcases, itself an importer of this package).
var (
	Canonical     = canonical
	SmallOrder    = smallOrder
	ScalarReduced = scalarReduced
)

// SmallOrderPoints and OrderL are copies of the tables Check uses.
var (
	SmallOrderPoints = smallOrderPoints
	OrderL           = orderL
)
