package offsets

import "context"

// The instances table: one row per (pipeline, instance), the instance's heartbeat and
// whether it shut down, so that operators can tell a live owner from a gone one (admin's
// positions, Operator.List).

// Heartbeat writes this store's instance's row of the instances table: now as its heartbeat,
// and stopped (true at shutdown). A row that was stopped starts again now.
func (s *Store) Heartbeat(ctx context.Context, stopped bool) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.instances+` (pipeline, instance, stopped)
		VALUES ($1, $2, $3) ON CONFLICT (pipeline, instance) DO UPDATE SET heartbeat_at = now(), stopped = $3,
		started_at = CASE WHEN instances.stopped THEN now() ELSE instances.started_at END`,
		s.pipeline, s.owner, stopped)
	return err
}
