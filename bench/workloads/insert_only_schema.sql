-- Scenario 4 (seed 001): pgbench_accounts converted to the insert-only model.
-- Every change appends a new version of the account row; the current
-- balance is the row with the highest version, found through the
-- (aid, version) index.  The primary key goes: an account now has many rows.
ALTER TABLE pgbench_accounts DROP CONSTRAINT pgbench_accounts_pkey;
ALTER TABLE pgbench_accounts ADD COLUMN version int NOT NULL DEFAULT 1;
CREATE INDEX pgbench_accounts_aid_version ON pgbench_accounts (aid, version);
