DROP TABLE IF EXISTS outbox_shard_claims;
