package sink

import (
	"fmt"

	"github.com/eosink/eosink/rebalance"
)

// PoisonPolicy says what happens to poison records. See Config.OnPoison.
type PoisonPolicy int

const (
	// StopOnPoison stops the partition at the batch holding a poison record.
	StopOnPoison PoisonPolicy = iota
	// DeadLetter writes poison records to the dead-letter table, in the same transaction as
	// the rest of their batch and the offset.
	DeadLetter
)

// ParsePoisonPolicy parses "stop" or "dead-letter".
func ParsePoisonPolicy(s string) (PoisonPolicy, error) {
	switch s {
	case "stop", "":
		return StopOnPoison, nil
	case "dead-letter":
		return DeadLetter, nil
	}
	return 0, fmt.Errorf("unknown poison policy %q: want stop or dead-letter", s)
}

func (p PoisonPolicy) String() string {
	if p == DeadLetter {
		return "dead-letter"
	}
	return "stop"
}

// ParseInitialPosition parses earliest, latest, error or kafka-committed.
func ParseInitialPosition(s string) (InitialPosition, error) {
	return rebalance.ParseInitialPosition(s)
}
