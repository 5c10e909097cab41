-- The load floor of a target (load.go): the snapshot LSN of the reads that loads copied
-- straight into it, with no position row per key. A key of the target that has a row and
-- no row in cdc_positions or cdc_positions_int was loaded at (commit 0, this lsn): the
-- merge compares a snapshot read of it with that position, as it compares it with a
-- stored one. Every load of a target is at its floor's LSN (a snapshot read at another
-- LSN is merged, and gets a position row), so the floor is exact for every key it covers.
CREATE TABLE cdc_load_floors (
    target text COLLATE "C" PRIMARY KEY, -- the replica table, as a quoted name ("replica"."items")
    lsn    bigint NOT NULL               -- the snapshot reads' source.lsn
);
