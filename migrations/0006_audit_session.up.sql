-- Who really moved a position: the database role of the operator's session and the address
-- it connected from, recorded by the server (column defaults), next to the operator's
-- self-declared name. Rows written before this migration keep NULL in both.
ALTER TABLE offsets_audit
    ADD COLUMN db_user     text,
    ADD COLUMN client_addr inet;
ALTER TABLE offsets_audit
    ALTER COLUMN db_user     SET DEFAULT session_user,
    ALTER COLUMN client_addr SET DEFAULT inet_client_addr(); -- NULL over a Unix socket
