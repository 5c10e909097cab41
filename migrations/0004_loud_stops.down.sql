DROP TABLE instances;
ALTER TABLE offsets_audit DROP COLUMN from_topic_id, DROP COLUMN to_topic_id;
ALTER TABLE offsets DROP COLUMN stopped_reason, DROP COLUMN stopped_error, DROP COLUMN stopped_at, DROP COLUMN stopped_by;
