// Package app is the point-accrual example: events {event_id, account_id, delta} become
// account balances. It holds the example's migrations, its handler, a producer of test
// events and an independent verifier. examples/points/main.go is its command line.
package app

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/failpoint"
	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/sink"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Event is one point accrual as produced to Kafka (JSON).
type Event struct {
	EventID   string `json:"event_id"`
	AccountID string `json:"account_id"`
	Delta     int64  `json:"delta"`
}

// Migrate creates the example's tables in schema with golang-migrate.
func Migrate(ctx context.Context, databaseURL, schema string) error {
	sub, err := fsSub()
	if err != nil {
		return err
	}
	m, err := migrator.Open(ctx, databaseURL, migrator.Set{FS: sub, Schema: schema, Table: "points_schema_migrations"})
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up()
}

// Handler returns the sink handler that applies a batch: ledger rows through COPY, then one
// upsert of the balances touched, in account order so that concurrent partitions cannot
// deadlock on the same accounts. A record that is not an event is poison (sink.Poison).
func Handler(schema string) sink.Handler {
	ledger := pgx.Identifier{schema, "ledger"}
	balances := pgx.Identifier{schema, "balances"}.Sanitize()
	upsert := `INSERT INTO ` + balances + ` AS b (account_id, balance, events)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
		ON CONFLICT (account_id) DO UPDATE SET balance = b.balance + EXCLUDED.balance, events = b.events + EXCLUDED.events`
	return func(ctx context.Context, tx pgx.Tx, batch sink.Batch) error {
		rows := make([][]any, 0, len(batch.Records))
		type agg struct{ sum, n int64 }
		per := map[string]*agg{}
		for i := range batch.Records {
			r := &batch.Records[i]
			var e Event
			if err := json.Unmarshal(r.Value, &e); err != nil {
				return sink.Poison(r, fmt.Errorf("decode event: %w", err))
			}
			if e.EventID == "" || e.AccountID == "" {
				return sink.Poison(r, errors.New("event_id and account_id are required"))
			}
			rows = append(rows, []any{e.EventID, e.AccountID, e.Delta, r.Topic, r.Partition, r.Offset})
			a := per[e.AccountID]
			if a == nil {
				a = &agg{}
				per[e.AccountID] = a
			}
			a.sum += e.Delta
			a.n++
		}
		if _, err := tx.CopyFrom(ctx, ledger, []string{"event_id", "account_id", "delta", "topic", "partition", "offset"},
			pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		failpoint.Eval(failpoint.MidWrite)
		ids := make([]string, 0, len(per))
		for id := range per {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		sums, counts := make([]int64, len(ids)), make([]int64, len(ids))
		for i, id := range ids {
			sums[i], counts[i] = per[id].sum, per[id].n
		}
		_, err := tx.Exec(ctx, upsert, ids, sums, counts)
		return err
	}
}
