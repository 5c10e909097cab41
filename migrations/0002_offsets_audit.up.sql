-- Every change an operator makes to a stored position (eosink offsets set|reset).
CREATE TABLE offsets_audit (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    operator    text        NOT NULL,
    reason      text        NOT NULL,
    pipeline    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    from_offset bigint,     -- NULL when the row did not exist
    to_offset   bigint      NOT NULL
);
CREATE INDEX offsets_audit_key ON offsets_audit (pipeline, topic, partition, at);
