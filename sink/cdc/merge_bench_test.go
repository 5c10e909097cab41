package cdc

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// BenchmarkMerge applies one batch of 5,000 staged changes (the bench's change stream: 70%
// inserts of new keys, 25% updates, 5% deletes) to a 100,000-row replica, in a transaction
// rolled back after each, through the merge's two final statements side by side: applySQL
// (the UPDATE of stored rows, then the INSERT of the others, as for a batch with unavailable
// values) and upsertSQL (one INSERT … ON CONFLICT DO UPDATE). The time includes the staging
// COPY and the positions, the same for both.
func BenchmarkMerge(b *testing.B) {
	e := testbed.Require(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := testbed.Schema(b, e)
	p, err := New(Config{PositionsSchema: schema, Table: "replica.${source.table}"})
	if err != nil {
		b.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		b.Fatal(err)
	}
	table := pgx.Identifier{schema, "m"}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY, account text NOT NULL, qty int NOT NULL);
INSERT INTO %[1]s SELECT g, 'acct-' || g %% 1000, g %% 97 FROM generate_series(1, 100000) g;
INSERT INTO %[2]s.cdc_positions_int SELECT %[3]s, g, 50, 50, false FROM generate_series(1, 100000) g; ANALYZE %[1]s`,
		table.Sanitize(), pgx.Identifier{schema}.Sanitize(), "'"+table.Sanitize()+"'")); err != nil {
		b.Fatal(err)
	}
	tg, _, err := loadTarget(ctx, conn, table, route{}, pgx.Identifier{schema, "cdc_positions"}.Sanitize())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		unavail int
	}{{"applySQL", 1}, {"upsertSQL", 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tx, err := conn.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				st := &stagedTable{t: tg}
				for i := range 5000 {
					id, del := int64(200000+i), false
					switch r := i % 20; {
					case r < 5: // updates
						id = int64(1 + i*17%100000)
					case r == 5: // deletes
						id, del = int64(1+i*31%100000), true
					}
					row := []any{strconv.FormatInt(id, 10), nil, nil}
					if !del {
						row[1], row[2] = "acct-new", strconv.Itoa(i)
					}
					if err := st.append(row, nil, &event{op: "u", commit: 100, lsn: int64(100 + i)}, 2*i+1, del); err != nil {
						b.Fatal(err)
					}
				}
				st.unavail = c.unavail
				if err := st.apply(ctx, tx, false, nil); err != nil {
					b.Fatal(err)
				}
				if err := tx.Rollback(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
