-- Which relay process may publish each shard. A relay that starts a shard claims it (the
-- epoch goes up by one) and publishes it only while its epoch is the current one. Kafka's
-- transactional.id fences an older producer, but a relay that was stalled (SIGSTOP, a long
-- pause) can finish initialising later and so fence the newer one; the claim decides which
-- of the two goes on: the newer claim re-initialises, the older one stops the shard.
CREATE TABLE outbox_shard_claims (
    relay      text        NOT NULL, -- the transactional.id prefix
    shard      integer     NOT NULL,
    epoch      bigint      NOT NULL,
    owner      text        NOT NULL, -- the relay instance
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (relay, shard)
);
