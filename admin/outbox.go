package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxStatus is the state of a schema's transactional outbox (package outbox) as the
// database records it: the relay's positions come from its outbox_relays rows, written
// after each Kafka commit (the relay itself reads its position from Kafka).
type OutboxStatus struct {
	// Unpublished counts rows past every relay's recorded position for their shard;
	// Oldest is the created_at of the oldest of them (zero when none).
	Unpublished int64
	Oldest      time.Time
	Shards      []RelayShard
}

// RelayShard is one outbox_relays row.
type RelayShard struct {
	Relay     string
	Shard     int
	LastID    int64
	Published int64 // by the current owner since it started
	Owner     string
	UpdatedAt time.Time
}

// Outbox returns the schema's outbox status, or nil when the schema has no outbox.
func (c *Client) Outbox(ctx context.Context) (*OutboxStatus, error) {
	var exists bool
	if err := c.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		c.table("outbox"), c.table("outbox_relays")).Scan(&exists); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if !exists {
		return nil, nil
	}
	var st OutboxStatus
	var oldest *time.Time
	if err := c.pool.QueryRow(ctx, `SELECT count(*), min(o.created_at) FROM `+c.table("outbox")+` o
WHERE NOT EXISTS (SELECT 1 FROM `+c.table("outbox_relays")+` r WHERE r.shard = o.shard AND (r.last_xid, r.last_id) >= (o.xid, o.id))`).Scan(&st.Unpublished, &oldest); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if oldest != nil {
		st.Oldest = *oldest
	}
	rows, err := c.pool.Query(ctx, `SELECT relay, shard, last_id, published, owner, updated_at FROM `+c.table("outbox_relays")+` ORDER BY relay, shard`)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var r RelayShard
	if _, err := pgx.ForEachRow(rows, []any{&r.Relay, &r.Shard, &r.LastID, &r.Published, &r.Owner, &r.UpdatedAt}, func() error {
		st.Shards = append(st.Shards, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &st, nil
}
