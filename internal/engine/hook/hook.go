// Package hook is the seam between package sink and package engine. Package sink imports it
// and fills its variables in an init function; package engine reads them and gives them
// sink's types. Nothing else uses it: the project's own packages import package engine.
//
// This package cannot import sink (sink imports it), so WriteBatch is typed any; package
// engine asserts its type when it is initialized, after sink's init has set it.
package hook

import "context"

// WriteOptions configure the engine's write step (engine.WriteBatch).
type WriteOptions struct {
	// Isolate writes the batch in savepoints, finds the poison records (splitting at the one
	// a *sink.PoisonError names, or by halves for a data error that names none), keeps every
	// record that writes together with the rest of the batch, and dead-letters the others.
	// Without it, a poison record fails the whole write.
	Isolate bool
	// CheckDeferred, with Isolate, checks deferred constraints at the end of each part, in
	// its savepoint (SET CONSTRAINTS ALL IMMEDIATE, which a rollback to the savepoint undoes),
	// so that a violation COMMIT would raise shows in the part that causes it. The engine sets
	// it when the batch's COMMIT failed with a data error (a deferred constraint).
	CheckDeferred bool
	// Schema and Pipeline locate and label the dead letters (sink.Config.Schema,
	// sink.Config.Pipeline).
	Schema, Pipeline string
	// RedactErrorValues writes the dead letters' errors without record data
	// (sink.Config.RedactErrorValues, sink.ErrorText).
	RedactErrorValues bool
}

var (
	// WriteBatch is package sink's write step, a
	// func(context.Context, pgx.Tx, sink.Plugin, sink.Batch, WriteOptions) (applied, skipped int, deadLettered []sink.Poisoned, err error).
	WriteBatch any

	// CountSkipped returns ctx in which sink.Skipped counts into *n.
	CountSkipped func(ctx context.Context) (context.Context, *int)

	// StopRemedy tells an operator what to do about a partition stopped for reason, one of
	// the sink.Stop* words.
	StopRemedy func(reason string) string
)
