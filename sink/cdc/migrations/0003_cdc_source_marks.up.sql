-- The furthest source position each partition has applied, and the latest source commit
-- time it has seen, to tell a source that went back in time (a failover to a standby that
-- lagged, a restore from a backup) from change events sent again (a Debezium restart).
-- One row per partition, written once per batch in the batch's transaction.
CREATE TABLE cdc_source_marks (
    pipeline   text    NOT NULL,
    topic      text    NOT NULL,
    partition  integer NOT NULL,
    commit_lsn bigint  NOT NULL, -- with lsn: the largest (commit_lsn, lsn) applied, as in cdc_positions
    lsn        bigint  NOT NULL,
    ts_ms      bigint  NOT NULL, -- the largest Debezium source.ts_ms applied (source commit time, ms)
    PRIMARY KEY (pipeline, topic, partition)
);
