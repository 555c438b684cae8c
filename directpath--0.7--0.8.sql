/* directpath--0.7--0.8.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.8'" to load this file. \quit

-- last_statement() gains updates: what a statement's updates and deletes
-- did - "N rows updated in bulk", "N rows deleted in bulk", "N in bulk" for
-- ON CONFLICT DO UPDATE and MERGE, followed by ", M rows by core's
-- executor: reason" when some rows took core's path - or NULL when the
-- statement changed no existing row.
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
	OUT statistics text,
	OUT updates text)
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_statement'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
