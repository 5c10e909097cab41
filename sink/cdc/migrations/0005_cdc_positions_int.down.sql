-- Back into cdc_positions, keyed as jsonb_build_array(pk) as the plugin did before
-- migration 5 (the newer position wins where a key is in both).
INSERT INTO cdc_positions AS p (target, pk, commit_lsn, lsn, deleted)
SELECT target, jsonb_build_array(pk), commit_lsn, lsn, deleted FROM cdc_positions_int
ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn);
DROP TABLE cdc_positions_int;
