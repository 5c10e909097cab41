package cli

import (
	"strings"
	"testing"
)

// TestMultiConfigErrors: an error in one of the multi plugin's sinks names its full path
// and line.
func TestMultiConfigErrors(t *testing.T) {
	head := `
kafka: {brokers: localhost:9092, group: g, topics: [moves]}
database: {url: postgres://localhost/db}
sink:
  type: multi
  sinks:
    - type: table
      table: inventory.history
      columns: {move_id: value.move_id}
`
	for _, tc := range []struct{ name, sinks, want string }{
		{"merge operation", `
    - type: upsert
      table: inventory.stock
      key: [sku]
      merge:
        qty: sum
      columns: {sku: value.sku, qty: value.delta}
`, `sink.sinks[1].merge.qty: "sum" is not replace, add, min, max, keep_first, coalesce (line 14)`},
		{"merge with only_if_newer", `
    - type: upsert
      table: inventory.stock
      key: [sku]
      only_if_newer: at
      merge: {qty: add}
      columns: {sku: value.sku, qty: value.delta, at: value.at}
`, `sink.sinks[1].merge.qty: add cannot be combined with only_if_newer`},
		{"only_if_newer column", `
    - type: upsert
      table: inventory.stock
      key: [sku]
      only_if_newer: when
      columns: {sku: value.sku, qty: value.delta}
`, `sink.sinks[1].only_if_newer: "when" is not a column of columns (line 13)`},
		{"table on_conflict", `
    - type: table
      table: inventory.log
      on_conflict: skip
      columns: {sku: value.sku}
`, `sink.sinks[1].on_conflict: "skip" is not error or nothing (line 12)`},
		{"unknown key", `
    - type: upsert
      table: inventory.stock
      key: [sku]
      merg: {qty: add}
      columns: {sku: value.sku, qty: value.delta}
`, `sink.sinks[1].merg: unknown key (sink.sinks[1] has type, table, columns, where, check, routes, key_format, value_format, create, key, ` +
			`on_conflict, delete_on_tombstone, merge, only_if_newer, on_equal); did you mean merge? (line 13)`},
		{"no type", `
    - table: inventory.stock
`, `sink.sinks[1].type: required: one of`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, head+strings.TrimPrefix(tc.sinks, "\n"))
			code, _, errOut := runCLI("run", "-config", file, "-validate")
			if code == 0 || !strings.Contains(errOut, file+": "+tc.want) {
				t.Fatalf("run -validate: exit %d, stderr lacks %q:\n%s", code, file+": "+tc.want, errOut)
			}
		})
	}
}
