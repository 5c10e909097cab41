-- The payments example's tables (examples/payments/pipeline.yaml writes both in one
-- transaction per batch, with the partition's offset).
CREATE SCHEMA IF NOT EXISTS payments;

-- The latest status of each payment: never regressing (only_if_newer: at), rewritten by a
-- replay of the same event (on_equal: update).
CREATE TABLE IF NOT EXISTS payments.payments (
    payment_id text PRIMARY KEY,
    order_id   text NOT NULL,
    amount     numeric(12, 2) NOT NULL,
    currency   char(3) NOT NULL,
    status     text NOT NULL CHECK (status IN ('pending', 'authorized', 'captured', 'refunded', 'failed')),
    at         timestamptz NOT NULL
);

-- Every status change once: an event published twice, or replayed, is the same row.
CREATE TABLE IF NOT EXISTS payments.history (
    payment_id text NOT NULL,
    status     text NOT NULL CHECK (status IN ('pending', 'authorized', 'captured', 'refunded', 'failed')),
    at         timestamptz NOT NULL,
    order_id   text NOT NULL,
    amount     numeric(12, 2) NOT NULL,
    currency   char(3) NOT NULL,
    PRIMARY KEY (payment_id, status, at)
);
