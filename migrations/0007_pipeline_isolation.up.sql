-- Pipelines isolated from each other, and an audit the writer cannot forge (issue 23).
--
-- 1. pipeline_roles maps a pipeline to a role. A role named there (as current_user, the role
--    a session acts as) is confined to the rows of its pipelines in offsets, offsets_audit,
--    dead_letters and instances: it neither sees nor changes another pipeline's rows, and
--    cannot insert rows for one. A role named nowhere keeps what its grants give it, every
--    row, as before this migration; so do the tables' owner (the migrate role), superusers
--    and BYPASSRLS roles. An existing install therefore works unchanged after `migrate up`,
--    until its operator confines a role (docs/sql/pipeline_role.sql, docs/security.md).
-- 2. offsets_audit's db_user, client_addr and at are set by the server on every insert,
--    whatever the inserter supplies, and a trigger on offsets writes the audit row itself for
--    every created or deleted row, every epoch change, every backward move, every change of
--    the topic id and every change of a row's key, whoever makes it and however (a claim,
--    `eosink offsets set`, or a hand-written UPDATE). A forward advance under an unchanged
--    epoch, the commit path of every batch, is not recorded.

CREATE TABLE pipeline_roles (
    pipeline text NOT NULL,
    role     text NOT NULL, -- the role's name, as current_user gives it
    PRIMARY KEY (role, pipeline)
);
-- Every role evaluating the policies below reads its own mappings, and only those.
GRANT SELECT ON pipeline_roles TO PUBLIC;
ALTER TABLE pipeline_roles ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_mappings ON pipeline_roles FOR SELECT USING (role = current_user::text);

-- One policy per table, for every command (its USING is also its WITH CHECK). The two
-- subqueries do not depend on the row: PostgreSQL runs each once per statement (an InitPlan
-- and a hashed SubPlan), so the per-row cost is a hash probe, and nothing for a role named
-- nowhere (the first test is true). The table names are bound when the policy is created,
-- so no search_path can redirect them.
ALTER TABLE offsets ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON offsets USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));
ALTER TABLE offsets_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON offsets_audit USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));
ALTER TABLE dead_letters ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON dead_letters USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));
ALTER TABLE instances ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON instances USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));

-- The audit's new columns. change is what the server saw: insert, update or delete of the
-- offsets row (written by the trigger), or manual (a row inserted into offsets_audit by
-- anyone but its owner: its other columns are the inserter's word). to_offset is NULL when
-- the row was deleted. Rows written before this migration keep NULL in the new columns.
ALTER TABLE offsets_audit
    ADD COLUMN change     text,
    ADD COLUMN from_epoch bigint,
    ADD COLUMN to_epoch   bigint,
    ADD COLUMN owner      text, -- the row's owner after the change (before it, for a delete)
    ALTER COLUMN to_offset DROP NOT NULL;

-- Every insert into offsets_audit: the session's login role, its client address (NULL over
-- a Unix socket) and the time, whatever the inserter wrote. session_user is the role that
-- logged in; SET ROLE does not change it. Only the trigger below (which runs as the table's
-- owner) may say what change it saw.
CREATE FUNCTION offsets_audit_stamp() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.db_user := session_user;
    NEW.client_addr := inet_client_addr();
    NEW.at := now();
    IF NOT pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        NEW.change := 'manual';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER stamp BEFORE INSERT ON offsets_audit FOR EACH ROW EXECUTE FUNCTION offsets_audit_stamp();

-- The audit row of a change to offsets, written as the owner of offsets_audit (SECURITY
-- DEFINER: the run role holds no privilege on it), into the offsets_audit of the same schema
-- (named from TG_TABLE_SCHEMA, never through search_path, which a caller's temporary table
-- could shadow). operator and reason are what the writer declared in its transaction
-- (set_config('eosink.operator', ..., true) and 'eosink.reason', as `eosink offsets set`
-- does); without them operator is empty and reason says what the change looks like: created,
-- deleted, claim (epoch + 1 at the same position), moved back, renamed, or changed.
CREATE FUNCTION offsets_audit_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    op  text := coalesce(nullif(current_setting('eosink.operator', true), ''), '');
    why text := nullif(current_setting('eosink.reason', true), '');
    ins text := format('INSERT INTO %I.offsets_audit (operator, reason, change, pipeline, topic, partition, from_offset, to_offset,
        from_epoch, to_epoch, from_topic_id, to_topic_id, owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)', TG_TABLE_SCHEMA);
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE ins USING op, coalesce(why, 'created'), 'insert', NEW.pipeline, NEW.topic, NEW.partition, NULL::bigint, NEW.next_offset,
            NULL::bigint, NEW.epoch, NULL::text, NEW.topic_id, NEW.owner;
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE ins USING op, coalesce(why, 'deleted'), 'delete', OLD.pipeline, OLD.topic, OLD.partition, OLD.next_offset, NULL::bigint,
            OLD.epoch, NULL::bigint, OLD.topic_id, NULL::text, OLD.owner;
    ELSIF (OLD.pipeline, OLD.topic, OLD.partition) IS DISTINCT FROM (NEW.pipeline, NEW.topic, NEW.partition) THEN
        -- A row moved to another key: its old key loses its position, the new one gets it.
        EXECUTE ins USING op, coalesce(why, format('renamed to %s/%s/%s', NEW.pipeline, NEW.topic, NEW.partition)), 'delete',
            OLD.pipeline, OLD.topic, OLD.partition, OLD.next_offset, NULL::bigint, OLD.epoch, NULL::bigint, OLD.topic_id, NULL::text, OLD.owner;
        EXECUTE ins USING op, coalesce(why, format('renamed from %s/%s/%s', OLD.pipeline, OLD.topic, OLD.partition)), 'insert',
            NEW.pipeline, NEW.topic, NEW.partition, NULL::bigint, NEW.next_offset, NULL::bigint, NEW.epoch, NULL::text, NEW.topic_id, NEW.owner;
    ELSE
        EXECUTE ins USING op, coalesce(why, CASE
                WHEN NEW.next_offset < OLD.next_offset THEN 'moved back'
                WHEN NEW.next_offset = OLD.next_offset AND NEW.epoch = OLD.epoch + 1 THEN 'claim'
                ELSE 'changed' END), 'update',
            NEW.pipeline, NEW.topic, NEW.partition, OLD.next_offset, NEW.next_offset, OLD.epoch, NEW.epoch,
            OLD.topic_id, CASE WHEN NEW.topic_id IS DISTINCT FROM OLD.topic_id THEN NEW.topic_id END, NEW.owner;
    END IF;
    RETURN NULL;
END
$$;
-- A trigger fires without EXECUTE on its function; without it nobody else can attach the
-- function (which runs as the owner) to a table of their own.
REVOKE ALL ON FUNCTION offsets_audit_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION offsets_audit_stamp() FROM PUBLIC;
CREATE TRIGGER audit_insert AFTER INSERT ON offsets FOR EACH ROW EXECUTE FUNCTION offsets_audit_change();
CREATE TRIGGER audit_delete AFTER DELETE ON offsets FOR EACH ROW EXECUTE FUNCTION offsets_audit_change();
-- The WHEN clause keeps the commit path free: a forward advance under the same epoch, topic
-- id and key calls no function and writes no row.
CREATE TRIGGER audit_update AFTER UPDATE ON offsets FOR EACH ROW
    WHEN (OLD.epoch IS DISTINCT FROM NEW.epoch OR NEW.next_offset < OLD.next_offset
          OR OLD.topic_id IS DISTINCT FROM NEW.topic_id
          OR (OLD.pipeline, OLD.topic, OLD.partition) IS DISTINCT FROM (NEW.pipeline, NEW.topic, NEW.partition))
    EXECUTE FUNCTION offsets_audit_change();
