-- Header keys as bytes. A Kafka header key is any bytes; text[] refused one that is not
-- UTF-8 or holds a NUL (SQLSTATE 22021), which stopped the partition under the dead-letter
-- policy. Existing keys keep their UTF-8 bytes and their order. (ALTER COLUMN ... TYPE cannot
-- convert an array element by element, so the column is rebuilt.)
ALTER TABLE dead_letters ADD COLUMN header_keys_bytes bytea[] NOT NULL DEFAULT '{}';
UPDATE dead_letters SET header_keys_bytes =
    ARRAY(SELECT convert_to(k, 'UTF8') FROM unnest(header_keys) WITH ORDINALITY AS u(k, i) ORDER BY i);
ALTER TABLE dead_letters DROP COLUMN header_keys;
ALTER TABLE dead_letters RENAME COLUMN header_keys_bytes TO header_keys;
