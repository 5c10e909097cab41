package offsets

import "context"

// The stop columns of the offsets table (stopped_reason, stopped_error, stopped_at,
// stopped_by): why a partition stopped, as the instance that stopped it recorded, for
// operators (admin's positions). An operator's move clears them (Operator.Set).

// MarkStopped records on the partition's row that this store's instance stopped it, for
// reason (a sink.Stop* word) with errText (already made safe for PostgreSQL). Only the row
// this instance owns is written: a stop of a partition that has moved on is not recorded.
func (s *Store) MarkStopped(ctx context.Context, topic string, partition int32, reason, errText string) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+s.table+` SET stopped_reason = $4, stopped_error = $5, stopped_at = now(), stopped_by = $6
				WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND owner = $6`,
		s.pipeline, topic, partition, reason, errText, s.owner)
	return err
}

// ClearStopped clears a recorded stop from the partition's row if the row still has epoch:
// the claim under which the partition runs again.
func (s *Store) ClearStopped(ctx context.Context, topic string, partition int32, epoch int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+s.table+` SET stopped_reason = NULL, stopped_error = NULL, stopped_at = NULL, stopped_by = NULL
				WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND epoch = $4 AND stopped_reason IS NOT NULL`,
		s.pipeline, topic, partition, epoch)
	return err
}
