package offsets

import (
	"context"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuditEntry is one row of the offsets_audit table: a change of a stored position, written
// by the offsets table's trigger (migration 7) or, for change "manual", inserted by hand.
// The JSON names are those of the console's GET /api/v1/audit.
type AuditEntry struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Operator  string    `json:"operator"` // as the writer declared it (eosink.operator); empty for a claim
	Reason    string    `json:"reason"`
	Change    string    `json:"change"` // insert, update, delete, manual; empty for rows older than migration 7
	Pipeline  string    `json:"pipeline"`
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	From      *int64    `json:"from_offset"` // nil: the row did not exist
	To        *int64    `json:"to_offset"`   // nil: the row was deleted
	FromEpoch *int64    `json:"from_epoch"`
	ToEpoch   *int64    `json:"to_epoch"`
	Owner     string    `json:"owner"`
	// DBUser and ClientAddr are what the server recorded of the session: its login role
	// and client address (empty over a Unix socket, and for rows older than migration 6).
	DBUser     string `json:"db_user"`
	ClientAddr string `json:"client_addr"`
}

// AuditFilter selects audit rows. Zero fields select everything.
type AuditFilter struct {
	Pipeline string
	Topic    string
	Operator string
	BeforeID int64 // > 0: only rows with a smaller id (paging back from the newest)
	Limit    int   // > 0: at most this many
}

// Audit returns the audit rows of f, newest first.
func (o *Operator) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := `SELECT id, at, operator, reason, coalesce(change, ''), pipeline, topic, partition, from_offset, to_offset,
			from_epoch, to_epoch, coalesce(owner, ''), coalesce(db_user, ''), client_addr
		FROM ` + pgx.Identifier{o.schema, "offsets_audit"}.Sanitize() + `
		WHERE ($1 = '' OR pipeline = $1) AND ($2 = '' OR topic = $2) AND ($3 = '' OR operator = $3) AND ($4::bigint <= 0 OR id < $4)
		ORDER BY id DESC`
	args := []any{f.Pipeline, f.Topic, f.Operator, f.BeforeID}
	if f.Limit > 0 {
		q += " LIMIT $5"
		args = append(args, f.Limit)
	}
	rows, err := o.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var addr *netip.Prefix
		err := r.Scan(&e.ID, &e.At, &e.Operator, &e.Reason, &e.Change, &e.Pipeline, &e.Topic, &e.Partition,
			&e.From, &e.To, &e.FromEpoch, &e.ToEpoch, &e.Owner, &e.DBUser, &addr)
		if addr != nil {
			e.ClientAddr = addr.Addr().String()
		}
		return e, err
	})
}
