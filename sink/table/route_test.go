package table_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

var cols = map[string]table.Column{"id": {From: "value.id"}, "body": {From: "value"}}

func TestRoutesPickTheFirstMatch(t *testing.T) {
	p, err := table.New(table.Config{Columns: cols, Routes: []table.Route{
		{Topic: "orders", Table: "shop.orders"},
		{Topic: `^cdc\.public\.(.*)`, Table: "replica.${1}"},
		{Topic: `^cdc\..*`, Table: "raw.${topic}"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"orders", "cdc.public.items", "cdc.other.x"} {
		if err := p.CheckTopic(topic); err != nil {
			t.Errorf("%s: %v", topic, err)
		}
	}
	for _, topic := range []string{"order", "orders2", "xcdc.public.items", "payments"} {
		err := p.CheckTopic(topic)
		var nr *sink.NoRouteError
		if !errors.As(err, &nr) || !errors.Is(err, sink.ErrNoRoute) || nr.Topic != topic {
			t.Errorf("%s: got %v, want a *sink.NoRouteError", topic, err)
			continue
		}
		if !strings.Contains(err.Error(), `orders, ^cdc\.public\.(.*), ^cdc\..*`) || !strings.Contains(err.Error(), "no default table") {
			t.Errorf("%s: the error does not list the routes: %v", topic, err)
		}
	}
	want := []string{"orders -> shop.orders", `^cdc\.public\.(.*) -> replica.${1}`, `^cdc\..* -> raw.${topic}`}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestDefaultTableTakesEveryOtherTopic(t *testing.T) {
	p, err := table.New(table.Config{Table: "public.events", Columns: cols, Routes: []table.Route{{Topic: "orders", Table: "orders"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckTopic("anything"); err != nil {
		t.Error(err)
	}
	want := []string{"orders -> orders", "(any other topic) -> public.events"}
	if got := p.RouteSummary(); !slices.Equal(got, want) {
		t.Errorf("summary %q, want %q", got, want)
	}
	// A template as the default table.
	p, err = table.New(table.Config{Table: "raw.${topic}", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckTopic("a.b-c"); err != nil {
		t.Error(err)
	}
	if got, want := p.RouteSummary(), []string{"(every topic) -> raw.${topic}"}; !slices.Equal(got, want) {
		t.Errorf("summary %q, want %q", got, want)
	}
	long := strings.Repeat("t", 64)
	if err := p.CheckTopic(long); !errors.Is(err, sink.ErrNoRoute) || !strings.Contains(err.Error(), "63 bytes") {
		t.Errorf("a 64-byte table name: got %v, want a no-route error about 63 bytes", err)
	}
}

func TestRouteConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		c    table.Config
		want string
	}{
		{"nothing", table.Config{Columns: cols}, "table: required (or routes)"},
		{"no topic", table.Config{Columns: cols, Routes: []table.Route{{Table: "t"}}}, "routes[0].topic: required"},
		{"bad pattern", table.Config{Columns: cols, Routes: []table.Route{{Topic: "^(x", Table: "t"}}}, "routes[0].topic: \"^(x\" is not a regular expression"},
		{"no table", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a"}}}, "routes[0].table: required"},
		{"three parts", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "a.b.c"}}}, "routes[0].table: \"a.b.c\" is not table or schema.table"},
		{"unknown var", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "x.${partition}"}}}, "unknown variable ${partition}"},
		{"group of a name", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "x.${1}"}}}, "${1} but the route's topic pattern has 0 capture groups"},
		{"too many groups", table.Config{Columns: cols, Routes: []table.Route{{Topic: "^a(.)", Table: "x.${2}"}}}, "has 1 capture groups"},
		{"duplicate", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "x"}, {Topic: "a", Table: "y"}}}, "routes[1].topic: \"a\" is routed by routes[0] already"},
		{"no columns", table.Config{Routes: []table.Route{{Topic: "a", Table: "x"}}}, "routes[0].columns: at least one column is required"},
		{"bad column", table.Config{Routes: []table.Route{{Topic: "a", Table: "x", Columns: map[string]table.Column{"c": {From: "nope"}}}}}, "routes[0].columns.c.from:"},
		{"key in table", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "x", Key: []string{"id"}}}}, "routes[0].key: only the upsert plugin"},
		{"NUL in a table", table.Config{Columns: cols, Routes: []table.Route{{Topic: "a", Table: "public.x\x00y"}}}, `routes[0].table: "public.x\x00y" holds a NUL byte`},
		{"newline in the table", table.Config{Columns: cols, Table: "public.x\ny"}, "holds a control character (U+000A)"},
		{"escape in a column", table.Config{Table: "x", Columns: map[string]table.Column{"c\x1b[0m": {From: "value.c"}}}, "holds a control character (U+001B)"},
	}
	for _, tc := range cases {
		_, err := table.New(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// upsert: a route's key must be among its columns, and defaults to the plugin's key.
	_, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, Config: table.Config{Columns: cols, Routes: []table.Route{
		{Topic: "a", Table: "x", Columns: map[string]table.Column{"other": {From: "value.o"}}},
	}}})
	if err == nil || !strings.Contains(err.Error(), `routes[0].key: column "id" is not in columns`) {
		t.Errorf("upsert route without its key column: got %v", err)
	}
	u, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, Config: table.Config{Columns: cols, Routes: []table.Route{
		{Topic: "a", Table: "x", Columns: map[string]table.Column{"other": {From: "value.o"}}, Key: []string{"other"}},
		{Topic: "^b.*", Table: "y.${topic}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.CheckTopic("c"); !errors.Is(err, sink.ErrNoRoute) {
		t.Errorf("upsert: topic c: got %v, want ErrNoRoute", err)
	}
}

// The sink refuses a listed topic without a route when it is created, naming the field.
func TestSinkRefusesUnroutedListedTopic(t *testing.T) {
	p, err := table.New(table.Config{Columns: cols, Routes: []table.Route{{Topic: "orders", Table: "orders"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sink.New(sink.Config{Brokers: "127.0.0.1:1", GroupID: "g", DatabaseURL: "postgres://x@127.0.0.1/db", Plugin: p,
		Topics: []string{"orders", "payments", `^eu\..*`}})
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Topics[1]" || !strings.Contains(ce.Reason, `no route for topic "payments"`) {
		t.Fatalf("got %v, want a ConfigError for Topics[1] naming payments", err)
	}
}

// write applies one batch of topic through p in a transaction of its own.
func write(t *testing.T, db *pgxpool.Pool, p sink.Plugin, topic string, values ...string) error {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b := sink.Batch{Topic: topic}
	for i, v := range values {
		b.Records = append(b.Records, sink.Record{Topic: topic, Offset: int64(i), Key: []byte(fmt.Sprint(i)), Value: []byte(v)})
	}
	if err := p.Write(ctx, tx, b); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Routes write each topic to its table: a name, a pattern's group, ${topic} with dots (one
// quoted identifier); upsert routes with their own key. A fixed route's missing table fails
// Prepare; a templated one fails its first batch.
func TestRoutesWriteToTheirTables(t *testing.T) {
	db, schema := testDB(t)
	ctx := context.Background()
	for _, name := range []string{"orders", "eu", "raw.events.x"} {
		exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, name}.Sanitize()+" (id int PRIMARY KEY, src text)")
	}
	c := map[string]table.Column{"id": {From: "value.id"}, "src": {From: "topic"}}
	p, err := table.New(table.Config{Columns: c, Table: schema + ".${topic}", Routes: []table.Route{
		{Topic: "shop-orders", Table: schema + ".orders"},
		{Topic: `^region-(eu|us)$`, Table: schema + ".${1}"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, db); err != nil {
		t.Fatal(err)
	}
	for topic, v := range map[string]string{"shop-orders": `{"id": 1}`, "region-eu": `{"id": 2}`, "raw.events.x": `{"id": 3}`} {
		if err := write(t, db, p, topic, v); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
	}
	got, err := rows(ctx, db, `SELECT format('%s %s %s', 'orders', id, src) FROM `+pgx.Identifier{schema, "orders"}.Sanitize()+
		` UNION ALL SELECT format('%s %s %s', 'eu', id, src) FROM `+pgx.Identifier{schema, "eu"}.Sanitize()+
		` UNION ALL SELECT format('%s %s %s', 'raw', id, src) FROM `+pgx.Identifier{schema, "raw.events.x"}.Sanitize()+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"eu 2 region-eu", "orders 1 shop-orders", "raw 3 raw.events.x"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	// region-us renders a table that does not exist: the batch fails, naming it.
	if err := write(t, db, p, "region-us", `{"id": 4}`); err == nil || !strings.Contains(err.Error(), "us does not exist") {
		t.Fatalf("region-us: %v, want a missing table", err)
	}

	// upsert: a route with its own columns and key.
	exec(t, db, "CREATE TABLE "+pgx.Identifier{schema, "balances"}.Sanitize()+" (account text PRIMARY KEY, amount int)")
	u, err := table.NewUpsert(table.UpsertConfig{Key: []string{"id"}, Config: table.Config{Columns: c, Routes: []table.Route{
		{Topic: "balances", Table: schema + ".balances", Key: []string{"account"},
			Columns: map[string]table.Column{"account": {From: "value.a"}, "amount": {From: "value.n"}}},
		{Topic: "^shop-", Table: schema + ".orders"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Prepare(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, u, "balances", `{"a": "x", "n": 1}`, `{"a": "x", "n": 5}`, `{"a": "y", "n": 2}`); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, u, "shop-orders", `{"id": 1}`, `{"id": 9}`); err != nil {
		t.Fatal(err)
	}
	got, err = rows(ctx, db, `SELECT format('%s=%s', account, amount) FROM `+pgx.Identifier{schema, "balances"}.Sanitize()+
		` UNION ALL SELECT format('%s=%s', id, src) FROM `+pgx.Identifier{schema, "orders"}.Sanitize()+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1=shop-orders", "9=shop-orders", "x=5", "y=2"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if err := write(t, db, u, "other", `{"id": 1}`); !errors.Is(err, sink.ErrNoRoute) {
		t.Fatalf("an unrouted topic's batch: %v, want ErrNoRoute", err)
	}

	// A fixed route's missing table fails at start.
	missing, err := table.New(table.Config{Columns: c, Routes: []table.Route{{Topic: "a", Table: schema + ".nosuch"}, {Topic: "^b", Table: schema + ".${topic}"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := missing.Prepare(ctx, db); err == nil || !strings.Contains(err.Error(), "nosuch does not exist") {
		t.Fatalf("Prepare: %v, want the missing table", err)
	}
}
