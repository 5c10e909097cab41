// Package ledger is an example sink plugin, written the way an outside author would write
// one: it registers itself as "ledger", ships its own migrations, and passes the
// conformance suite (ledger_test.go).
//
// Each record's JSON value {"account": "a-1", "delta": -5} is appended to a journal and
// added to the account's balance. Adding is not idempotent: applied twice, a balance is
// wrong. That is what exactly-once delivery is for.
//
//	sink:
//	  type: ledger
//	  schema: ledger      # where its tables live; defaults to the pipeline's schema
package ledger

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

//go:embed migrations/*.sql
var files embed.FS

// Config is the plugin's config section.
type Config struct {
	Schema string `yaml:"schema"`
}

func init() { plugin.RegisterConfig("ledger", fromConfig) }

// fromConfig builds the plugin from its config section; the schema defaults to the
// pipeline's.
func fromConfig(cfg plugin.Config, c Config) (*Ledger, error) {
	if c.Schema == "" {
		c.Schema = cfg.Schema
	}
	return New(c), nil
}

// Ledger is the plugin.
type Ledger struct {
	schema  string
	journal pgx.Identifier
	balance string
}

// New returns a Ledger writing to c.Schema.
func New(c Config) *Ledger {
	return &Ledger{schema: c.Schema, journal: pgx.Identifier{c.Schema, "ledger_journal"},
		balance: pgx.Identifier{c.Schema, "ledger_balances"}.Sanitize()}
}

// Migrations are the ledger's tables, versioned in their own table.
func (l *Ledger) Migrations() []sink.Migrations {
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		panic(err)
	}
	return []sink.Migrations{{Name: "ledger", FS: sub, Schema: l.schema, Table: "ledger_schema_migrations"}}
}

// Open and Close keep no state: every partition writes the same tables.
func (l *Ledger) Open(context.Context, sink.Partition) error  { return nil }
func (l *Ledger) Close(context.Context, sink.Partition) error { return nil }

type entry struct {
	Account string `json:"account"`
	Delta   *int64 `json:"delta"`
}

// Write journals the batch with COPY, then adds each account's sum to its balance.
func (l *Ledger) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	rows := make([][]any, 0, len(b.Records))
	sums := map[string]int64{}
	counts := map[string]int64{}
	for i := range b.Records {
		r := &b.Records[i]
		var e entry
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return sink.Poison(r, fmt.Errorf("value is not a ledger entry: %w", err))
		}
		if e.Account == "" || e.Delta == nil {
			return sink.Poison(r, errors.New("a ledger entry needs account and delta"))
		}
		rows = append(rows, []any{e.Account, *e.Delta, r.Topic, r.Partition, r.Offset})
		sums[e.Account] += *e.Delta
		counts[e.Account]++
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.CopyFrom(ctx, l.journal, []string{"account", "delta", "topic", "partition", "offset"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	accounts := make([]string, 0, len(sums))
	deltas := make([]int64, 0, len(sums))
	ns := make([]int64, 0, len(sums))
	for a, d := range sums {
		accounts, deltas, ns = append(accounts, a), append(deltas, d), append(ns, counts[a])
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+l.balance+` AS b (account, balance, entries)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) ORDER BY 1
ON CONFLICT (account) DO UPDATE SET balance = b.balance + EXCLUDED.balance, entries = b.entries + EXCLUDED.entries`, accounts, deltas, ns)
	return err
}
