package mapping

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"

	"github.com/eosink/eosink/sink"
)

func mustExpr(t testing.TB, text string) *Expr {
	t.Helper()
	e, err := CompileExpr(text)
	if err != nil {
		t.Fatalf("CompileExpr(%q): %v", text, err)
	}
	return e
}

func mustCond(t testing.TB, text string) *Expr {
	t.Helper()
	e, err := CompileCondition(text)
	if err != nil {
		t.Fatalf("CompileCondition(%q): %v", text, err)
	}
	return e
}

// exprRow maps r with one column whose value is text, through Row and AppendCopy, and
// checks the two agree.
func exprRow(t *testing.T, m *Mapping, r *sink.Record) ([]any, error) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	row, err := m.Row(r, nil)
	var scratch []byte
	line, cerr := m.AppendCopy(nil, r, nil, &scratch)
	var want []byte
	werr := err
	if err == nil {
		want, werr = AppendCopyRow(nil, row, nil) // bytes in a text column: refused by both
	}
	if (werr == nil) != (cerr == nil) || string(want) != string(line) {
		t.Fatalf("AppendCopy %q (%v), Row+AppendCopyRow %q (%v)", line, cerr, want, werr)
	}
	return row, err
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		text, cond, want string
	}{
		{text: "", want: "empty expression"},
		{text: "value.a +", want: "1:10: Syntax error"},
		{text: "nosuchvar + 1", want: "1:1: undeclared reference to 'nosuchvar'"},
		{text: "topic + 1", want: "no matching overload"},
		{text: `value.a.nosuchfn()`, want: "undeclared reference to 'nosuchfn'"},
		{cond: `topic + "x"`, want: "gives string, not bool"},
		{cond: `offset`, want: "gives int, not bool"},
	} {
		var err error
		if tc.cond != "" {
			_, err = CompileCondition(tc.cond)
		} else {
			_, err = CompileExpr(tc.text)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("compile %q%q: %v, want an error with %q", tc.text, tc.cond, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("compile %q%q: the error has several lines: %q", tc.text, tc.cond, err)
		}
	}
	for _, ok := range []string{`value.status in ["a", "b"]`, `value.n > 1`, `has(value.x)`, `key == "k"`} {
		if _, err := CompileCondition(ok); err != nil {
			t.Errorf("CompileCondition(%q): %v", ok, err)
		}
	}
}

func TestExprValues(t *testing.T) {
	r := &sink.Record{Topic: "pay", Partition: 2, Offset: 77, Key: []byte("k-1"),
		Value: []byte(`{"amount": "12,30", "big": "12345678901234567.89", "n": 12, "x": 1.5, "huge": 123456789012345678901,
"maxint": 9223372036854775807, "s": "ok", "list": [1, "a", null, {"b": true}], "obj": {"z": 1, "a": [2.5]},
"dup": 1, "dup": 2, "esc": "t\tq\"\u00e9", "nul": "a\u0000b", "nothing": null}`),
		Headers:   []sink.Header{{Key: "h", Value: []byte("one")}, {Key: "h", Value: []byte("two")}, {Key: "gone", Value: []byte("x")}, {Key: "gone"}},
		Timestamp: time.Date(2024, 5, 6, 7, 8, 9, 120000000, time.FixedZone("CEST", 7200))}
	for _, tc := range []struct {
		expr string
		want any // nil: NULL
	}{
		{`value.amount.replace(",", ".")`, "12.30"},
		{`value.big`, "12345678901234567.89"},                   // a string stays exact
		{`value.big.replace(".", ",")`, "12345678901234567,89"}, // and through string functions
		{`value.n`, "12"},
		{`value.n + 1`, "13"},
		{`value.maxint`, "9223372036854775807"}, // integers that fit int64 are exact
		{`value.huge`, "123456789012345680000"}, // beyond: a double, the nearest
		{`value.x * 2.0`, "3"},
		{`1.0 / 3.0`, "0.3333333333333333"},
		{`1e-7`, "1e-7"},
		{`1e300 * 1e300`, "Infinity"},
		{`uint(7)`, "7"},
		{`value.s == "ok"`, "true"},
		{`value.s != "ok"`, "false"},
		{`b"\x01\xff"`, []byte{1, 0xff}},
		{`value.nothing`, nil},
		{`null`, nil},
		{`timestamp`, "2024-05-06T05:08:09.12Z"},
		{`duration("90s") + duration("500ms")`, "90.5s"},
		{`value.list`, `[1,"a",null,{"b":true}]`},
		{`value.obj`, `{"a":[2.5],"z":1}`},
		{`{"k": value.s, "n": [offset, partition]}`, `{"k":"ok","n":[77,2]}`},
		{`value.dup`, "1"}, // the first of a repeated key, as paths
		{`value.esc`, "t\tq\"é"},
		{`topic + ":" + string(partition) + ":" + string(offset)`, "pay:2:77"},
		{`key`, "k-1"},
		{`headers.h`, "two"},
		{`"gone" in headers`, "false"},
		{`value.s.upperAscii() + "-" + "  x ".trim()`, "OK-x"},
		{`base64.encode(b"hi")`, "aGk="},
	} {
		m := &Mapping{Key: String, Value: JSON, Columns: []Column{{Name: "c", Expr: mustExpr(t, tc.expr)}}}
		row, err := exprRow(t, m, r)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !equalValue(row[0], tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.expr, row[0], tc.want)
		}
	}
}

func TestExprColumnOptions(t *testing.T) {
	r := &sink.Record{Topic: "t", Value: []byte(`{"ms": 1700000000123, "nothing": null}`)}
	zero := "0"
	for _, tc := range []struct {
		col  Column
		want any
		err  error
	}{
		{col: Column{Expr: mustExpr(t, `value.ms`), Cast: CastEpochMs}, want: "2023-11-14T22:13:20.123Z"},
		{col: Column{Expr: mustExpr(t, `value.nothing`), Cast: CastEpochMs, Default: &zero}, want: "1970-01-01T00:00:00Z"},
		{col: Column{Expr: mustExpr(t, `value.nothing`), Required: true}, err: ErrMissing},
		{col: Column{Expr: mustExpr(t, `"x"`), Cast: CastEpochMs}, err: ErrCast},
	} {
		tc.col.Name = "c"
		row, err := exprRow(t, &Mapping{Value: JSON, Columns: []Column{tc.col}}, r)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.col.Expr, err, tc.err)
			}
			continue
		}
		if err != nil || !equalValue(row[0], tc.want) {
			t.Errorf("%s = %#v (%v), want %#v", tc.col.Expr, row, err, tc.want)
		}
	}
}

func TestExprRuntimeErrorsArePoison(t *testing.T) {
	for _, tc := range []struct {
		expr, value string
		want        error
		says        string
	}{
		{`value.nosuchkey`, `{"a": 1}`, ErrExpr, "no such key"},
		{`value.a + 1`, `{"a": "x"}`, ErrExpr, "no such overload"},
		{`value.a`, `{"a": "x\u0000"}`, ErrInvalidText, "NUL"},
		{`type(value)`, `{}`, ErrExpr, "no column value"},
		{`value.a`, `{"a": `, ErrInvalidJSON, "value is not JSON"},
		{`value.a`, "\xff", ErrInvalidJSON, "UTF-8"},
		// a hostile expression: 10^6 steps, refused at the cost limit
		{`[0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c,
		  [0,1,2,3,4,5,6,7,8,9].map(d, [0,1,2,3,4,5,6,7,8,9].map(e, [0,1,2,3,4,5,6,7,8,9].map(f, a+b+c+d+e+f))))))`, `{}`, ErrExpr, "cost limit"},
		// a hostile record: a small expression, squared over the record's list of 3000
		{`value.items.map(x, value.items.map(y, x + y)).size()`, `{"items": [` + strings.Repeat("1,", 2999) + `1]}`, ErrExpr, "cost limit"},
	} {
		m := &Mapping{Value: JSON, Columns: []Column{{Name: "c", Expr: mustExpr(t, tc.expr)}}}
		start := time.Now()
		_, err := exprRow(t, m, &sink.Record{Topic: "t", Value: []byte(tc.value)})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%.30s on %s: %v, want %v saying %q", tc.expr, tc.value, err, tc.want, tc.says)
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%.30s: %T is not a *FieldError", tc.expr, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.30s took %v", tc.expr, d)
		}
		// RecordError makes it poison.
		if perr := RecordError(&sink.Record{Topic: "t"}, err); !errors.Is(perr, sink.ErrPoison) {
			t.Errorf("%.30s: RecordError gives %v, not poison", tc.expr, perr)
		}
	}
}

func TestWhereAndChecks(t *testing.T) {
	m := &Mapping{Value: JSON,
		Where: mustCond(t, `value.kind != "test"`),
		Checks: []Check{
			{Expr: mustCond(t, `value.status in ["paid", "refunded"]`), Message: "status is not paid or refunded"},
			{Expr: mustCond(t, `value.id.size() > 0`)},
		},
		Columns: []Column{{Name: "id", From: MustParseSource("value.id")}}}
	for _, tc := range []struct {
		value string
		want  error
		says  string
	}{
		{value: `{"kind": "real", "status": "paid", "id": "a"}`},
		{value: `{"kind": "test", "status": "bogus", "id": ""}`, want: ErrSkip}, // where comes first
		{value: `{"kind": "real", "status": "bogus", "id": "a"}`, says: "check failed: status is not paid or refunded"},
		{value: `{"kind": "real", "status": "paid", "id": ""}`, says: `check failed: value.id.size() > 0`},
		{value: `{"status": "paid", "id": "a"}`, want: ErrExpr, says: "where value.kind"},
		{value: `{"kind": "real", "status": "paid", "id": 1}`, want: ErrExpr, says: "no such overload"},
	} {
		r := &sink.Record{Topic: "t", Value: []byte(tc.value)}
		_, err := exprRow(t, m, r)
		ferr := m.Filter(r)
		switch {
		case tc.want == nil && tc.says == "":
			if err != nil || ferr != nil {
				t.Errorf("%s: %v / Filter %v", tc.value, err, ferr)
			}
		case tc.want == nil:
			var ce *CheckError
			if !errors.As(err, &ce) || err.Error() != "mapping: "+tc.says || !errors.As(ferr, &ce) {
				t.Errorf("%s: %v / Filter %v, want a *CheckError %q", tc.value, err, ferr, tc.says)
			}
		default:
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !errors.Is(ferr, tc.want) {
				t.Errorf("%s: %v / Filter %v, want %v saying %q", tc.value, err, ferr, tc.want, tc.says)
			}
		}
		if perr := RecordError(r, err); tc.says != "" && !errors.Is(perr, sink.ErrPoison) {
			t.Errorf("%s: RecordError gives %v, not poison", tc.value, perr)
		}
	}
	// A where on a condition that is dyn must give a bool.
	m = &Mapping{Value: JSON, Where: mustCond(t, `value.flag`), Columns: []Column{{Name: "id", From: MustParseSource("topic")}}}
	if _, err := m.Row(&sink.Record{Topic: "t", Value: []byte(`{"flag": "yes"}`)}, nil); !errors.Is(err, ErrExpr) || !strings.Contains(err.Error(), "not bool") {
		t.Errorf("where on a string: %v", err)
	}
}

func TestExprValidate(t *testing.T) {
	for _, tc := range []struct {
		m    Mapping
		want string
	}{
		{Mapping{Value: Avro, Decoder: fakeDecoder{}, Columns: []Column{{Name: "c", Expr: mustExpr(t, `value.a`)}}}, "format avro expressions cannot read"},
		{Mapping{Value: JSON, Columns: []Column{{Name: "c", From: MustParseSource("topic"), Expr: mustExpr(t, `topic`)}}}, "both a source and an expression"},
		{Mapping{Value: JSON, Where: mustExpr(t, `true`), Columns: []Column{{Name: "c", From: MustParseSource("topic")}}}, "where needs a condition"},
	} {
		if err := tc.m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
	}
	// An expression that reads only the metadata is fine with an avro value.
	m := Mapping{Value: Avro, Decoder: fakeDecoder{}, Columns: []Column{{Name: "c", Expr: mustExpr(t, `topic + "x"`)}}}
	if err := m.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if m.ReadsValue() {
		t.Error("ReadsValue: true for topic")
	}
	if m := (Mapping{Columns: []Column{{Name: "c", Expr: mustExpr(t, `value.a`)}}}); !m.ReadsValue() {
		t.Error("ReadsValue: false for value.a")
	}
}

func TestExprDecodesSidesOnlyWhenRead(t *testing.T) {
	// The value is not JSON, but no expression reads it.
	m := &Mapping{Key: JSON, Value: JSON, Where: mustCond(t, `key.k == 1`),
		Columns: []Column{{Name: "c", Expr: mustExpr(t, `topic + string(key.k)`)}}}
	row, err := exprRow(t, m, &sink.Record{Topic: "t", Key: []byte(`{"k": 1}`), Value: []byte("not json")})
	if err != nil || row[0] != "t1" {
		t.Fatalf("row %v, %v", row, err)
	}
	// A tombstone's value is null.
	m = &Mapping{Value: JSON, Columns: []Column{{Name: "c", Expr: mustExpr(t, `value == null ? "gone" : "here"`)}}}
	if row, err := exprRow(t, m, &sink.Record{Topic: "t"}); err != nil || row[0] != "gone" {
		t.Fatalf("tombstone: %v, %v", row, err)
	}
}

// TestExprDocExamples: the examples of docs/plugins.md ("Expressions (CEL)") compile and
// give what the docs say.
func TestExprDocExamples(t *testing.T) {
	r := &sink.Record{Topic: "orders-eu", Headers: []sink.Header{{Key: "source", Value: []byte("web")}},
		Value: []byte(`{"amount": "12,30", "status": "paid", "payment_id": "p1", "email": " A@B.example ", "n": 12, "at_s": 1700000000,
"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], "at": "2023-11-14T22:13:20Z"}`)}
	zero := "0"
	for _, tc := range []struct {
		expr string
		cast Cast
		def  *string
		want any
	}{
		{expr: `value.amount.replace(",", ".")`, want: "12.30"},
		{expr: `value.status in ["paid", "refunded"]`, want: "true"},
		{expr: `value.payment_id + ":" + value.status`, want: "p1:paid"},
		{expr: `has(value.discount) ? value.discount : 0`, want: "0"},
		{expr: `has(value.currency) ? value.currency : null`, def: &zero, want: "0"},
		{expr: `value.email.lowerAscii().trim()`, want: "a@b.example"},
		{expr: `value.items.map(i, i.sku)`, want: `["a","b"]`},
		{expr: `size(value.items) > 0 && value.items.all(i, i.qty > 0)`, want: "true"},
		{expr: `timestamp(value.at) > timestamp("2020-01-01T00:00:00Z")`, want: "true"},
		{expr: `headers["source"] == "web" && topic.startsWith("orders")`, want: "true"},
		{expr: `"trace" in headers`, want: "false"},
		{expr: `value.n == 12.0`, want: "true"},
		{expr: `double("12.30")`, want: "12.3"},
		{expr: `1e21`, want: "1e+21"},
		{expr: `value.at_s * 1000`, cast: CastEpochMs, want: "2023-11-14T22:13:20Z"},
		{expr: `value.status.matches("^p[a-z]+$")`, want: "true"},
		{expr: `"%s-%d".format([value.status, value.n])`, want: "paid-12"},
	} {
		m := &Mapping{Value: JSON, Columns: []Column{{Name: "c", Expr: mustExpr(t, tc.expr), Cast: tc.cast, Default: tc.def}}}
		row, err := exprRow(t, m, r)
		if err != nil || !equalValue(row[0], tc.want) {
			t.Errorf("%s = %#v (%v), want %#v", tc.expr, row, err, tc.want)
		}
	}
}

// TestExprLazyObject: a JSON object read by expressions behaves as a CEL map whatever the
// order of lookups: first key wins (also past manyMembers, where lookups use a map),
// escaped keys, size, iteration, membership, equality and nesting.
func TestExprLazyObject(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"a\u0062": 1, "n": {"x": [1, {"y": "z"}], "e": {}}, "dup": "first", "s": "t\u00e9"`)
	for i := range 40 {
		fmt.Fprintf(&b, `, "k%d": %d`, i, i)
	}
	b.WriteString(`, "dup": "second", "k3": "again"}`)
	r := &sink.Record{Topic: "t", Value: []byte(b.String())}
	for _, tc := range []struct{ expr, want string }{
		{`value.k39`, "39"}, // scans to the end first
		{`value.k3`, "3"},   // then finds an early one among those found
		{`value.dup + value.s`, "firstté"},
		{`value.ab`, "1"},
		{`value.size()`, "44"},
		{`"k20" in value && !("nope" in value)`, "true"},
		{`value.n.x[1].y + string(size(value.n.e))`, "z0"},
		{`value.n == {"e": {}, "x": [1, {"y": "z"}]}`, "true"},
		{`value.n != {"e": {}}`, "true"},
		{`value.filter(k, k.startsWith("k3")).size()`, "11"},
		{`value.n`, `{"e":{},"x":[1,{"y":"z"}]}`},
		{`has(value.n.e.q) || has(value.k0)`, "true"},
	} {
		m := &Mapping{Value: JSON, Columns: []Column{{Name: "c", Expr: mustExpr(t, tc.expr)}}}
		row, err := exprRow(t, m, r)
		if err != nil || !equalValue(row[0], tc.want) {
			t.Errorf("%s = %#v (%v), want %q", tc.expr, row, err, tc.want)
		}
	}
	// Two lookups in one record: the second resumes the scan, and both agree with a path.
	m := &Mapping{Value: JSON, Columns: []Column{
		{Name: "a", Expr: mustExpr(t, `value.k10`)}, {Name: "b", Expr: mustExpr(t, `value.k2`)}, {Name: "c", From: MustParseSource("value.dup")}}}
	if row, err := exprRow(t, m, r); err != nil || row[0] != "10" || row[1] != "2" || row[2] != "first" {
		t.Errorf("row %v, %v", row, err)
	}
}

// FuzzExprJSON: on any document the scanner accepts, the lazy object that expressions read
// gives the same JSON text as the eager decoder, and neither panics.
func FuzzExprJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": 1, "a": 2}`, `{"a\u0062": [1, {"c": null}], "d": "\u00e9\n", "e": 1e400, "f": -0, "g": 12345678901234567890}`,
		` {"x": {"y": {"z": [true, false, "s"]}}} `, `[1, {"a": 2}]`, `"str"`, `12.5`} {
		f.Add(s)
	}
	lazy := mustExpr(f, `value`)
	f.Fuzz(func(t *testing.T, doc string) {
		if scanJSON(doc, nil, 0) != nil || !utf8.ValidString(doc) {
			return
		}
		m := &Mapping{Value: JSON, Columns: []Column{{Name: "c", Expr: lazy}}}
		row, err := m.Row(&sink.Record{Topic: "t", Value: []byte(doc)}, nil)
		eager, derr := decodeJSON(trimJSONSpace(doc))
		if derr != nil {
			t.Fatalf("decodeJSON refuses what scanJSON accepts: %v", derr)
		}
		want, werr := appendExprJSON(nil, types.DefaultTypeAdapter.NativeToValue(eager), 0)
		if (err == nil) != (werr == nil && checkTextBytes(want) == nil) {
			t.Fatalf("%q: lazy %v, eager %v", doc, err, werr)
		}
		if err == nil && row[0] != nil && row[0].(string) != string(want) {
			if _, isStr := eager.(string); !isStr { // a top-level string is text, not JSON
				t.Fatalf("%q: lazy %q, eager %q", doc, row[0], want)
			}
		}
	})
}
