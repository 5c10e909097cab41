package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Generations (<schema>.outbox_generations, outbox migration 3) tell the relay whether the
// database it reads is still the history its Kafka position came from. The relay reads in
// (xid, id) order, so a database whose transaction ids went back (restored from a backup, or
// a standby promoted while it lagged) would give new rows ids at or below the position: they
// would never be published, and cleanup would delete them. The system identifier and the
// timeline do not show it (a base backup keeps the identifier; only archive recovery changes
// the timeline), and a high-water mark kept in the database is rewound with it.
//
// So before a Kafka transaction whose last row's xid is at or above the current generation's
// horizon, the relay commits a new generation row: a random name, and as horizon the xmin of
// the inserting statement's snapshot. Every transaction with a smaller xid ended before the
// row committed, so a database that holds the row holds every commit published under it,
// and its next transaction ids are above the position. The Kafka transaction then stores
// the generation with the position. On every read (each poll, so also after any reconnect)
// the relay checks, on the connection it reads from, that the database still holds the
// generation of its position; cleanup and the outbox_relays status row check it in the same
// statement. A database without it stops the shard with ErrDatabaseRewound: nothing is
// skipped or deleted. The remedy is Resync (`eosink relay -resync`, docs/outbox.md).

// generation is the outbox_generations row a shard's position carries.
type generation struct {
	name    string // "" for none (a position an older relay wrote, or none yet)
	horizon uint64 // every xid below it had ended when the row committed
}

// covers reports whether a Kafka transaction whose last row is at p may carry g.
func (g generation) covers(p position) bool { return g.name != "" && p.Xid < g.horizon }

func newGenerationName() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// rewound is the error for a database that does not hold name, the generation of pos.
func (r *Relay) rewound(shard int, pos position, name string) error {
	return fmt.Errorf("%w: shard %d's Kafka position %s carries generation %s, which %s does not hold (restored from a backup, "+
		"or a standby promoted while it lagged); nothing was skipped or deleted; remedy: with this relay stopped, run "+
		"`eosink relay -config FILE -resync` (docs/outbox.md, \"After a restore or a failover\")",
		ErrDatabaseRewound, shard, pos, name, r.gens)
}

// holdsGeneration returns the generation name of pos, or ErrDatabaseRewound when the database
// does not hold it. A name of "" (a position written before generations) returns none.
func (r *Relay) holdsGeneration(ctx context.Context, shard int, pos position, name string) (generation, error) {
	if name == "" {
		return generation{}, nil
	}
	var h string
	err := r.pool.QueryRow(ctx, `SELECT horizon::text FROM `+r.gens+` WHERE relay = $1 AND shard = $2 AND generation = $3`,
		r.c.Name, shard, name).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		return generation{}, r.rewound(shard, pos, name)
	}
	if err != nil {
		return generation{}, fmt.Errorf("read %s: %w", r.gens, err)
	}
	x, err := strconv.ParseUint(h, 10, 64)
	return generation{name: name, horizon: x}, err
}

// read returns up to BatchSize rows of shard after pos, in (xid, id) order, from
// transactions that ended before every transaction still in flight, and the generation the
// Kafka transaction of those rows carries. On one connection, in one round trip, it checks
// that the database holds gen (ErrDatabaseRewound otherwise) and fetches; when the rows
// reach past gen's horizon it commits a new generation on that same connection, so that the
// generation is in the database the rows were read from.
func (r *Relay) read(ctx context.Context, shard int, pos position, gen generation) ([]row, generation, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, gen, err
	}
	defer conn.Release()
	var b pgx.Batch
	b.Queue(`SELECT $3 = '' OR EXISTS (SELECT 1 FROM `+r.gens+` WHERE relay = $1 AND shard = $2 AND generation = $3)`, r.c.Name, shard, gen.name)
	// The xid goes out as text (pgx has no xid8 type) under another name: ORDER BY xid would
	// sort by an output column called xid, as text, where 1000 comes before 999.
	b.Queue(`SELECT o.xid::text AS xid_text, o.id, o.topic, o.key, o.value, o.header_keys, o.header_values, o.event_id, o.created_at
FROM `+r.table+` o
WHERE o.shard = $1 AND (o.xid, o.id) > ($2::text::xid8, $3) AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY o.xid, o.id LIMIT $4`, shard, pos.xidText(), pos.ID, r.c.BatchSize)
	br := conn.SendBatch(ctx, &b)
	var held bool
	if err := br.QueryRow().Scan(&held); err != nil {
		br.Close()
		return nil, gen, err
	}
	if !held {
		br.Close()
		return nil, gen, r.rewound(shard, pos, gen.name)
	}
	rows, err := br.Query()
	var out []row
	if err == nil {
		out, err = scanRows(rows)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || len(out) == 0 || gen.covers(out[len(out)-1].pos) {
		return out, gen, err
	}
	next, err := r.writeGeneration(ctx, conn, shard, out[len(out)-1].pos)
	if err != nil {
		return nil, gen, err
	}
	return out, next, nil
}

// writeGeneration commits a new generation for a Kafka transaction ending at last, on conn.
func (r *Relay) writeGeneration(ctx context.Context, conn *pgxpool.Conn, shard int, last position) (generation, error) {
	name := newGenerationName()
	var h string
	err := conn.QueryRow(ctx, `INSERT INTO `+r.gens+` (relay, shard, generation, horizon, last_xid, last_id, owner)
VALUES ($1, $2, $3, pg_snapshot_xmin(pg_current_snapshot()), $4::text::xid8, $5, $6) RETURNING horizon::text`,
		r.c.Name, shard, name, last.xidText(), last.ID, r.c.InstanceID).Scan(&h)
	if err != nil {
		return generation{}, fmt.Errorf("write a generation into %s: %w", r.gens, err)
	}
	x, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return generation{}, err
	}
	if x <= last.Xid { // the rows were read from a snapshot whose xmin was above last.Xid
		return generation{}, fmt.Errorf("%w: the new generation's horizon %d is not above the rows just read %s: the database's "+
			"transaction ids went back between two statements of one connection", ErrDatabaseRewound, x, last)
	}
	r.m.generations.Inc()
	return generation{name: name, horizon: x}, nil
}

func scanRows(rows pgx.Rows) ([]row, error) {
	var out []row
	var xid string
	var w row
	_, err := pgx.ForEachRow(rows, []any{&xid, &w.pos.ID, &w.topic, &w.key, &w.value, &w.hkeys, &w.hvalues, &w.eventID, &w.created}, func() error {
		x, err := strconv.ParseUint(xid, 10, 64)
		if err != nil {
			return err
		}
		w.pos.Xid = x
		out = append(out, w)
		w = row{}
		return nil
	})
	return out, err
}

// cleanGenerations deletes shard's generations older than name, the generation of the
// position committed to Kafka; nothing when the database does not hold name.
func (r *Relay) cleanGenerations(ctx context.Context, shard int, name string) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := r.pool.Exec(c, `DELETE FROM `+r.gens+` WHERE relay = $1 AND shard = $2
  AND seq < (SELECT seq FROM `+r.gens+` WHERE relay = $1 AND shard = $2 AND generation = $3)`, r.c.Name, shard, name)
	if err != nil && ctx.Err() == nil {
		r.c.Logger.Warn("deleting old outbox generations failed; trying again later", "shard", shard, "err", err)
	}
}

// stopReason names why a shard stopped, for the log line and eosink_outbox_shard_stopped.
func stopReason(err error) string {
	switch {
	case errors.Is(err, ErrDatabaseRewound):
		return "database_rewound"
	case errors.Is(err, ErrFenced):
		return "fenced"
	case errors.Is(err, ErrPositionLost):
		return "position_lost"
	case errors.Is(err, ErrPositionAhead):
		return "position_ahead"
	}
	return "error"
}
