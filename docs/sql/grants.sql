-- What the run role needs on eosink's tables and on the target tables (docs/security.md).
-- Run it as the migrate role (the owner of both) after `eosink migrate up`:
--
--   psql -v run_role=eosink_run -v schema=eosink -v target_schema=public -f docs/sql/grants.sql
--
-- schema is eosink's schema (the offsets table's, `schema:` in the pipeline file);
-- target_schema holds the tables the plugin writes. Rerun it when a migration or you add a
-- table.

-- eosink's own tables.
GRANT USAGE ON SCHEMA :"schema" TO :"run_role";
-- the start-up check of the schema version
GRANT SELECT ON :"schema".eosink_schema_migrations TO :"run_role";
-- claims (INSERT the row, UPDATE ... RETURNING the epoch), commits (UPDATE next_offset), stops
GRANT SELECT, INSERT, UPDATE ON :"schema".offsets TO :"run_role";
-- heartbeats (INSERT ... ON CONFLICT DO UPDATE)
GRANT SELECT, INSERT, UPDATE ON :"schema".instances TO :"run_role";
-- dead letters, in the batch's transaction (INSERT ... ON CONFLICT DO UPDATE)
GRANT SELECT, INSERT, UPDATE ON :"schema".dead_letters TO :"run_role";
GRANT USAGE ON SEQUENCE :"schema".dead_letters_id_seq TO :"run_role";
-- the dead letters' audit (migration 9): `eosink dlq edit|replay|discard`, run with the
-- pipeline's config file (and so its role), write a row per action; db_user and at are set
-- by the server. The sink itself never writes it.
SELECT format('GRANT SELECT, INSERT ON %I.dead_letters_audit TO %I', :'schema', :'run_role')
 WHERE to_regclass(format('%I.dead_letters_audit', :'schema')) IS NOT NULL
\gexec
SELECT format('GRANT USAGE ON SEQUENCE %I.dead_letters_audit_id_seq TO %I', :'schema', :'run_role')
 WHERE to_regclass(format('%I.dead_letters_audit', :'schema')) IS NOT NULL
\gexec
-- leases (migration 8): the set of partitions a cdc replica in consistency: transaction
-- owns together (take, renew, release, and the epoch check of every commit)
GRANT SELECT, INSERT, UPDATE ON :"schema".leases TO :"run_role";
-- offsets_audit is written by the offsets table's trigger (migration 7), as its owner: no
-- grant. pipeline_roles (migration 7) is readable by every role, each its own mappings.
-- The plugins' tables in eosink's schema, when their migrations made them: the inbox's event
-- ids (DELETE for retention), the cdc plugin's positions (the never-backwards guard) and its
-- source marks (a source that went back in time), and its transaction watermarks
-- (consistency: transaction).
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.%I TO %I', :'schema', t, :'run_role')
  FROM unnest(ARRAY['inbox', 'cdc_positions', 'cdc_positions_int', 'cdc_source_marks', 'cdc_tx_watermarks']) AS t
 WHERE to_regclass(format('%I.%I', :'schema', t)) IS NOT NULL
\gexec
-- The outbox (the outbox plugin and outbox.Add), when its migration made it: the sink only
-- inserts events. The relay's role needs more: docs/outbox.md and docs/security.md.
SELECT format('GRANT INSERT ON %I.outbox TO %I', :'schema', :'run_role')
 WHERE to_regclass(format('%I.outbox', :'schema')) IS NOT NULL
\gexec

-- The target tables: what the plugin does to them. table: INSERT (COPY); upsert: SELECT,
-- INSERT, UPDATE, DELETE (tombstones with delete_on_tombstone: true); cdc: SELECT, INSERT,
-- UPDATE, DELETE; sql: what its statements do. Narrow it to the tables and privileges of your
-- pipeline. create: true and evolve need more (docs/security.md).
GRANT USAGE ON SCHEMA :"target_schema" TO :"run_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA :"target_schema" TO :"run_role";
GRANT USAGE ON ALL SEQUENCES IN SCHEMA :"target_schema" TO :"run_role";
