package offsets

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Instance is one row of the instances table as the operator reads it: when the instance
// last wrote its heartbeat, measured on the database's clock, and whether it shut down.
type Instance struct {
	Pipeline string
	Instance string
	// HeartbeatAge is how long ago the instance last wrote its heartbeat (the database's
	// now() minus heartbeat_at, so that the operator's clock does not matter).
	HeartbeatAge time.Duration
	Stopped      bool // it shut down cleanly (and left the consumer group)
	Alive        bool // its heartbeat is recent (three heartbeats) and it has not shut down
}

// Instances returns the instances of pipeline (all pipelines when empty) in (pipeline,
// instance) order, with Alive as List's OwnerAlive computes it.
func (o *Operator) Instances(ctx context.Context, pipeline string) ([]Instance, error) {
	rows, err := o.pool.Query(ctx, `SELECT pipeline, instance, greatest(extract(epoch FROM now() - heartbeat_at), 0)::float8, stopped,
			heartbeat_at > now() - $2::interval AND NOT stopped
		FROM `+o.instances+` WHERE $1 = '' OR pipeline = $1 ORDER BY pipeline, instance`, pipeline, aliveWithin)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Instance, error) {
		var in Instance
		var age float64
		err := r.Scan(&in.Pipeline, &in.Instance, &age, &in.Stopped, &in.Alive)
		in.HeartbeatAge = time.Duration(age * float64(time.Second))
		return in, err
	})
}
