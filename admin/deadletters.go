package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eosink/eosink/sink"
)

// A dead letter's lifecycle (migration 9). The sink writes one row per record coordinates
// (pipeline, topic, partition, offset); the row is open until it is resolved:
//
//   - applied: a later batch of the sink applied the record at those coordinates (after an
//     operator moved the offset back with Reset), in that batch's transaction;
//   - replayed: Replay applied it (its edited key and value, when EditDeadLetter stored any);
//   - discarded: DiscardDeadLetters gave it up.
//
// A record that fails again at the same coordinates reopens its row, one more failure,
// whatever resolved it. Rows are never deleted, so the same record keeps its id. Every edit,
// replay and discard is a row of the dead_letters_audit table (DeadLetterAudit).

// Dead-letter states, DeadLetter.State.
const (
	StateOpen      = "open"
	StateApplied   = "applied"
	StateReplayed  = "replayed"
	StateDiscarded = "discarded"
)

// ErrNoDeadLetter matches the error of an operation on a dead letter id that does not
// exist (or that the session's role may not see).
var ErrNoDeadLetter = errors.New("admin: no such dead letter")

// ErrDeadLetterResolved matches the error of an edit of a dead letter that is resolved
// already (a *ResolvedError).
var ErrDeadLetterResolved = errors.New("admin: the dead letter is resolved")

// NoDeadLetterError names the missing dead letter. It matches ErrNoDeadLetter and ErrNotFound.
type NoDeadLetterError struct{ ID int64 }

func (e *NoDeadLetterError) Error() string { return fmt.Sprintf("no dead letter with id %d", e.ID) }
func (e *NoDeadLetterError) Is(target error) bool {
	return target == ErrNoDeadLetter || target == ErrNotFound
}

// ResolvedError: the dead letter ID was resolved (How: applied, replayed or discarded) by
// By. It matches ErrDeadLetterResolved.
type ResolvedError struct {
	ID      int64
	How, By string
}

func (e *ResolvedError) Error() string {
	return fmt.Sprintf("dead letter %d is resolved (%s by %s): nothing to change", e.ID, e.How, e.By)
}
func (e *ResolvedError) Is(target error) bool { return target == ErrDeadLetterResolved }

// DeadLetter is one row of the dead-letter table: a record the sink refused as poison under
// the sink.DeadLetter policy. The JSON names are those of `eosink dlq list -json`.
type DeadLetter struct {
	ID            int64     `json:"id"`
	Pipeline      string    `json:"pipeline"`
	Topic         string    `json:"topic"`
	Partition     int32     `json:"partition"`
	Offset        int64     `json:"offset"`
	Error         string    `json:"error"`    // the last failure's error
	Failures      int       `json:"failures"` // how often it failed: once when dead-lettered, then per failed replay or redelivery
	FirstFailedAt time.Time `json:"first_failed_at"`
	LastFailedAt  time.Time `json:"last_failed_at"`
	KeyBytes      int       `json:"key_bytes"`   // of the original key
	ValueBytes    int       `json:"value_bytes"` // of the original value
	// State is StateOpen, or how it was resolved: StateApplied, StateReplayed or
	// StateDiscarded, at ResolvedAt by ResolvedBy (the operator, or the sink's instance id
	// for applied).
	State      string     `json:"state"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy string     `json:"resolved_by,omitempty"`
	// Edited says that an operator stored a corrected key or value (EditDeadLetter), the
	// last time at EditedAt, as EditedBy.
	Edited   bool       `json:"edited"`
	EditedBy string     `json:"edited_by,omitempty"`
	EditedAt *time.Time `json:"edited_at,omitempty"`
	// Record is the record as it was in Kafka (key, value, headers, timestamp), filled by
	// ShowDeadLetter only. Header keys are the record's bytes exactly (stored as bytea), which
	// may be invalid UTF-8 or hold NULs.
	Record *sink.Record `json:"-"`
	// Replayed is the record as Replay sends it: Record with the edited key and value in
	// place of the originals. Filled by ShowDeadLetter when Edited, else nil.
	Replayed *sink.Record `json:"-"`
}

// DeadLetterFilter selects dead letters. Zero fields select every open one.
type DeadLetterFilter struct {
	Pipeline  string
	Topic     string
	Partition *int32  // nil: every partition
	IDs       []int64 // empty: every id
	Limit     int     // 0: no limit
	// Resolved selects the resolved dead letters too (DeadLetters only: Replay and
	// DiscardDeadLetters act on open ones).
	Resolved bool
	AfterID  int64 // > 0: only ids above it (paging: the last id of the previous page)
}

func (f DeadLetterFilter) where() (string, []any) {
	sql := "WHERE ($1 = '' OR pipeline = $1) AND ($2 = '' OR topic = $2) AND ($3::int IS NULL OR partition = $3) AND (cardinality($4::bigint[]) = 0 OR id = ANY($4)) AND ($5 OR resolved_at IS NULL) AND ($6::bigint <= 0 OR id > $6)"
	ids := f.IDs
	if ids == nil {
		ids = []int64{}
	}
	return sql, []any{f.Pipeline, f.Topic, f.Partition, ids, f.Resolved, f.AfterID}
}

const dlColumns = `id, pipeline, topic, partition, "offset", error, failures, first_failed_at, last_failed_at, coalesce(length(key), 0), coalesce(length(value), 0),
coalesce(resolved_how, 'open'), resolved_at, coalesce(resolved_by, ''), edited_at IS NOT NULL, coalesce(edited_by, ''), edited_at`

// dest is where a row of dlColumns goes.
func (d *DeadLetter) dest() []any {
	return []any{&d.ID, &d.Pipeline, &d.Topic, &d.Partition, &d.Offset, &d.Error, &d.Failures, &d.FirstFailedAt, &d.LastFailedAt,
		&d.KeyBytes, &d.ValueBytes, &d.State, &d.ResolvedAt, &d.ResolvedBy, &d.Edited, &d.EditedBy, &d.EditedAt}
}

// DeadLetters lists dead letters in id order, without their records: the open ones, and
// with f.Resolved the resolved ones too.
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	where, args := f.where()
	q := "SELECT " + dlColumns + " FROM " + c.table("dead_letters") + " " + where + " ORDER BY id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	var out []DeadLetter
	var d DeadLetter
	_, err = pgx.ForEachRow(rows, d.dest(), func() error {
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return out, nil
}

// CountDeadLetters returns the number of open dead letters per pipeline.
func (c *Client) CountDeadLetters(ctx context.Context) (map[string]int64, error) {
	rows, err := c.pool.Query(ctx, "SELECT pipeline, count(*) FROM "+c.table("dead_letters")+" WHERE resolved_at IS NULL GROUP BY pipeline")
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	out := map[string]int64{}
	var p string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil })
	return out, err
}

// scanRecord reads a dead letter with its record (dlRecordColumns).
func scanRecord(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	var r sink.Record
	var keys, vals [][]byte
	var ts pgtype.Timestamptz
	var editedKey, editedValue []byte
	err := row.Scan(append(d.dest(), &r.Key, &r.Value, &keys, &vals, &ts, &editedKey, &editedValue)...)
	if err != nil {
		return d, err
	}
	r.Topic, r.Partition, r.Offset = d.Topic, d.Partition, d.Offset
	if ts.Valid {
		r.Timestamp = ts.Time
	}
	for i := range keys {
		r.Headers = append(r.Headers, sink.Header{Key: string(keys[i]), Value: vals[i]})
	}
	d.Record = &r
	if d.Edited {
		e := r
		if editedKey != nil {
			e.Key = editedKey
		}
		if editedValue != nil {
			e.Value = editedValue
		}
		d.Replayed = &e
	}
	return d, nil
}

const dlRecordColumns = dlColumns + `, key, value, header_keys, header_values, "timestamp", edited_key, edited_value`

// ShowDeadLetter returns one dead letter, open or resolved, with its record (and the edited
// one, when it was edited). An unknown id is a *NoDeadLetterError.
func (c *Client) ShowDeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	d, err := scanRecord(c.pool.QueryRow(ctx, "SELECT "+dlRecordColumns+" FROM "+c.table("dead_letters")+" WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, &NoDeadLetterError{ID: id}
	}
	return d, err
}
