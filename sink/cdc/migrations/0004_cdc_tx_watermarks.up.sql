-- The watermark of a transaction-consistent replica (consistency: transaction, issue 25):
-- the commit LSN of the last source transaction applied, written in the transaction that
-- applies it, with the stored offsets of every partition it involved. Like a PostgreSQL
-- replication origin's LSN, it only moves forward; what is at or before it in the topics
-- (events Debezium sent again, a replay) is skipped.
CREATE TABLE cdc_tx_watermarks (
    pipeline          text        NOT NULL,
    transaction_topic text        NOT NULL,
    commit_lsn        bigint      NOT NULL, -- the END's LSN of the last transaction applied
    xid               bigint      NOT NULL, -- its source transaction id
    ts_ms             bigint      NOT NULL, -- its END's ts_ms (source commit time), 0 when missing
    transactions      bigint      NOT NULL DEFAULT 0, -- source transactions applied
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline, transaction_topic)
);
