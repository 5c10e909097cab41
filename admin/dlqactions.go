package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Action says who acts on dead letters and why, for the dead_letters_audit table (which
// also records, set by the server, the session's database role and the time). An empty
// Operator is recorded as the session's database role.
type Action struct {
	Operator string
	Reason   string
}

// DeadLetterEdit is a correction of a dead letter's record: Key and Value replace the
// original ones when the dead letter is replayed. A nil Key or Value leaves that part as it
// is (an edit cannot make a value NULL); an empty, non-nil one is an edit to empty bytes.
// Operator and Reason are required.
type DeadLetterEdit struct {
	Key, Value []byte
	Action
}

// AuditEntry is one row of the dead_letters_audit table: an operator's edit, replay or
// discard of a dead letter. OldKey, NewKey, OldValue and NewValue are those an edit
// replaced and stored (nil for the part it left alone, and for a replay or a discard).
type AuditEntry struct {
	ID           int64     `json:"id"`
	DeadLetterID int64     `json:"dead_letter_id"`
	Action       string    `json:"action"` // edit, replay or discard
	Operator     string    `json:"operator"`
	Reason       string    `json:"reason"`
	DBUser       string    `json:"db_user"` // the session's login role, set by the server
	At           time.Time `json:"at"`      // set by the server
	OldKey       []byte    `json:"old_key,omitempty"`
	NewKey       []byte    `json:"new_key,omitempty"`
	OldValue     []byte    `json:"old_value,omitempty"`
	NewValue     []byte    `json:"new_value,omitempty"`
}

// auditInsert inserts one audit row per dead letter that the statement in front of it
// (a CTE named d returning id, pipeline, topic, partition and "offset") touched; $N..$N+1
// are the operator and the reason.
func (c *Client) auditInsert(action string, op int) string {
	return fmt.Sprintf(`INSERT INTO %s (dead_letter_id, pipeline, topic, partition, "offset", action, operator, reason)
SELECT d.id, d.pipeline, d.topic, d.partition, d."offset", '%s', coalesce(nullif($%d, ''), session_user), $%d FROM d`,
		c.table("dead_letters_audit"), action, op, op+1)
}

// EditDeadLetter stores e's key and value beside the original ones of the open dead letter
// id, which Replay then applies instead, and audits the edit (the key and value replaced and
// stored) in the same transaction. A later edit replaces an earlier one; the original stays.
// An unknown id is a *NoDeadLetterError, a resolved one a *ResolvedError.
func (c *Client) EditDeadLetter(ctx context.Context, id int64, e DeadLetterEdit) error {
	switch {
	case e.Operator == "":
		return errors.New("edit needs the operator's name")
	case e.Reason == "":
		return errors.New("edit needs a reason")
	case e.Key == nil && e.Value == nil:
		return errors.New("edit needs a new key or value")
	}
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var how, by *string
		var pipeline, topic string
		var partition int32
		var offset int64
		var oldKey, oldValue []byte
		err := tx.QueryRow(ctx, `SELECT resolved_how, resolved_by, pipeline, topic, partition, "offset",
coalesce(edited_key, key), coalesce(edited_value, value) FROM `+c.table("dead_letters")+` WHERE id = $1 FOR UPDATE`, id).
			Scan(&how, &by, &pipeline, &topic, &partition, &offset, &oldKey, &oldValue)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NoDeadLetterError{ID: id}
		}
		if err != nil {
			return fmt.Errorf("edit dead letter %d: %w", id, err)
		}
		if how != nil {
			re := &ResolvedError{ID: id, How: *how}
			if by != nil {
				re.By = *by
			}
			return re
		}
		if e.Key == nil {
			oldKey = nil
		}
		if e.Value == nil {
			oldValue = nil
		}
		if _, err := tx.Exec(ctx, `UPDATE `+c.table("dead_letters")+` SET edited_key = coalesce($2, edited_key),
edited_value = coalesce($3, edited_value), edited_by = $4, edited_at = now() WHERE id = $1`, id, e.Key, e.Value, e.Operator); err != nil {
			return fmt.Errorf("edit dead letter %d: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+c.table("dead_letters_audit")+` (dead_letter_id, pipeline, topic, partition, "offset",
action, operator, reason, old_key, new_key, old_value, new_value) VALUES ($1, $2, $3, $4, $5, 'edit', $6, $7, $8, $9, $10, $11)`,
			id, pipeline, topic, partition, offset, e.Operator, e.Reason, oldKey, e.Key, oldValue, e.Value); err != nil {
			return fmt.Errorf("audit the edit of dead letter %d: %w", id, err)
		}
		return nil
	})
}

// DiscardDeadLetters resolves the open dead letters of f (whose Pipeline is required) as
// discarded, auditing each with a's operator and reason in the same statement, and returns
// how many. The rows stay (DeadLetters with Resolved lists them): the same record failing
// again later reopens its row.
func (c *Client) DiscardDeadLetters(ctx context.Context, f DeadLetterFilter, a Action) (int64, error) {
	if f.Pipeline == "" {
		return 0, errors.New("discard needs the pipeline")
	}
	f.Resolved = false
	where, args := f.where()
	op := len(args) + 1 // the operator's and the reason's placeholders follow the filter's
	q := `WITH d AS (UPDATE ` + c.table("dead_letters") + ` SET resolved_at = now(), resolved_how = 'discarded',
resolved_by = coalesce(nullif($` + strconv.Itoa(op) + `, ''), session_user) ` + where + ` RETURNING id, pipeline, topic, partition, "offset")
` + c.auditInsert("discard", op)
	tag, err := c.pool.Exec(ctx, q, append(args, a.Operator, a.Reason)...)
	if err != nil {
		return 0, fmt.Errorf("discard dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeadLetterAudit returns the audit of dead letter id (edits, replays, discards), oldest
// first.
func (c *Client) DeadLetterAudit(ctx context.Context, id int64) ([]AuditEntry, error) {
	rows, err := c.pool.Query(ctx, `SELECT id, dead_letter_id, action, operator, reason, db_user, at, old_key, new_key, old_value, new_value
FROM `+c.table("dead_letters_audit")+` WHERE dead_letter_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read the audit of dead letter %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var a AuditEntry
		err := row.Scan(&a.ID, &a.DeadLetterID, &a.Action, &a.Operator, &a.Reason, &a.DBUser, &a.At, &a.OldKey, &a.NewKey, &a.OldValue, &a.NewValue)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the audit of dead letter %d: %w", id, err)
	}
	return out, nil
}
