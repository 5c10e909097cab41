package cdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

const jsonKey = `{"schema":{"type":"struct","name":"src.public.items.Key","fields":[{"type":"int64","field":"id"}]},"payload":{"id":7}}`

// The column types of jsonEvent's fields, from its schema: the types convert's values read
// into exactly.
func TestColumnsFromJSONSchema(t *testing.T) {
	ev, err := decodeJSONValue([]byte(jsonEvent))
	if err != nil {
		t.Fatal(err)
	}
	if ev.key, ev.keySchema, err = decodeJSONKey([]byte(jsonKey)); err != nil {
		t.Fatal(err)
	}
	cols, keys, err := ev.columns()
	if err != nil {
		t.Fatal(err)
	}
	want := []column{{"id", "bigint"}, {"mts", "timestamp"}, {"ts", "timestamp(3)"}, {"day", "date"},
		{"zts", "timestamptz"}, {"t", "time"}, {"vs", "numeric"}, {"dec", "numeric"}, {"decs", "text"},
		{"j", "jsonb"}, {"u", "uuid"}, {"b", "bytea"}}
	if len(cols) != len(want) {
		t.Fatalf("columns %v, want %v", cols, want)
	}
	for i := range want {
		if cols[i] != want[i] {
			t.Errorf("column %d: %v, want %v", i, cols[i], want[i])
		}
	}
	if len(keys) != 1 || keys[0] != "id" {
		t.Errorf("keys %v, want [id]", keys)
	}
	sql := createSQL(pgx.Identifier{"replica", "items"}, cols, keys, route{exclude: []string{"decs"}})
	for _, s := range []string{`CREATE TABLE IF NOT EXISTS "replica"."items" (`, `"zts" timestamptz,`, `"b" bytea,`, `PRIMARY KEY ("id")`} {
		if !strings.Contains(sql, s) {
			t.Errorf("create statement lacks %q:\n%s", s, sql)
		}
	}
	if strings.Contains(sql, `"decs"`) {
		t.Errorf("an excluded column is created:\n%s", sql)
	}
	if got := addColumnsSQL(pgx.Identifier{"r", "it\"ems"}, []column{{"a b", "numeric"}, {"c", "text"}}); got !=
		`ALTER TABLE "r"."it""ems" ADD COLUMN IF NOT EXISTS "a b" numeric, ADD COLUMN IF NOT EXISTS "c" text` {
		t.Errorf("add columns: %s", got)
	}
}

// Without schemas there is no type to create a column with: never guessed.
func TestColumnsUntyped(t *testing.T) {
	ev, err := decodeJSONValue([]byte(`{"before":null,"after":{"id":1},"source":{"schema":"public","table":"t","lsn":5},"op":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	ev.key, ev.keySchema, _ = decodeJSONKey([]byte(`{"id":1}`))
	if _, _, err := ev.columns(); !errors.Is(err, errUntyped) {
		t.Fatalf("columns of an event without schemas: %v, want errUntyped", err)
	}
}

func TestPgType(t *testing.T) {
	for _, c := range []struct{ base, name, want string }{
		{"int16", "", "smallint"}, {"int32", "", "integer"}, {"int64", "", "bigint"}, {"float32", "", "real"},
		{"float64", "", "double precision"}, {"boolean", "", "boolean"}, {"string", "", "text"}, {"bytes", "", "bytea"},
		{"struct", "io.debezium.data.geometry.Point", "point"}, {"struct", "io.debezium.data.geometry.Geometry", "jsonb"}, {"array", "", "jsonb"},
		{"int64", dbzMicroTimestamp, "timestamp"}, {"int32", dbzDate, "date"}, {"string", dbzZonedTimestamp, "timestamptz"},
		{"bytes", connectDecimal, "numeric"}, {"struct", dbzVarDecimal, "numeric"}, {"string", dbzJSON, "jsonb"},
		{"string", dbzUUID, "uuid"}, {"int64", dbzMicroTime, "time"}, {"string", dbzInterval, "interval"},
		{"int64", "io.debezium.time.MicroDuration", "bigint"},
		// The JsonConverter's schema names of float32 and float64 (the fidelity suite's
		// real and double cells under create: true stopped with "no column type").
		{"float", "", "real"}, {"double", "", "double precision"},
	} {
		if got, err := pgType(c.base, c.name); err != nil || got != c.want {
			t.Errorf("pgType(%s, %s) = %q, %v; want %q", c.base, c.name, got, err, c.want)
		}
	}
	if _, err := pgType("nonsense", ""); err == nil {
		t.Error("pgType of an unknown type: no error")
	}
}

func TestEvolveConfig(t *testing.T) {
	if _, err := New(Config{Evolve: "add-column", Schemas: []string{"public"}}); err == nil || !strings.Contains(err.Error(), "evolve:") {
		t.Fatalf("evolve: add-column: %v, want an error naming evolve", err)
	}
	if _, err := New(Config{Create: true, Evolve: EvolveAddColumns, Schemas: []string{"public"}}); err != nil {
		t.Fatal(err)
	}
}

// From a config file: create and evolve are keys of the sink section; an unknown evolve
// value is a config error naming the field.
func TestDDLKeysFromConfig(t *testing.T) {
	_, err := plugin.Build(plugin.Config{Path: "sink", Schema: "eosink",
		Raw: map[string]any{"type": "cdc", "schemas": []any{"public"}, "create": true, "evolve": "add-columns"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = plugin.Build(plugin.Config{Path: "sink", Schema: "eosink",
		Raw: map[string]any{"type": "cdc", "schemas": []any{"public"}, "evolve": "drop-columns"}})
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "sink.evolve" || !strings.HasPrefix(ce.Reason, `"drop-columns" is not add-columns`) {
		t.Fatalf("evolve: drop-columns: %#v", err)
	}
	_, err = plugin.Build(plugin.Config{Path: "sink", Schema: "eosink",
		Raw: map[string]any{"type": "cdc", "create": "sometimes"}})
	if !errors.As(err, &ce) {
		t.Fatalf("create: sometimes: %v", err)
	}
}
