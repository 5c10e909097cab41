package sink

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/pgerr"
)

// errIsolate: the first attempt of a batch hit a poison record and the policy is DeadLetter.
// The batch is tried again at once, in a new transaction, with isolation.
var errIsolate = errors.New("eosink: batch holds a poison record; isolating it")

// IsPoison reports whether err comes from the records rather than the database or the code:
// a *PoisonError, or a data error (SQLSTATE class 22 or 23, or 54000). Such errors are
// handled by Config.OnPoison; retrying them cannot help.
func IsPoison(err error) bool {
	return errors.Is(err, ErrPoison) || pgerr.Classify(err) == pgerr.Data
}

// poisonOffset returns the offset a *PoisonError names.
func poisonOffset(err error) (int64, bool) {
	var pe *PoisonError
	if errors.As(err, &pe) {
		return pe.Offset, true
	}
	return 0, false
}

// WriteResult says what WriteBatch did.
type WriteResult struct {
	Applied      int        // records written by the plugin
	DeadLettered []Poisoned // poison records written to the dead-letter table
}

// WriteOptions configure WriteBatch.
type WriteOptions struct {
	// Isolate writes the batch in savepoints, splitting it around poison records (the one a
	// *PoisonError names, or by halves for a data error that names none) and dead-lettering
	// them. Without it, a poison record fails the whole write.
	Isolate bool
	// Schema and Pipeline locate and label the dead letters (Config.Schema, Config.Pipeline).
	Schema, Pipeline string
}

// WriteBatch is the engine's write step, exported for plugin conformance suites (sinktest)
// and tests: it calls p.Write on tx for batch and, with opts.Isolate, isolates poison records
// into the dead-letter table in the same transaction. The caller owns tx (BEGIN, the offset
// advance and COMMIT). An error is the plugin's: transient, poison (when not isolating),
// or fatal.
func WriteBatch(ctx context.Context, tx pgx.Tx, p Plugin, batch Batch, opts WriteOptions) (WriteResult, error) {
	if !opts.Isolate {
		if err := p.Write(ctx, ownedTx{tx}, batch); err != nil {
			return WriteResult{}, err
		}
		return WriteResult{Applied: len(batch.Records)}, nil
	}
	iso := isolator{ctx: ctx, tx: tx, p: p, topic: batch.Topic, partition: batch.Partition}
	if err := iso.write(batch.Records); err != nil {
		return WriteResult{}, err
	}
	if len(iso.dead) > 0 {
		if err := insertDeadLetters(ctx, tx, opts.Schema, opts.Pipeline, iso.dead); err != nil {
			return WriteResult{}, err
		}
	}
	return WriteResult{Applied: iso.applied, DeadLettered: iso.dead}, nil
}

// isolator writes records in savepoints and splits around poison.
type isolator struct {
	ctx       context.Context
	tx        pgx.Tx
	p         Plugin
	topic     string
	partition int32
	applied   int
	dead      []Poisoned
}

func (iso *isolator) write(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	sp, err := iso.tx.Begin(iso.ctx) // SAVEPOINT
	if err != nil {
		return err
	}
	werr := iso.p.Write(iso.ctx, ownedTx{sp}, Batch{Topic: iso.topic, Partition: iso.partition, Records: recs})
	if werr == nil {
		if err := sp.Commit(iso.ctx); err != nil { // RELEASE SAVEPOINT
			return err
		}
		iso.applied += len(recs)
		return nil
	}
	if err := sp.Rollback(iso.ctx); err != nil { // ROLLBACK TO SAVEPOINT
		// The rollback's error decides (a lost connection is retried), not the write's.
		return fmt.Errorf("rollback to savepoint: %w (after: %v)", err, werr)
	}
	if isRetryable(werr) || !IsPoison(werr) { // transient errors are retried, never dead-lettered
		return werr
	}
	if off, ok := poisonOffset(werr); ok {
		i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
		if i < len(recs) && recs[i].Offset == off {
			if err := iso.write(recs[:i]); err != nil {
				return err
			}
			iso.dead = append(iso.dead, Poisoned{Record: recs[i], Err: werr})
			return iso.write(recs[i+1:])
		}
		// A *PoisonError for a record not in this part: the plugin is confused. Fall back
		// to halving, which ends at single records.
	}
	if len(recs) == 1 {
		iso.dead = append(iso.dead, Poisoned{Record: recs[0], Err: werr})
		return nil
	}
	mid := len(recs) / 2
	if err := iso.write(recs[:mid]); err != nil {
		return err
	}
	return iso.write(recs[mid:])
}
