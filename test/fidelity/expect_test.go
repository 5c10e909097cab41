package fidelity

import "github.com/eosink/eosink/internal/testbed"

// variant is one connector configuration: a converter and the Debezium settings that change
// how values are encoded. Each runs its own Debezium connector, one at a time.
type variant struct {
	name      string // as printed in the cell lines
	conv      testbed.Converter
	decimal   string            // decimal.handling.mode; "" is Debezium's default, precise
	connector map[string]string // more connector properties
	// create: a second pipeline writes a replica made by create: true (and evolve:
	// add-columns), compared by value. Only with schemas: without, eosink never guesses types.
	create bool
	// sink holds more lines of the sink section (indented two spaces).
	sink string
}

var variants = []variant{
	{name: "json", conv: testbed.JSONWithSchemas, create: true},
	{name: "json-plain/precise", conv: testbed.JSONPlain, decimal: "precise", sink: "  decimal_handling: precise\n"},
	{name: "json-plain/string", conv: testbed.JSONPlain, decimal: "string", connector: map[string]string{"interval.handling.mode": "string"},
		sink: "  decimal_handling: string\n"},
	{name: "json-plain/double", conv: testbed.JSONPlain, decimal: "double", sink: "  decimal_handling: double\n"},
	{name: "avro", conv: testbed.Avro, create: true, connector: map[string]string{"interval.handling.mode": "string"}},
}

// cellKey names a type under a variant and a replica identity. variant is a variant's
// name (matching its ddl and create replicas) or a replica's label ("json/create"); "*"
// matches every variant; identity "" matches DEFAULT and FULL.
type cellKey struct{ typ, variant, identity string }

// lossyCell is an expected lossy cell: the connector setting that makes it exact and
// whether the cell may also turn out exact (the loss hits only some rows, which the random
// workload may have changed since).
type lossyCell struct {
	setting   string
	sometimes bool
}

// expectLossy are the cells where the connector itself loses information, each with the
// connector setting that makes it exact. They are checked: such a cell must not be exact
// (it may differ, be equal by value only, or be refused loudly: never silently exact),
// unless marked sometimes; one that turns out exact is a stale entry and fails the suite.
var expectLossy = map[cellKey]lossyCell{
	{"numeric", "json-plain/double", ""}:       {setting: "decimal.handling.mode=precise or string (double keeps 15-17 significant digits)"},
	{"numeric(20,6)", "json-plain/double", ""}: {setting: "decimal.handling.mode=precise or string (double keeps 15-17 significant digits)"},
	// numeric(12,2) is not here: its 12 significant digits survive a double (the suite found
	// the cell exact, and an entry for it failed as stale).
	{"money", "json-plain/double", ""}: {setting: "decimal.handling.mode=precise or string (double keeps 15-17 significant digits)"},
	// precise (Debezium's default) sends a numeric without a declared scale as a
	// VariableScaleDecimal without trailing zeros: 87.84134644360 arrives as 87.8413464436, the
	// same number with another display scale (compared by value: trim_scale). Only values
	// with a trailing zero: a table whose such rows the workload deleted is exact.
	{"numeric", "json", ""}:               {sometimes: true, setting: "decimal.handling.mode=string (precise drops the trailing zeros of a numeric without a declared scale)"},
	{"numeric", "json-plain/precise", ""}: {sometimes: true, setting: "decimal.handling.mode=string (precise drops the trailing zeros of a numeric without a declared scale)"},
	{"numeric", "avro", ""}:               {sometimes: true, setting: "decimal.handling.mode=string (precise drops the trailing zeros of a numeric without a declared scale)"},
	// Debezium sends timetz as io.debezium.time.ZonedTime normalised to UTC: the instant is
	// kept, the source's offset is not (03:37:58+05:30 arrives as 22:07:58Z).
	{"timetz", "*", ""}: {setting: "none: Debezium's ZonedTime is always UTC; keep the replica's column timetz and compare instants, or use time with an offset column"},
	// interval.handling.mode=numeric (Debezium's default) sends a MicroDuration: months become
	// 30 days (an average month), so '1 mon' arrives as '30 days'.
	{"interval", "json", ""}:               {setting: "interval.handling.mode=string"},
	{"interval", "json-plain/precise", ""}: {setting: "interval.handling.mode=string"},
	{"interval", "json-plain/double", ""}:  {setting: "interval.handling.mode=string"},
	// Debezium's snapshot reads dates through JDBC (java.sql.Date), which drops the era:
	// '0044-03-15 BC' arrives as the day count of 0044-03-15 AD, which eosink cannot tell from
	// a real one. Streamed changes carry the era and are exact, so a table whose BC row was
	// updated after the snapshot is exact.
	{"date", "*", ""}: {sometimes: true, setting: "none in Debezium 3.6 for the snapshot (streamed BC dates are exact): load the replica yourself (pg_dump) and start the connector with snapshot.mode=no_data"},
	// Bits of a bit varying value hold no length: B'0101' and B'101' arrive alike. eosink
	// refuses them (a dead letter naming the reason) rather than guess.
	{"bit varying", "*", ""}: {setting: "none: Debezium's Bits drop a bit varying value's length; replicate into bytea or bit(n)"},
	// create: true makes bytea for Debezium's Bits (its schema says bytes and a length, not
	// whether the source column was bit(n) or bit varying(n)).
	{"bit(8)", "json/create", ""}: {setting: "create the replica column as bit(n) yourself (create: true makes bytea of Debezium's Bits)"},
	{"bit(8)", "avro/create", ""}: {setting: "create the replica column as bit(n) yourself (create: true makes bytea of Debezium's Bits)"},
	// A primary key change under REPLICA IDENTITY DEFAULT: PostgreSQL's logical decoding does
	// not send the new row's unchanged TOASTed value, and the new key has no stored row to
	// take it from, so eosink refuses the event (it never writes the placeholder). Only when
	// the workload changes the key of a row holding a TOASTed value (the full form).
	{"text TOAST", "*", "DEFAULT"}:   {sometimes: true, setting: "REPLICA IDENTITY FULL (the new key's event then carries the value)"},
	{"bytea TOAST", "*", "DEFAULT"}:  {sometimes: true, setting: "REPLICA IDENTITY FULL (the new key's event then carries the value)"},
	{"jsonb TOAST", "*", "DEFAULT"}:  {sometimes: true, setting: "REPLICA IDENTITY FULL (the new key's event then carries the value)"},
	{"text[] TOAST", "*", "DEFAULT"}: {sometimes: true, setting: "REPLICA IDENTITY FULL (the new key's event then carries the value)"},
}

// lossy returns the expected lossy entry of a cell: type typ in the replica labelled label
// of variant v, under identity.
func lossy(typ, label, v, identity string) (lossyCell, bool) {
	for _, vv := range []string{label, v, "*"} {
		for _, id := range []string{identity, ""} {
			if e, ok := expectLossy[cellKey{typ, vv, id}]; ok {
				return e, true
			}
		}
	}
	return lossyCell{}, false
}

// The short form (go test ./..., so make test) runs these variants and types only: the
// cells that issue 22's fixes make exact (TOAST: helper merge; arrays and decimals without
// schemas: helper types), so that make test fails if one of them regresses. FIDELITY=full
// (make fidelity) runs every variant and type.
var (
	shortVariants = []string{"json", "avro"}
	shortTypes    = []string{"int4", "numeric_20_6", "numeric_12_2", "text", "enum", "int_array", "text_array", "jsonb", "tstz",
		"text_toast", "bytea_toast", "jsonb_toast", "text_array_toast"}
)
