package sinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinktest"
)

// notes is a minimal plugin: each record's JSON value {"n": int} becomes a row (offset, n).
type notes struct{ table pgx.Identifier }

func (notes) Open(context.Context, sink.Partition) error  { return nil }
func (notes) Close(context.Context, sink.Partition) error { return nil }

func (p notes) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	rows := make([][]any, 0, len(b.Records))
	for i := range b.Records {
		r := &b.Records[i]
		var v struct{ N *int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return sink.Poison(r, fmt.Errorf("value is not JSON: %w", err))
		}
		rows = append(rows, []any{r.Partition, r.Offset, v.N}) // a missing n violates NOT NULL: a data error
	}
	_, err := tx.CopyFrom(ctx, p.table, []string{"partition", "offset", "n"}, pgx.CopyFromRows(rows))
	return err
}

func TestConformanceOfTheSuiteItself(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, db *pgxpool.Pool, schema string) sink.Plugin {
			table := pgx.Identifier{schema, "notes"}
			if _, err := db.Exec(context.Background(), "CREATE TABLE "+table.Sanitize()+
				` (partition int NOT NULL, "offset" bigint NOT NULL, n bigint NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			return notes{table}
		},
		Record: func(i int) sink.Record { return sink.Record{Value: []byte(`{"n": ` + strconv.Itoa(i*10) + `}`)} },
		Poison: func(i int) sink.Record {
			if i%2 == 0 {
				return sink.Record{Value: []byte(`{"n": `)} // not JSON
			}
			return sink.Record{Value: []byte(`{}`)} // NOT NULL violation
		},
		State: func(ctx context.Context, db sink.DB, schema string) ([]string, error) {
			rows, err := db.Query(ctx, `SELECT format('%s/%s/%s', partition, "offset", n) FROM `+pgx.Identifier{schema, "notes"}.Sanitize())
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		Expect: func(r sink.Record) string { return fmt.Sprintf("%d/%d/%d", r.Partition, r.Offset, r.Offset*10) },
	})
}
