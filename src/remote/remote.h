/*-------------------------------------------------------------------------
 *
 * remote/remote.h
 *	  The remote stage: a postgres_fdw foreign partition's rows streamed to
 *	  its server as COPY data (shard.c), over postgres_fdw's own
 *	  connections (fdwconn.c), encoded for the server (copyenc.c), and
 *	  committed in two phases with the local transaction (shardcommit.c).
 *	  The load reaches it through its door to foreign targets (foreign.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_REMOTE_H
#define DP_REMOTE_H

#include "common/compat.h"

#include "lib/stringinfo.h"
#include "nodes/execnodes.h"

struct pg_conn;					/* libpq's PGconn (fdwconn.c, shard.c) */

/* ---------- shard.c: a postgres_fdw partition's rows as a remote COPY ---------- */

typedef struct DPShard DPShard;

/*
 * Open the COPY to the partition's server over postgres_fdw's connection;
 * NULL with the reason in *why when the partition is not postgres_fdw's or
 * COPY cannot carry its rows.
 */
extern DPShard *dp_shard_open(ResultRelInfo *rri, EState *estate,
							  const char **why);

/* One row in the partition's format; 'lineno': its input line (COPY), or 0. */
extern void dp_shard_row(DPShard *sh, TupleTableSlot *slot, uint64 lineno);

/*
 * The end, in two steps so that the shards finish together: send the
 * rest and end the COPY (every shard), then read the result (raising the
 * shard's error); dp_shard_collect returns the rows the shard did not
 * insert.
 */
extern void dp_shard_end_input(DPShard *sh);
extern uint64 dp_shard_collect(DPShard *sh);

/* Is the stream in COPY's binary format (else text)? */
extern bool dp_shard_binary(DPShard *sh);

/* Release the stream's slots. */
extern void dp_shard_close(DPShard *sh);

/*
 * Before the wrapper uses a postgres_fdw connection (dp_fdwconn_of), end
 * the COPY that holds it, if any.
 */
extern void dp_shard_free_connection(struct pg_conn *conn);

/* ---------- fdwconn.c: postgres_fdw's connections under COPY streams ---------- */

typedef struct DPConnTrack DPConnTrack;

/*
 * The connection postgres_fdw's insert into the foreign partition uses;
 * NULL with the reason in *why when its wrapper is not postgres_fdw.
 */
extern struct pg_conn *dp_fdwconn_of(ResultRelInfo *rri, const char **why);

/* Track a connection from before its COPY until its result is read. */
extern DPConnTrack *dp_fdwconn_track(struct pg_conn *conn, void *owner);
extern void dp_fdwconn_untrack(DPConnTrack *t);

/* The owner, other than 'except', of the COPY on 'conn', or NULL. */
extern void *dp_fdwconn_holder(struct pg_conn *conn, void *except);

/* Call fn(owner, arg) for every tracked connection's owner. */
extern void dp_fdwconn_foreach(void (*fn) (void *owner, void *arg), void *arg);

/* Register the abort callbacks, after postgres_fdw's (once). */
extern void dp_fdwconn_callbacks(void);

/* ---------- shardcommit.c: two-phase commit across shards ---------- */

/*
 * With directpath.shard_two_phase on, commit the remote transaction on
 * 'conn' (foreign server 'serverid') in two phases with ours.
 */
extern void dp_shardcommit_enlist(struct pg_conn *conn, Oid serverid);

/* ---------- copyenc.c: rows as COPY data for a remote server ---------- */

typedef struct DPCopyEncoder DPCopyEncoder;

/* The columns of foreign table 'rel' a remote COPY takes (current context). */
extern DPCopyEncoder *dp_copyenc_begin(Relation rel);

/* How many, and their remote names (postgres_fdw's column_name option). */
extern int	dp_copyenc_columns(DPCopyEncoder *e, const char ***names);

/*
 * Choose the format from the remote side: 'same_major' server, and each
 * column's type there (InvalidOid: not found).  True if binary.
 */
extern bool dp_copyenc_choose(DPCopyEncoder *e, bool same_major,
							  const Oid *remote_types);

/* A binary COPY's header and trailer (nothing for text). */
extern void dp_copyenc_header(DPCopyEncoder *e, StringInfo buf);
extern void dp_copyenc_trailer(DPCopyEncoder *e, StringInfo buf);

/*
 * Append a row to 'buf' (text rows whose output depends on settings wait
 * for a batch); dp_copyenc_flush appends those waiting.
 */
extern void dp_copyenc_row(DPCopyEncoder *e, TupleTableSlot *slot,
						   StringInfo buf);
extern void dp_copyenc_flush(DPCopyEncoder *e, StringInfo buf);

/* Rows waiting for a batch (not in 'buf' yet). */
extern int	dp_copyenc_waiting(DPCopyEncoder *e);

/* Release its slots. */
extern void dp_copyenc_end(DPCopyEncoder *e);

#endif							/* DP_REMOTE_H */
