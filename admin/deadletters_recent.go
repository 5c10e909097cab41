package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CountDeadLettersSince returns, per pipeline, the dead letters whose last failure is at or
// after since (the console's "dead letters in the last hour").
func (c *Client) CountDeadLettersSince(ctx context.Context, since time.Time) (map[string]int64, error) {
	rows, err := c.pool.Query(ctx, "SELECT pipeline, count(*) FROM "+c.table("dead_letters")+" WHERE last_failed_at >= $1 GROUP BY pipeline", since)
	if err != nil {
		return nil, fmt.Errorf("count recent dead letters: %w", err)
	}
	out := map[string]int64{}
	var p string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil })
	return out, err
}
