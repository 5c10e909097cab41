-- Event ids already applied, per subscriber: the inbox (processed-events) pattern. A row is
-- written in the same transaction as the event's effect.
CREATE TABLE inbox (
    subscriber       text        NOT NULL,
    event_id         text        NOT NULL,
    payload_hash     bytea       NOT NULL, -- SHA-256 of the record's value
    topic            text        NOT NULL, -- where the event was first applied
    partition        integer     NOT NULL,
    "offset"         bigint      NOT NULL,
    processed_at     timestamptz NOT NULL DEFAULT now(),
    duplicates       integer     NOT NULL DEFAULT 0, -- later deliveries skipped, with the same payload
    last_duplicate_at timestamptz,
    PRIMARY KEY (subscriber, event_id)
);
CREATE INDEX inbox_retention ON inbox (subscriber, processed_at);
