/* directpath--0.6--0.7.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.7'" to load this file. \quit

-- The progress of every running direct statement: a row per process (a
-- parallel load's workers have their own, with their leader's pid).  Rows
-- exist only when the library is in shared_preload_libraries.  A row's
-- numbers are shown to the roles of its session user and to members of
-- pg_read_all_stats; others get its pid and NULLs, as in pg_stat_activity.
CREATE FUNCTION get_progress(
	OUT pid integer,
	OUT leader_pid integer,		-- a parallel worker's leader, or NULL
	OUT datid oid,
	OUT relid oid,
	OUT relation regclass,		-- NULL for another database's relation
	OUT kind text,				-- INSERT, COPY, MERGE, CREATE TABLE AS, ...
	OUT phase text,
	OUT rows_done bigint,		-- rows read from the statement's input
	OUT bytes_done bigint,		-- COPY: input bytes read, else NULL
	OUT pages_written bigint,	-- heap pages written (a worker: built)
	OUT index_entries bigint,	-- index entries made or sorted for a build
	OUT total bigint,			-- the input's size when known, else NULL
	OUT total_unit text,		-- what total counts: 'rows' or 'bytes'
	OUT total_is_estimate boolean,	-- total is the planner's estimate
	OUT started timestamptz,
	OUT elapsed interval,
	OUT eta interval)			-- time left to the input's end at the rate
								-- so far, while the input is read
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dp_get_progress'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW progress AS
	SELECT p.pid, p.leader_pid, d.datname, p.relid, p.relation, p.kind,
		   p.phase, p.rows_done, p.bytes_done, p.pages_written,
		   p.index_entries, p.total, p.total_unit, p.total_is_estimate,
		   p.started, p.elapsed, p.eta
	FROM get_progress() p
		 LEFT JOIN pg_database d ON d.oid = p.datid;
GRANT SELECT ON progress TO PUBLIC;
