-- Confine a run role to one pipeline's rows (docs/security.md, "One role per pipeline").
-- Run it as the migrate role (the owner of eosink's tables) after `eosink migrate up` (at
-- migration 7 or later) and after docs/sql/grants.sql gave run_role its privileges:
--
--   psql -v pipeline=orders -v run_role=eosink_run_orders -v schema=eosink -f docs/sql/pipeline_role.sql
--
-- From then on run_role sees and changes only the rows of `orders` (and of any other pipeline
-- mapped to it) in offsets, offsets_audit, dead_letters, dead_letters_audit (migration 9)
-- and instances, and in the plugins'
-- tables below; it cannot insert rows for another pipeline. Rerun it for each pipeline of
-- the role, and after a plugin's migration made one of those tables. Undo it with
--   DELETE FROM eosink.pipeline_roles WHERE role = 'eosink_run_orders' AND pipeline = 'orders';
-- (a role with no mapping left sees every row again, as before migration 7).
--
-- plugin_schema (optional, default schema) is where the plugins' tables are: the cdc
-- plugin's positions_schema, the inbox plugin's schema.

\if :{?plugin_schema}
\else
\set plugin_schema :schema
\endif

INSERT INTO :"schema".pipeline_roles (pipeline, role) VALUES (:'pipeline', :'run_role') ON CONFLICT DO NOTHING;

-- The plugins' tables keyed by pipeline get the policy of eosink's own tables (migration 7):
-- cdc_source_marks and cdc_tx_watermarks by their pipeline column, inbox by its subscriber (the pipeline's name
-- unless `subscriber:` names another: map that name to the role too). cdc_positions is keyed
-- by target table, not pipeline, and outbox by event: see docs/security.md.
SELECT format('ALTER TABLE %I.%I ENABLE ROW LEVEL SECURITY', :'plugin_schema', t.name)
  FROM (VALUES ('cdc_source_marks'), ('cdc_tx_watermarks'), ('inbox')) AS t(name)
 WHERE to_regclass(format('%I.%I', :'plugin_schema', t.name)) IS NOT NULL
\gexec
SELECT format('CREATE POLICY pipeline_scope ON %1$I.%2$I USING (
    NOT EXISTS (SELECT FROM %3$I.pipeline_roles r WHERE r.role = current_user::text)
    OR %4$I IN (SELECT r.pipeline FROM %3$I.pipeline_roles r WHERE r.role = current_user::text))', :'plugin_schema', t.name, :'schema', t.col)
  FROM (VALUES ('cdc_source_marks', 'pipeline'), ('cdc_tx_watermarks', 'pipeline'), ('inbox', 'subscriber')) AS t(name, col)
 WHERE to_regclass(format('%I.%I', :'plugin_schema', t.name)) IS NOT NULL
   AND NOT EXISTS (SELECT FROM pg_policies p WHERE p.schemaname = :'plugin_schema' AND p.tablename = t.name AND p.policyname = 'pipeline_scope')
\gexec
