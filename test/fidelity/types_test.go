package fidelity

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// colType is one source column type of the suite: each gets a table per replica identity,
// `fid.t_<slug>_d` (DEFAULT) and `fid.t_<slug>_f` (FULL), with the columns
// (id bigint PRIMARY KEY, version integer, note text, v <sql>).
type colType struct {
	name string // as printed in the cell lines
	slug string // table name part
	sql  string // the source column's type
	// gen returns a value as an SQL literal expression; edge values are inserted first, so
	// every table holds each of them (the snapshot reads them; updates stream others).
	gen  func(r *rand.Rand) string
	edge []string
	// toast: one value per table (three in the full form) is 20 KB or more of incompressible
	// data, stored out of line, and the workload updates the other columns of its row.
	toast bool
	// val is the by-value comparison of a replica made by create: true, a format with one %s
	// (the column), applied on both sides; default "%s::text" on the source and
	// "%s::text::<sql>::text" on the replica (the replica's value read back as the source's type).
	val string
}

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func intIn(lo, hi int64) func(r *rand.Rand) string {
	return func(r *rand.Rand) string { return fmt.Sprint(lo + r.Int64N(hi-lo+1)) }
}

// decimal returns a random decimal with up to ip integer and exactly fp fraction digits.
func decimal(ip, fp int) func(r *rand.Rand) string {
	return func(r *rand.Rand) string {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		for i, n := 0, 1+r.IntN(ip); i < n; i++ {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		if fp > 0 {
			b.WriteByte('.')
			for range fp {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		return lit(b.String())
	}
}

// words are text values with the characters that break naive encodings.
var words = []string{"plain", "com,ma", `say "hi"`, "it's", `back\slash`, "tab\there", "new\nline", "ünïcødé ✓", "日本語", "", "NULL", "{brace}", " lead and trail "}

func word(r *rand.Rand) string { return words[r.IntN(len(words))] }

func text(r *rand.Rand) string { return lit(fmt.Sprintf("%s %d %s", word(r), r.IntN(1e6), word(r))) }

// noise is n bytes of random alphanumerics: pglz finds nothing to compress.
func noise(r *rand.Rand, n int) string {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = a[r.IntN(len(a))]
	}
	return string(b)
}

func bytesLit(b []byte) string { return fmt.Sprintf(`'\x%x'::bytea`, b) }

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

func tsIn(r *rand.Rand, from, to int, layout string) string {
	lo := time.Date(from, 1, 1, 0, 0, 0, 0, time.UTC)
	d := time.Date(to, 1, 1, 0, 0, 0, 0, time.UTC).Sub(lo)
	return lo.Add(time.Duration(r.Int64N(int64(d/time.Microsecond))) * time.Microsecond).Format(layout)
}

func textArray(r *rand.Rand) string {
	n := r.IntN(5)
	el := make([]string, n)
	for i := range el {
		if r.IntN(6) == 0 {
			el[i] = "NULL"
		} else {
			el[i] = lit(word(r))
		}
	}
	return "ARRAY[" + strings.Join(el, ", ") + "]::text[]"
}

// types is the catalogue: every source type of docs/cdc.md's type table, and the ones the
// issue names (arrays, enums, interval, network types, bit strings, xml, money, extreme
// numerics, timestamps outside 1970..2038, infinity, TOASTed values).
var types = []colType{
	{name: "smallint", slug: "int2", sql: "smallint", gen: intIn(-32768, 32767), edge: []string{"-32768", "32767", "0"}},
	{name: "integer", slug: "int4", sql: "integer", gen: intIn(-2147483648, 2147483647), edge: []string{"-2147483648", "2147483647"}},
	{name: "bigint", slug: "int8", sql: "bigint", gen: func(r *rand.Rand) string { return fmt.Sprint(int64(r.Uint64())) }, edge: []string{"-9223372036854775808", "9223372036854775807"}},
	{name: "real", slug: "float4", sql: "real", gen: func(r *rand.Rand) string { return fmt.Sprint(float32(r.NormFloat64() * 1e4)) },
		edge: []string{"1.17549435e-38", "3.4028235e+38", "-0.1"}},
	{name: "double", slug: "float8", sql: "double precision", gen: func(r *rand.Rand) string { return fmt.Sprint(r.NormFloat64() * 1e9) },
		edge: []string{"2.2250738585072014e-308", "1.7976931348623157e+308", "0.1"}},
	{name: "boolean", slug: "bool", sql: "boolean", gen: func(r *rand.Rand) string { return fmt.Sprint(r.IntN(2) == 0) }},
	{name: "numeric", slug: "numeric", sql: "numeric", val: "trim_scale(%s)::text", gen: func(r *rand.Rand) string { return decimal(20, r.IntN(12))(r) },
		edge: []string{ // very large and very small
			"'123456789012345678901234567890123456789012345678901234567890.123456789'",
			"'0.000000000000000000000000000000000000000000000000000000000001'",
			"'-98765432109876543210987654321098765432109876543210'", "'1e100'", "'0.10'"}},
	{name: "numeric(20,6)", slug: "numeric_20_6", sql: "numeric(20,6)", gen: decimal(14, 6),
		edge: []string{"'99999999999999.999999'", "'-99999999999999.999999'", "'0.000001'", "'12345678901234.567891'"}},
	{name: "numeric(12,2)", slug: "numeric_12_2", sql: "numeric(12,2)", gen: decimal(10, 2),
		edge: []string{"'-29293.56'", "'-31382.52'", "'9999999999.99'", "'-0.01'"}},
	{name: "money", slug: "money", sql: "money", gen: func(r *rand.Rand) string { return decimal(12, 2)(r) + "::money" },
		edge: []string{"'-92233720368547758.08'::money", "'92233720368547758.07'::money", "'0.01'::money"}, val: "%s::numeric::text"},
	{name: "text", slug: "text", sql: "text", gen: text},
	{name: "varchar(40)", slug: "varchar", sql: "varchar(40)", gen: func(r *rand.Rand) string { return lit(word(r)) }},
	{name: "char(6)", slug: "bpchar", sql: "char(6)", gen: func(r *rand.Rand) string { return lit(noise(r, r.IntN(6))) }},
	{name: "bytea", slug: "bytea", sql: "bytea", gen: func(r *rand.Rand) string { return bytesLit(randBytes(r, r.IntN(40))) },
		edge: []string{`'\x'::bytea`, `'\x00ff00'::bytea`}},
	{name: "uuid", slug: "uuid", sql: "uuid", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Uint64()&(1<<48-1)))
	}},
	{name: "json", slug: "json", sql: "json", val: "%s::jsonb::text", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf(`{"b": %d,  "a" : [%s, null],"b": "dup"}`, r.IntN(100), strings.ReplaceAll(fmt.Sprintf("%q", word(r)), `\t`, `\t`)))
	}},
	{name: "jsonb", slug: "jsonb", sql: "jsonb", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf(`{"n": %d, "w": %q, "f": 1.50, "big": 12345678901234567890.5, "nested": {"a": [1, "x", null, true]}}`, r.IntN(1000), word(r)))
	}},
	{name: "xml", slug: "xml", sql: "xml", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf(`<a n="%d"><b>%s</b><c/></a>`, r.IntN(1000), strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(word(r))))
	}},
	{name: "date", slug: "date", sql: "date", gen: func(r *rand.Rand) string { return lit(tsIn(r, 1900, 2200, "2006-01-02")) },
		edge: []string{"'0001-01-01'", "'1969-12-31'", "'1970-01-01'", "'2038-01-20'", "'9999-12-31'", "'0044-03-15 BC'"}},
	{name: "date ±infinity", slug: "date_inf", sql: "date", gen: func(r *rand.Rand) string { return lit([]string{"infinity", "-infinity", "2024-02-29"}[r.IntN(3)]) }},
	{name: "timestamp", slug: "ts", sql: "timestamp", gen: func(r *rand.Rand) string { return lit(tsIn(r, 1900, 2200, "2006-01-02 15:04:05.999999")) },
		edge: []string{"'1900-01-01 00:00:00.000001'", "'1969-12-31 23:59:59.999999'", "'2038-01-19 03:14:08'", "'2262-04-11 23:47:16.854776'", "'4000-06-01 12:00:00.5'"}},
	{name: "timestamp(3)", slug: "ts3", sql: "timestamp(3)", gen: func(r *rand.Rand) string { return lit(tsIn(r, 1900, 2200, "2006-01-02 15:04:05.999")) },
		edge: []string{"'1960-05-05 05:05:05.005'", "'2100-01-01 00:00:00.001'"}},
	{name: "timestamp ±infinity", slug: "ts_inf", sql: "timestamp", gen: func(r *rand.Rand) string {
		return lit([]string{"infinity", "-infinity", "2000-01-01 00:00:00"}[r.IntN(3)])
	}},
	{name: "timestamptz", slug: "tstz", sql: "timestamptz", gen: func(r *rand.Rand) string {
		return lit(tsIn(r, 1900, 2200, "2006-01-02 15:04:05.999999") + []string{"+00", "+05:30", "-08"}[r.IntN(3)])
	}, edge: []string{"'1901-12-13 20:45:52+00'", "'1969-12-31 23:59:59.999999-01'", "'2038-01-19 03:14:08+00'", "'2500-01-01 00:00:00+14'"}},
	{name: "time", slug: "time", sql: "time", gen: func(r *rand.Rand) string { return lit(tsIn(r, 2000, 2001, "15:04:05.999999")) },
		edge: []string{"'00:00:00'", "'23:59:59.999999'", "'24:00:00'"}},
	{name: "time(3)", slug: "time3", sql: "time(3)", gen: func(r *rand.Rand) string { return lit(tsIn(r, 2000, 2001, "15:04:05.999")) }},
	{name: "timetz", slug: "timetz", sql: "timetz", gen: func(r *rand.Rand) string {
		return lit(tsIn(r, 2000, 2001, "15:04:05.999999") + []string{"+00", "+05:30", "-08"}[r.IntN(3)])
	}},
	{name: "interval", slug: "interval", sql: "interval", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf("%d years %d mons %d days %d:%02d:%02d.%06d", r.IntN(50)-25, r.IntN(12), r.IntN(40)-20, r.IntN(100), r.IntN(60), r.IntN(60), r.IntN(1e6)))
	}, edge: []string{"'1 mon'", "'-1 year 2 days 03:04:05.678901'", "'30 days'", "'00:00:00.000001'"}},
	{name: "inet", slug: "inet", sql: "inet", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf("%d.%d.%d.%d/%d", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256), 8+r.IntN(25)))
	}, edge: []string{"'::1'", "'2001:db8::ff00:42:8329/64'", "'10.1.2.3'"}},
	{name: "cidr", slug: "cidr", sql: "cidr", gen: func(r *rand.Rand) string { return lit(fmt.Sprintf("10.%d.0.0/16", r.IntN(256))) },
		edge: []string{"'2001:db8::/32'", "'0.0.0.0/0'"}},
	{name: "macaddr", slug: "macaddr", sql: "macaddr", gen: func(r *rand.Rand) string {
		b := randBytes(r, 6)
		return lit(fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]))
	}},
	{name: "bit(8)", slug: "bit8", sql: "bit(8)", gen: func(r *rand.Rand) string { return fmt.Sprintf("B'%08b'", r.IntN(256)) }},
	{name: "bit varying", slug: "varbit", sql: "bit varying(64)", gen: func(r *rand.Rand) string {
		return fmt.Sprintf("B'%b'", r.Uint64()>>r.IntN(63))
	}, edge: []string{"B''", "B'1'", "B'101'"}},
	{name: "enum", slug: "enum", sql: "fid.mood", val: "%s::text", gen: func(r *rand.Rand) string {
		return lit([]string{"happy", "sad", "très bien", "with,comma", `quo"te`}[r.IntN(5)])
	}},
	{name: "int[]", slug: "int_array", sql: "integer[]", val: "to_jsonb(%s)::text", gen: func(r *rand.Rand) string {
		el := make([]string, r.IntN(5))
		for i := range el {
			el[i] = fmt.Sprint(r.Int32N(1<<30) - 1<<29)
			if r.IntN(6) == 0 {
				el[i] = "NULL"
			}
		}
		return "ARRAY[" + strings.Join(el, ", ") + "]::integer[]"
	}, edge: []string{"'{}'", "'{1,NULL,-3}'", "'{2147483647,-2147483648}'"}},
	{name: "text[]", slug: "text_array", sql: "text[]", val: "to_jsonb(%s)::text", gen: textArray,
		edge: []string{"'{}'", `ARRAY['a,b', 'say "hi"', NULL, 'ünïcødé', 'NULL', '', 'back\slash']`}},
	{name: "point", slug: "point", sql: "point", val: "%s::text", gen: func(r *rand.Rand) string {
		return lit(fmt.Sprintf("(%d.5,%d.25)", r.IntN(1000)-500, r.IntN(1000)))
	}},
	// TOASTed values: 20 KB or more of incompressible data.
	{name: "text TOAST", slug: "text_toast", sql: "text", toast: true, gen: text},
	{name: "bytea TOAST", slug: "bytea_toast", sql: "bytea", toast: true, gen: func(r *rand.Rand) string { return bytesLit(randBytes(r, 16)) }},
	{name: "jsonb TOAST", slug: "jsonb_toast", sql: "jsonb", toast: true, gen: func(r *rand.Rand) string { return lit(fmt.Sprintf(`{"n": %d}`, r.IntN(100))) }},
	{name: "text[] TOAST", slug: "text_array_toast", sql: "text[]", toast: true, val: "to_jsonb(%s)::text", gen: textArray},
}

// big returns a TOASTed value of t (20 KB or more of incompressible data).
func big(t colType, r *rand.Rand) string {
	const n = 24 << 10
	switch t.slug {
	case "text_toast":
		return lit(noise(r, n))
	case "bytea_toast":
		return bytesLit(randBytes(r, n))
	case "jsonb_toast":
		return fmt.Sprintf(`jsonb_build_object('blob', %s, 'n', %d)`, lit(noise(r, n)), r.IntN(100))
	case "text_array_toast":
		el := make([]string, 0, 400)
		for i := 0; i < 400; i++ {
			el = append(el, lit(noise(r, 60)+",\"é"))
		}
		return "ARRAY[" + strings.Join(el, ", ") + "]::text[]"
	}
	panic("no TOAST value for " + t.slug)
}

func typeBySlug(slug string) colType {
	for _, t := range types {
		if t.slug == slug {
			return t
		}
	}
	panic("fidelity: no type " + slug)
}
