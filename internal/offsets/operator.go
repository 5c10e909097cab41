package offsets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/migrations"
)

// The operator's statements (package admin: `eosink offsets`, `eosink lag`, `eosink status`):
// they span the pipelines of one schema. Moving a position bumps the epoch, as a claim does,
// so that the current owner is fenced; the audit row of each move is written by the offsets
// table's trigger from what DeclareAudit declares.

// Operator runs the operator's statements on the tables of one schema. Safe for concurrent
// use.
type Operator struct {
	pool      *pgxpool.Pool
	schema    string
	table     string // sanitized schema.offsets
	instances string // sanitized schema.instances
}

// NewOperator returns an Operator for the tables in schema; pool runs the statements that
// take no transaction.
func NewOperator(pool *pgxpool.Pool, schema string) *Operator {
	return &Operator{pool: pool, schema: schema,
		table: pgx.Identifier{schema, "offsets"}.Sanitize(), instances: pgx.Identifier{schema, "instances"}.Sanitize()}
}

// aliveWithin is how recent an instance's heartbeat must be for it to count as alive: three
// of the sink's heartbeats.
const aliveWithin = "10 seconds"

// Row is one row of the offsets table as the operator reads it.
type Row struct {
	Pipeline   string
	Topic      string
	Partition  int32
	NextOffset int64
	Epoch      int64
	Owner      string
	UpdatedAt  time.Time
	// OwnerAlive says whether the owner's heartbeat in the instances table is recent (three
	// heartbeats) and it has not shut down.
	OwnerAlive bool
	Stopped    *Stopped // set while the partition is stopped
}

// Stopped is a recorded stop: the row's stopped_* columns.
type Stopped struct {
	Reason string
	Error  string
	At     time.Time // zero when not recorded
	By     string
}

// List returns the rows of pipeline (all pipelines when empty) in (pipeline, topic,
// partition) order, each with whether its owner is alive and its recorded stop.
func (o *Operator) List(ctx context.Context, pipeline string) ([]Row, error) {
	rows, err := o.pool.Query(ctx, `SELECT o.pipeline, o.topic, o.partition, o.next_offset, o.epoch, coalesce(o.owner, ''), o.updated_at,
			coalesce(i.heartbeat_at > now() - $2::interval AND NOT i.stopped, false),
			o.stopped_reason, coalesce(o.stopped_error, ''), o.stopped_at, coalesce(o.stopped_by, '')
		FROM `+o.table+` o LEFT JOIN `+o.instances+` i ON i.pipeline = o.pipeline AND i.instance = o.owner
		WHERE $1 = '' OR o.pipeline = $1 ORDER BY o.pipeline, o.topic, o.partition`, pipeline, aliveWithin)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var p Row
		var reason *string
		var st Stopped
		var at *time.Time
		err := r.Scan(&p.Pipeline, &p.Topic, &p.Partition, &p.NextOffset, &p.Epoch, &p.Owner, &p.UpdatedAt,
			&p.OwnerAlive, &reason, &st.Error, &at, &st.By)
		if reason != nil {
			st.Reason = *reason
			if at != nil {
				st.At = *at
			}
			p.Stopped = &st
		}
		return p, err
	})
}

// NextOffsets returns the stored next offset of pipeline's rows, of topic's only unless it
// is empty, of partition's only unless it is negative. Only Topic, Partition and NextOffset
// of each Row are set.
func (o *Operator) NextOffsets(ctx context.Context, pipeline, topic string, partition int32) ([]Row, error) {
	rows, err := o.pool.Query(ctx, `SELECT topic, partition, next_offset FROM `+o.table+
		` WHERE pipeline = $1 AND ($2 = '' OR topic = $2) AND ($3 < 0 OR partition = $3)`, pipeline, topic, partition)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		p := Row{Pipeline: pipeline}
		return p, r.Scan(&p.Topic, &p.Partition, &p.NextOffset)
	})
}

// Move is one operator's change of a partition's position.
type Move struct {
	Pipeline  string
	Topic     string
	Partition int32
	To        int64  // the new next offset
	TopicID   string // when not empty, stored as the topic's id (accepting a recreated topic)
}

// Lock locks the partition's row in tx (FOR UPDATE, waiting for a batch in flight at most
// tx's lock_timeout) and returns its next offset and owner. found is false when there is no
// row; err is then nil.
func (o *Operator) Lock(ctx context.Context, tx pgx.Tx, pipeline, topic string, partition int32) (next int64, owner string, found bool, err error) {
	err = tx.QueryRow(ctx, `SELECT next_offset, coalesce(owner, '') FROM `+o.table+`
				WHERE pipeline = $1 AND topic = $2 AND partition = $3 FOR UPDATE`, pipeline, topic, partition).Scan(&next, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	return next, owner, err == nil, err
}

// Create inserts the row of a partition that has none at m.To, owned by operator (ResetOwner
// of no instance). created is false when a row appeared meanwhile (a sink's first claim);
// it is then left as it is.
func (o *Operator) Create(ctx context.Context, tx pgx.Tx, m Move, operator string) (created bool, err error) {
	t, err := tx.Exec(ctx, `INSERT INTO `+o.table+` (pipeline, topic, partition, next_offset, owner, topic_id)
					VALUES ($1, $2, $3, $4, $5, NULLIF($6, '')) ON CONFLICT DO NOTHING`, m.Pipeline, m.Topic, m.Partition, m.To,
		ResetOwner(operator, ""), m.TopicID)
	if err != nil {
		return false, err
	}
	return t.RowsAffected() == 1, nil
}

// Set moves a locked row (Lock) to m.To and bumps its epoch, so that its owner is fenced,
// writes the owner ResetOwner(operator, owner) (owner: the row's owner as Lock read it),
// stores m.TopicID when set, and clears a recorded stop.
func (o *Operator) Set(ctx context.Context, tx pgx.Tx, m Move, operator, owner string) error {
	_, err := tx.Exec(ctx, `UPDATE `+o.table+` SET next_offset = $4, epoch = epoch + 1, owner = $5, updated_at = now(),
					topic_id = coalesce(NULLIF($6, ''), topic_id),
					stopped_reason = NULL, stopped_error = NULL, stopped_at = NULL, stopped_by = NULL
					WHERE pipeline = $1 AND topic = $2 AND partition = $3`,
		m.Pipeline, m.Topic, m.Partition, m.To, ResetOwner(operator, owner), m.TopicID)
	return err
}

// auditVersion is the framework migration whose trigger writes offsets_audit.
const auditVersion = 7

// DeclareAudit names, for the offsets table's audit trigger, the operator and the reason of
// the changes tx makes (transaction-local settings eosink.operator and eosink.reason). It
// fails when eosink's schema is older than auditVersion, whose trigger would not see them:
// the moves would then go unaudited.
func (o *Operator) DeclareAudit(ctx context.Context, tx pgx.Tx, operator, reason string) error {
	var version int64
	if err := tx.QueryRow(ctx, "SELECT version FROM "+pgx.Identifier{o.schema, migrations.Table}.Sanitize()+" LIMIT 1").Scan(&version); err != nil {
		return fmt.Errorf("read the schema version of %q: %w", o.schema, err)
	}
	if version < auditVersion {
		return fmt.Errorf("eosink schema %q is at version %d; moving positions needs version %d or later, whose trigger writes the audit: run `eosink migrate up`",
			o.schema, version, auditVersion)
	}
	_, err := tx.Exec(ctx, "SELECT set_config('eosink.operator', $1, true), set_config('eosink.reason', $2, true)", operator, reason)
	return err
}
