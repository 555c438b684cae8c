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
	OUT indexes_rebuilt integer,	-- indexes built or rebuilt at the end
	OUT index_maintenance text,	-- how index entries were made: row, sorted,
								-- append, runs, leaf merge, merge, build,
								-- reindex, summarize (comma-separated), or
								-- NULL
	OUT foreign_keys text,		-- which foreign keys were checked per batch,
								-- which per row and why, or NULL
	OUT parallel_workers integer,	-- workers that built pages, 0 if none
	OUT parallel text)			-- asked for a parallel load: why it ran
								-- serially, or NULL
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_statement'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

GRANT USAGE ON SCHEMA directpath TO PUBLIC;

-- The shape of a rejects table for COPY ... WITH (REJECTS_TABLE 'name'):
--   CREATE TABLE my_rejects (LIKE directpath.rejects INCLUDING ALL);
CREATE TABLE rejects (
	relation regclass,			-- the table being loaded
	line bigint,				-- input line (row number for binary COPY)
	raw_line text,				-- the input line, where still known
	sqlstate text,				-- what the row failed with
	message text,
	detail text,
	rejected_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON rejects TO PUBLIC;
