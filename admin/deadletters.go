package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink"
)

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
	KeyBytes      int       `json:"key_bytes"`
	ValueBytes    int       `json:"value_bytes"`
	// Record is the record itself (key, value, headers, timestamp), filled by ShowDeadLetter
	// only. Header keys are the record's bytes exactly (stored as bytea), which may be
	// invalid UTF-8 or hold NULs.
	Record *sink.Record `json:"-"`
}

// DeadLetterFilter selects dead letters. Zero fields select everything.
type DeadLetterFilter struct {
	Pipeline  string
	Topic     string
	Partition *int32  // nil: every partition
	IDs       []int64 // empty: every id
	Limit     int     // 0: no limit
	AfterID   int64   // > 0: only ids above it (paging: the last id of the previous page)
}

func (f DeadLetterFilter) where() (string, []any) {
	sql := "WHERE ($1 = '' OR pipeline = $1) AND ($2 = '' OR topic = $2) AND ($3::int IS NULL OR partition = $3) AND (cardinality($4::bigint[]) = 0 OR id = ANY($4)) AND ($5::bigint <= 0 OR id > $5)"
	ids := f.IDs
	if ids == nil {
		ids = []int64{}
	}
	return sql, []any{f.Pipeline, f.Topic, f.Partition, ids, f.AfterID}
}

const dlColumns = `id, pipeline, topic, partition, "offset", error, failures, first_failed_at, last_failed_at, coalesce(length(key), 0), coalesce(length(value), 0)`

// DeadLetters lists dead letters in id order, without their records.
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
	_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.Pipeline, &d.Topic, &d.Partition, &d.Offset, &d.Error, &d.Failures,
		&d.FirstFailedAt, &d.LastFailedAt, &d.KeyBytes, &d.ValueBytes}, func() error {
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return out, nil
}

// CountDeadLetters returns the number of dead letters per pipeline.
func (c *Client) CountDeadLetters(ctx context.Context) (map[string]int64, error) {
	rows, err := c.pool.Query(ctx, "SELECT pipeline, count(*) FROM "+c.table("dead_letters")+" GROUP BY pipeline")
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	out := map[string]int64{}
	var p string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil })
	return out, err
}

// scanRecord reads a dead letter with its record.
func scanRecord(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	var r sink.Record
	var keys, vals [][]byte
	var ts pgtype.Timestamptz
	err := row.Scan(&d.ID, &d.Pipeline, &d.Topic, &d.Partition, &d.Offset, &d.Error, &d.Failures, &d.FirstFailedAt,
		&d.LastFailedAt, &d.KeyBytes, &d.ValueBytes, &r.Key, &r.Value, &keys, &vals, &ts)
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
	return d, nil
}

const dlRecordColumns = dlColumns + `, key, value, header_keys, header_values, "timestamp"`

// ShowDeadLetter returns one dead letter with its record.
func (c *Client) ShowDeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	d, err := scanRecord(c.pool.QueryRow(ctx, "SELECT "+dlRecordColumns+" FROM "+c.table("dead_letters")+" WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, &notFound{fmt.Sprintf("no dead letter with id %d", id)}
	}
	return d, err
}

// ReplayResult counts what Replay did.
type ReplayResult struct {
	Replayed    int     `json:"replayed"`             // applied, and their dead letters removed
	FailedAgain int     `json:"failed_again"`         // still poison: the dead letter stays, with the new error
	Gone        int     `json:"gone"`                 // removed by someone else meanwhile
	FailedIDs   []int64 `json:"failed_ids,omitempty"` // the ids counted in FailedAgain
}

// Replay sends dead letters of f (whose Pipeline is required) back through plugin, one
// transaction each: the dead letter's removal and the plugin's write commit together, so a
// record is applied at most once however many operators replay at the same time. A record
// that fails again keeps its dead letter, with the new error and one more failure. A
// transient error ends the replay with an error. progress, when set, is called after each
// record.
func (c *Client) Replay(ctx context.Context, f DeadLetterFilter, plugin sink.Plugin, progress func(done, total int, r ReplayResult)) (ReplayResult, error) {
	var res ReplayResult
	if f.Pipeline == "" {
		return res, errors.New("replay needs the pipeline")
	}
	list, err := c.DeadLetters(ctx, f)
	if err != nil {
		return res, err
	}
	opened := map[sink.Partition]bool{}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for p := range opened {
			_ = plugin.Close(cctx, p)
		}
	}()
	if p, ok := plugin.(sink.Preparer); ok {
		if err := p.Prepare(ctx, c.pool); err != nil {
			return res, fmt.Errorf("plugin: %w", err)
		}
	}
	for i, d := range list {
		k := sink.Partition{Topic: d.Topic, Partition: d.Partition}
		if !opened[k] {
			if err := plugin.Open(ctx, k); err != nil {
				return res, fmt.Errorf("plugin open %s[%d]: %w", d.Topic, d.Partition, err)
			}
			opened[k] = true
		}
		werr, err := c.replayOne(ctx, d.ID, plugin)
		switch {
		case err != nil:
			return res, err
		case errors.Is(werr, pgx.ErrNoRows):
			res.Gone++
		case werr != nil:
			res.FailedAgain++
			res.FailedIDs = append(res.FailedIDs, d.ID)
			if _, err := c.pool.Exec(ctx, "UPDATE "+c.table("dead_letters")+
				" SET error = $2, failures = failures + 1, last_failed_at = now() WHERE id = $1", d.ID, pgerr.SafeText(sink.ErrorText(werr, c.redact))); err != nil {
				return res, fmt.Errorf("record the failure of dead letter %d: %w", d.ID, err)
			}
		default:
			res.Replayed++
		}
		if progress != nil {
			progress(i+1, len(list), res)
		}
	}
	return res, nil
}

// replayOne applies one dead letter. werr is the plugin's error (or pgx.ErrNoRows if the
// dead letter is gone); err is a failure of the replay itself.
func (c *Client) replayOne(ctx context.Context, id int64, plugin sink.Plugin) (werr, err error) {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	d, err := scanRecord(tx.QueryRow(ctx, "DELETE FROM "+c.table("dead_letters")+" WHERE id = $1 RETURNING "+dlRecordColumns, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return pgx.ErrNoRows, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take dead letter %d: %w", id, err)
	}
	_, werr = engine.WriteBatch(ctx, tx, plugin, sink.Batch{Topic: d.Topic, Partition: d.Partition, Records: []sink.Record{*d.Record}}, engine.WriteOptions{RedactErrorValues: c.redact})
	if werr != nil {
		if !sink.IsPoison(werr) { // transient, or the plugin cannot work: stop replaying
			return nil, fmt.Errorf("replay dead letter %d: %w", id, werr)
		}
		return werr, nil
	}
	return nil, tx.Commit(ctx)
}

// DiscardDeadLetters deletes the dead letters of f (whose Pipeline is required) and returns
// how many.
func (c *Client) DiscardDeadLetters(ctx context.Context, f DeadLetterFilter) (int64, error) {
	if f.Pipeline == "" {
		return 0, errors.New("discard needs the pipeline")
	}
	where, args := f.where()
	tag, err := c.pool.Exec(ctx, "DELETE FROM "+c.table("dead_letters")+" "+where, args...)
	if err != nil {
		return 0, fmt.Errorf("discard dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}
