-- Poison records, written in the same transaction as the rest of their batch and the offset
-- advance, so that the offset never moves past a record without either its business write or
-- its dead letter. `eosink dlq` lists, shows, replays and discards them.
CREATE TABLE dead_letters (
    id              bigserial   PRIMARY KEY,
    pipeline        text        NOT NULL,
    topic           text        NOT NULL,
    partition       integer     NOT NULL,
    "offset"        bigint      NOT NULL,
    key             bytea,
    value           bytea,
    header_keys     text[]      NOT NULL DEFAULT '{}',
    header_values   bytea[]     NOT NULL DEFAULT '{}',
    "timestamp"     timestamptz,
    error           text        NOT NULL,
    failures        integer     NOT NULL DEFAULT 1,
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (pipeline, topic, partition, "offset")
);
