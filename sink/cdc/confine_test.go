package cdc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eosink/eosink/sink"
)

// TestConfinementAtLoad: a template whose schema comes from the event needs schemas:, and
// eosink's own schemas, the system schemas and bad fixed names are refused at load.
func TestConfinementAtLoad(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, c := range []struct {
		name string
		c    Config
		want string // "" for accepted
	}{
		{"default template", Config{}, "table: \"${source.schema}.${source.table}\" takes its schema from each event; list the schemas its targets may be in with schemas: [...]"},
		{"default with schemas", Config{Schemas: []string{"public", "inventory"}}, ""},
		{"fixed schema", Config{Table: "replica.${source.table}"}, ""},
		{"schema from db", Config{Table: "r_${source.db}.${source.table}"}, "schemas: [...]"},
		{"override from event", Config{Table: "replica.${source.table}", Tables: map[string]TableConfig{"public.a": {Table: "${source.schema}.a"}}}, "tables.public.a.table: \"${source.schema}.a\" takes its schema"},
		{"eosink schema in schemas", Config{Schemas: []string{"eosink"}}, "schemas: eosink is eosink's own schema"},
		{"pipeline schema", Config{Table: "ops.${source.table}", PipelineSchema: "ops"}, "table: schema ops is eosink's own schema"},
		{"positions schema", Config{Table: "pos.x", PositionsSchema: "pos"}, "table: schema pos is eosink's own schema"},
		{"pg_catalog", Config{Schemas: []string{"pg_catalog"}}, "schemas: pg_catalog is a PostgreSQL system schema"},
		{"pg_temp", Config{Table: "pg_temp_3.${source.table}"}, "schema pg_temp_3 is a PostgreSQL system schema"},
		{"pg_toast", Config{Table: "replica.x", Tables: map[string]TableConfig{"public.a": {Table: "pg_toast.a"}}}, "tables.public.a.table: schema pg_toast is a PostgreSQL system schema"},
		{"information_schema", Config{Table: "information_schema.${source.table}"}, "system schema"},
		{"fixed name too long", Config{Table: "replica." + long}, "is 64 bytes long; PostgreSQL truncates names at 63 bytes"},
		{"schema too long", Config{Schemas: []string{long}}, "schemas: a schema is 64 bytes long"},
		{"NUL in a fixed name", Config{Table: "replica.a\x00b"}, "holds a NUL byte"},
		{"two overrides on one table", Config{Table: "replica.${source.table}", Tables: map[string]TableConfig{
			"public.a": {Table: "replica.t"}, "public.b": {Table: "replica.t"}}}, "tables: public.a and public.b both go to \"replica\".\"t\""},
		{"topic_check", Config{Table: "replica.${source.table}", TopicCheck: "strict"}, `topic_check: "strict" is not debezium or off`},
		{"max_columns", Config{Table: "replica.${source.table}", MaxColumns: 1601}, "max_columns: 1601 is not between 1 and 1600"},
	} {
		_, err := New(c.c)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestCheckColumn(t *testing.T) {
	for name, want := range map[string]string{
		"amount":                  "",
		"XMIN":                    "", // a quoted identifier other than xmin
		"xmin":                    "system column",
		"ctid":                    "system column",
		"tableoid":                "system column",
		"eosink_lsn":              "eosink_",
		"eosink_anything":         "eosink_",
		"":                        "is empty",
		"a\x00b":                  "NUL",
		"a\nb":                    "control character",
		strings.Repeat("é", 32):   "64 bytes long", // 32 runes, 64 bytes
		strings.Repeat("x", 63):   "",
		strings.Repeat("x", 64):   "truncates",
		string([]byte{0xff, 'a'}): "UTF-8",
	} {
		got := checkColumn(name)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}

func TestTopicNames(t *testing.T) {
	for _, c := range []struct {
		topic, schema, table string
		want                 bool
	}{
		{"dbz.public.items", "public", "items", true},
		{"my.server.public.items", "public", "items", true},
		{"dbz.public.items", "public", "orders", false},
		{"dbz.public.items", "eosink", "cdc_positions", false},
		{"public.items", "public", "items", false}, // no prefix
		{"dbz.public.my_table", "public", "my table", true},
		{"dbz.public.caf_", "public", "café", true},
		{"dbz.public.x__", "public", "x😀", true},
		{"xdbz.public.items", "dbz.public", "items", false},
		{"a.dbz.public.items", "dbz.public", "items", true},
	} {
		if got := topicNames(c.topic, c.schema, c.table); got != c.want {
			t.Errorf("topicNames(%q, %q, %q) = %v", c.topic, c.schema, c.table, got)
		}
	}
}

// TestConfinementOfEvents: Write refuses, as poison and before any statement, an event
// whose target is outside the confinement. The transaction is nil: a Write that tried a
// statement would panic.
func TestConfinementOfEvents(t *testing.T) {
	ev := func(schema, table string) []byte {
		return []byte(`{"before":null,"after":{"id":1},"source":{"db":"src","schema":"` + schema + `","table":"` + table + `","lsn":5},"op":"c"}`)
	}
	long := strings.Repeat("t", 64)
	for _, c := range []struct {
		name   string
		c      Config
		topic  string
		value  []byte
		reason string
	}{
		{"eosink's positions", Config{Schemas: []string{"public"}}, "dbz.eosink.cdc_positions", ev("eosink", "cdc_positions"),
			"schema eosink is eosink's own schema"},
		{"the pipeline's schema", Config{Schemas: []string{"public"}, PipelineSchema: "ops"}, "dbz.ops.inbox", ev("ops", "inbox"),
			"schema ops is eosink's own schema"},
		{"pg_catalog", Config{Schemas: []string{"public"}}, "dbz.pg_catalog.pg_class", ev("pg_catalog", "pg_class"), "system schema"},
		{"a schema not listed", Config{Schemas: []string{"public"}}, "dbz.billing.invoices", ev("billing", "invoices"),
			"schema billing is not one of schemas: [public]"},
		{"another topic's table", Config{Schemas: []string{"public"}}, "dbz.public.items", ev("public", "accounts"),
			"the event's source table public.accounts is not the one its topic dbz.public.items names"},
		{"another topic's table, fixed schema", Config{Table: "replica.${source.table}"}, "dbz.public.items", ev("public", "accounts"),
			"topic_check: off"},
		{"an override chosen by the source", Config{Table: "replica.items", Tables: map[string]TableConfig{"public.secret": {Table: "vault.secret"}}},
			"dbz.public.items", ev("public", "secret"), "is not the one its topic"},
		{"a name over 63 bytes", Config{Table: "replica.${source.table}"}, "dbz.public." + long, ev("public", long),
			"its table name is 64 bytes long"},
		{"a NUL in the name", Config{Table: "replica.${source.table}", TopicCheck: TopicCheckOff}, "dbz.public.items", ev("public", `a\u0000b`),
			"its table name holds a NUL byte"},
	} {
		p, err := New(c.c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b := sink.Batch{Topic: c.topic, Records: []sink.Record{{Topic: c.topic, Key: []byte(`{"id":1}`), Value: c.value}}}
		err = p.Write(context.Background(), nil, b)
		var ce *ConfinementError
		if !sink.IsPoison(err) || !errors.As(err, &ce) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want poison saying %q", c.name, err, c.reason)
		}
	}
}

// TestTopicCheckOff: with topic_check: off an event may name another topic's table, and a
// fixed target (no ${source.*}, no override) is never checked against its topic.
func TestTopicCheckOff(t *testing.T) {
	p, err := New(Config{Table: "replica.${source.table}", TopicCheck: TopicCheckOff})
	if err != nil {
		t.Fatal(err)
	}
	ev := &event{schema: "public", table: "accounts"}
	rt := p.rs.lookup("public", "accounts")
	if err := p.cf.target(rt.tmpl.render("", "public", "accounts", ""), rt, ev, "dbz.public.items"); err != nil {
		t.Errorf("topic_check: off: %v", err)
	}
	p, err = New(Config{Table: "replica.everything"})
	if err != nil {
		t.Fatal(err)
	}
	rt = p.rs.lookup("public", "accounts")
	if err := p.cf.target(rt.tmpl.render("", "public", "accounts", ""), rt, ev, "some-topic"); err != nil {
		t.Errorf("a fixed target: %v", err)
	}
}

func TestColumnBudget(t *testing.T) {
	p, err := New(Config{Table: "replica.${source.table}", MaxColumns: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cf.columns("replica.t", 3, []string{"a", "b"}); err != nil {
		t.Errorf("5 of 5: %v", err)
	}
	err = p.cf.columns("replica.t", 3, []string{"a", "b", "c"})
	if err == nil || !strings.Contains(err.Error(), "6 columns would exceed max_columns (5)") {
		t.Errorf("6 of 5: %v", err)
	}
	if p, _ := New(Config{Table: "replica.${source.table}"}); p.cf.maxColumns != DefaultMaxColumns {
		t.Errorf("default max_columns %d", p.cf.maxColumns)
	}
	if err := p.cf.columns("replica.t", 0, []string{"id", "eosink_del"}); err == nil || !strings.Contains(err.Error(), `field "eosink_del" cannot be a column`) {
		t.Errorf("a staging column: %v", err)
	}
}
