ALTER TABLE offsets_audit
    DROP COLUMN client_addr,
    DROP COLUMN db_user;
