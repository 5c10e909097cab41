-- Back to a position row per loaded key, as loads wrote before migration 6: each row of a
-- floored target without a position row gets (0, the floor's lsn) in cdc_positions_int.
-- A target that no longer exists, or whose primary key is no longer one integer column,
-- has nothing to read the keys back from and is left out (with a warning).
DO $$
DECLARE
    f   record;
    key name;
    typ oid;
BEGIN
    FOR f IN SELECT target, lsn FROM cdc_load_floors LOOP
        key := NULL;
        IF to_regclass(f.target) IS NOT NULL THEN
            SELECT a.attname, a.atttypid INTO key, typ
            FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE i.indrelid = to_regclass(f.target) AND i.indisprimary AND i.indnatts = 1;
            WHILE (SELECT t.typtype FROM pg_type t WHERE t.oid = typ) = 'd' LOOP -- domains, however nested
                typ := (SELECT t.typbasetype FROM pg_type t WHERE t.oid = typ);
            END LOOP;
            IF typ IS NULL OR typ NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
                key := NULL;
            END IF;
        END IF;
        IF key IS NULL THEN
            RAISE WARNING 'cdc_load_floors: % is gone or not keyed by one integer column; its loaded keys get no position rows', f.target;
            CONTINUE;
        END IF;
        EXECUTE format('INSERT INTO cdc_positions_int (target, pk, commit_lsn, lsn, deleted)
            SELECT $1, t.%1$I, 0, $2, false FROM %2$s t
            WHERE NOT EXISTS (SELECT 1 FROM cdc_positions_int p WHERE p.target = $1 AND p.pk = t.%1$I)
              AND NOT EXISTS (SELECT 1 FROM cdc_positions p WHERE p.target = $1 AND p.pk = jsonb_build_array(t.%1$I))',
            key, f.target) USING f.target, f.lsn;
    END LOOP;
END $$;
DROP TABLE cdc_load_floors;
