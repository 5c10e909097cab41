-- Generations: how the relay tells that the database it reads is still the history its
-- Kafka position came from. Before a Kafka transaction whose rows reach past the current
-- generation's horizon, the relay commits a new row here (a random generation) and stores the
-- generation with the position in Kafka. Every transaction id below the row's horizon ended
-- before the row committed, so a database that holds the row holds every commit the relay
-- published under it, and its next transaction ids are above the position. A database
-- restored from a backup, or a standby promoted while it lagged, lacks the newer rows: the
-- relay stops the shard (ErrDatabaseRewound) and never skips or deletes. See docs/outbox.md.
CREATE TABLE outbox_generations (
    relay      text        NOT NULL, -- the transactional.id prefix
    shard      integer     NOT NULL,
    generation text        NOT NULL, -- random; never reused, so another history cannot make it again
    seq        bigint      GENERATED ALWAYS AS IDENTITY, -- the order they were written in
    horizon    xid8        NOT NULL, -- the writing statement's snapshot xmin
    last_xid   xid8        NOT NULL, -- the position of the Kafka transaction it was written for
    last_id    bigint      NOT NULL,
    owner      text        NOT NULL, -- the relay instance
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (relay, shard, generation)
);
CREATE INDEX outbox_generations_seq ON outbox_generations (relay, shard, seq);
