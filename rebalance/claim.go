package rebalance

import "github.com/eosink/eosink/internal/offsets"

// The offsets table's rows as the Balancer and its Lifecycle see them. Every statement on
// that table is the offsets store's (internal/offsets); these names are its types.

// Claim is the result of claiming one partition: the epoch this instance now owns it under,
// and the offset to start consuming at. Its fields: Topic, Partition, Epoch, NextOffset,
// TopicID (as stored; empty when unknown) and Created (the row was created by this claim
// from the initial position).
type Claim = offsets.Claim

// Position is a stored row as read back: NextOffset, Epoch and Owner.
type Position = offsets.Position

// Range is one partition's part of a commit: the records from Start up to End (exclusive,
// last record's offset + 1) under the Epoch the instance claimed, of Topic and Partition.
type Range = offsets.Range

// ResetOwnerPrefix starts the owner written by an operator who moved a position
// (`eosink offsets set`): "reset by OPERATOR (was INSTANCE)", where INSTANCE is the owner
// the change fenced. That change bumps the epoch; the sink whose InstanceID is INSTANCE,
// and only that one, claims the partition again at the new position.
const ResetOwnerPrefix = offsets.ResetOwnerPrefix

// ResetOwner returns the owner an operator's change writes over current.
func ResetOwner(operator, current string) string { return offsets.ResetOwner(operator, current) }

// ResetFrom returns the instance an operator's change fenced, if owner was written by one.
func ResetFrom(owner string) (instance string, ok bool) { return offsets.ResetFrom(owner) }

// NotifyChannel ("eosink_offsets") is the PostgreSQL channel told of every operator change
// to a position, with the pipeline as payload, so that idle sinks notice it without a commit.
const NotifyChannel = offsets.NotifyChannel
