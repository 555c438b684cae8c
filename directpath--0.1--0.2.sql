/* directpath--0.1--0.2.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.2'" to load this file. \quit

-- Per type, the fields of this session's last direct text or CSV COPY that
-- the exact fast input took (fast) and those it handed to the type's input
-- function (fallback), a parallel COPY's workers' included.
CREATE FUNCTION last_copy_input(
	OUT type regtype,
	OUT fast bigint,
	OUT fallback bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'directpath_last_copy_input'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
