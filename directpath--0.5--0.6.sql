/* directpath--0.5--0.6.sql */

\echo Use "ALTER EXTENSION directpath UPDATE TO '0.6'" to load this file. \quit

-- Two-phase commit across shards (directpath.shard_two_phase): after a
-- crash or a lost shard, commit or roll back the shards' prepared
-- transactions as the local transaction ended.  A row per prepared
-- transaction found on a postgres_fdw server the caller has a user mapping
-- for (or per server that could not be read).  Not for PUBLIC: it connects
-- to every server and ends transactions there.
CREATE FUNCTION resolve_shards(
	OUT server text,
	OUT transaction text,
	OUT outcome text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dp_resolve_shards'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION resolve_shards() FROM PUBLIC;
