package sink

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
)

// isolator finds the poison records of a batch and writes the rest, in savepoints of the
// batch's transaction, in three steps:
//
//  1. search: the batch is written in parts, each in a savepoint; a part that fails with
//     poison is rolled back and split, at the record a *PoisonError names or else in halves,
//     down to single records: the suspects. Splitting can make a record fail that is fine in
//     its batch (a child written apart from its parent, whose key is checked at the end of
//     the statement or, with CheckDeferred, of the part), so the search is rolled back.
//  2. rescue: the batch without the suspects must write in one savepoint (else the search's
//     parts are kept, as found: the fallback); then suspects are added back, in groups
//     halved down to single records, each try writing the whole set in offset order in one
//     savepoint that is rolled back. A suspect whose addition fails stays out. Passes repeat
//     while one adds a record.
//  3. the set kept is written once more, in offset order, in one savepoint that stays; the
//     suspects left are the dead letters.
//
// So a record is dead-lettered only if the batch without the other dead letters, with it
// added, fails (as the plugin and the constraints judge at the end of a write, or at COMMIT
// with CheckDeferred).
type isolator struct {
	ctx           context.Context
	tx            pgx.Tx
	p             Plugin
	topic         string
	partition     int32
	checkDeferred bool

	written, skipped int        // records in the parts kept, and those the plugin reported skipped
	dead             []Poisoned // in offset order
}

// try writes recs in a savepoint. With keep, a successful write stays (RELEASE); otherwise
// the savepoint is always rolled back. werr is the write's poison error; err is any other
// failure, which ends the isolation (transient errors are retried, never dead-lettered).
func (iso *isolator) try(recs []Record, keep bool) (werr, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	sp, err := iso.tx.Begin(iso.ctx) // SAVEPOINT
	if err != nil {
		return nil, err
	}
	skipped, werr := write(iso.ctx, sp, iso.p, Batch{Topic: iso.topic, Partition: iso.partition, Records: recs})
	if werr == nil && iso.checkDeferred {
		// Check the deferred constraints now; the rollback below restores their mode.
		_, werr = sp.Exec(iso.ctx, "SET CONSTRAINTS ALL IMMEDIATE")
	}
	if werr == nil && keep {
		if err := sp.Commit(iso.ctx); err != nil { // RELEASE SAVEPOINT
			return nil, err
		}
		iso.written += len(recs)
		iso.skipped += skipped
		return nil, nil
	}
	if err := sp.Rollback(iso.ctx); err != nil { // ROLLBACK TO SAVEPOINT
		// The rollback's error decides (a lost connection is retried), not the write's.
		return nil, fmt.Errorf("rollback to savepoint: %w (after: %v)", err, werr)
	}
	if werr != nil && (isRetryable(werr) || !IsPoison(werr)) {
		return nil, werr
	}
	return werr, nil
}

// run isolates the poison of recs (steps 1 to 3 above).
func (iso *isolator) run(recs []Record) error {
	outer, err := iso.tx.Begin(iso.ctx)
	if err != nil {
		return err
	}
	if err := iso.search(recs); err != nil {
		_ = outer.Rollback(iso.ctx)
		return err
	}
	if len(iso.dead) == 0 { // every part wrote: keep them
		return outer.Commit(iso.ctx)
	}
	if err := outer.Rollback(iso.ctx); err != nil {
		return fmt.Errorf("rollback to savepoint: %w", err)
	}
	suspects := iso.dead
	iso.dead, iso.written, iso.skipped = nil, 0, 0
	kept, left, err := iso.rescue(recs, suspects)
	if err != nil {
		return err
	}
	if kept != nil {
		werr, err := iso.try(kept, true)
		if err != nil {
			return err
		}
		if werr == nil {
			iso.dead = left
			return nil
		}
		// The set that wrote a moment ago fails now: a plugin that does not write the same
		// records the same way. Fall back to the parts as found.
	}
	iso.dead, iso.written, iso.skipped = nil, 0, 0
	return iso.search(recs)
}

// rescue returns the records of recs to keep and the suspects left out, or kept == nil when
// recs without every suspect does not write (then the search's parts are the result).
func (iso *isolator) rescue(recs []Record, suspects []Poisoned) (kept []Record, left []Poisoned, err error) {
	out := make(map[int64]bool, len(suspects))
	for _, d := range suspects {
		out[d.Record.Offset] = true
	}
	kept = slices.DeleteFunc(slices.Clone(recs), func(r Record) bool { return out[r.Offset] })
	if werr, err := iso.try(kept, false); err != nil || werr != nil {
		return nil, nil, err
	}
	left = suspects
	for added := true; added && len(left) > 0; {
		var still []Poisoned
		n := len(kept)
		if kept, still, err = iso.addBack(kept, left); err != nil {
			return nil, nil, err
		}
		added, left = len(kept) > n, still
	}
	return kept, left, nil
}

// addBack tries to add group to kept: all at once, else each half in turn. It returns kept
// with what could be added and the suspects that could not.
func (iso *isolator) addBack(kept []Record, group []Poisoned) ([]Record, []Poisoned, error) {
	with := merge(kept, group)
	werr, err := iso.try(with, false)
	switch {
	case err != nil:
		return nil, nil, err
	case werr == nil:
		return with, nil, nil
	case len(group) == 1:
		return kept, group, nil
	}
	mid := len(group) / 2
	kept, left1, err := iso.addBack(kept, group[:mid])
	if err != nil {
		return nil, nil, err
	}
	kept, left2, err := iso.addBack(kept, group[mid:])
	if err != nil {
		return nil, nil, err
	}
	return kept, append(left1, left2...), nil
}

// merge returns recs with the records of add, in offset order.
func merge(recs []Record, add []Poisoned) []Record {
	out := make([]Record, 0, len(recs)+len(add))
	out = append(out, recs...)
	for _, d := range add {
		out = append(out, d.Record)
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// search writes recs in parts, each kept in its savepoint when it writes, and splits the
// parts that fail with poison down to single records, which it adds to iso.dead.
func (iso *isolator) search(recs []Record) error {
	werr, err := iso.try(recs, true)
	if err != nil || werr == nil {
		return err
	}
	if off, ok := poisonOffset(werr); ok {
		i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
		if i < len(recs) && recs[i].Offset == off {
			if err := iso.search(recs[:i]); err != nil {
				return err
			}
			iso.dead = append(iso.dead, Poisoned{Record: recs[i], Err: werr})
			return iso.search(recs[i+1:])
		}
		// A *PoisonError for a record not in this part: the plugin is confused. Fall back
		// to halving, which ends at single records.
	}
	if len(recs) == 1 {
		iso.dead = append(iso.dead, Poisoned{Record: recs[0], Err: werr})
		return nil
	}
	mid := len(recs) / 2
	if err := iso.search(recs[:mid]); err != nil {
		return err
	}
	return iso.search(recs[mid:])
}
