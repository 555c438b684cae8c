/* directpath--0.2--0.3.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.3'" to load this file. \quit

-- The rows of this session's last direct COPY that directpath's row former
-- formed (formed) and those core's COPY reader read (core), a parallel
-- COPY's workers' included, and why core's reader read the whole COPY
-- (reason; NULL when the row former read it).
CREATE FUNCTION last_copy_reader(
	OUT formed bigint,
	OUT core bigint,
	OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'directpath_last_copy_reader'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
