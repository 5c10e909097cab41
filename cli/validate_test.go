package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/eosink/eosink/sink/plugin"
)

// TestValidateWithoutTheEnvironment: -validate checks a file whose variables are not set,
// warning for each (naming the variable and the field), while run refuses it.
func TestValidateWithoutTheEnvironment(t *testing.T) {
	t.Setenv("NOPE_SET", "orders")
	text := `
kafka:
  brokers: ${NOPE_BROKERS}
  group: g
  topics: ["${NOPE_SET}"]
  properties:
    sasl.password: ${NOPE_PW}
database:
  url: postgres://${NOPE_USER}:pw-never-shown@${NOPE_HOST}/db
sink:
  type: table
  table: ${NOPE_TABLE}
  columns: {id: value.id}
`
	unset(t, "NOPE_BROKERS", "NOPE_DB", "NOPE_PW", "NOPE_TABLE", "NOPE_USER", "NOPE_HOST")
	file := writeFile(t, text)
	code, out, errOut := runCLI("run", "-config", file, "-validate")
	if code != 0 {
		t.Fatalf("run -validate: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"eosink: warning: " + file + ": kafka.brokers: environment variable NOPE_BROKERS is not set; the field is not checked (run needs it) (line 3)\n",
		"eosink: warning: " + file + ": kafka.properties[sasl.password]: environment variable NOPE_PW is not set",
		"eosink: warning: " + file + ": database.url: environment variables NOPE_USER, NOPE_HOST are not set",
		"eosink: warning: " + file + ": sink.table: environment variable NOPE_TABLE is not set",
		"eosink: warning: " + file + ": sink: the plugin was not built without the unset variables: table: required",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "eosink: "+file) {
		t.Errorf("an error line besides the warnings:\n%s", errOut)
	}
	for _, want := range []string{file + ": valid\n", "(unchecked: 5 field(s)", "brokers ${NOPE_BROKERS} (unset)", "topics orders,",
		"properties: sasl.password (unset) (values not shown)", "database:  (unset variable), schema eosink"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "pw-never-shown") {
		t.Errorf("the output shows the password:\n%s\n%s", out, errOut)
	}

	// run, without -validate, refuses the same file before connecting.
	code, out, errOut = runCLI("run", "-config", file)
	if code != 1 || !strings.Contains(errOut, "eosink: "+file+": kafka.brokers: environment variable NOPE_BROKERS is not set (write ${NOPE_BROKERS:-default} for a default) (line 3)") ||
		strings.Contains(errOut, "warning") {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the unset variable", code, out, errOut)
	}

	// Real errors stay errors alongside the warnings.
	code, _, errOut = runCLI("run", "-validate", "-config", writeFile(t, strings.Replace(text, "group: g", "group: g\n  initial_position: sometimes", 1)))
	if code != 1 || !strings.Contains(errOut, `kafka.initial_position: "sometimes" is not earliest`) {
		t.Fatalf("an invalid file with unset variables: exit %d: %s", code, errOut)
	}
}

func unset(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "") // restores the old value after the test
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValidateShowsRoutes: the summary shows each plugin's target tables, their columns and
// the sql plugin's parameters with their sources and options, and the cdc plugin's template
// and overrides.
func TestValidateShowsRoutes(t *testing.T) {
	head := "kafka: {brokers: 127.0.0.1:9092, group: g, topics: [t]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\"}\n"
	for _, c := range []struct {
		name, sink string
		want       []string
	}{
		{"table", `
sink:
  type: table
  table: public.orders
  columns:
    order_id: {from: value.order_id, required: true}
    amount: value.amount
`, []string{
			"sink:      table\n",
			"routes:    (every topic) -> public.orders\n",
			"columns:   amount   <- value.amount\n",
			"           order_id <- value.order_id (required)\n",
		}},
		{"casts and defaults", `
sink:
  type: table
  table: public.events
  columns:
    at: {from: value.ts, cast: epoch_ms}
    region: {from: value.region, default: eu}
`, []string{
			"columns:   at     <- value.ts (cast epoch_ms)\n",
			"           region <- value.region (default \"eu\")\n",
		}},
		{"sql parameters", `
sink:
  type: sql
  params:
    id: {from: value.id, required: true}
    at: {from: value.at, cast: rfc3339}
    region: {from: value.region, default: eu}
    sku: value.sku
  statements:
    - INSERT INTO payments (id, at, region, sku) VALUES (@id, @at::timestamptz, @region, @sku)
`, []string{
			"params:    @at     <- value.at (cast rfc3339)\n",
			"           @id     <- value.id (required)\n",
			"           @region <- value.region (default \"eu\")\n",
			"           @sku    <- value.sku\n",
		}},
		{"sql parameters in multi", `
sink:
  type: multi
  sinks:
    - {type: table, table: t, columns: {at: {from: value.at, cast: epoch_ms}}}
    - {type: sql, params: {at: {from: value.at, cast: epoch_ms}}, statements: ["SELECT @at"]}
`, []string{
			"columns:   sinks[0]: at <- value.at (cast epoch_ms)\n",
			"params:    sinks[1]: @at <- value.at (cast epoch_ms)\n",
		}},
		{"expressions", `
sink:
  type: table
  table: public.payments
  where: value.kind != "test"
  check:
    - value.id != ""
    - {expr: 'value.status in ["paid", "failed"]', message: unknown payment status}
  columns:
    amount: {expr: 'value.amount.replace(",", ".")', required: true}
    id: value.id
`, []string{
			"columns:   amount <- expr value.amount.replace(\",\", \".\") (required)\n",
			"           id     <- value.id\n",
			"filters:   where value.kind != \"test\"\n",
			"           check value.id != \"\"\n",
			"           check value.status in [\"paid\", \"failed\"] (message \"unknown payment status\")\n",
		}},
		{"upsert", `
sink: {type: upsert, table: replica.accounts, key: [id], key_format: json, columns: {id: key.id, balance: value.balance}}
`, []string{
			"routes:    (every topic) -> replica.accounts (key id)\n",
			"columns:   balance <- value.balance\n",
			"           id      <- key.id\n",
		}},
		{"inbox", `
sink:
  type: inbox
  event_id: header.event-id
  inner: {type: table, table: orders, columns: {id: value.id}}
`, []string{
			"routes:    (every topic) -> orders (once per event id header.event-id)\n",
			"columns:   id <- value.id\n",
		}},
		{"multi, with an anchor", `
sink:
  type: multi
  sinks:
    - type: table
      table: inventory.history
      columns: &cols
        sku: value.sku
        qty: {from: value.delta, required: true}
    - type: upsert
      table: inventory.stock
      key: [sku]
      columns: *cols
    - {type: inbox, event_id: value.id, inner: {type: table, table: inventory.log, columns: {note: value.note}}}
`, []string{
			"columns:   sinks[0]: qty <- value.delta (required)\n",
			"           sinks[0]: sku <- value.sku\n",
			"           sinks[1]: qty <- value.delta (required)\n",
			"           sinks[1]: sku <- value.sku\n",
			"           sinks[2]: note <- value.note\n",
		}},
		{"outbox", `
sink:
  type: outbox
  topic: order-events
  inner: {type: table, table: orders, columns: {id: value.id}}
`, []string{
			"columns:   id <- value.id\n",
		}},
		{"cdc", `
sink:
  type: cdc
  table: replica.$${source.table}
  exclude: [secret]
  tables:
    inventory.customers: {table: crm.customers, include: [id, name]}
    inventory.orders: {exclude: [notes]}
`, []string{
			"           any other source table -> replica.${source.table} (exclude secret; from each event's source, which its topic must name)\n",
			"routes:    source table inventory.customers -> crm.customers (include id, name)\n",
			"           source table inventory.orders -> replica.${source.table} (exclude notes)\n",
		}},
		{"cdc default", "sink: {type: cdc, schemas: [inventory, public]}\n", []string{
			"routes:    every source table -> ${source.schema}.${source.table} (from each event's source, which its topic must name)\n",
			"           event-chosen schemas confined to: inventory, public (the schemas option; eosink's own, pg_* and information_schema never)\n",
			"           topic check: each event's source table must be the one its topic names (<topic.prefix>.<schema>.<table>), " +
				"else it is poison; set topic_check: off if a topic-routing transform (ByLogicalTableRouter) renames the topics\n",
		}},
		{"cdc topic_check off", "sink: {type: cdc, table: \"replica.$${source.table}\", topic_check: off}\n", []string{
			"           topic check: off (topic_check: off): an event on any subscribed topic may write any table its source routes to\n",
		}},
	} {
		code, out, errOut := runCLI("run", "-validate", "-config", writeFile(t, head+c.sink))
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.name, code, errOut)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: summary lacks %q:\n%s", c.name, want, out)
			}
		}
	}
}

// TestValidateRefusesUnconfinedCDC: the cdc plugin's default template takes the target's
// schema from each event; without schemas: [...] the config is refused, naming the option,
// and so is a target in eosink's own schema.
func TestValidateRefusesUnconfinedCDC(t *testing.T) {
	head := "kafka: {brokers: 127.0.0.1:9092, group: g, topics: [t]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\", schema: ops}\n"
	for sinkSec, want := range map[string]string{
		"sink: {type: cdc}\n": `sink.table: "${source.schema}.${source.table}" takes its schema from each event; ` +
			"list the schemas its targets may be in with schemas: [...]",
		"sink: {type: cdc, schemas: [public, ops]}\n":                 "sink.schemas: ops is eosink's own schema",
		"sink: {type: cdc, table: \"ops.$${source.table}\"}\n":        "sink.table: schema ops is eosink's own schema",
		"sink: {type: cdc, table: \"pg_catalog.$${source.table}\"}\n": "sink.table: schema pg_catalog is a PostgreSQL system schema",
	} {
		code, _, errOut := runCLI("run", "-validate", "-config", writeFile(t, head+sinkSec))
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d: %s\nwant exit 1 and %q", sinkSec, code, errOut, want)
		}
	}
}

// routedPlugin lists its own routes, as a plugin that routes by topic does.
type routedPlugin struct{ rowsPlugin }

func (routedPlugin) RouteSummary() []string {
	return []string{"audit -> ops.audit_log", `^events\..* -> raw.${topic}`}
}

func init() {
	plugin.RegisterConfig("routedtest", func(cfg plugin.Config, _ struct{}) (*routedPlugin, error) {
		return &routedPlugin{rowsPlugin{schema: cfg.Schema}}, nil
	})
}

// TestValidateShowsAPluginsOwnRoutes: a plugin's RouteSummary is the summary's routes.
func TestValidateShowsAPluginsOwnRoutes(t *testing.T) {
	file := writeFile(t, "kafka: {brokers: 127.0.0.1:9092, group: g, topics: [t]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\"}\nsink: {type: routedtest}\n")
	code, out, errOut := runCLI("run", "-validate", "-config", file)
	want := "sink:      routedtest\nroutes:    audit -> ops.audit_log\n           ^events\\..* -> raw.${topic}\non_poison: stop\n"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, %s\nsummary:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	// A plugin with neither shows its type only.
	file = writeFile(t, "kafka: {brokers: 127.0.0.1:9092, group: g, topics: [t]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\"}\nsink: {type: clitest}\n")
	if code, out, _ := runCLI("run", "-validate", "-config", file); code != 0 || !strings.Contains(out, "sink:      clitest\non_poison:") {
		t.Fatalf("exit %d, summary:\n%s", code, out)
	}
}
