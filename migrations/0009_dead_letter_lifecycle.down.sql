-- Back to dead letters that are deleted when replayed or discarded: the resolved ones go (as
-- the earlier version would have deleted them; a record applied later was never removed
-- before, and goes too), and the edits of open ones are dropped (their original key and
-- value stay). The audit of operators' actions is dropped.
DROP TABLE dead_letters_audit;
DROP FUNCTION dead_letters_audit_stamp();
DELETE FROM dead_letters WHERE resolved_at IS NOT NULL;
DROP INDEX dead_letters_open;
ALTER TABLE dead_letters
    DROP CONSTRAINT dead_letters_resolved,
    DROP COLUMN edited_at,
    DROP COLUMN edited_by,
    DROP COLUMN edited_value,
    DROP COLUMN edited_key,
    DROP COLUMN resolved_by,
    DROP COLUMN resolved_how,
    DROP COLUMN resolved_at;
