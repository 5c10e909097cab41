// Package sqlsink is the escape hatch among the built-in sink plugins, registered as "sql": it
// runs statements of your own for every record, with the record's values bound as
// parameters. Use it when table and upsert do not fit: several tables per record, an
// increment, a function call.
//
//	sink:
//	  type: sql
//	  value_format: json            # json|string|bytes|avro|protobuf|json_schema; default json
//	  key_format: string            # the same; default string
//	  params:                       # @name: a source expression, or {from (or expr), required, cast, default}
//	    sku: {from: value.sku, required: true}
//	    qty: value.qty
//	    at: {from: value.at, cast: rfc3339}   # refuses anything but an RFC 3339 timestamp
//	    region: {from: value.region, default: eu}
//	    id: key                     # the record key, for the tombstone statement
//	  statements:                   # run in order for each record
//	    - INSERT INTO inventory.history (id, sku, qty, at, region) VALUES (@id, @sku, @qty, @at, @region)
//	    - UPDATE inventory.stock SET qty = qty + @qty WHERE sku = @sku
//	  on_tombstone: statements      # poison (default) | skip | statements
//	  tombstone_statements:         # with on_tombstone: statements (the default when set)
//	    - DELETE FROM inventory.reservations WHERE id = @id
//
// In Go: sqlsink.New(sqlsink.Config{Params: ..., Statements: ...}) returns the plugin for
// sink.Config.Plugin.
//
// # Security: record data only ever as parameters
//
// Statements are configuration. Record data reaches PostgreSQL only as bound parameters of
// the extended protocol, never as SQL text: the plugin never builds SQL from a record, and
// refuses a database connection configured with pgx's simple_protocol or exec query modes
// (default_query_exec_mode), where pgx would put values into the text or type them itself.
//
// # Parameters
//
// A parameter is written @name, as with pgx.NamedArgs: @ then a letter or _, then letters,
// digits and _ (case-sensitive). Nothing inside a string constant ('...', E'...',
// $tag$...$tag$), a quoted identifier or a comment is a parameter, so casts (@qty::numeric),
// := and : in array slices keep their meaning. The plugin rewrites them to $1, $2, ... once,
// when the config loads; a name used twice in a statement is one parameter. @ is also the
// prefix of some PostgreSQL operators (@>, <@, @@, and the prefix @ for absolute value):
// put a space between such an operator and a name after it (tags <@ @wanted, not
// tags<@wanted, which reads as the parameter @wanted after <). Positional $1 are refused.
//
// At load these are errors that name the field: a statement using a parameter not declared
// under params (statements[1]: unknown parameter @skux), a declared parameter no statement
// uses (params.at), a tombstone statement whose parameter reads the value, an empty list.
// At start (Prepare) PostgreSQL parses and describes every statement in a transaction that
// is rolled back: a syntax error, a missing table or column, or a parameter whose type
// PostgreSQL cannot infer fails the start with PostgreSQL's message and the statement's
// index (statements[1]: ERROR: relation "inventory.stok" does not exist (SQLSTATE 42P01)).
//
// # Values and types
//
// PostgreSQL infers each parameter's type from the statement, and parses the value sent in
// its text form into that type, as for a literal: write a cast where the statement leaves
// the type open (@at::timestamptz). Values are those of the table plugin's columns:
//
//	JSON string            its text: into text, varchar, uuid, date, timestamptz, enums...
//	JSON number            its literal (12, -3.5, 1e3): into integer, numeric, float...;
//	                       1e3 or 3.5 into an integer is a data error (poison)
//	JSON true, false       into boolean (or text "true", "false")
//	JSON null, absent      NULL; with required: true, poison
//	JSON object, array     its JSON text: into json or jsonb (or text)
//	value, key (json)      the whole JSON text
//	bytes format           into bytea as the bytes; into anything else as text (invalid
//	                       UTF-8 is a data error)
//	string into bytea      its UTF-8 bytes
//	topic, partition,      text, decimal, decimal, RFC 3339 (into timestamptz)
//	offset, timestamp
//
// # Casts and defaults
//
// A parameter takes the options of the table plugin's columns, decoded and applied by the
// same code (the mapping layer), with the same errors: required, cast and default.
//
//	params:
//	  at:     {from: value.at, cast: rfc3339}      # epoch_s | epoch_ms | epoch_us | rfc3339 -> RFC 3339 text in UTC
//	  blob:   {from: value.b64, cast: base64}      # -> bytes, for a bytea parameter
//	  doc:    {from: value.payload, cast: json}    # a string holding JSON -> checked JSON text
//	  region: {from: value.region, default: eu}    # when the field is absent (an explicit null stays NULL)
//
// A cast checks and converts the value before anything is sent, so that PostgreSQL never
// guesses: it reads "yesterday", "now" or "epoch" into a timestamptz parameter
// (@at::timestamptz) as dates, while cast: rfc3339 refuses them. A value that does not cast
// makes its record poison, naming the parameter, its source and the start of the value:
//
//	sql: parameter @at (value.at): cast rfc3339: "yesterday" is not an RFC 3339 timestamp
//
// A timestamp cast gives RFC 3339 text in UTC (a time without a zone is UTC, whatever the
// session's TimeZone), for a parameter PostgreSQL types timestamptz; base64 gives bytes for
// a bytea parameter (into another type they would go as text); json checks the text is one
// JSON document. PostgreSQL still types the parameter from the statement: the cast decides
// what the value may be, the statement what it becomes. The default goes through the cast,
// in the source's form (epoch_ms: "0"), and is checked at load; it excludes required. An
// unknown cast, a default with required, or a default its cast refuses is an error at load
// naming the field (params.at.cast).
//
// What a column has besides these belongs to the table it writes, so a parameter has none
// of it: upsert's key, merge and only_if_newer, create's types, and the array flag the table
// plugin reads from the column's type. An array read from an avro, protobuf or json_schema
// side is therefore JSON text, as with the json format; convert it in the statement
// (ARRAY(SELECT jsonb_array_elements_text(@tags::jsonb))).
//
// # Batches and errors
//
// Each batch is one pgx.Batch: every statement for every record, in record order, sent at
// once (pipelined) in the engine's transaction, with the partition's offset update. So a
// record's statements and the offset commit together, or not at all.
//
// A record whose parameters cannot be mapped (invalid JSON, a required value missing, a
// value its cast refuses) is poison before anything is sent. When a statement fails, the failing result's position in
// the batch names the record and the statement: a data error (SQLSTATE class 22 or 23, or
// 54000: a check or unique violation, a bad number) is returned as that record's poison
// (sink.Poison), and with on_poison: dead-letter the engine isolates it in savepoints and
// dead-letters it, without any of its statements' effects; any other error (a lost
// connection, 40001, 57014 statement timeout, a missing privilege) is returned as it is, to
// be retried or to stop the partition.
//
// # Routes
//
// Routes give some topics statements of their own; the parameters are the section's:
//
//	routes:                       # tried in order before statements
//	  - topic: audit              # a name, or a pattern starting with ^
//	    statements:
//	      - INSERT INTO ops.audit (id, body) VALUES (@id, @body)
//	    tombstone_statements:
//	      - DELETE FROM ops.audit WHERE id = @id
//
// (Write statements as block list items, as here: in a flow list, [a, b], YAML splits
// them at their commas.) statements then serve every other topic; without them, such a topic has no route, and the
// plugin says so as a sink.TopicRouter (refused at load or start, or its partitions stop).
//
// # Tombstones
//
// A record with a null value is poison by default (on_tombstone: poison). skip passes it,
// counting it as skipped; statements runs tombstone_statements for it, whose parameters may
// read the key, headers, topic, partition, offset and timestamp, not the value.
package sqlsink
