package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkRecorded compares the position read from Kafka with the last one outbox_relays
// recorded for the shard. That row is written only after a Kafka commit, so a Kafka position
// behind it means the position topic lost records (deleted or recreated): publishing from
// there would send events again, and the relay refuses (ErrPositionLost).
//
// It also refuses a position whose xid the database has not reached (ErrPositionAhead): the
// database was restored from a backup or moved to another cluster, its transaction ids went
// back, and new rows would sort before the position and never be published.
func (r *Relay) checkRecorded(ctx context.Context, shard int, pos position, found bool) error {
	var next string
	if err := r.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&next); err != nil {
		return fmt.Errorf("read the next transaction id: %w", err)
	}
	if n, err := strconv.ParseUint(next, 10, 64); err != nil {
		return err
	} else if found && pos.Xid >= n {
		return fmt.Errorf("%w: Kafka %s, the database's next xid is %d: see docs/outbox.md", ErrPositionAhead, pos, n)
	}
	var xid string
	var id int64
	err := r.pool.QueryRow(ctx, `SELECT last_xid::text, last_id FROM `+r.relays+` WHERE relay = $1 AND shard = $2`, r.c.Name, shard).Scan(&xid, &id)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return fmt.Errorf("read %s: %w", r.relays, err)
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		return err
	}
	rec := position{Xid: x, ID: id}
	if pos.less(rec) {
		return fmt.Errorf("%w: Kafka %s (found: %t), database %s: restore the position topic %s, or delete the shard's row in %s after checking what was published",
			ErrPositionLost, pos, found, rec, r.c.PositionTopic, r.relays)
	}
	return nil
}

// statsLoop measures each owned shard's depth and ages every StatsInterval, records the
// positions in outbox_relays, and warns about rows the xmin horizon holds back too long.
func (r *Relay) statsLoop(ctx context.Context) {
	t := time.NewTicker(r.c.StatsInterval)
	defer t.Stop()
	var lastWarn time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.writeStatus(ctx)
		held := 0.0
		for _, s := range r.c.Own {
			r.mu.Lock()
			st := *r.shards[s]
			r.mu.Unlock()
			if !st.ready {
				continue
			}
			var depth, blocked int64
			var oldest, wait float64
			err := r.pool.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8,
  count(*) FILTER (WHERE xid >= pg_snapshot_xmin(pg_current_snapshot())),
  coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE xid >= pg_snapshot_xmin(pg_current_snapshot()))), 0)::float8
FROM `+r.table+` WHERE shard = $1 AND (xid, id) > ($2::text::xid8, $3)`, s, st.pos.xidText(), st.pos.ID).Scan(&depth, &oldest, &blocked, &wait)
			if err != nil {
				if ctx.Err() == nil {
					r.c.Logger.Warn("outbox stats failed", "shard", s, "err", err)
				}
				continue
			}
			label := strconv.Itoa(s)
			r.m.depth.WithLabelValues(label).Set(float64(depth))
			r.m.oldest.WithLabelValues(label).Set(oldest)
			r.m.horizon.WithLabelValues(label).Set(wait)
			if blocked > 0 {
				held = max(held, wait)
			}
		}
		if held > r.c.HorizonWarn.Seconds() && time.Since(lastWarn) > r.c.HorizonWarn {
			lastWarn = time.Now()
			var pid int32
			var app, state string
			var age float64
			err := r.pool.QueryRow(ctx, `SELECT pid, coalesce(application_name, ''), coalesce(state, ''),
  coalesce(extract(epoch FROM now() - xact_start), 0)::float8 FROM pg_stat_activity
WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&pid, &app, &state, &age)
			if err != nil {
				r.c.Logger.Warn("committed outbox rows are held back by a transaction still in flight (none found now: a prepared transaction?)",
					"waiting_seconds", held)
			} else {
				r.c.Logger.Warn("committed outbox rows are held back by a transaction still in flight; they are not skipped",
					"waiting_seconds", held, "oldest_xact_pid", pid, "application_name", app, "state", state, "xact_seconds", age)
			}
		}
	}
}

// writeStatus records each shard's committed position in outbox_relays, never moving a
// row backwards (a fenced relay may write late), and only into a database that holds the
// position's generation (not into a rewound one).
func (r *Relay) writeStatus(ctx context.Context) {
	for _, s := range r.c.Own {
		r.mu.Lock()
		st := r.shards[s]
		pos, gen, ready, published, written := st.pos, st.gen, st.ready, st.published, st.written
		r.mu.Unlock()
		if !ready || (!written.less(pos) && pos != (position{})) {
			continue
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := r.pool.Exec(c, `INSERT INTO `+r.relays+` AS r (relay, shard, last_xid, last_id, published, owner, updated_at)
SELECT $1, $2, $3::text::xid8, $4, $5, $6, now()
WHERE $7 = '' OR EXISTS (SELECT 1 FROM `+r.gens+` WHERE relay = $1 AND shard = $2 AND generation = $7)
ON CONFLICT (relay, shard) DO UPDATE SET last_xid = EXCLUDED.last_xid, last_id = EXCLUDED.last_id, published = EXCLUDED.published,
  owner = EXCLUDED.owner, updated_at = now()
WHERE (r.last_xid, r.last_id) <= (EXCLUDED.last_xid, EXCLUDED.last_id)`, r.c.Name, s, pos.xidText(), pos.ID, published, r.c.InstanceID, gen)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.c.Logger.Warn("recording the relay position in the database failed", "shard", s, "err", err)
			}
			continue
		}
		r.mu.Lock()
		st.written = pos
		r.mu.Unlock()
	}
}

// cleanupLoop deletes published rows older than Retention every CleanupInterval, up to the
// position each shard committed to Kafka, CleanupBatch rows per statement. Each statement
// deletes only when the database holds the position's generation: a rewound database's rows
// at or below the position were never published, and are kept. A position without a
// generation (written by an older relay) deletes nothing until the shard's next transaction.
func (r *Relay) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(r.c.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range r.c.Own {
			r.mu.Lock()
			pos, gen, ready := r.shards[s].pos, r.shards[s].gen, r.shards[s].ready
			r.mu.Unlock()
			if !ready || pos == (position{}) || gen == "" {
				continue
			}
			r.cleanGenerations(ctx, s, gen)
			for ctx.Err() == nil {
				tag, err := r.pool.Exec(ctx, `DELETE FROM `+r.table+` WHERE id = ANY (ARRAY(SELECT id FROM `+r.table+`
WHERE shard = $1 AND (xid, id) <= ($2::text::xid8, $3) AND created_at < now() - $4 * interval '1 second'
  AND EXISTS (SELECT 1 FROM `+r.gens+` WHERE relay = $6 AND shard = $1 AND generation = $7) LIMIT $5))`,
					s, pos.xidText(), pos.ID, r.c.Retention.Seconds(), r.c.CleanupBatch, r.c.Name, gen)
				if err != nil {
					if ctx.Err() == nil {
						r.c.Logger.Warn("outbox cleanup failed; trying again later", "shard", s, "err", err)
					}
					break
				}
				r.m.cleaned.Add(float64(tag.RowsAffected()))
				if tag.RowsAffected() < int64(r.c.CleanupBatch) {
					break
				}
			}
		}
	}
}
