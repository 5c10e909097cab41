-- The outbox example's business tables. The outbox, offsets and inbox tables are eosink's,
-- created by `eosink migrate up -config stage1.yaml` / `-config stage2.yaml`.
CREATE TABLE IF NOT EXISTS orders (
    order_id text PRIMARY KEY,
    customer text NOT NULL,
    amount   integer NOT NULL
);
-- No unique key on event_id on purpose: a duplicate would be a second row, which verify counts.
CREATE TABLE IF NOT EXISTS ledger (
    entry      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id   text NOT NULL,
    order_id   text NOT NULL,
    amount     integer NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
