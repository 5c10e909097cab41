package txn

import (
	"cmp"
	"slices"
)

// Position is a Kafka record's place: in inputs, the record's offset; in a Tx, the next
// offset to commit for the partition.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

type partKey struct {
	topic     string
	partition int32
}

// partition tracks one partition's records: the offset after the last one read and the
// offsets still held by transactions not yet emitted. Its safe next offset is the smallest
// held offset, else the one after the last record read: a position never passes a record
// of a transaction that is not emitted, whatever later transactions were emitted past it.
type partition struct {
	next     int64   // after the last record read; -1 before the first
	held     []int64 // increasing: records arrive in offset order
	released map[int64]struct{}
	reported int64 // the safe offset last reported in a Tx; -1 none
}

func newPartition() *partition {
	return &partition{next: -1, reported: -1, released: map[int64]struct{}{}}
}

// read checks that offset follows the partition's last record.
func (p *partition) read(offset int64) error {
	if offset < 0 || offset < p.next {
		return ErrOrder
	}
	return nil
}

func (p *partition) hold(offset int64) {
	p.held = append(p.held, offset)
	p.next = offset + 1
}

func (p *partition) pass(offset int64) { p.next = offset + 1 }

func (p *partition) release(offset int64) {
	if len(p.held) > 0 && p.held[0] == offset {
		p.held = p.held[1:]
		p.trim()
		return
	}
	p.released[offset] = struct{}{}
}

func (p *partition) trim() {
	for len(p.held) > 0 {
		if _, ok := p.released[p.held[0]]; !ok {
			return
		}
		delete(p.released, p.held[0])
		p.held = p.held[1:]
	}
	if len(p.held) == 0 {
		p.held = nil // let the array go
	}
}

// safe is the next offset the partition may commit, -1 before any record.
func (p *partition) safe() int64 {
	if len(p.held) > 0 {
		return p.held[0]
	}
	return p.next
}

// heldAt is one record a transaction holds.
type heldAt struct {
	part   *partition
	offset int64
}

// positions reports every partition whose safe offset moved since the last report, sorted
// by topic and partition.
func (a *Assembler) positions() []Position {
	var out []Position
	for k, p := range a.parts {
		if s := p.safe(); s >= 0 && s != p.reported {
			p.reported = s
			out = append(out, Position{Topic: k.topic, Partition: k.partition, Offset: s})
		}
	}
	slices.SortFunc(out, func(x, y Position) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// Positions returns the safe next offset of every partition read so far, whether or not a
// Tx reported it, sorted by topic and partition.
func (a *Assembler) Positions() []Position {
	var out []Position
	for k, p := range a.parts {
		if s := p.safe(); s >= 0 {
			out = append(out, Position{Topic: k.topic, Partition: k.partition, Offset: s})
		}
	}
	slices.SortFunc(out, func(x, y Position) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

func (a *Assembler) part(at Position) *partition {
	k := partKey{at.Topic, at.Partition}
	p := a.parts[k]
	if p == nil {
		p = newPartition()
		a.parts[k] = p
	}
	return p
}

// Moved returns the partitions whose safe offset moved since the last Tx or Moved
// reported them, sorted by topic and partition: a caller that applies what it Passes (a
// snapshot read) stores them with it.
func (a *Assembler) Moved() []Position { return a.positions() }
