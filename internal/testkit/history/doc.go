// Package history is test support for the robustness tests: it records
// what clients saw of a workload as a history of calls, checks that
// history for linearizability against a model of the coordinator's
// observable semantics (porcupine), and validates the event streams of
// subscriptions and Mirrors.
//
// The model (model.go) is the executable statement of what a client may
// rely on (§8, §10, §13; docs/semantics.md "Commands and operation
// results"): per OperationId one principal, one digest and one outcome;
// an exact duplicate is answered the stored result, another principal or
// digest OPERATION_CONFLICT, and a refusal admits nothing; Objectives
// change only through admitted commands, one revision each, and a
// revision precondition is judged against the current revision; a Run
// exists once its START_RUN was admitted, and at most one CANCEL_RUN of
// it is admitted unless the earlier ones ended without success. A call
// whose outcome the client could not learn (the connection was lost, a
// deadline passed) may or may not have taken effect, at any time after it
// was invoked: the model forks, as etcd's robustness model does for a
// failed request.
//
// The stream validators (stream.go) check, for every subscription and
// Mirror: events in EventSequence order with exact-next DeliverySequence,
// no event twice, no visible event missing without a GAP before it, a
// GAP's cut exact, a replay or replacing snapshot resuming exactly at its
// cut, and every commit whose boundaries the history knows delivered
// whole and never split by a snapshot or replay cut.
//
// Production packages must never import this package (TestNotImported
// checks it). The seeded simulation may use it: its histories and streams
// are the same values.
package history
