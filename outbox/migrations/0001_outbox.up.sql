-- The transactional outbox: events written in the same transaction as the business rows,
-- published to Kafka by `eosink relay`. The relay reads a shard in (xid, id) order and only
-- rows whose transaction id is below the current snapshot's xmin: every transaction that could
-- still add a row before that point has ended, so no row committed out of id order is skipped.
CREATE TABLE outbox (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- monotonic per insert
    xid           xid8        NOT NULL DEFAULT pg_current_xact_id(),   -- the writing transaction
    shard         integer     NOT NULL CHECK (shard >= 0),             -- key hash modulo the shard count
    topic         text        NOT NULL,
    key           bytea,
    value         bytea,
    header_keys   text[]      NOT NULL DEFAULT '{}',
    header_values bytea[]     NOT NULL DEFAULT '{}',
    event_id      text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_shard_order ON outbox (shard, xid, id);

-- What each relay shard last published, written after its Kafka transaction commits. For
-- `eosink status` and as a guard: the relay's position is read from Kafka, never from here,
-- but a Kafka position behind this one means the position topic lost records, and the relay
-- refuses to start rather than publish again.
CREATE TABLE outbox_relays (
    relay      text        NOT NULL, -- the transactional.id prefix
    shard      integer     NOT NULL,
    last_xid   xid8        NOT NULL,
    last_id    bigint      NOT NULL,
    published  bigint      NOT NULL DEFAULT 0, -- events published by the current owner
    owner      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (relay, shard)
);
