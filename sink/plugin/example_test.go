package plugin_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// auditPlugin writes one row per record into the table its config section names.
type auditPlugin struct {
	table string
}

func (p *auditPlugin) Open(context.Context, sink.Partition) error { return nil }

func (p *auditPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	q := fmt.Sprintf(`INSERT INTO %s (topic, "partition", "offset", body) VALUES ($1, $2, $3, $4)`,
		pgx.Identifier{p.table}.Sanitize())
	for i := range b.Records {
		r := &b.Records[i]
		if _, err := tx.Exec(ctx, q, r.Topic, r.Partition, r.Offset, r.Value); err != nil {
			return err
		}
	}
	return nil
}

func (p *auditPlugin) Close(context.Context, sink.Partition) error { return nil }

// Register makes a plugin available by name to pipeline config files (`sink: {type: ...}`)
// and to Build. Its factory decodes the plugin's section strictly.
func ExampleRegister() {
	plugin.Register("example-audit", func(cfg plugin.Config) (sink.Plugin, error) {
		var c struct {
			Table string `yaml:"table"`
		}
		if err := cfg.Decode(&c); err != nil {
			return nil, err
		}
		if c.Table == "" {
			return nil, &sink.ConfigError{Field: cfg.Path + ".table", Reason: "required"}
		}
		return &auditPlugin{table: c.Table}, nil
	})

	p, err := plugin.Build(plugin.Config{Path: "sink", Raw: map[string]any{"type": "example-audit", "table": "audit"}})
	fmt.Printf("%T %v\n", p, err)
	_, err = plugin.Build(plugin.Config{Path: "sink", Raw: map[string]any{"type": "example-audit", "tabel": "audit"}})
	fmt.Println(err)
	// Output:
	// *plugin_test.auditPlugin <nil>
	// eosink: config sink.tabel: unknown key (sink has type, table); did you mean table?
}
