-- cdc migration 2: position keys that do not depend on session settings.
--
-- Before, a row's key in cdc_positions was jsonb_build_array(<key columns>), whose text
-- depends on the writing session's TimeZone (timestamptz), extra_float_digits (real, double
-- precision), bytea_output (bytea), lc_monetary (money) and IntervalStyle (interval), also
-- inside arrays, composites and ranges (DateStyle too there). Since this migration the
-- plugin writes each key column so that its text is the same under every setting
-- (sink/cdc/pkexpr.go): timestamptz in UTC, floats with the shortest exact digits, bytea in
-- hex, money as an integer of minor units, interval as its length in microseconds (so that
-- '1 mon' and '30 days', equal for PostgreSQL, are one key), arrays, composites and ranges of
-- those through cdc_key_json below. For the first three this is the old key under the
-- defaults (TimeZone UTC, extra_float_digits 1, bytea_output hex).
--
-- This migration rewrites the stored keys of every target table that still exists and has
-- such a key column: each stored key is read back as the key column's type and written in
-- the new form; keys that now coincide (one row keyed under two settings) keep the newest
-- position. Exact for timestamptz (its text carries its offset), bytea (hex or escape), money
-- (its digits are the minor units under every lc_monetary), interval (every IntervalStyle's
-- text reads back), and floats stored under extra_float_digits 1 or more (the default since
-- PostgreSQL 12). NOT exact:
--   * real/double precision keys written under extra_float_digits 0 or less (15 digits or
--     fewer): read back as the value nearest to the rounded digits;
--   * money inside an array, composite or range key (read back under lc_monetary C);
--   * ranges written under a DateStyle other than ISO: their timestamps are read back
--     through the zone abbreviation (one that timezone_abbreviations does not know does not
--     read: see below), and SQL's dates month first (so not SQL with DMY);
--   * a key that does not read back as its column's type (the table was re-created with
--     other key types, an unknown abbreviation): left as it is, counted in a WARNING in the
--     server log ('cdc_positions: N keys of T do not read back ...');
--   * keys of tables that no longer exist (no types to read them with): left as they are.
-- For such a table, if you replay old events into it, first delete its positions and
-- re-snapshot it (docs/cdc.md, "Position keys").

-- A value as jsonb under fixed settings. The plugin calls it for the key kinds without an
-- inline form (sink/cdc/pkexpr.go, keyFunc).
CREATE FUNCTION cdc_key_json(anyelement) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET TimeZone = 'UTC' SET extra_float_digits = 1 SET IntervalStyle = 'postgres'
SET bytea_output = 'hex' SET DateStyle = 'ISO, MDY' SET lc_monetary = 'C'
AS 'SELECT pg_catalog.to_jsonb($1)';

-- Helpers of this migration only (dropped at its end). Each reads a stored key element
-- back as the key column's type, or gives NULL when it does not read (that key is then
-- left as it is, and counted in the WARNING).
CREATE FUNCTION cdc_key_m2_interval_pg(text) RETURNS interval LANGUAGE plpgsql STABLE STRICT
SET IntervalStyle = 'postgres' AS $$BEGIN RETURN $1::pg_catalog.interval; EXCEPTION WHEN data_exception THEN RETURN NULL; END$$;
CREATE FUNCTION cdc_key_m2_interval_std(text) RETURNS interval LANGUAGE plpgsql STABLE STRICT
SET IntervalStyle = 'sql_standard' AS $$BEGIN RETURN $1::pg_catalog.interval; EXCEPTION WHEN data_exception THEN RETURN NULL; END$$;
-- A stored key element as a row of the target's type, under a DateStyle that reads its
-- dates (those of ranges: jsonb writes the others in ISO 8601): German's are day first,
-- SQL's are read month first (its default order).
CREATE FUNCTION cdc_key_m2_mdy(r anyelement, j jsonb) RETURNS anyelement LANGUAGE plpgsql STABLE
SET DateStyle = 'ISO, MDY' AS $$BEGIN RETURN pg_catalog.jsonb_populate_record(r, j); EXCEPTION WHEN data_exception THEN RETURN NULL; END$$;
CREATE FUNCTION cdc_key_m2_dmy(r anyelement, j jsonb) RETURNS anyelement LANGUAGE plpgsql STABLE
SET DateStyle = 'ISO, DMY' AS $$BEGIN RETURN pg_catalog.jsonb_populate_record(r, j); EXCEPTION WHEN data_exception THEN RETURN NULL; END$$;
-- The interval key, as pkexpr.go's keyExpr writes it.
CREATE FUNCTION cdc_key_m2_interval(x interval) RETURNS jsonb LANGUAGE sql STABLE STRICT AS $$
SELECT CASE WHEN isfinite(x) THEN to_jsonb((((extract(year FROM x)::numeric * 12 + extract(month FROM x)::numeric) * 30
  + extract(day FROM x)::numeric) * 86400000000 + extract(hour FROM x)::numeric * 3600000000
  + extract(minute FROM x)::numeric * 60000000 + extract(microseconds FROM x)::numeric)::numeric(30,0))
  ELSE to_jsonb(x::text) END $$;

DO $m$
DECLARE
    tgt text;
    rel regclass;
    cols text[];
    kinds text[];
    exprs text[];
    e text;
    i int;
    unread bigint;
BEGIN
    CREATE TEMP TABLE cdc_key_m2 (old jsonb, new jsonb, commit_lsn bigint, lsn bigint, deleted boolean, unread boolean) ON COMMIT DROP;
    -- Every stored target, without reading the whole table (a loose index scan).
    FOR tgt IN WITH RECURSIVE t(target) AS (
            SELECT min(target) FROM cdc_positions
            UNION ALL SELECT (SELECT min(p.target) FROM cdc_positions p WHERE p.target > t.target) FROM t WHERE t.target IS NOT NULL)
        SELECT target FROM t WHERE target IS NOT NULL
    LOOP
        rel := to_regclass(tgt);
        CONTINUE WHEN rel IS NULL; -- dropped: left as it is
        -- The key columns in the key's order, and their kinds (as pkexpr.go's keyKind).
        SELECT array_agg(a.attname::text ORDER BY k.n) INTO cols
        FROM pg_index x, unnest(x.indkey) WITH ORDINALITY k(att, n), pg_attribute a
        WHERE x.indrelid = rel AND x.indisprimary AND a.attrelid = rel AND a.attnum = k.att;
        CONTINUE WHEN cols IS NULL;
        WITH RECURSIVE r(ord, typ, lvl, arr) AS (
            SELECT k.ord, a.atttypid, 0, false FROM unnest(cols) WITH ORDINALITY k(name, ord)
            JOIN pg_attribute a ON a.attrelid = rel AND a.attname = k.name AND NOT a.attisdropped
            UNION ALL
            SELECT r.ord, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.typelem END, r.lvl + 1, r.arr OR t.typtype <> 'd'
            FROM r JOIN pg_type t ON t.oid = r.typ
            WHERE r.lvl < 64 AND (t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1))),
        innermost AS (SELECT DISTINCT ON (r.ord) r.ord, r.arr, t.typtype, t.typnamespace = 'pg_catalog'::regnamespace AS cat, t.typname
            FROM r JOIN pg_type t ON t.oid = r.typ ORDER BY r.ord, r.lvl DESC),
        kind AS (SELECT ord, arr, CASE
                WHEN typtype IN ('c', 'r', 'm') THEN 'value'
                WHEN typtype <> 'b' OR NOT cat THEN ''
                WHEN typname = 'timestamptz' THEN 'timestamptz'
                WHEN typname IN ('float4', 'float8') THEN 'float'
                WHEN typname = 'bytea' THEN 'bytea'
                WHEN typname = 'money' THEN 'money'
                WHEN typname = 'interval' THEN 'interval'
                ELSE '' END AS k FROM innermost)
        SELECT array_agg(CASE WHEN arr AND k <> '' THEN 'value' ELSE k END ORDER BY ord) INTO kinds FROM kind;
        CONTINUE WHEN kinds IS NULL OR cardinality(kinds) <> cardinality(cols) OR array_to_string(kinds, '') = '';

        -- The new key of a stored key p.pk, element by element.
        exprs := '{}';
        FOR i IN 1 .. cardinality(cols) LOOP
            e := format('p.pk -> %s', i - 1);
            exprs := exprs || CASE kinds[i]
                WHEN '' THEN e
                WHEN 'money' THEN format($$CASE WHEN jsonb_typeof(%1$s) = 'number' THEN %1$s ELSE to_jsonb(
                    (CASE WHEN (%1$s #>> '{}') ~ '[-(]' THEN -1 ELSE 1 END) * nullif(regexp_replace(%1$s #>> '{}', '[^0-9]', '', 'g'), '')::numeric) END$$, e)
                WHEN 'interval' THEN format($$CASE WHEN jsonb_typeof(%1$s) = 'number' THEN %1$s ELSE cdc_key_m2_interval(
                    CASE WHEN (%1$s #>> '{}') ~ '[A-Za-z@]' THEN cdc_key_m2_interval_pg(%1$s #>> '{}') ELSE cdc_key_m2_interval_std(%1$s #>> '{}') END) END$$, e)
                ELSE format($$cdc_key_json((CASE WHEN (%3$s)::text ~ '\d\d\.\d\d\.\d\d\d\d'
                    THEN cdc_key_m2_dmy(NULL::%1$s, jsonb_build_object(%2$L, %3$s)) ELSE cdc_key_m2_mdy(NULL::%1$s, jsonb_build_object(%2$L, %3$s)) END).%4$I)$$,
                    rel, cols[i], e, cols[i])
            END;
        END LOOP;

        BEGIN
            TRUNCATE cdc_key_m2;
            -- A key with an element that does not read back keeps its old text.
            EXECUTE format($$INSERT INTO cdc_key_m2 SELECT p.pk, CASE WHEN n.k @? '$[*] ? (@ == null)' THEN p.pk ELSE n.k END,
                p.commit_lsn, p.lsn, p.deleted, n.k @? '$[*] ? (@ == null)'
                FROM cdc_positions p, LATERAL (SELECT jsonb_build_array(%s) AS k) n WHERE p.target = $1 AND p.pk <> 'null'::jsonb
                AND jsonb_typeof(p.pk) = 'array' AND jsonb_array_length(p.pk) = $2$$, array_to_string(exprs, ', '))
                USING tgt, cardinality(cols);
            SELECT count(*) INTO unread FROM cdc_key_m2 WHERE cdc_key_m2.unread;
            IF unread > 0 THEN
                RAISE WARNING 'cdc_positions: % keys of % do not read back as its key columns'' types and were left as they are', unread, tgt;
            END IF;
            DELETE FROM cdc_positions p USING cdc_key_m2 m WHERE p.target = tgt AND p.pk = m.old AND m.old <> m.new;
            -- One row per new key: the newest position of the old keys that map to it.
            INSERT INTO cdc_positions AS p (target, pk, commit_lsn, lsn, deleted)
            SELECT DISTINCT ON (m.new) tgt, m.new, m.commit_lsn, m.lsn, m.deleted FROM cdc_key_m2 m
            WHERE m.new IN (SELECT c.new FROM cdc_key_m2 c WHERE c.old <> c.new)
            ORDER BY m.new, m.commit_lsn DESC, m.lsn DESC
            ON CONFLICT (target, pk) DO UPDATE SET commit_lsn = EXCLUDED.commit_lsn, lsn = EXCLUDED.lsn, deleted = EXCLUDED.deleted
            WHERE (p.commit_lsn, p.lsn) < (EXCLUDED.commit_lsn, EXCLUDED.lsn);
        EXCEPTION WHEN data_exception THEN
            RAISE WARNING 'cdc_positions: the keys of % were left as they are: %', tgt, SQLERRM;
        END;
    END LOOP;
END
$m$;

DROP FUNCTION cdc_key_m2_mdy(anyelement, jsonb);
DROP FUNCTION cdc_key_m2_dmy(anyelement, jsonb);
DROP FUNCTION cdc_key_m2_interval(interval);
DROP FUNCTION cdc_key_m2_interval_pg(text);
DROP FUNCTION cdc_key_m2_interval_std(text);
