package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
)

// typesDDL is the source's DDL; the replica runs the same statements in its own schema
// (then makes mood_text a text column, to check an enum into text).
const typesDDL = `CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'très "bien", {ok}', 'NULL');
CREATE TABLE typed (
  id int PRIMARY KEY,
  tags text[],
  ns int[],
  big_ns bigint[],
  mood mood,
  mood_text mood,
  amount numeric(12,2),
  big numeric(20,6),
  nums numeric(10,2)[],
  ids uuid[],
  tss timestamptz[],
  lts timestamp[],
  flags boolean[]
);
CREATE TABLE grids (id int PRIMARY KEY, grid int[]);
CREATE TABLE amounts (id int PRIMARY KEY, amount numeric(12,2));`

// typedCols are typed's columns, in order.
var typedCols = []string{"id", "tags", "ns", "big_ns", "mood", "mood_text", "amount", "big", "nums", "ids", "tss", "lts", "flags"}

// TestCDCTypesJSONWithSchemas: text[] (commas, quotes, NULL elements, backslashes,
// non-ASCII, empty strings, the text "NULL"), int[], bigint[], arrays of numeric, uuid,
// timestamptz, timestamp and boolean, an enum into the same enum type and into text, and
// numeric(12,2) (-29293.56, -31382.52 and random values) and numeric(20,6), through the
// real Debezium connector with the JsonConverter and schemas into eosink run: the replica,
// made with the source's own DDL, equals the source as row::text.
func TestCDCTypesJSONWithSchemas(t *testing.T) { typesScenario(t, testbed.JSONWithSchemas, "", "") }

// TestCDCTypesAvro: the same through Avro and the registry.
func TestCDCTypesAvro(t *testing.T) { typesScenario(t, testbed.Avro, "", "") }

// TestCDCTypesJSONPlainPrecise: JSON without schemas, decimal.handling.mode=precise (the
// connector's default) and decimal_handling: precise.
func TestCDCTypesJSONPlainPrecise(t *testing.T) {
	typesScenario(t, testbed.JSONPlain, "precise", "precise")
}

// TestCDCTypesJSONPlainString: decimal.handling.mode=string, decimal_handling: string.
func TestCDCTypesJSONPlainString(t *testing.T) {
	typesScenario(t, testbed.JSONPlain, "string", "string")
}

// TestCDCTypesJSONPlainDouble: decimal.handling.mode=double, decimal_handling: double. The
// connector sends doubles: numeric(12,2) arrives exact, numeric(20,6) does not (the test
// reports how many values the connector changed, and checks every other column exactly).
func TestCDCTypesJSONPlainDouble(t *testing.T) {
	typesScenario(t, testbed.JSONPlain, "double", "double")
}

// TestCDCDecimalsUnsetStops: JSON without schemas, the connector's default precise, and no
// decimal_handling: -29293.56 in a numeric(12,2) arrives as "0000", which is also the
// decimal text 0000. The partition stops at it, naming decimal_handling; no row of the
// replica holds a number the source does not (the old code stored 0.00).
func TestCDCDecimalsUnsetStops(t *testing.T) {
	typesScenario(t, testbed.JSONPlain, "", "")
}

func typesScenario(t *testing.T, conv testbed.Converter, connectorMode, sinkMode string) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "typesrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if _, err := src.Exec(ctx, typesDDL); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(22, uint64(len(conv)+len(connectorMode))))
	w := &typesWorkload{r: r, src: src}
	for id := 1; id <= 40; id++ { // read by Debezium's snapshot
		w.insert(t, ctx, id)
	}
	if _, err := src.Exec(ctx, `INSERT INTO grids VALUES (1, '{1,2,NULL}'), (2, '{{1,2},{3,4}}'), (3, '{}'), (4, NULL);
INSERT INTO amounts VALUES (1, -29293.56), (2, -31382.52), (3, 1.00)`); err != nil {
		t.Fatal(err)
	}
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	rs := pgx.Identifier{replica}.Sanitize()
	if _, err := db.Exec(ctx, fmt.Sprintf("BEGIN; CREATE SCHEMA %[1]s; SET LOCAL search_path TO %[1]s; %[2]s\nALTER TABLE typed ALTER COLUMN mood_text TYPE text; COMMIT",
		rs, typesDDL)); err != nil {
		t.Fatal(err)
	}
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.typed", "public.grids", "public.amounts"}, TopicPrefix: testbed.Name(t, "types"),
		Converter: conv, RegistryURL: registryURL, DecimalHandling: connectorMode})
	t.Logf("Debezium (%s, decimal.handling.mode=%s) running after %s", conv, connectorMode, d.StartedIn.Round(time.Millisecond))
	topics := []string{d.Topic("public.typed"), d.Topic("public.grids"), d.Topic("public.amounts")}
	waitTopics(t, e.Brokers, topics)
	format, registry, decimals := "json", "", ""
	if conv == testbed.Avro {
		format, registry = "avro", "schema_registry:\n  url: "+registryURL+"\n"
	}
	if sinkMode != "" {
		decimals = "  decimal_handling: " + sinkMode + "\n"
	}
	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
database:
  url: %s
  schema: %s
on_poison: dead-letter
%ssink:
  type: cdc
  format: %s
  table: "%s.$${source.table}"
%s`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.Join(topics, ", "), e.DatabaseURL, offsets, registry, format, replica, decimals)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	sink := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	for id := 41; id <= 80; id++ { // streamed
		w.insert(t, ctx, id)
	}
	for range 20 {
		w.update(t, ctx, 1+r.IntN(80))
	}
	for _, id := range []int{5, 17, 44, 63} {
		if _, err := src.Exec(ctx, `DELETE FROM typed WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	oq := pgx.Identifier{offsets}.Sanitize()
	deadLetters := func(topic string) (int, string) {
		var n int
		var reason string
		if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), coalesce(min(error), '') FROM %s.dead_letters WHERE topic = $1`, oq), topic).Scan(&n, &reason); err != nil {
			t.Fatal(err)
		}
		return n, reason
	}
	cols := typedCols
	if connectorMode == "double" {
		cols = slices.DeleteFunc(slices.Clone(typedCols), func(c string) bool { return c == "big" })
	}
	rowsOf := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}, schema string) ([]string, error) {
		return textRows(ctx, q, fmt.Sprintf(`SELECT row(%s)::text FROM %s.typed`, strings.Join(cols, ", "), pgx.Identifier{schema}.Sanitize()))
	}

	if conv == testbed.JSONPlain && sinkMode == "" {
		var reason, stopErr string
		testbed.Eventually(t, 2*time.Minute, "the partition of typed to stop", func() (bool, string) {
			// Rows 1, 41 always hold -29293.56 ("0000"), 2, 42 -31382.52 ("0B00").
			wrong, err := textRows(ctx, db, fmt.Sprintf(`SELECT id || ': ' || amount FROM %s.typed
  WHERE id IN (1, 41) AND amount IS DISTINCT FROM -29293.56 OR id IN (2, 42) AND amount IS DISTINCT FROM -31382.52`, rs))
			if err != nil || len(wrong) > 0 {
				t.Fatalf("the replica holds amounts the source never had: %v %v", wrong, err)
			}
			// amounts has no arrays: on the old code its events applied, "0000" as 0.00.
			if wrong, err = textRows(ctx, db, fmt.Sprintf(`SELECT id || ': ' || amount FROM %s.amounts
  WHERE id = 1 AND amount <> -29293.56 OR id = 2 AND amount <> -31382.52`, rs)); err != nil || len(wrong) > 0 {
				t.Fatalf("the replica of amounts holds amounts the source never had: %v %v", wrong, err)
			}
			err = db.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(stopped_reason, ''), coalesce(stopped_error, '') FROM %s.offsets WHERE pipeline = $1 AND topic = $2`, oq),
				pipeline, d.Topic("public.typed")).Scan(&reason, &stopErr)
			return err == nil && reason != "", fmt.Sprint(reason, err)
		})
		t.Logf("typed stopped: %s: %s", reason, stopErr)
		if reason != "decimal_ambiguous" { // sink.StopDecimal; it was the generic handler
			t.Errorf("stopped with reason %q, want decimal_ambiguous", reason)
		}
		if !strings.Contains(stopErr, "decimal_handling") || !strings.Contains(stopErr, `"0000"`) || !strings.Contains(stopErr, "-29293.56") {
			t.Errorf("stop reason %q does not name decimal_handling and the value", stopErr)
		}
		a, err := rowsOf(src, "public")
		if err != nil {
			t.Fatal(err)
		}
		b, err := rowsOf(db, replica)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range b {
			if !slices.Contains(a, row) {
				t.Errorf("the replica holds a row the source does not: %s", row)
			}
		}
		if n, reason := deadLetters(d.Topic("public.typed")); n != 0 {
			t.Errorf("%d dead letters of typed: %s", n, reason)
		}
		t.Logf("replica: %d rows, all of the source", len(b))
		sink.StopClean(60 * time.Second)
		return
	}

	testbed.Eventually(t, 2*time.Minute, "the replica of typed equal to the source (row::text)", func() (bool, string) {
		if n, reason := deadLetters(d.Topic("public.typed")); n > 0 {
			t.Fatalf("%d events of typed dead-lettered: %s", n, reason)
		}
		a, err := rowsOf(src, "public")
		if err != nil {
			return false, err.Error()
		}
		b, err := rowsOf(db, replica)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(a, b), typesDiff(a, b)
	})
	a, _ := rowsOf(src, "public")
	t.Logf("typed: %d rows, replica equal as row::text (columns %s)", len(a), strings.Join(cols, ", "))
	if connectorMode == "double" {
		lossyDouble(t, ctx, src, db, replica)
	}
	// grids: the one-dimensional, empty and NULL arrays are exact. The connector itself loses
	// a two-dimensional array: {{1,2},{3,4}} arrives as [null,null], the event of a
	// one-dimensional array of two NULLs, which the sink cannot tell from it. This checks
	// what arrives, so that a connector that starts sending more is noticed.
	testbed.Eventually(t, time.Minute, "grids applied", func() (bool, string) {
		n, _ := deadLetters(d.Topic("public.grids"))
		b, err := textRows(ctx, db, fmt.Sprintf(`SELECT g::text FROM %s.grids g`, rs))
		return err == nil && len(b)+n == 4, fmt.Sprint(b, n, err)
	})
	b, _ := textRows(ctx, db, fmt.Sprintf(`SELECT g::text FROM %s.grids g`, rs))
	n, reason := deadLetters(d.Topic("public.grids"))
	t.Logf("grids: replica %v; %d dead-lettered %s", b, n, reason)
	if want := []string{"(1,\"{1,2,NULL}\")", "(2,\"{NULL,NULL}\")", "(3,{})", "(4,)"}; !slices.Equal(b, want) || n != 0 {
		t.Errorf("grids: replica %v, %d dead letters; want %v (the 2-D {{1,2},{3,4}} as the connector sends it, [null,null])", b, n, want)
	} else {
		t.Logf("grids: the source's two-dimensional {{1,2},{3,4}} arrived from the connector as [null,null] (connector loss)")
	}
	sink.StopClean(60 * time.Second)
}

// lossyDouble reports the numeric(20,6) values that decimal.handling.mode=double changed.
func lossyDouble(t *testing.T, ctx context.Context, src *pgx.Conn, db *pgxpool.Pool, replica string) {
	a, err := textRows(ctx, src, `SELECT id || ' ' || big FROM typed`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := textRows(ctx, db, fmt.Sprintf(`SELECT id || ' ' || big FROM %s.typed`, pgx.Identifier{replica}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for i := range a {
		if i < len(b) && a[i] != b[i] {
			lost = append(lost, a[i]+" → "+strings.SplitN(b[i], " ", 2)[1])
		}
	}
	t.Logf("decimal.handling.mode=double: %d of %d numeric(20,6) values changed by the connector (e.g. %v)", len(lost), len(a), lost[:min(3, len(lost))])
	if len(lost) == 0 {
		t.Error("no numeric(20,6) value lost digits under double: the test's values are too small to show it")
	}
}

func typesDiff(a, b []string) string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, "source only: "+x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, "replica only: "+x)
		}
	}
	return fmt.Sprintf("source %d rows, replica %d rows\n%s", len(a), len(b), strings.Join(out[:min(6, len(out))], "\n"))
}

// typesWorkload writes random rows of typed.
type typesWorkload struct {
	r   *rand.Rand
	src *pgx.Conn
}

var (
	tagPool  = []string{"a,b", `q"uote`, `back\slash`, "ünï €𝄞", "", "NULL", "null", "{br}", " sp ", "red", "blue", `\N`, "'apos'"}
	moodPool = []string{"sad", "ok", "happy", `très "bien", {ok}`, "NULL"}
)

const typesUpsert = `INSERT INTO typed VALUES ($1, $2, $3, $4, $5::text::mood, $6::text::mood, $7::text::numeric, $8::text::numeric,
  $9::text[]::numeric(10,2)[], $10::text[]::uuid[], $11::text[]::timestamptz[], $12::text[]::timestamp[], $13)
ON CONFLICT (id) DO UPDATE SET tags = EXCLUDED.tags, ns = EXCLUDED.ns, big_ns = EXCLUDED.big_ns, mood = EXCLUDED.mood,
  mood_text = EXCLUDED.mood_text, amount = EXCLUDED.amount, big = EXCLUDED.big, nums = EXCLUDED.nums, ids = EXCLUDED.ids,
  tss = EXCLUDED.tss, lts = EXCLUDED.lts, flags = EXCLUDED.flags`

func (w *typesWorkload) insert(t *testing.T, ctx context.Context, id int) { w.write(t, ctx, id) }
func (w *typesWorkload) update(t *testing.T, ctx context.Context, id int) { w.write(t, ctx, id) }

func (w *typesWorkload) write(t *testing.T, ctx context.Context, id int) {
	t.Helper()
	r := w.r
	amount := w.decimal(10, 2)
	switch id {
	case 1, 41:
		amount = "-29293.56" // precise: "0000"
	case 2, 42:
		amount = "-31382.52" // precise: "0B00"
	}
	var tags []*string
	for range r.IntN(8) {
		if r.IntN(6) == 0 {
			tags = append(tags, nil)
		} else {
			s := tagPool[r.IntN(len(tagPool))]
			tags = append(tags, &s)
		}
	}
	var ns []*int32
	for range r.IntN(6) {
		if r.IntN(5) == 0 {
			ns = append(ns, nil)
		} else {
			n := int32(r.Uint32())
			ns = append(ns, &n)
		}
	}
	bigNs := []int64{-9223372036854775808, 9223372036854775807, int64(r.Uint64())}[:r.IntN(4)]
	var nums, ids, tss, lts []*string
	for range r.IntN(4) {
		n, u := w.decimal(8, 2), fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Int64N(1<<48))
		ts := time.Unix(r.Int64N(4e9)-1e9, r.Int64N(1e6)*1000).UTC() // 1938 to 2096
		z, l := ts.Format("2006-01-02 15:04:05.999999+00"), ts.Format("2006-01-02 15:04:05.999999")
		nums, ids, tss, lts = append(nums, &n), append(ids, &u), append(tss, &z), append(lts, &l)
	}
	if r.IntN(4) == 0 {
		nums = append(nums, nil)
	}
	var flags []*bool
	for range r.IntN(4) {
		b := r.IntN(2) == 0
		flags = append(flags, &b)
	}
	var mood any = moodPool[r.IntN(len(moodPool))]
	if r.IntN(8) == 0 {
		mood = nil
	}
	if _, err := w.src.Exec(ctx, typesUpsert, id, tags, ns, bigNs, mood, moodPool[r.IntN(len(moodPool))], amount,
		w.decimal(14, 6), nums, ids, tss, lts, flags); err != nil {
		t.Fatal(err)
	}
}

// decimal returns a random decimal with up to digits integer digits and scale fraction
// digits, either sign.
func (w *typesWorkload) decimal(digits, scale int) string {
	r := w.r
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteByte('-')
	}
	n := 1 + r.IntN(digits)
	for i := range n {
		d := r.IntN(10)
		if i == 0 && n > 1 && d == 0 {
			d = 1
		}
		b.WriteByte(byte('0' + d))
	}
	b.WriteByte('.')
	for range scale {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}
