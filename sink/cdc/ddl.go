package cdc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// Creating and evolving target tables (Config.Create, Config.Evolve).
//
// The DDL runs in the batch's transaction, so a batch that fails or a process that dies
// before COMMIT leaves neither the table (or column) nor the rows. Before its DDL a
// transaction takes an advisory lock keyed on the table's name
// (pg_advisory_xact_lock, held to COMMIT or ROLLBACK): partitions creating the same table
// at once queue on it, and the ones after the first find the table there (CREATE TABLE IF
// NOT EXISTS, ADD COLUMN IF NOT EXISTS do nothing). Without it two concurrent CREATE
// TABLE IF NOT EXISTS of one name make the second fail with a unique violation on pg_type
// (SQLSTATE 23505, which the engine takes for poison).
//
// Column types come from the writer's schema, never from values: the JsonConverter's
// schema (schemas.enable=true) or the Avro schema from the registry. Events without a
// schema make create and evolve fail with errUntyped, which stops the partition.

// EvolveAddColumns is the Evolve value that adds a nullable column for a new field.
const EvolveAddColumns = "add-columns"

// errUntyped: the event carries no schema to take column types from.
var errUntyped = errors.New("create/evolve needs the change events' schema to choose column types, " +
	"and these events have none (the JsonConverter with schemas.enable=false); " +
	"use schemas.enable=true or format: avro, or create the table (or column) yourself; eosink never guesses column types")

// column is a column to create: its name and PostgreSQL type.
type column struct {
	name, typ string
}

// Debezium semantic type names that only the DDL needs (convert passes their values as
// they are).
const (
	dbzZonedTimestamp = "io.debezium.time.ZonedTimestamp"
	dbzZonedTime      = "io.debezium.time.ZonedTime"
	dbzInterval       = "io.debezium.time.Interval"
	dbzJSON           = "io.debezium.data.Json"
	dbzUUID           = "io.debezium.data.Uuid"
	dbzXML            = "io.debezium.data.Xml"
)

// pgType returns the column type for a field whose Kafka Connect type is base (int8,
// int16, int32, int64, float32, float64, boolean, string, bytes, struct, map, array; the
// JsonConverter's schemas write float32 and float64 as float and double) with
// the semantic name name. It is the type that convert's text for such a value reads
// into exactly: decimals are numeric without a declared precision or scale (any value
// fits, its scale kept); Debezium's Timestamp/MicroTimestamp/NanoTimestamp are a source
// timestamp without time zone, ZonedTimestamp one with.
func pgType(base, name string) (string, error) {
	switch name {
	case dbzMicroTimestamp, dbzNanoTimestamp:
		return "timestamp", nil
	case dbzTimestamp, connectTimestamp:
		return "timestamp(3)", nil
	case dbzZonedTimestamp:
		return "timestamptz", nil
	case dbzDate, connectDate:
		return "date", nil
	case dbzMicroTime, dbzNanoTime:
		return "time", nil
	case dbzTime, connectTime:
		return "time(3)", nil
	case dbzZonedTime:
		return "timetz", nil
	case dbzInterval:
		return "interval", nil
	case connectDecimal, dbzVarDecimal:
		return "numeric", nil
	case dbzJSON:
		return "jsonb", nil
	case dbzUUID:
		return "uuid", nil
	case dbzXML:
		return "xml", nil
	case dbzPoint:
		return "point", nil // pointText's "(x,y)"
	}
	switch base {
	case "int8", "int16":
		return "smallint", nil
	case "int32":
		return "integer", nil
	case "int64":
		return "bigint", nil
	case "float32", "float": // Kafka Connect's name; the JsonConverter's schema spells it float
		return "real", nil
	case "float64", "double": // likewise double
		return "double precision", nil
	case "boolean":
		return "boolean", nil
	case "string":
		return "text", nil
	case "bytes":
		return "bytea", nil
	case "struct", "map", "array":
		return "jsonb", nil
	}
	return "", fmt.Errorf("no column type for Kafka Connect type %q (%s)", base, name)
}

// avroBase is the Kafka Connect type of an Avro field, and its semantic name: connect.name
// when the writer put one, else the name of the Connect logical type that the Avro
// logical type stands for.
func avroBase(f schemaformat.Field) (base, name string) {
	switch f.Type {
	case "boolean":
		base = "boolean"
	case "int":
		base = "int32"
		if f.ConnectBase == "int8" || f.ConnectBase == "int16" {
			base = f.ConnectBase
		}
	case "long":
		base = "int64"
	case "float":
		base = "float32"
	case "double":
		base = "float64"
	case "string", "enum":
		base = "string"
	case "bytes", "fixed":
		base = "bytes"
	case "record":
		base = "struct"
	case "map", "array":
		base = f.Type
	default:
		base = "avro " + f.Type
	}
	if f.HasConnect {
		return base, f.Connect.Name
	}
	switch f.Logical {
	case "decimal":
		name = connectDecimal
	case "date":
		name = dbzDate
	case "time-millis":
		name = dbzTime
	case "time-micros":
		name = dbzMicroTime
	case "timestamp-millis", "timestamp-micros":
		name = dbzZonedTimestamp // an instant: decoded as time.Time, written with its Z
	case "local-timestamp-millis":
		name = dbzTimestamp
	case "local-timestamp-micros":
		name = dbzMicroTimestamp
	case "uuid":
		name = dbzUUID
	}
	return base, name
}

// columns returns the columns of the event's row images as its writer's schema describes
// them (after's schema, else before's: Debezium gives both the table's), in the schema's
// order, and the primary key: the Kafka key's fields, in the key schema's order. A key
// field that the row schema lacks is a column too, typed by the key's schema.
func (ev *event) columns() (cols []column, keys []string, err error) {
	var keyCols []column
	switch {
	case ev.valueMsg != nil:
		fs, ok := ev.valueMsg.Fields("after")
		if !ok {
			fs, ok = ev.valueMsg.Fields("before")
		}
		if !ok {
			return nil, nil, errors.New("the change event's Avro schema has no after or before record")
		}
		if cols, err = avroColumns(fs); err != nil {
			return nil, nil, err
		}
		if ev.keyMsg == nil {
			return nil, nil, errors.New("the change event has no key (its table has no primary key)")
		}
		kf, ok := ev.keyMsg.Fields()
		if !ok {
			return nil, nil, errors.New("the change event's Avro key is not a record")
		}
		if keyCols, err = avroColumns(kf); err != nil {
			return nil, nil, err
		}
	case ev.valueSchema != nil:
		side := ev.valueSchema.field("after")
		if side == nil || len(side.Fields) == 0 {
			side = ev.valueSchema.field("before")
		}
		if side == nil || len(side.Fields) == 0 {
			return nil, nil, errors.New("the change event's schema has no after or before struct")
		}
		if cols, err = jsonColumns(side.Fields); err != nil {
			return nil, nil, err
		}
		if ev.keySchema == nil {
			// The key without its schema (key.converter's schemas.enable=false): its
			// fields, typed and ordered by the row's schema.
			for _, c := range cols {
				if _, ok := ev.key[c.name]; ok {
					keyCols = append(keyCols, c)
				}
			}
			if len(keyCols) != len(ev.key) {
				return nil, nil, errUntyped
			}
		} else if keyCols, err = jsonColumns(ev.keySchema.Fields); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errUntyped
	}
	if len(keyCols) == 0 {
		return nil, nil, errors.New("the change event's key has no fields (its table has no primary key)")
	}
	for _, k := range keyCols {
		keys = append(keys, k.name)
		if !hasColumn(cols, k.name) {
			cols = append(cols, k)
		}
	}
	return cols, keys, nil
}

func avroColumns(fs []schemaformat.Field) ([]column, error) {
	cols := make([]column, 0, len(fs))
	for _, f := range fs {
		typ, err := pgType(avroBase(f))
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		cols = append(cols, column{f.Name, typ})
	}
	return cols, nil
}

func jsonColumns(fs []jsonSchema) ([]column, error) {
	cols := make([]column, 0, len(fs))
	for _, f := range fs {
		typ, err := pgType(f.Type, f.Name)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Field, err)
		}
		cols = append(cols, column{f.Field, typ})
	}
	return cols, nil
}

func hasColumn(cols []column, name string) bool {
	for _, c := range cols {
		if c.name == name {
			return true
		}
	}
	return false
}

// lockDDL takes the transaction's advisory lock on table (see above).
func lockDDL(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "eosink.cdc.ddl "+name); err != nil {
		return fmt.Errorf("cdc: lock %s for DDL: %w", name, err)
	}
	return nil
}

// createSQL is the CREATE TABLE of table with the columns that r replicates and the
// key columns, the key as primary key. Columns are nullable but for the key's.
func createSQL(table pgx.Identifier, cols []column, keys []string, r route) string {
	var defs []string
	for _, c := range cols {
		if !r.replicated(c.name) && !contains(keys, c.name) {
			continue
		}
		defs = append(defs, pgx.Identifier{c.name}.Sanitize()+" "+c.typ)
	}
	defs = append(defs, "PRIMARY KEY ("+quote(keys, "")+")")
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n  %s\n)", table.Sanitize(), strings.Join(defs, ",\n  "))
}

// addColumnsSQL is the ALTER TABLE that adds cols, nullable.
func addColumnsSQL(table pgx.Identifier, cols []column) string {
	adds := make([]string, len(cols))
	for i, c := range cols {
		adds[i] = "ADD COLUMN IF NOT EXISTS " + pgx.Identifier{c.name}.Sanitize() + " " + c.typ
	}
	return fmt.Sprintf("ALTER TABLE %s %s", table.Sanitize(), strings.Join(adds, ", "))
}

// create creates table from ev's schema, in tx, and returns its target.
func (p *CDC) create(ctx context.Context, tx pgx.Tx, table pgx.Identifier, r route, ev *event) (*target, error) {
	name := table.Sanitize()
	cols, keys, err := ev.columns()
	if err != nil {
		return nil, fmt.Errorf("cdc: create %s: %w", name, err)
	}
	var made []string
	for _, c := range cols {
		if r.replicated(c.name) || contains(keys, c.name) {
			made = append(made, c.name)
		}
	}
	if err := p.cf.columns(strings.Join(table, "."), 0, made); err != nil {
		return nil, err
	}
	if err := lockDDL(ctx, tx, name); err != nil {
		return nil, err
	}
	sql := createSQL(table, cols, keys, r)
	if _, err := tx.Exec(ctx, sql); err != nil {
		return nil, fmt.Errorf("cdc: create %s: %w", name, err)
	}
	p.log.Info("cdc: target table created (commits with the batch)", "table", name, "primary_key", strings.Join(keys, ","), "source", ev.schema+"."+ev.table)
	t, _, err := loadTarget(ctx, tx, table, r, p.positions)
	return t, err
}

// addColumns adds the fields of ev that t has no column for (missing), in tx, and returns
// the table's target read again.
func (p *CDC) addColumns(ctx context.Context, tx pgx.Tx, table pgx.Identifier, t *target, ev *event, missing []string) (*target, error) {
	cols, _, err := ev.columns()
	if err != nil {
		return nil, fmt.Errorf("cdc: evolve %s: %w", t.name, err)
	}
	var add []column // in the schema's order
	for _, c := range cols {
		if contains(missing, c.name) {
			add = append(add, c)
		}
	}
	for _, f := range missing {
		if !hasColumn(add, f) {
			return nil, fmt.Errorf("cdc: evolve %s: field %q is not in the change event's schema", t.name, f)
		}
	}
	names := make([]string, len(add))
	for i, c := range add {
		names[i] = c.name
	}
	if err := p.cf.columns(strings.Join(table, "."), 0, names); err != nil {
		return nil, err
	}
	if err := lockDDL(ctx, tx, t.name); err != nil {
		return nil, err
	}
	// The budget counts every column the table has (excluded ones too), after the lock:
	// another partition may have just added some.
	var existing int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
		t.name).Scan(&existing); err != nil {
		return nil, fmt.Errorf("cdc: evolve %s: count its columns: %w", t.name, err)
	}
	if err := p.cf.columns(strings.Join(table, "."), existing, names); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, addColumnsSQL(table, add)); err != nil {
		return nil, fmt.Errorf("cdc: evolve %s: %w", t.name, err)
	}
	typed := make([]string, len(add))
	for i, c := range add {
		typed[i] = c.name + " " + c.typ
	}
	p.log.Info("cdc: columns added (commit with the batch)", "table", t.name, "columns", strings.Join(typed, ", "), "source", ev.schema+"."+ev.table)
	nt, _, err := loadTarget(ctx, tx, table, t.r, p.positions)
	return nt, err
}
