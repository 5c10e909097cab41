package cdc

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// A key column's kind says how its value goes into the positions key (pkExpr). The key is
// jsonb_build_array of the key columns; jsonb writes most types the same way under every
// session setting (integers, numeric, text, uuid, date and timestamp in ISO 8601, time,
// timetz, enums, inet, booleans...), but not these, which are normalised:
const (
	kindPlain    = ""            // the value itself
	kindTZ       = "timestamptz" // TimeZone: written in UTC, as jsonb writes it under TimeZone UTC
	kindFloat    = "float"       // extra_float_digits: the shortest exact digits (as under 1, the default)
	kindBytea    = "bytea"       // bytea_output: hex, as under the default
	kindMoney    = "money"       // lc_monetary: the amount in the currency's minor unit (an integer)
	kindInterval = "interval"    // IntervalStyle, and '1 mon' = '30 days': its length in microseconds
	kindValue    = "value"       // arrays of the above, composites, ranges: cdc_key_json (migration 2)
)

// keyFunc is the positions schema's function that writes a value as jsonb under fixed
// settings (TimeZone UTC, extra_float_digits 1, IntervalStyle postgres, bytea_output hex,
// DateStyle ISO, MDY, lc_monetary C), made by cdc migration 2. A function with SET clauses
// costs about 15 µs a call, so only the kinds without an inline form use it.
const keyFunc = "cdc_key_json"

// keyKindsSQL resolves each key column ($2, in the key's order) of table $1 through domains
// and array elements to its innermost type. arr: some level is an array.
const keyKindsSQL = `WITH RECURSIVE r(ord, typ, lvl, arr) AS (
  SELECT k.ord, a.atttypid, 0, false FROM unnest($2::text[]) WITH ORDINALITY k(name, ord)
  JOIN pg_attribute a ON a.attrelid = $1::regclass AND a.attname = k.name AND NOT a.attisdropped
  UNION ALL
  SELECT r.ord, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.typelem END, r.lvl + 1, r.arr OR t.typtype <> 'd'
  FROM r JOIN pg_type t ON t.oid = r.typ
  WHERE r.lvl < 64 AND (t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1)))
SELECT DISTINCT ON (r.ord) r.arr, t.typtype::text, t.typnamespace = 'pg_catalog'::regnamespace, t.typname::text
FROM r JOIN pg_type t ON t.oid = r.typ ORDER BY r.ord, r.lvl DESC`

// keyKinds reads the kind of each of t's key columns from the catalog.
func (t *target) keyKinds(ctx context.Context, db sink.DB) error {
	rows, err := db.Query(ctx, keyKindsSQL, t.name, t.keys)
	if err != nil {
		return fmt.Errorf("cdc: target table %s: read key types: %w", t.name, err)
	}
	var arr, catalog bool
	var typtype, typname string
	t.keyKind, t.intKey = t.keyKind[:0], false
	if _, err := pgx.ForEachRow(rows, []any{&arr, &typtype, &catalog, &typname}, func() error {
		t.keyKind = append(t.keyKind, keyKind(arr, typtype, catalog, typname))
		t.intKey = len(t.keys) == 1 && !arr && typtype == "b" && catalog && (typname == "int2" || typname == "int4" || typname == "int8")
		return nil
	}); err != nil {
		return fmt.Errorf("cdc: target table %s: read key types: %w", t.name, err)
	}
	if len(t.keyKind) != len(t.keys) {
		return fmt.Errorf("cdc: target table %s: read key types: %d of %d key columns", t.name, len(t.keyKind), len(t.keys))
	}
	return nil
}

// keyKind is the kind of a key column whose innermost type (through domains and array
// elements) is typname, of pg_type.typtype typtype; arr: the column is an array. Base
// types outside pg_catalog (extensions) are taken as plain.
func keyKind(arr bool, typtype string, catalog bool, typname string) string {
	kind := kindPlain
	switch {
	case typtype == "c" || typtype == "r" || typtype == "m": // composite, range, multirange
		return kindValue
	case typtype != "b" || !catalog:
	case typname == "timestamptz":
		kind = kindTZ
	case typname == "float4" || typname == "float8":
		kind = kindFloat
	case typname == "bytea":
		kind = kindBytea
	case typname == "money":
		kind = kindMoney
	case typname == "interval":
		kind = kindInterval
	}
	if arr && kind != kindPlain {
		return kindValue // inside an array, jsonb writes each element as to_jsonb would
	}
	return kind
}

// pkExpr is the positions key of a row: a jsonb array of its key columns, prefixed with
// prefix ("t." or ""), whose text is the same under every session setting, and equal for
// key values that the type's equality takes as equal. Under PostgreSQL's default settings
// (and TimeZone UTC) it equals jsonb_build_array of the columns, the key of eosink before
// cdc migration 2, for every kind but money and interval. The same rules are in
// migrations/0002_position_keys.up.sql (cdc_key_expr): change both together.
func (t *target) pkExpr(prefix string) string {
	parts := make([]string, len(t.keys))
	for i, k := range t.keys {
		parts[i] = keyExpr(t.keyKind[i], prefix+pgx.Identifier{k}.Sanitize(), t.keyFn)
	}
	return "jsonb_build_array(" + strings.Join(parts, ", ") + ")"
}

// keyExpr is the expression of one key column x of kind; fn is the qualified keyFunc.
func keyExpr(kind, x, fn string) string {
	switch kind {
	case kindTZ:
		// jsonb writes a timestamp as ISO 8601 without offset, a timestamptz with the
		// session's; BC years end in " BC", after the offset.
		u := fmt.Sprintf("(%s AT TIME ZONE 'UTC')", x)
		return fmt.Sprintf(`CASE WHEN NOT isfinite(%[1]s) THEN to_jsonb(%[2]s)
  WHEN %[1]s < '0001-01-01 00:00:00+00'::timestamptz THEN to_jsonb(replace(to_jsonb(%[2]s) #>> '{}', ' BC', '+00:00 BC'))
  ELSE to_jsonb((to_jsonb(%[2]s) #>> '{}') || '+00:00') END`, x, u)
	case kindFloat:
		// Every extra_float_digits above 0 writes the shortest exact digits (PostgreSQL 12
		// and later); only a session below pays for the function.
		return fmt.Sprintf("CASE WHEN current_setting('extra_float_digits')::int > 0 THEN to_jsonb(%[1]s) ELSE %[2]s(%[1]s) END", x, fn)
	case kindBytea:
		return fmt.Sprintf(`'\x' || encode(%s, 'hex')`, x)
	case kindMoney:
		// money is an int64 of minor units, shown (and cast to numeric) by lc_monetary.
		return fmt.Sprintf("('x' || encode(cash_send(%s), 'hex'))::bit(64)::bigint", x)
	case kindInterval:
		// interval equality compares months * 30 days + days * 24 h + time. Each part is
		// exact (extract gives float8 before PostgreSQL 14, numeric since).
		return fmt.Sprintf(`CASE WHEN isfinite(%[1]s) THEN to_jsonb((((extract(year FROM %[1]s)::numeric * 12 + extract(month FROM %[1]s)::numeric) * 30
  + extract(day FROM %[1]s)::numeric) * 86400000000 + extract(hour FROM %[1]s)::numeric * 3600000000
  + extract(minute FROM %[1]s)::numeric * 60000000 + extract(microseconds FROM %[1]s)::numeric)::numeric(30,0))
  ELSE to_jsonb(%[1]s::text) END`, x)
	case kindValue:
		return fmt.Sprintf("%s(%s)", fn, x)
	}
	return x
}

// posKey is the key of a row in its positions table (t.keyPositions), prefixed with prefix
// ("t." or ""): the column as a bigint for a key of one integer column
// (cdc_positions_int, migration 5), else pkExpr.
func (t *target) posKey(prefix string) string {
	if t.intKey {
		return prefix + pgx.Identifier{t.keys[0]}.Sanitize() + "::bigint"
	}
	return t.pkExpr(prefix)
}

// keyFuncOf is keyFunc in the schema of positions, the quoted positions table.
func keyFuncOf(positions string) string {
	return strings.TrimSuffix(positions, `"cdc_positions"`) + pgx.Identifier{keyFunc}.Sanitize()
}
