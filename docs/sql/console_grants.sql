-- What the console's role needs on eosink's tables (`eosink console`, docs/console.md): SELECT
-- on what the API reads, and with mutations only the writes that replaying, discarding and
-- moving positions make. Run it as the migrate role (the tables' owner) after
-- `eosink migrate up`:
--
--   psql -v console_role=eosink_console -v schema=eosink -f docs/sql/console_grants.sql
--   psql -v console_role=eosink_console -v schema=eosink -v mutations=true -f docs/sql/console_grants.sql
--
-- The role then sees every pipeline of the schema. To confine it to some pipelines, map it
-- to them with docs/sql/pipeline_role.sql (run_role=<the console role>), as a pipeline's run
-- role is confined (docs/security.md). internal/console's TestConsoleRoleGrants runs the
-- API's read endpoints and its mutations as a role with these grants only.

\if :{?mutations}
\else
\set mutations false
\endif

-- Reads: pipelines and partitions (offsets, and instances for whether an owner is alive),
-- leases (cdc sets), dead letters, the audit, and the schema version (checked before a move).
-- pipeline_roles (migration 7) is readable by every role, each its own mappings: no grant.
GRANT USAGE ON SCHEMA :"schema" TO :"console_role";
GRANT SELECT ON :"schema".eosink_schema_migrations, :"schema".offsets, :"schema".instances,
    :"schema".leases, :"schema".offsets_audit, :"schema".dead_letters, :"schema".dead_letters_audit TO :"console_role";

\if :mutations
-- Moving positions: lock the row (SELECT ... FOR UPDATE, which needs UPDATE), move it and
-- bump its epoch (UPDATE), or create it (INSERT). offsets_audit is written by the offsets
-- table's trigger as its owner (migration 7): no grant, and the console cannot forge it.
GRANT INSERT, UPDATE ON :"schema".offsets TO :"console_role";
-- Dead letters: a replay resolves the dead letter in the transaction of its write, a
-- discard resolves it, a replay that fails again records the new error (UPDATE; rows are
-- never deleted, migration 9), and each is a row of the dead letters' audit (INSERT). The
-- console holds no DELETE anywhere.
GRANT UPDATE ON :"schema".dead_letters TO :"console_role";
GRANT INSERT ON :"schema".dead_letters_audit TO :"console_role";
GRANT USAGE ON SEQUENCE :"schema".dead_letters_audit_id_seq TO :"console_role";
-- A replay writes through the pipeline's sink plugin: grant the console role the plugin's
-- privileges on its target tables too (the target part of docs/sql/grants.sql, with
-- run_role=<the console role>), or replays fail with a permission error.
\endif
