-- The framework's offsets table: one row per (pipeline, topic, partition).
-- Created in the schema chosen by the caller (search_path is set to it by the migrator).
CREATE TABLE offsets (
    pipeline    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL CHECK (partition >= 0),
    -- The first offset NOT yet applied: last applied offset + 1.
    next_offset bigint      NOT NULL CHECK (next_offset >= 0),
    -- Ownership counter, bumped by every claim; a commit must present the epoch it claimed.
    epoch       bigint      NOT NULL DEFAULT 0,
    -- Instance id of the last claimer, for operators. Never used for fencing.
    owner       text,
    -- Kafka topic id seen at the first claim, to detect a deleted and recreated topic.
    topic_id    text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    claimed_at  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline, topic, partition)
);
