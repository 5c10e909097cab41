CREATE TABLE ledger_journal (
    account   text        NOT NULL,
    delta     bigint      NOT NULL,
    topic     text        NOT NULL,
    partition integer     NOT NULL,
    "offset"  bigint      NOT NULL,
    PRIMARY KEY (topic, partition, "offset")
);
CREATE TABLE ledger_balances (
    account text   PRIMARY KEY,
    balance bigint NOT NULL,
    entries bigint NOT NULL
);
