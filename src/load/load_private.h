/*-------------------------------------------------------------------------
 *
 * load/load_private.h
 *	  What the parts of the load share among themselves: a load's state
 *	  (struct DPLoad) and the steps the row loop (load.c) takes through
 *	  place.c, decide.c and finish.c.  Files outside src/load/ use
 *	  load/load.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_LOAD_PRIVATE_H
#define DP_LOAD_PRIVATE_H

#include "load/load.h"
#include "stats/stats.h"

/* ---------- a load's state (load.c and its parts) ---------- */

typedef enum DPState
{
	DPS_HOLD,					/* holding rows until min_bytes */
	DPS_DIRECT,					/* placing rows on pages */
	DPS_WRITTEN,				/* direct, every row written, indexes next */
	DPS_DONE,
} DPState;

/* What the flush rule asks for. */
typedef enum DPFlush
{
	DPF_NONE,
	DPF_BATCH,					/* full pages (and, with queued rows, all) */
	DPF_DRAIN,					/* everything, pages still filling too */
} DPFlush;

struct DPLoad
{
	const char *kind;			/* "INSERT" or "COPY", for messages */
	bool		hinted;			/* fallback messages at the user's level */
	DPState		state;
	DPLeafSet	leaves;			/* the relations written, their writers */
	DPLeaf	   *plain;			/* the one leaf, while its rows take the
								 * plain way (plain_leaf), or NULL */
	DPQueue    *queue;			/* rows held, or waiting for their work */
	Size		held_bytes;		/* HOLD: size of the rows held */
	int			pending_full;	/* full pages waiting, all builders */
	bool		flushed_once;	/* for the first_batch fault point */
	DPRejects  *rejects;		/* COPY's rejects table, or NULL */
	DPInputLine *input;			/* COPY's input position, or NULL */
	uint64		foreign_rows;	/* rows sent to foreign partitions */
	/* ON CONFLICT: checked rows waiting for their decision */
	DPRow	   *pending;		/* DP_CONFLICT_BATCH at most */
	int			npending;
	Size		pending_bytes;
	MemoryContext pending_cxt;
	uint64		skipped;		/* rows skipped for a conflict */
	DPUpsert   *upsert;			/* rows for core after the load, or NULL */
	const char *update_sql;		/* COPY's ON_CONFLICT 'update', or NULL */
	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	/* statistics gathered as rows are written (stats/stats.c) */
	const char *stats_why;		/* why a leaf gathers none, or NULL */
	Relation	stats_of;		/* whose statistics they are, if not the
								 * target's (dp_load_statistics_of) */
	DPSampleGroup *samples;		/* the leaves' samples, sharing the
								 * sampling */
	DPReport	report;			/* what the statement did */
};

/* Count a builder's full pages, 'full' after a placement. */
static inline void
dp_load_count_full(DPLoad *s, DPLeaf *leaf, int full)
{
	s->pending_full += full - leaf->full_pages;
	leaf->full_pages = full;
}

static inline void
dp_load_count_pages(DPLoad *s, DPLeaf *leaf)
{
	dp_load_count_full(s, leaf, dp_heap_full_pages(leaf->writer));
}

/* ---------- place.c: rows held, placed or sent; the flush rule ---------- */

/* Start a leaf's page builder; count it as frozen if it is. */
extern void dp_load_start_writer(DPLoad *s, DPLeaf *leaf);

/*
 * dp_load_flush_rule: what the one flush rule asks for before a row of
 * 'leaf'; dp_load_flush writes the builders' pages (all of them with
 * 'drain', or while rows are queued), then does the queued rows' work;
 * dp_load_flush_before_row does so before the row in 'slot' (HOLD goes
 * direct first), keeping the row and COPY's position.
 */
extern DPFlush dp_load_flush_rule(DPLoad *s, DPLeaf *leaf);
extern void dp_load_flush(DPLoad *s, bool drain);
extern void dp_load_flush_before_row(DPLoad *s, TupleTableSlot *slot,
									 DPFlush f);

/* Enough rows: commit to the direct path and place the held rows. */
extern void dp_load_go_direct(DPLoad *s);

/* A row decided on: counted, then held, placed or sent. */
extern void dp_load_insert_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
							   uint64 lineno);

/* Rows the wrapper did not insert ("do nothing") are not counted. */
extern void dp_load_uncount(DPLoad *s, uint64 skipped);

/* A page placed whole: its rows' index entries spooled or rows queued. */
extern void dp_load_page_rows(DPLoad *s, DPLeaf *leaf, Page page,
							  BlockNumber blkno);

/* ---------- decide.c: ON CONFLICT's pending rows; rows left to core ---------- */

/*
 * dp_load_add_pending: a checked row waits for its batch's conflict
 * decisions (the batch is decided when full); dp_load_decide_pending:
 * the pending rows decided and the others inserted, in input order.
 */
extern void dp_load_add_pending(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
								uint64 lineno);
extern void dp_load_decide_pending(DPLoad *s);

/*
 * A row for the updates after the load (upsert.c); 'found': the entry of
 * the row it meets (DO UPDATE), else NULL.
 */
extern void dp_load_keep(DPLoad *s, ResultRelInfo *rri, TupleTableSlot *slot,
						 ItemPointer found);

/* ---------- finish.c: the end of a load ---------- */

/*
 * dp_load_end_rows' steps: the last flush with every page builder
 * finished (direct), or the held rows inserted normally (the input ended
 * before min_bytes).  dp_load_finish's: the indexes built or their waiting
 * entries added, then the statistics stored.
 */
extern void dp_load_finish_heaps(DPLoad *s);
extern void dp_load_finish_normal(DPLoad *s);
extern void dp_load_finish_indexes(DPLoad *s);
extern void dp_load_finish_statistics(DPLoad *s);

#endif							/* DP_LOAD_PRIVATE_H */
