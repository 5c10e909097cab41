-- Header keys back to text[]. A dead letter whose header key is not UTF-8 or holds a NUL
-- cannot be converted: the migration fails (SQLSTATE 22021) and changes nothing. Replay or
-- discard those dead letters first (`eosink dlq`).
ALTER TABLE dead_letters ADD COLUMN header_keys_text text[] NOT NULL DEFAULT '{}';
UPDATE dead_letters SET header_keys_text =
    ARRAY(SELECT convert_from(k, 'UTF8') FROM unnest(header_keys) WITH ORDINALITY AS u(k, i) ORDER BY i);
ALTER TABLE dead_letters DROP COLUMN header_keys;
ALTER TABLE dead_letters RENAME COLUMN header_keys_text TO header_keys;
