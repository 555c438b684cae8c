-- Scenario 4 (seed 001), insert-only side: the same change as the UPDATE
-- workloads, written as a new version row; then the latest version is read
-- back through the index.  (The index is not unique: two clients changing
-- the same account at once may write the same version, which the model
-- tolerates; a unique index would abort the pgbench client.)
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
BEGIN;
INSERT INTO pgbench_accounts (aid, version, bid, abalance, filler)
    SELECT aid, version + 1, bid, abalance + :delta, filler
      FROM pgbench_accounts WHERE aid = :aid ORDER BY version DESC LIMIT 1;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid ORDER BY version DESC LIMIT 1;
END;
