package sink_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// New validates the configuration and does no I/O; Run connects, joins the group and
// applies batches until its context is cancelled.
func ExampleNew() {
	s, err := sink.New(sink.Config{
		Brokers:     "127.0.0.1:9092",
		GroupID:     "points",
		Topics:      []string{"points"},
		DatabaseURL: "postgres://eosink@127.0.0.1:5432/app",
		Handler: func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
			for _, r := range b.Records {
				// Every write goes through tx: it commits with the partition's next offset.
				if _, err := tx.Exec(ctx, "INSERT INTO events (body) VALUES ($1)", r.Value); err != nil {
					return err // transient: retried; poison: OnPoison; other: the partition stops
				}
			}
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created; s.Run(ctx) consumes")
	_ = s
	// Output: created; s.Run(ctx) consumes
}

// A bad configuration fails in New with a *ConfigError naming the field.
func ExampleNew_configError() {
	_, err := sink.New(sink.Config{
		Brokers:     "127.0.0.1:9092",
		Topics:      []string{"points"},
		DatabaseURL: "postgres://eosink@127.0.0.1:5432/app",
		Handler:     func(context.Context, pgx.Tx, sink.Batch) error { return nil },
	})
	fmt.Println(err)
	// Output: eosink: config GroupID: required
}

// auditPlugin is a Plugin that writes one row per record into a table named in its config.
// Open and Close run once per claimed partition, on that partition's goroutine.
type auditPlugin struct {
	table string
}

func (p *auditPlugin) Open(ctx context.Context, part sink.Partition) error { return nil }

func (p *auditPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	q := fmt.Sprintf(`INSERT INTO %s (topic, "partition", "offset", body) VALUES ($1, $2, $3, $4)`,
		pgx.Identifier{p.table}.Sanitize()) // identifiers quoted, values as parameters
	for i := range b.Records {
		r := &b.Records[i]
		if len(r.Value) == 0 {
			return sink.Poison(r, fmt.Errorf("empty value")) // this record, not the batch, is bad
		}
		if _, err := tx.Exec(ctx, q, r.Topic, r.Partition, r.Offset, r.Value); err != nil {
			return err
		}
	}
	return nil
}

func (p *auditPlugin) Close(ctx context.Context, part sink.Partition) error { return nil }

// A plugin gives the engine a lifecycle per partition. Set it as Config.Plugin, or register
// it by name for config files (see package sink/plugin).
func ExamplePlugin() {
	_, err := sink.New(sink.Config{
		Brokers:     "127.0.0.1:9092",
		GroupID:     "audit",
		Topics:      []string{"orders"},
		DatabaseURL: "postgres://eosink@127.0.0.1:5432/app",
		Plugin:      &auditPlugin{table: "audit"},
		OnPoison:    sink.DeadLetter, // empty values go to the dead-letter table, the rest commits
	})
	fmt.Println(err)
	// Output: <nil>
}
