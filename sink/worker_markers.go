package sink

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/rebalance"
)

// Moving the stored position past trailing transaction markers, on the worker's side: the
// poll goroutine hands it the end of the partition it saw (poller.atEnd, skipTo); the worker
// goroutine moves the row there once it has committed what it was given (skipMarkers). Why
// that is exact: poller_ranges.go.

// skipTo asks the worker to move its stored position to end once it has committed what it
// was given (poll goroutine).
func (w *worker) skipTo(end int64) {
	w.markersEnd.Store(end)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// skipMarkers runs on the worker goroutine with nothing queued or in flight: it advances the
// row from the next offset to the end the poll goroutine saw, past transaction markers and
// aborted records only, with the same conditional update as a batch. A fence stops the
// partition; any other failure leaves the position where it was until the next end.
func (w *worker) skipMarkers() error {
	cfg := w.cfg
	end, start := w.markersEnd.Load(), w.next.Load()
	if end <= start {
		return nil
	}
	giveUp := func(err error) error {
		w.markersEnd.CompareAndSwap(end, 0)
		cfg.log.Warn("could not move the stored position past transaction markers; it stays", "topic", w.topic,
			"partition", w.partition, "next_offset", start, "end", end, "err", err)
		return nil
	}
	rng := rebalance.Range{Topic: w.topic, Partition: w.partition, Epoch: w.epoch, Start: start, End: end}
	tx, err := cfg.store.Begin(w.ctx, cfg.db, pgx.TxOptions{IsoLevel: cfg.isolationLevel}, nil, rng) // rolled back on error
	if err != nil {
		if errors.Is(err, ErrFenced) {
			cfg.m.fenced.add(1)
			return err
		}
		return giveUp(err)
	}
	pid := tx.Conn().PgConn().PID() // the session to end if this COMMIT's outcome is unknown
	if err := tx.Commit(w.ctx); err != nil {
		if !pgerr.IsConnectionError(err) || w.ctx.Err() != nil {
			return giveUp(err)
		}
		if err := w.settle(rng, pid, err); err != nil {
			if errors.Is(err, ErrFenced) {
				return err
			}
			return giveUp(err)
		}
	}
	w.next.Store(end)
	cfg.log.Debug("stored position moved past transaction markers", "topic", w.topic, "partition", w.partition, "from", start, "to", end)
	if cfg.kcommit != nil {
		cfg.kcommit.note(w.topic, w.partition, end)
	}
	return nil
}
