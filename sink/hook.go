package sink

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine/hook"
)

// init lends the project's own packages what they reuse of the engine (internal/engine):
// the write step, the skip count of a nested write and the stop remedies.
func init() {
	hook.WriteBatch = func(ctx context.Context, tx pgx.Tx, p Plugin, b Batch, opts hook.WriteOptions) (int, int, []Poisoned, error) {
		res, err := writeBatch(ctx, tx, p, b, opts)
		return res.Applied, res.Skipped, res.DeadLettered, err
	}
	hook.CountSkipped = countSkipped
	hook.StopRemedy = stopRemedy
}
