// Package offsets is the one owner of eosink's tables of positions: every Go statement that
// reads or writes the offsets table (its positions, epochs, owners and stop columns), the
// instances table (the sinks' heartbeats) and the audit of operator changes (written by the
// offsets table's trigger, from what DeclareAudit declares) is a method here, one method per
// statement.
//
// The fence, the product's core invariant, is in fence.go: the claim that bumps the epoch,
// its conditional forms, and the compare-and-set on epoch and next offset that every commit
// runs first. The other files hold the reads (read.go), ending stalled sessions that hold a
// row (stalled.go), the stop columns (stopped.go), the instances (instances.go: the
// heartbeat; liveness.go: the operator's read of it), the operator's statements
// (operator.go) and the owner and channel conventions (owner.go).
//
// Package rebalance claims through a Store, package sink commits and records stops through
// it, package admin moves positions through an Operator. A test of this package fails when
// any other non-test Go file of the module holds a statement on these tables (the examples'
// verifiers may read a stored position, and only read it).
package offsets
