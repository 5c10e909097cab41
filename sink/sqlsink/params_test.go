package sqlsink

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

func TestRewrite(t *testing.T) {
	cases := []struct {
		in, want string
		names    []string
	}{
		{"INSERT INTO t (a, b) VALUES (@a, @b)", "INSERT INTO t (a, b) VALUES ($1, $2)", []string{"a", "b"}},
		{"UPDATE s SET qty = qty + @qty WHERE sku = @sku AND @qty > 0", "UPDATE s SET qty = qty + $1 WHERE sku = $2 AND $1 > 0", []string{"qty", "sku"}},
		{"SELECT @x::numeric, y::text, a[1:2], f(p := @p_1)", "SELECT $1::numeric, y::text, a[1:2], f(p := $2)", []string{"x", "p_1"}},
		{"SELECT '@no', E'\\'@no', \"@no\", $$ @no $$, $t$ @no $t$ -- @no\n, @yes /* @no /* @no */ @no */", "SELECT '@no', E'\\'@no', \"@no\", $$ @no $$, $t$ @no $t$ -- @no\n, $1 /* @no /* @no */ @no */", []string{"yes"}},
		{"SELECT 'it''s @no', @Case, @case", "SELECT 'it''s @no', $1, $2", []string{"Case", "case"}},
		{"SELECT tags @> @want, a @@ b, @ -5, x@y", "SELECT tags @> $1, a @@ b, @ -5, x$2", []string{"want", "y"}},
		{"SELECT a$1 FROM t", "SELECT a$1 FROM t", nil},
	}
	for _, c := range cases {
		got, names, err := rewrite(c.in)
		if err != nil {
			t.Errorf("rewrite(%q): %v", c.in, err)
			continue
		}
		if got != c.want || !slices.Equal(names, c.names) {
			t.Errorf("rewrite(%q)\n got %q %v\nwant %q %v", c.in, got, names, c.want, c.names)
		}
	}
}

func TestRewriteRejects(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "empty statement",
		"  \n":                 "empty statement",
		"SELECT $1":            "positional parameter $1",
		"SELECT 'open":         "unterminated string",
		"SELECT \"open":        "unterminated quoted identifier",
		"SELECT $q$ open":      "unterminated dollar-quoted",
		"SELECT /* open /* */": "unterminated comment",
		"SELECT '\x00'":        "NUL",
	} {
		if _, _, err := rewrite(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rewrite(%q): %v, want an error containing %q", in, err, want)
		}
	}
}

func FuzzRewrite(f *testing.F) {
	for _, s := range []string{"INSERT INTO t VALUES (@a, @b)", "SELECT '@x' || @y", "$$@x$$ @z", "E'\\'' @a", "/* /* */ */ @q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, names, err := rewrite(in)
		if err != nil {
			return
		}
		// Every name becomes $n, and nothing else changes: putting @name back gives the input.
		back := out
		for i := len(names); i >= 1; i-- {
			back = strings.ReplaceAll(back, "$"+strconv.Itoa(i), "@"+names[i-1])
		}
		if len(names) > 0 && !strings.Contains(in, "$") && back != in {
			t.Fatalf("rewrite(%q) = %q %v, which does not map back", in, out, names)
		}
	})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	base := func() Config {
		return Config{Params: map[string]Param{"sku": {From: "value.sku", Required: true}, "qty": {From: "value.qty"}},
			Statements: []string{"INSERT INTO h (sku, qty) VALUES (@sku, @qty)", "UPDATE s SET qty = qty + @qty WHERE sku = @sku"}}
	}
	cases := []struct {
		name        string
		mod         func(*Config)
		field, want string
	}{
		{"unknown parameter", func(c *Config) { c.Statements[1] = "UPDATE s SET qty = @qty WHERE sku = @skux" }, "statements[1]", "unknown parameter @skux (declared under params: qty, sku)"},
		{"unused parameter", func(c *Config) { c.Params["at"] = Param{From: "timestamp"} }, "params.at", "not used by any statement"},
		{"no statements", func(c *Config) { c.Statements = nil; c.Params = nil }, "statements", "required"},
		{"bad source", func(c *Config) { c.Params["qty"] = Param{From: "valu.qty"} }, "params.qty.from", ""},
		{"unknown cast", func(c *Config) { c.Params["qty"] = Param{From: "value.qty", Cast: "timestamptz"} }, "params.qty.cast", `unknown cast "timestamptz" (want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json)`},
		{"default and required", func(c *Config) { c.Params["sku"] = Param{From: "value.sku", Required: true, Default: ptr("x")} }, "params.sku.default", "exclude each other"},
		{"default the cast refuses", func(c *Config) { c.Params["qty"] = Param{From: "value.at", Cast: "rfc3339", Default: ptr("yesterday")} }, "params.qty.default", `cast rfc3339: "yesterday" is not an RFC 3339 timestamp`},
		{"bad name", func(c *Config) { c.Params["1x"] = Param{From: "key"} }, "params.1x", "cannot be written @1x"},
		{"positional", func(c *Config) { c.Statements[0] = "INSERT INTO h VALUES ($1)" }, "statements[0]", "positional parameter"},
		{"bad on_tombstone", func(c *Config) { c.OnTombstone = "delete" }, "on_tombstone", "want poison, skip or statements"},
		{"tombstone statements need the mode", func(c *Config) {
			c.OnTombstone = "skip"
			c.TombstoneStatements = []string{"DELETE FROM s WHERE sku = @sku"}
		}, "tombstone_statements", "only with on_tombstone: statements"},
		{"tombstone reads the value", func(c *Config) { c.TombstoneStatements = []string{"DELETE FROM s WHERE sku = @sku"} }, "tombstone_statements[0]", "@sku reads the value"},
		{"statements mode needs statements", func(c *Config) { c.OnTombstone = "statements" }, "tombstone_statements", "required"},
		{"bad format", func(c *Config) { c.ValueFormat = "xml" }, "value_format", ""},
		{"unknown parameter in a route", func(c *Config) {
			c.Routes = []Route{{Topic: "a", Statements: []string{"SELECT @sku"}}, {Topic: "^b", Statements: []string{"SELECT @qty, @nope"}}}
		}, "routes[1].statements[0]", "unknown parameter @nope"},
		{"route without topic", func(c *Config) { c.Routes = []Route{{Statements: []string{"SELECT @sku"}}} }, "routes[0].topic", "required"},
		{"route with a bad pattern", func(c *Config) { c.Routes = []Route{{Topic: "^(", Statements: []string{"SELECT @sku"}}} }, "routes[0].topic", "not a regular expression"},
		{"route without statements", func(c *Config) { c.Routes = []Route{{Topic: "a"}} }, "routes[0].statements", "required"},
		{"route tombstones need the mode", func(c *Config) {
			c.OnTombstone = "skip"
			c.Routes = []Route{{Topic: "a", Statements: []string{"SELECT @sku"}, TombstoneStatements: []string{"SELECT 1"}}}
		}, "routes[0].tombstone_statements", "only with on_tombstone: statements"},
		{"route needs tombstone statements", func(c *Config) {
			c.Statements, c.OnTombstone = nil, "statements"
			c.Routes = []Route{{Topic: "a", Statements: []string{"SELECT @sku, @qty"}}}
		}, "routes[0].tombstone_statements", "required"},
	}
	for _, c := range cases {
		cfg := base()
		c.mod(&cfg)
		_, err := New(cfg)
		var ce *sink.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Reason, c.want) {
			t.Errorf("%s: got %v, want a config error on %s containing %q", c.name, err, c.field, c.want)
		}
	}
	if _, err := New(base()); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	// Several problems: the first names the field, the others follow.
	cfg := base()
	cfg.Statements[0] = "INSERT INTO h VALUES (@nope)"
	cfg.Params["at"] = Param{From: "timestamp"}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "statements[0]: unknown parameter @nope") || !strings.Contains(err.Error(), "params.at: not used") {
		t.Errorf("several problems: %v", err)
	}
}

func ptr(s string) *string { return &s }

// TestParamsMapLikeColumns: a parameter takes the table plugin's column options (cast,
// default) and maps through the same code; a value its cast refuses is an error naming the
// parameter, its source and the value, before any statement runs.
func TestParamsMapLikeColumns(t *testing.T) {
	p, err := New(Config{Params: map[string]Param{
		"at":     {From: "value.at", Cast: "rfc3339"},
		"ms":     {From: "value.ms", Cast: "epoch_ms", Default: ptr("0")},
		"region": {From: "value.region", Default: ptr("eu")},
		"blob":   {From: "value.b64", Cast: "base64"},
		"doc":    {From: "value.doc", Cast: "json"},
	}, Statements: []string{"SELECT @at, @ms, @region, @blob, @doc"}})
	if err != nil {
		t.Fatal(err)
	}
	r := sink.Record{Value: []byte(`{"at": "2023-11-14T23:13:20.5+01:00", "ms": 1700000000123, "b64": "+/8=", "doc": "{\"a\": 1}"}`)}
	row, err := p.m.Row(&r, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for i, c := range p.m.Columns {
		byName[c.Name] = row[i]
	}
	want := map[string]any{"at": "2023-11-14T22:13:20.5Z", "ms": "2023-11-14T22:13:20.123Z", "region": "eu", "blob": "\xfb\xff", "doc": `{"a": 1}`}
	if fmt.Sprintf("%q", byName) != fmt.Sprintf("%q", want) {
		t.Fatalf("row %q, want %q", byName, want)
	}
	// Absent: the defaults, through the cast.
	r = sink.Record{Value: []byte(`{"region": null}`)}
	if row, err = p.m.Row(&r, nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range p.m.Columns {
		byName[c.Name] = row[i]
	}
	want = map[string]any{"at": nil, "ms": "1970-01-01T00:00:00Z", "region": nil, "blob": nil, "doc": nil}
	if fmt.Sprintf("%q", byName) != fmt.Sprintf("%q", want) {
		t.Fatalf("defaults: row %q, want %q", byName, want)
	}
	r = sink.Record{Value: []byte(`{"at": "yesterday"}`)}
	_, err = p.m.Row(&r, nil)
	err = paramError(err)
	if want := `sql: parameter @at (value.at): cast rfc3339: "yesterday" is not an RFC 3339 timestamp`; err == nil || err.Error() != want || !errors.Is(err, mapping.ErrCast) {
		t.Fatalf("yesterday: %v, want %q matching mapping.ErrCast", err, want)
	}
}

// TestParamsFromYAML: a config section's parameter takes cast and default, and an unknown
// key's error lists them.
func TestParamsFromYAML(t *testing.T) {
	raw := map[string]any{"type": "sql", "statements": []any{"SELECT @at, @n"}, "params": map[string]any{
		"at": map[string]any{"from": "value.at", "cast": "rfc3339"},
		"n":  map[string]any{"from": "value.n", "default": 0},
	}}
	p, err := plugin.Build(plugin.Config{Path: "sink", Raw: raw})
	if err != nil {
		t.Fatal(err)
	}
	cols := p.(*SQL).m.Columns
	if cols[0].Name != "at" || cols[0].Cast != mapping.CastRFC3339 || cols[1].Name != "n" || cols[1].Default == nil || *cols[1].Default != "0" {
		t.Fatalf("columns %+v", cols)
	}
	raw["params"].(map[string]any)["at"].(map[string]any)["colour"] = "red"
	_, err = plugin.Build(plugin.Config{Path: "sink", Raw: raw})
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "sink.params.at.colour" || ce.Reason != "unknown key (sink.params.at has from, expr, required, cast, default)" {
		t.Fatalf("unknown key: %v", err)
	}
	raw["params"].(map[string]any)["at"] = map[string]any{"from": "value.at", "cast": "epoch_sec"}
	if _, err = plugin.Build(plugin.Config{Path: "sink", Raw: raw}); !errors.As(err, &ce) || ce.Field != "sink.params.at.cast" || !strings.Contains(ce.Reason, `unknown cast "epoch_sec"`) {
		t.Fatalf("unknown cast: %v", err)
	}
}

// TestRegisteredConfig: from a config section the error names the path from the file's root.
func TestRegisteredConfig(t *testing.T) {
	raw := map[string]any{"type": "sql", "params": map[string]any{"sku": map[string]any{"from": "value.sku", "required": true}},
		"statements": []any{"INSERT INTO h (sku) VALUES (@sku)", "UPDATE s SET n = n + 1 WHERE sku = @skux"}}
	_, err := plugin.Build(plugin.Config{Path: "sink", Raw: raw})
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "sink.statements[1]" || !strings.Contains(ce.Reason, "unknown parameter @skux") {
		t.Fatalf("got %v, want a config error on sink.statements[1]", err)
	}
	raw["statements"] = []any{"INSERT INTO h (sku) VALUES (@sku)"}
	raw["oops"] = 1
	if _, err := plugin.Build(plugin.Config{Path: "sink", Raw: raw}); !errors.As(err, &ce) || ce.Field != "sink.oops" {
		t.Fatalf("unknown key: got %v, want a config error on sink.oops", err)
	}
	delete(raw, "oops")
	p, err := plugin.Build(plugin.Config{Path: "sink", Raw: raw})
	if err != nil {
		t.Fatal(err)
	}
	got := p.(*SQL).RouteSummary()
	if err := p.(*SQL).CheckTopic("any"); err != nil {
		t.Fatalf("CheckTopic with default statements: %v", err)
	}
	want := []string{"(every topic) -> statements[0]: INSERT INTO h (sku) VALUES (@sku)", "(tombstones) -> poison"}
	if !slices.Equal(got, want) {
		t.Fatalf("RouteSummary = %q, want %q", got, want)
	}
}

// TestRoutes: a topic runs the first matching route's statements, else the default ones;
// without default statements, a topic no route takes has no route.
func TestRoutes(t *testing.T) {
	c := Config{Params: map[string]Param{"x": {From: "value.x"}, "k": {From: "key"}},
		Routes: []Route{
			{Topic: "orders", Statements: []string{"SELECT @x"}},
			{Topic: "^audit\\.", Statements: []string{"SELECT @x, @k"}, TombstoneStatements: []string{"SELECT @k"}},
		},
		TombstoneStatements: []string{"SELECT 2"}}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"orders": "orders", "audit.x": "^audit\\.", "auditx": ""} {
		tg, err := p.target(topic)
		if want == "" {
			if !errors.Is(err, sink.ErrNoRoute) {
				t.Errorf("%s: %v, want no route", topic, err)
			}
			continue
		}
		if err != nil || tg.topic != want {
			t.Errorf("%s: route %v (%v), want %s", topic, tg, err, want)
		}
	}
	c.Statements = []string{"SELECT 1"}
	if p, err = New(c); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"orders -> routes[0].statements[0]: SELECT @x",
		"orders (tombstones) -> tombstone_statements[0]: SELECT 2",
		"^audit\\. -> routes[1].statements[0]: SELECT @x, @k",
		"^audit\\. (tombstones) -> routes[1].tombstone_statements[0]: SELECT @k",
		"(any other topic) -> statements[0]: SELECT 1",
		"(any other topic) (tombstones) -> tombstone_statements[0]: SELECT 2",
	}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Fatalf("RouteSummary:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tg, err := p.target("other"); err != nil || tg.stmts[0].sql != "SELECT 1" {
		t.Fatalf("other topic: %v %v", tg, err)
	}
}

// TestParamsTakeExpressions: a parameter's expr, as a column's, gives its value; a compile
// error names the parameter's path.
func TestParamsTakeExpressions(t *testing.T) {
	p, err := New(Config{Params: map[string]Param{
		"amount": {Expr: `value.amount.replace(",", ".")`, Required: true},
		"id":     {Expr: `value.id + ":" + string(offset)`},
	}, Statements: []string{"SELECT @amount::numeric, @id"}})
	if err != nil {
		t.Fatal(err)
	}
	r := sink.Record{Offset: 7, Value: []byte(`{"amount": "12,30", "id": "p1"}`)}
	row, err := p.m.Row(&r, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for i, c := range p.m.Columns {
		byName[c.Name] = row[i]
	}
	if byName["amount"] != "12.30" || byName["id"] != "p1:7" {
		t.Fatalf("row %q", byName)
	}
	_, err = New(Config{Params: map[string]Param{"amount": {Expr: `value.amount +`}}, Statements: []string{"SELECT @amount"}})
	if err == nil || !strings.Contains(err.Error(), "params.amount.expr: 1:") {
		t.Fatalf("a bad expression: %v, want an error at params.amount.expr", err)
	}
}
