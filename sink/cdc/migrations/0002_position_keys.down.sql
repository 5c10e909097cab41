-- Back to the position keys of before cdc migration 2: jsonb_build_array(<key columns>)
-- under this session's settings. timestamptz, float and bytea keys are already that key
-- under the defaults (TimeZone UTC, extra_float_digits 1, bytea_output hex) and are left as
-- they are; money keys (minor units) become this session's lc_monetary text; interval keys
-- (microseconds) become the text of the justified interval ('30 days' is written '1 mon'),
-- which is the old key only of values stored justified. Tables that no longer exist are
-- left as they are.
DO $m$
DECLARE
    tgt text;
    rel regclass;
    cols text[];
    kinds text[];
    exprs text[];
    e text;
    i int;
BEGIN
    FOR tgt IN WITH RECURSIVE t(target) AS (
            SELECT min(target) FROM cdc_positions
            UNION ALL SELECT (SELECT min(p.target) FROM cdc_positions p WHERE p.target > t.target) FROM t WHERE t.target IS NOT NULL)
        SELECT target FROM t WHERE target IS NOT NULL
    LOOP
        rel := to_regclass(tgt);
        CONTINUE WHEN rel IS NULL;
        SELECT array_agg(a.attname::text ORDER BY k.n) INTO cols
        FROM pg_index x, unnest(x.indkey) WITH ORDINALITY k(att, n), pg_attribute a
        WHERE x.indrelid = rel AND x.indisprimary AND a.attrelid = rel AND a.attnum = k.att;
        CONTINUE WHEN cols IS NULL;
        -- money and interval key columns, through domains, not inside arrays.
        WITH RECURSIVE r(ord, typ, lvl) AS (
            SELECT k.ord, a.atttypid, 0 FROM unnest(cols) WITH ORDINALITY k(name, ord)
            JOIN pg_attribute a ON a.attrelid = rel AND a.attname = k.name AND NOT a.attisdropped
            UNION ALL
            SELECT r.ord, t.typbasetype, r.lvl + 1 FROM r JOIN pg_type t ON t.oid = r.typ
            WHERE r.lvl < 64 AND t.typtype = 'd')
        SELECT array_agg(CASE WHEN t.typnamespace = 'pg_catalog'::regnamespace AND t.typname IN ('money', 'interval')
            THEN t.typname::text ELSE '' END ORDER BY r.ord) INTO kinds
        FROM r JOIN pg_type t ON t.oid = r.typ
        WHERE r.lvl = (SELECT max(r2.lvl) FROM r r2 WHERE r2.ord = r.ord);
        CONTINUE WHEN kinds IS NULL OR array_to_string(kinds, '') = '';
        exprs := '{}';
        FOR i IN 1 .. cardinality(cols) LOOP
            e := format('p.pk -> %s', i - 1);
            exprs := exprs || CASE kinds[i]
                WHEN 'money' THEN format($$CASE WHEN jsonb_typeof(%1$s) <> 'number' THEN %1$s ELSE to_jsonb(((%1$s)::text::numeric
                    / ('x' || encode(cash_send(1::numeric::money), 'hex'))::bit(64)::bigint)::money) END$$, e)
                WHEN 'interval' THEN format($$CASE WHEN jsonb_typeof(%1$s) <> 'number' THEN %1$s
                    ELSE to_jsonb(justify_interval(((%1$s)::text || ' microseconds')::interval)) END$$, e)
                ELSE e END;
        END LOOP;
        BEGIN
            EXECUTE format($$UPDATE cdc_positions p SET pk = jsonb_build_array(%s)
                WHERE p.target = $1 AND p.pk <> 'null'::jsonb AND jsonb_typeof(p.pk) = 'array' AND jsonb_array_length(p.pk) = $2$$,
                array_to_string(exprs, ', ')) USING tgt, cardinality(cols);
        EXCEPTION WHEN data_exception OR unique_violation THEN
            RAISE WARNING 'cdc_positions: the keys of % were left as they are: %', tgt, SQLERRM;
        END;
    END LOOP;
END
$m$;

DROP FUNCTION cdc_key_json(anyelement);
