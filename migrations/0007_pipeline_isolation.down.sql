DROP TRIGGER audit_update ON offsets;
DROP TRIGGER audit_delete ON offsets;
DROP TRIGGER audit_insert ON offsets;
DROP FUNCTION offsets_audit_change();
DROP TRIGGER stamp ON offsets_audit;
DROP FUNCTION offsets_audit_stamp();
-- A deleted row's audit (to_offset NULL) keeps -1 as its to_offset.
UPDATE offsets_audit SET to_offset = -1 WHERE to_offset IS NULL;
ALTER TABLE offsets_audit
    ALTER COLUMN to_offset SET NOT NULL,
    DROP COLUMN owner,
    DROP COLUMN to_epoch,
    DROP COLUMN from_epoch,
    DROP COLUMN change;
DROP POLICY pipeline_scope ON instances;
ALTER TABLE instances DISABLE ROW LEVEL SECURITY;
DROP POLICY pipeline_scope ON dead_letters;
ALTER TABLE dead_letters DISABLE ROW LEVEL SECURITY;
DROP POLICY pipeline_scope ON offsets_audit;
ALTER TABLE offsets_audit DISABLE ROW LEVEL SECURITY;
DROP POLICY pipeline_scope ON offsets;
ALTER TABLE offsets DISABLE ROW LEVEL SECURITY;
DROP TABLE pipeline_roles;
