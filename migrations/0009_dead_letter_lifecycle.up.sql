-- Dead letters with a lifecycle (issue 27). A dead letter is one row per record coordinates
-- (pipeline, topic, partition, offset), as since migration 3; it is now resolved rather than
-- deleted, so that a record dead-lettered again at the same coordinates (a replay from
-- Kafka after `eosink offsets set`) counts one more failure on the same row instead of
-- coming back under a new id:
--
--   resolved_how 'applied'   a later batch applied the record at these coordinates (in that
--                            batch's transaction); resolved_by is the sink's instance id
--                'replayed'  `eosink dlq replay` (admin.Client.Replay) applied it
--                'discarded' `eosink dlq discard` gave it up
--
-- A dead letter with resolved_at NULL is open. Failing again reopens it (resolved_* NULL,
-- failures + 1). key and value keep the record as it was in Kafka; `eosink dlq edit` stores
-- a corrected key or value beside them (edited_*), which a replay applies instead. Every
-- operator action (edit, replay, discard) is a row of dead_letters_audit.
ALTER TABLE dead_letters
    ADD COLUMN resolved_at  timestamptz,
    ADD COLUMN resolved_how text CHECK (resolved_how IN ('applied', 'replayed', 'discarded')),
    ADD COLUMN resolved_by  text,
    ADD COLUMN edited_key   bytea,
    ADD COLUMN edited_value bytea,
    ADD COLUMN edited_by    text,
    ADD COLUMN edited_at    timestamptz,
    ADD CONSTRAINT dead_letters_resolved CHECK ((resolved_at IS NULL) = (resolved_how IS NULL));

-- The open dead letters of a partition, for the sink's check at claim (is there one at or
-- above the claimed position?) and for `eosink dlq list`.
CREATE INDEX dead_letters_open ON dead_letters (pipeline, topic, partition, "offset") WHERE resolved_at IS NULL;

-- What operators did to dead letters. old_*/new_* hold the key and value an edit replaced
-- and stored (NULL for a replay or a discard, and for the part an edit left alone).
-- db_user and at are set by the server, whatever the inserter supplies.
CREATE TABLE dead_letters_audit (
    id             bigserial   PRIMARY KEY,
    dead_letter_id bigint      NOT NULL,
    pipeline       text        NOT NULL,
    topic          text        NOT NULL,
    partition      integer     NOT NULL,
    "offset"       bigint      NOT NULL,
    action         text        NOT NULL CHECK (action IN ('edit', 'replay', 'discard')),
    operator       text        NOT NULL,
    reason         text        NOT NULL DEFAULT '',
    old_key        bytea,
    new_key        bytea,
    old_value      bytea,
    new_value      bytea,
    db_user        text        NOT NULL DEFAULT session_user,
    at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_audit_dead_letter ON dead_letters_audit (dead_letter_id);

CREATE FUNCTION dead_letters_audit_stamp() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.db_user := session_user;
    NEW.at := now();
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION dead_letters_audit_stamp() FROM PUBLIC;
CREATE TRIGGER stamp BEFORE INSERT ON dead_letters_audit FOR EACH ROW EXECUTE FUNCTION dead_letters_audit_stamp();

ALTER TABLE dead_letters_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON dead_letters_audit USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));
