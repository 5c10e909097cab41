// Package migrations holds the framework's own schema: the offsets table, its audit (with
// the session's role and client address since migration 6), the dead letters, the stop
// columns and the instances' heartbeats; since migration 7, the pipeline_roles table whose
// row-level security policies confine a role to its pipelines' rows, and the triggers that
// write the audit (docs/security.md, "One role per pipeline" and "The audit"). The files are embedded and applied with
// golang-migrate (iofs source, pgx5 driver) by github.com/eosink/eosink/sink.Migrate or by
// `eosink migrate`.
package migrations

import "embed"

// FS holds NNNN_name.up.sql and NNNN_name.down.sql files.
//
//go:embed *.sql
var FS embed.FS

// Table is the golang-migrate bookkeeping table used for these migrations, inside the
// configured schema. It is distinct from golang-migrate's default so that a user's own
// migrations can live in the same schema.
const Table = "eosink_schema_migrations"
