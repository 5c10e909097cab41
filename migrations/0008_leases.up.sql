-- Leases (issue 25): a set of partitions owned together by one instance at a time, outside
-- any consumer group (the cdc plugin's consistency: transaction owns the transaction topic
-- and every data topic of a replica together). The holder renews renewed_at; another
-- instance takes the lease when it is released (holder NULL) or not renewed for its
-- timeout, and every take bumps epoch. Every commit of the holder checks the epoch in its
-- own transaction (offsets.Store.CheckLease), so a holder that lost the lease never
-- commits again.
CREATE TABLE leases (
    pipeline   text        NOT NULL,
    name       text        NOT NULL, -- the set: for the cdc plugin, its transaction topic
    epoch      bigint      NOT NULL DEFAULT 0,
    holder     text,                 -- the instance holding it; NULL when released
    taken_at   timestamptz,
    renewed_at timestamptz,
    PRIMARY KEY (pipeline, name)
);
ALTER TABLE leases ENABLE ROW LEVEL SECURITY;
CREATE POLICY pipeline_scope ON leases USING (
    NOT EXISTS (SELECT FROM pipeline_roles r WHERE r.role = current_user::text)
    OR pipeline IN (SELECT r.pipeline FROM pipeline_roles r WHERE r.role = current_user::text));
