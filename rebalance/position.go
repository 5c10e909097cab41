package rebalance

import (
	"fmt"
	"strings"
)

// InitialPosition says where a partition starts the first time a pipeline claims it, that is
// when it has no row in the offsets table yet. Once a row exists it is the only source of the
// position.
type InitialPosition int

const (
	// Earliest starts at the log start offset.
	Earliest InitialPosition = iota
	// Latest starts at the log end offset: records already in the log are not applied. The
	// log end is the consumer's (QueryWatermarkOffsets follows isolation.level): under
	// read_committed, the default, the last stable offset, as `eosink offsets set -to latest`
	// uses, so that the records of a transaction still open are applied once it commits.
	Latest
	// Error refuses to start the partition; an operator must set a position first.
	Error
	// KafkaCommitted starts at the consumer group's committed offset in Kafka, so that an
	// existing consumer group can move to eosink without replay. A partition with no
	// committed offset starts at the log start offset. Kafka's value is read only to create
	// the row, never again.
	KafkaCommitted
)

var positionNames = map[InitialPosition]string{
	Earliest: "earliest", Latest: "latest", Error: "error", KafkaCommitted: "kafka-committed",
}

func (p InitialPosition) String() string {
	if s, ok := positionNames[p]; ok {
		return s
	}
	return fmt.Sprintf("InitialPosition(%d)", int(p))
}

// ParseInitialPosition parses earliest, latest, error or kafka-committed.
func ParseInitialPosition(s string) (InitialPosition, error) {
	for p, name := range positionNames {
		if strings.EqualFold(s, name) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown initial position %q (want earliest, latest, error or kafka-committed)", s)
}
