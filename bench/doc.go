// Package bench holds the comparison baselines for the coordwire benchmarks.
// It is not part of the library: it exists so that
// `go test -bench Compare ./bench` can measure, in one run, the coordwire
// COORD_EVENT codec against
//
//   - the equivalent protobuf message (bench.proto, generated bench.pb.go),
//     marshalled into a reused buffer and unmarshalled into a reused message;
//   - a hand-written fixed-layout encoding/binary codec of the same fields
//     (FixedEvent), the floor any general codec can approach.
//
// BenchmarkCompareCoordEvent fails when a target is missed. See README.md
// for the figures and how they were taken.
package bench
