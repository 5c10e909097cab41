package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink"
)

// ReplayResult counts what Replay did.
type ReplayResult struct {
	Replayed    int     `json:"replayed"`             // applied, and their dead letters resolved as replayed
	FailedAgain int     `json:"failed_again"`         // still poison: the dead letter stays open, with the new error
	Gone        int     `json:"gone"`                 // resolved by someone else meanwhile
	FailedIDs   []int64 `json:"failed_ids,omitempty"` // the ids counted in FailedAgain
}

// ReplayOptions configure ReplayWith and ReplayHandler.
type ReplayOptions struct {
	// Action is who replays and why, for the audit. Defaults to the session's database role
	// and no reason.
	Action
	// Progress, when set, is called after each record.
	Progress func(done, total int, r ReplayResult)
}

// Replay is ReplayWith with progress as the options' Progress and no operator named.
func (c *Client) Replay(ctx context.Context, f DeadLetterFilter, plugin sink.Plugin, progress func(done, total int, r ReplayResult)) (ReplayResult, error) {
	return c.ReplayWith(ctx, f, plugin, ReplayOptions{Progress: progress})
}

// ReplayHandler replays the open dead letters of f through h, the sink.Config.Handler of a
// pipeline written in Go, as ReplayWith does through a plugin. It is the way to replay the
// dead letters of such a pipeline: `eosink dlq replay` builds the pipeline from its config
// file, and a Go handler has none.
func (c *Client) ReplayHandler(ctx context.Context, f DeadLetterFilter, h sink.Handler, opts ReplayOptions) (ReplayResult, error) {
	if h == nil {
		return ReplayResult{}, errors.New("replay needs a handler")
	}
	return c.ReplayWith(ctx, f, handlerPlugin(h), opts)
}

// handlerPlugin adapts a sink.Handler to a sink.Plugin for ReplayHandler.
type handlerPlugin sink.Handler

func (handlerPlugin) Open(context.Context, sink.Partition) error  { return nil }
func (handlerPlugin) Close(context.Context, sink.Partition) error { return nil }
func (h handlerPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	return h(ctx, tx, b)
}

// ReplayWith sends the open dead letters of f (whose Pipeline is required) back through
// plugin, one transaction each: the plugin's write, the dead letter's resolution as
// replayed and its audit row commit together, so a record is applied at most once however
// many operators replay at the same time (the second finds it resolved: Gone). A dead letter
// an operator edited (EditDeadLetter) is replayed with its edited key and value. A record
// that fails again keeps its dead letter open, with the new error and one more failure. A
// transient error ends the replay with an error.
func (c *Client) ReplayWith(ctx context.Context, f DeadLetterFilter, plugin sink.Plugin, opts ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if f.Pipeline == "" {
		return res, errors.New("replay needs the pipeline")
	}
	f.Resolved = false
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
		werr, err := c.replayOne(ctx, d.ID, plugin, opts.Action)
		switch {
		case err != nil:
			return res, err
		case errors.Is(werr, pgx.ErrNoRows):
			res.Gone++
		case werr != nil:
			res.FailedAgain++
			res.FailedIDs = append(res.FailedIDs, d.ID)
			if _, err := c.pool.Exec(ctx, "UPDATE "+c.table("dead_letters")+
				" SET error = $2, failures = failures + 1, last_failed_at = now() WHERE id = $1 AND resolved_at IS NULL", d.ID,
				pgerr.SafeText(sink.ErrorText(werr, c.redact))); err != nil {
				return res, fmt.Errorf("record the failure of dead letter %d: %w", d.ID, err)
			}
		default:
			res.Replayed++
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(list), res)
		}
	}
	return res, nil
}

// replayOne applies one dead letter. werr is the plugin's error (or pgx.ErrNoRows if the
// dead letter is resolved or gone); err is a failure of the replay itself.
func (c *Client) replayOne(ctx context.Context, id int64, plugin sink.Plugin, a Action) (werr, err error) {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// The row lock taken here makes a concurrent replay (or a sink's batch applying the same
	// coordinates) wait, then find it resolved.
	d, err := scanRecord(tx.QueryRow(ctx, "UPDATE "+c.table("dead_letters")+
		" SET resolved_at = now(), resolved_how = 'replayed', resolved_by = coalesce(nullif($2, ''), session_user)"+
		" WHERE id = $1 AND resolved_at IS NULL RETURNING "+dlRecordColumns, id, a.Operator))
	if errors.Is(err, pgx.ErrNoRows) {
		return pgx.ErrNoRows, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take dead letter %d: %w", id, err)
	}
	r := d.Record
	if d.Replayed != nil {
		r = d.Replayed
	}
	_, werr = engine.WriteBatch(ctx, tx, plugin, sink.Batch{Topic: d.Topic, Partition: d.Partition, Records: []sink.Record{*r}}, engine.WriteOptions{RedactErrorValues: c.redact})
	if werr != nil {
		if !sink.IsPoison(werr) { // transient, or the plugin cannot work: stop replaying
			return nil, fmt.Errorf("replay dead letter %d: %w", id, werr)
		}
		return werr, nil
	}
	if _, err := tx.Exec(ctx, `WITH d AS (SELECT id, pipeline, topic, partition, "offset" FROM `+c.table("dead_letters")+
		` WHERE id = $1) `+c.auditInsert("replay", 2), id, a.Operator, a.Reason); err != nil {
		return nil, fmt.Errorf("audit the replay of dead letter %d: %w", id, err)
	}
	return nil, tx.Commit(ctx)
}
