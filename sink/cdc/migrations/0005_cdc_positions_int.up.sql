-- The positions of targets whose primary key is one integer column (smallint, integer,
-- bigint, or a domain over one), the most common key by far: the same rows as
-- cdc_positions, with the key as a bigint instead of a jsonb array, and the target's
-- name compared bytewise (COLLATE "C"). Writing a batch's positions here costs about
-- half of what it costs in cdc_positions (jsonb_build_array per key, and the jsonb and
-- collated-text comparisons of every index descent). A target's truncate watermark (pk
-- 'null') stays in cdc_positions. The plugin moves a target's rows from cdc_positions the
-- first time it loads the target after this migration (and back, should its key stop
-- being one integer column).
CREATE TABLE cdc_positions_int (
    target     text COLLATE "C" NOT NULL, -- the replica table, as a quoted name ("replica"."items")
    pk         bigint  NOT NULL,          -- the row's primary key
    commit_lsn bigint  NOT NULL,
    lsn        bigint  NOT NULL,
    deleted    boolean NOT NULL,
    PRIMARY KEY (target, pk)
);
