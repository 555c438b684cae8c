/* directpath--0.4--0.5.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.5'" to load this file. \quit

-- last_statement() gains statistics: "gathered for N relations from M sample
-- rows" when a load that filled tables from empty stored their statistics
-- (directpath.load_statistics), with what it left to ANALYZE; "left to
-- ANALYZE: why" when it did not; NULL when the statement wrote nothing
-- directly.
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
	OUT foreign_partitions text,
	OUT statistics text)
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_statement'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
