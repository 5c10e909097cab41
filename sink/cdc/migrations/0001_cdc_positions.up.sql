-- The source position each replicated row was last written from, kept also after a delete
-- (deleted = true), so that an older change replayed later never moves a row back or
-- resurrects a deleted one. pk is the row's primary key as a JSON array of its column
-- values, in the order of the key; pk 'null' holds a table's last applied truncate.
CREATE TABLE cdc_positions (
    target     text    NOT NULL, -- the replica table, as a quoted name ("replica"."items")
    pk         jsonb   NOT NULL,
    commit_lsn bigint  NOT NULL, -- Debezium source.sequence[0] (0 for snapshot reads)
    lsn        bigint  NOT NULL, -- Debezium source.lsn
    deleted    boolean NOT NULL,
    PRIMARY KEY (target, pk)
);
