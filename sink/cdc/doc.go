// Package cdc is the built-in sink plugin "cdc": it applies Debezium change events (from
// the PostgreSQL connector) to replica tables, exactly once, and never moves a row back.
//
//	schema_registry:                # the pipeline's section; avro needs it
//	  url: http://127.0.0.1:8080/apis/ccompat/v7
//	sink:
//	  type: cdc
//	  format: avro                  # json (default; schemas on or off, detected) | avro
//	  table: "replica.$${source.table}"   # default $${source.schema}.$${source.table};
//	                                # also $${source.db}, $${topic}. ($$ escapes the config
//	                                # loader's own ${ENV} expansion.)
//	  schema: public                # target schema of a table name without one
//	  schemas: [public]             # the schemas a $${source.schema} target may be in
//	                                # (required by such a template: the default)
//	  topic_check: debezium         # an event's source table must be its topic's; off
//	                                # for topic-routing transforms (ByLogicalTableRouter)
//	  exclude: [internal_note]      # or include: [...]; columns, for every table
//	  tables:                       # per source table overrides
//	    public.orders: {table: archive.orders, exclude: [blob]}
//	  truncate: false               # apply op t (truncate); default: skip and log
//	  positions_schema: eosink      # where cdc_positions lives; default the pipeline's schema
//	  create: false                 # true: create a missing target table from the event's schema
//	  evolve: ""                    # add-columns: add a nullable column for a new field
//	  max_columns: 250              # the widest table create and evolve make
//	  unavailable_value_placeholder: __debezium_unavailable_value  # the connector's (default)
//	  decimal_handling: ""          # JSON without schemas: precise | string | double, the
//	                                # connector's decimal.handling.mode; unset: a value both
//	                                # could have written stops the partition
//
// Targets are confined (confine.go): to a template's fixed schema or, for a schema taken
// from the event, to schemas; never eosink's own schemas, information_schema or pg_*; names
// at most 63 bytes, through internal/names, columns neither system columns nor eosink_*.
// An event that fails is poison (a *ConfinementError); a name the config fixes is checked
// at load.
//
// Arrays into array columns become PostgreSQL array literals, each element converted as a
// column of the element type would be (docs/cdc.md, Types).
//
// c and r upsert by the target's primary key, u updates (a u whose before image has
// another key deletes the old key), d deletes, tombstones are skipped (counted in Stats).
// Columns are the target table's (minus exclude); a replicated field without a column is
// poison. An event with a null key (a source table without a primary key), an unknown op,
// or bytes that do not decode (an unknown schema id included) is poison. While the schema
// registry cannot be reached Write returns sink.Transient: the engine rolls the batch back
// and retries it; a registry's refusal (401, 403) stops the partition.
//
// With create, a missing target table is created (CREATE TABLE IF NOT EXISTS) from the
// change event's schema, the Kafka key's fields as primary key; with evolve: add-columns a
// replicated field without a column adds one (ADD COLUMN IF NOT EXISTS), nullable. Columns
// are never dropped or retyped. Types come from the JsonConverter's schema or the Avro
// schema (see docs/cdc.md for the mapping); events without a schema make create and
// evolve stop the partition rather than guess. The DDL runs in the batch's transaction
// after an advisory lock on the table's name, so a rollback leaves neither the DDL nor the
// rows, and partitions creating the same table queue instead of failing.
//
// Each row's source position, (commit LSN from source.sequence, source.lsn), is kept in
// cdc_positions, also after a delete; a change applies only when its position is newer.
// Snapshot reads (op r) order before every streamed change; the reads of a fresh table's
// snapshot are copied in with one position for the table (its load floor, load.go). A
// merge takes the target's advisory merge lock shared (a truncate or a load exclusive),
// decides the positions in one statement and writes the rows in a later one, so it sees
// what concurrent partitions committed. A column holding the connector's unavailable-value
// placeholder (a TOASTed value an update did not change) keeps its earlier value; with
// none, the change is poison. See docs/cdc.md.
package cdc
