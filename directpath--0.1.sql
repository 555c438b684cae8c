/* directpath--0.1.sql */

\echo Use "CREATE EXTENSION directpath" to load this file. \quit

-- What the last INSERT or COPY of this session that directpath looked at did.
CREATE FUNCTION last_statement(
	OUT path text,			-- 'direct' or 'normal'
	OUT reason text,		-- why the normal path was used, or NULL
	OUT rows_inserted bigint,
	OUT pages_written bigint,
	OUT frozen boolean,
	OUT relations integer,	-- leaf relations written
	OUT indexes_rebuilt integer)
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_statement'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

GRANT USAGE ON SCHEMA directpath TO PUBLIC;
