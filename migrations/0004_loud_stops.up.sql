-- Loud stops (issue 11): why a partition stopped, kept on its offsets row so that
-- `eosink status` shows it; cleared by the next claim and by an operator's move.
ALTER TABLE offsets
    ADD COLUMN stopped_reason text,        -- a short stable word: out_of_range, topic_recreated, handler, ...
    ADD COLUMN stopped_error  text,        -- the error, for operators
    ADD COLUMN stopped_at     timestamptz,
    ADD COLUMN stopped_by     text;        -- the instance that stopped it
-- An operator's move that accepted a recreated topic (`eosink offsets set -accept-new-topic`).
ALTER TABLE offsets_audit
    ADD COLUMN from_topic_id text,
    ADD COLUMN to_topic_id   text;
-- One row per running sink instance, its heartbeat updated every few seconds, so that
-- `eosink status` tells whether each owner is alive now.
CREATE TABLE instances (
    pipeline     text        NOT NULL,
    instance     text        NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped      boolean     NOT NULL DEFAULT false, -- set by a clean shutdown
    PRIMARY KEY (pipeline, instance)
);
