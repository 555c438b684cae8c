/* directpath--0.8--0.9.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.9'" to load this file. \quit

-- progress gains 'process': 'statement' for a serial statement's row; for
-- a parallel one, a row per process ('leader': the rows the leader placed
-- itself; 'worker': those a worker placed) and one 'total' row for the
-- statement, with the leader's pid, its total and ETA.
DROP VIEW progress;
DROP FUNCTION get_progress();
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
	OUT eta interval,			-- time left to the input's end at the rate
								-- so far, while the input is read
	OUT process text)			-- statement, leader, worker or total
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dp_get_progress'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW progress AS
	SELECT p.pid, p.leader_pid, d.datname, p.relid, p.relation, p.kind,
		   p.phase, p.rows_done, p.bytes_done, p.pages_written,
		   p.index_entries, p.total, p.total_unit, p.total_is_estimate,
		   p.started, p.elapsed, p.eta, p.process
	FROM get_progress() p
		 LEFT JOIN pg_database d ON d.oid = p.datid;
GRANT SELECT ON progress TO PUBLIC;
