-- The orders example's table. It has no unique key on purpose: only the inbox keeps a
-- republished event from being inserted twice.
CREATE TABLE IF NOT EXISTS order_lines (
    event_id text    NOT NULL,
    order_id text    NOT NULL,
    customer text    NOT NULL,
    amount   integer NOT NULL
);
