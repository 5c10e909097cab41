-- Least-privilege roles for eosink (docs/security.md). Run once per database, as a superuser
-- or a role with CREATEROLE that holds the database's privileges WITH GRANT OPTION:
--
--   psql -v migrate_role=eosink_migrate -v run_role=eosink_run -v database=mydb -f docs/sql/roles.sql
--   psql -c "ALTER ROLE eosink_run PASSWORD '...'"   (and eosink_migrate's)
--
-- Then migrate as migrate_role (`eosink migrate up`, with the run role's plugin config), and
-- grant the run role its tables with docs/sql/grants.sql, run as migrate_role, which owns
-- them. Rerun grants.sql after an upgrade whose migrations add a table.
--
-- Neither role is a superuser, owns the database, or can create roles. The run role cannot
-- create, alter or drop anything but its own temporary tables.

SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION', :'migrate_role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'migrate_role') \gexec
SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION', :'run_role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'run_role') \gexec

-- migrate: connect, and create eosink's schema and the plugins' schemas (which it then owns).
-- With schemas an administrator creates beforehand (CREATE SCHEMA s AUTHORIZATION migrate_role),
-- CREATE on the database is not needed.
GRANT CONNECT, CREATE ON DATABASE :"database" TO :"migrate_role";

-- run: connect, and temporary tables (the upsert plugin stages each batch in one; PUBLIC has
-- TEMPORARY by default, this keeps it when an administrator revokes that).
GRANT CONNECT, TEMPORARY ON DATABASE :"database" TO :"run_role";
