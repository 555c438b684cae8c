/* directpath--0.3--0.4.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.4'" to load this file. \quit

-- last_statement() gains foreign_partitions: for each foreign partition the
-- statement wrote, "name: COPY" (its rows streamed to its server as one
-- COPY) or "name: batched (reason)" (through the wrapper's INSERTs), joined
-- by "; "; NULL when there was none.
DROP FUNCTION last_statement();
CREATE FUNCTION last_statement(
	OUT path text,
	OUT reason text,
	OUT rows_inserted bigint,
	OUT pages_written bigint,
	OUT frozen boolean,
	OUT relations integer,
	OUT indexes_rebuilt integer,
	OUT index_maintenance text,
	OUT foreign_keys text,
	OUT parallel_workers integer,
	OUT parallel text,
	OUT foreign_partitions text)
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_statement'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
