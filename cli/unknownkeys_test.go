package cli

import (
	"strings"
	"testing"
)

// TestUnknownKeysInTheSink: an unknown key anywhere in the sink section, as deep as a
// parameter's or a column's options, is an error at its full path and its key's line, naming
// what its section takes and, for a typo, the key meant, as the file's own keys are.
func TestUnknownKeysInTheSink(t *testing.T) {
	head := "kafka: {brokers: 127.0.0.1:9092, group: g, topics: [orders]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\"}\nsink:\n"
	for _, c := range []struct{ name, sink, want string }{
		{"sql parameter", `
  type: sql
  params:
    at: {from: value.at, cast: epoch_ms, colour: red}
  statements: ["INSERT INTO t VALUES (@at)"]
`, "sink.params.at.colour: unknown key (sink.params.at has from, expr, required, cast, default) (line 6)"},
		{"sql parameter cast", `
  type: sql
  params:
    at: {from: value.at, cast: timestamptz}
  statements: ["INSERT INTO t VALUES (@at)"]
`, `sink.params.at.cast: unknown cast "timestamptz" (want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json) (line 6)`},
		{"sql parameter typo", `
  type: sql
  params:
    at:
      from: value.at
      requird: true
  statements: ["INSERT INTO t VALUES (@at)"]
`, "sink.params.at.requird: unknown key (sink.params.at has from, expr, required, cast, default); did you mean required? (line 8)"},
		{"sql route", `
  type: sql
  statements: ["SELECT 1"]
  routes:
    - topic: orders
      statments: ["SELECT 2"]
`, "sink.routes[0].statments: unknown key (sink.routes[0] has topic, statements, tombstone_statements); did you mean statements? (line 8)"},
		{"table column", `
  type: table
  table: events
  columns:
    id: {from: value.id, defualt: 0}
`, "sink.columns.id.defualt: unknown key (sink.columns.id has from, expr, required, cast, default); did you mean default? (line 7)"},
		{"table route", `
  type: table
  table: events
  columns: {id: value.id}
  routes:
    - topik: orders
      table: other
`, "sink.routes[0].topik: unknown key (sink.routes[0] has topic, table, columns, key, where, check); did you mean topic? (line 8)"},
		{"the plugin's own key", `
  type: table
  tabel: events
  columns: {id: value.id}
`, "sink.tabel: unknown key (sink has type, table, columns, where, check, routes, key_format, value_format, create, on_conflict); did you mean table? (line 5)"},
		{"inbox's inner plugin", `
  type: inbox
  event_id: value.id
  inner:
    type: table
    table: events
    colums: {id: value.id}
`, "sink.inner.colums: unknown key (sink.inner has type, table, columns, where, check, routes, key_format, value_format, create, on_conflict); did you mean columns? (line 9)"},
		{"cdc table override", `
  type: cdc
  table: replica.$${source.table}
  tables:
    inventory.orders: {tabel: replica.o}
`, "sink.tables[inventory.orders].tabel: unknown key (sink.tables[inventory.orders] has table, include, exclude); did you mean table? (line 7)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, head+strings.TrimPrefix(c.sink, "\n"))
			code, _, out := runCLI("run", "-validate", "-config", file)
			if code != 1 || !strings.Contains(out, "eosink: "+file+": "+c.want+"\n") {
				t.Errorf("exit %d, errors:\n%s\nwant:\n%s", code, out, c.want)
			}
		})
	}
}

// TestEveryUnknownKeyIsReported: the sink section's unknown keys are all reported, with the
// plugin's other problems.
func TestEveryUnknownKeyIsReported(t *testing.T) {
	file := writeFile(t, `kafka: {brokers: 127.0.0.1:9092, group: g, topics: [orders]}
database: {url: "postgres://u@127.0.0.1/db"}
sink:
  type: table
  table: events
  columns:
    id: {from: value.id, requird: true}
    at: {from: value.at, cast: epoch_sec}
  colour: red
`)
	code, _, out := runCLI("run", "-validate", "-config", file)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{
		"sink.columns.id.requird: unknown key (sink.columns.id has from, expr, required, cast, default); did you mean required? (line 7)",
		`sink.columns.at.cast: unknown cast "epoch_sec"`,
		"sink.colour: unknown key (sink has type, table, ",
	} {
		if !strings.Contains(out, file+": "+want) {
			t.Errorf("errors:\n%s\nwant:\n%s", out, want)
		}
	}
}
