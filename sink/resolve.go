package sink

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/rebalance"
)

// Resolving dead letters that a later batch applies.
//
// A dead letter stays open until an operator replays or discards it (eosink dlq), or until
// a batch applies the record at its coordinates: after a fix, an operator moves the stored
// offset back (`eosink offsets set`) and the records go through the pipeline again. Such a
// batch marks the open dead letters of the records it applied resolved (resolved_how
// 'applied', resolved_by the instance id) in its own transaction, with one UPDATE per
// partition, so the dead letter is resolved exactly when the record's write commits. Records
// dead-lettered again in the same batch stay open (insertDeadLetters reopened them). A
// record the plugin reported skipped (an inbox duplicate, a where: that is false) counts as
// applied: the pipeline dealt with it. A set's commit resolves every offset its units moved
// past (its units do not dead-letter).
//
// The hot path does not pay for it: when a partition is claimed, its worker (or the set's
// ownership) reads the highest offset of its open dead letters at or above the claimed
// position, once, and a batch runs the UPDATE only while its offsets reach that far. A
// claimed position only moves forward, and the dead letters the owner writes itself lie
// below it once committed, so no later open dead letter is missed. If the read fails, every
// batch runs the UPDATE (correct, just slower).

// noOpenDeadLetter is the highest open dead-letter offset of a partition that has none at or
// above its claimed position.
const noOpenDeadLetter = -1

// batchQuerier sends a batch of statements (*pgxpool.Pool).
type batchQuerier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// highestOpenDeadLetter returns the highest offset of the open dead letters of the partition
// at or above from, or noOpenDeadLetter, in one round trip.
func highestOpenDeadLetter(ctx context.Context, db batchQuerier, schema, pipeline, topic string, partition int32, from int64) (int64, error) {
	b := &pgx.Batch{}
	var top *int64
	b.Queue(`SELECT max("offset") FROM `+pgx.Identifier{schema, "dead_letters"}.Sanitize()+
		` WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND "offset" >= $4 AND resolved_at IS NULL`,
		pipeline, topic, partition, from).QueryRow(func(row pgx.Row) error { return row.Scan(&top) })
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("read the open dead letters of %s[%d]: %w", topic, partition, err)
	}
	if top == nil {
		return noOpenDeadLetter, nil
	}
	return *top, nil
}

// openDeadLetterLimit is highestOpenDeadLetter for a claimed partition, logging a failure
// and returning math.MaxInt64 then (every batch checks).
func openDeadLetterLimit(ctx context.Context, db batchQuerier, cfg resolveConfig, topic string, partition int32, from int64) int64 {
	top, err := highestOpenDeadLetter(ctx, db, cfg.schema, cfg.pipeline, topic, partition, from)
	if err != nil {
		if ctx.Err() == nil {
			cfg.log.Warn("could not read the partition's open dead letters; every batch will check them", "topic", topic,
				"partition", partition, "err", err)
		}
		return math.MaxInt64
	}
	return top
}

// resolveConfig names the dead-letter table and who resolves.
type resolveConfig struct {
	schema, pipeline, instance string
	log                        *slog.Logger
}

// resolveApplied marks resolved, as applied by instance, the open dead letters of the
// partition at offsets first..last, in tx: all of them when only is nil, else those whose
// offset only lists (the records a batch applied, without the offsets it dead-lettered
// again or that held no record).
func resolveApplied(ctx context.Context, tx pgx.Tx, cfg resolveConfig, topic string, partition int32, first, last int64, only []int64) error {
	_, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{cfg.schema, "dead_letters"}.Sanitize()+
		` SET resolved_at = now(), resolved_how = 'applied', resolved_by = $6
 WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND "offset" BETWEEN $4 AND $5 AND resolved_at IS NULL
   AND ($7::bigint[] IS NULL OR "offset" = ANY($7))`, cfg.pipeline, topic, partition, first, last, cfg.instance, only)
	if err != nil {
		return fmt.Errorf("resolve the applied dead letters of %s[%d]: %w", topic, partition, err)
	}
	return nil
}

// resolve is the worker's resolveConfig.
func (c *workerConfig) resolve() resolveConfig {
	return resolveConfig{schema: c.schema, pipeline: c.pipeline, instance: c.instance, log: c.log}
}

// loadOpenDeadLetters sets w.openDead at the claim (worker goroutine, before the first
// batch). A worker without a database (unit tests) has none.
func (w *worker) loadOpenDeadLetters() {
	w.openDead = noOpenDeadLetter
	if w.cfg.db != nil {
		w.openDead = openDeadLetterLimit(w.ctx, w.cfg.db, w.cfg.resolve(), w.topic, w.partition, w.next.Load())
	}
}

// resolveApplied resolves, in tx, the open dead letters of the batch's records that it
// applied (all but those in dead), when the partition's open dead letters reach that far.
func (w *worker) resolveApplied(ctx context.Context, tx pgx.Tx, batch []Record, dead []Poisoned) error {
	first, last := batch[0].Offset, batch[len(batch)-1].Offset
	if w.openDead < first {
		return nil
	}
	again := make(map[int64]bool, len(dead))
	for _, d := range dead {
		again[d.Record.Offset] = true
	}
	applied := make([]int64, 0, len(batch)-len(dead))
	for i := range batch {
		if o := batch[i].Offset; !again[o] {
			applied = append(applied, o)
		}
	}
	if len(applied) == 0 {
		return nil
	}
	return resolveApplied(ctx, tx, w.cfg.resolve(), w.topic, w.partition, first, last, applied)
}

// committedTo notes a commit up to end: once past the highest open dead letter, no later
// batch of this worker needs to look (worker goroutine).
func (w *worker) committedTo(end int64) {
	if end > w.openDead {
		w.openDead = noOpenDeadLetter
	}
}

// resolve is the set's resolveConfig.
func (s *Sink) resolve() resolveConfig {
	return resolveConfig{schema: s.cfg.Schema, pipeline: s.cfg.Pipeline, instance: s.cfg.InstanceID, log: s.log}
}

// resolveApplied resolves, in tx, the open dead letters at the offsets that ranges move
// past, for the partitions whose open dead letters reach that far. A set's units do not
// dead-letter, so every offset moved past was applied.
func (w *ownership) resolveApplied(ctx context.Context, tx pgx.Tx, ranges []rebalance.Range) error {
	for _, r := range ranges {
		p := w.parts[partitionKey{r.Topic, r.Partition}]
		if p == nil || p.openDead < r.Start {
			continue
		}
		if err := resolveApplied(ctx, tx, w.s.resolve(), r.Topic, r.Partition, r.Start, r.End-1, nil); err != nil {
			return err
		}
	}
	return nil
}
