-- The points example's own tables, in the schema given to app.Migrate.
-- ledger deliberately has no unique constraint on event_id: exactly-once delivery is what
-- keeps each event applied once, and the verifier counts duplicates from this table.
CREATE TABLE ledger (
    event_id   text        NOT NULL,
    account_id text        NOT NULL,
    delta      bigint      NOT NULL,
    topic      text        NOT NULL,
    partition  integer     NOT NULL,
    "offset"   bigint      NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_event_id ON ledger (event_id);

CREATE TABLE balances (
    account_id text   PRIMARY KEY,
    balance    bigint NOT NULL,
    events     bigint NOT NULL
);
