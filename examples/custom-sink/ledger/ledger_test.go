package ledger_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/examples/custom-sink/ledger"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinktest"
)

// TestConformance runs eosink's plugin conformance suite on the ledger. Each record is its
// own account here, so that the journal and balances show every record's effect.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			l := ledger.New(ledger.Config{Schema: schema})
			if err := sink.MigratePlugin(context.Background(), os.Getenv("DATABASE_URL"), l, nil); err != nil {
				t.Fatal(err)
			}
			return l
		},
		Record: func(i int) sink.Record {
			return sink.Record{Value: []byte(fmt.Sprintf(`{"account": "a-%d", "delta": %d}`, i, i+1))}
		},
		Poison: func(i int) sink.Record {
			if i%2 == 0 {
				return sink.Record{Value: []byte(`{"account": "a"}`)}
			}
			return sink.Record{Value: []byte(`[1, 2]`)}
		},
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			rows, err := db.Query(ctx, `SELECT format('%s %s %s', b.account, b.balance, b.entries) FROM `+
				pgx.Identifier{schema, "ledger_balances"}.Sanitize()+` b`)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		Expect: func(r sink.Record) string { return fmt.Sprintf("a-%d %d 1", r.Offset, r.Offset+1) },
	})
}
