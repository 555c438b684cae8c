/*-------------------------------------------------------------------------
 *
 * stats/stats_private.h
 *	  What the files of stats/ share among themselves: the sample and its
 *	  group (stats.c begins and stores a sample, sample.c fills and cuts
 *	  it, store.c computes and stores its statistics), and the functions
 *	  stats.c calls in the other two.  Files outside stats/ use stats.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_STATS_PRIVATE_H
#define DP_STATS_PRIVATE_H

#include "stats/stats.h"

#include "commands/vacuum.h"
#include "common/pg_prng.h"
#include "nodes/execnodes.h"

/* An index of the table: its size and its expression columns' statistics. */
typedef struct DPIndexSample
{
	Relation	index;
	IndexInfo  *info;
	VacAttrStats **columns;		/* its expression columns analyzed */
	int			ncolumns;
} DPIndexSample;

/*
 * Kept rows live in blocks of this many bytes, filled in order: keeping a
 * row moves a pointer, dropping one frees nothing; when a sweep leaves
 * less than half the blocks' bytes in kept rows, these are copied into new
 * blocks and the old ones freed (compact_rows).
 */
#define DP_ROW_BLOCK			(64 * 1024)

typedef struct DPRowBlock
{
	struct DPRowBlock *next;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} DPRowBlock;

/* The samples of one load. */
struct DPSampleGroup
{
	double		offered;		/* rows offered to all of them */
	int64		kept;			/* rows they keep */
	int64		next_sweep;		/* sweep them all when kept passes it */
	List	   *samples;		/* DPSample *, not yet stored */
};

struct DPSample
{
	Relation	rel;
	Relation	as;				/* whose statistics they are: rel, or a
								 * materialized view whose new heap rel is */
	DPSampleGroup *group;
	MemoryContext mcxt;			/* the sample and the computed statistics */
	VacAttrStats **columns;		/* the columns analyzed */
	int			ncolumns;
	DPIndexSample *indexes;		/* every index of the table */
	int			nindexes;
	int			targrows;		/* ANALYZE's sample size for the table */
	HeapTuple  *rows;			/* the rows kept, in TID order */
	double	   *keys;			/* their random keys, in [0, 1) */
	int			numrows;
	int			maxrows;		/* rows and keys allocated */
	double		seen;			/* rows offered so far */
	BlockNumber pages;			/* pages offered so far */
	int64		skip;			/* rows to pass before the next one kept;
								 * -1: not drawn yet */
	double		skip_below;		/* the threshold it was drawn for */
	pg_prng_state random;
	/* the kept rows' memory */
	DPRowBlock *blocks;			/* the newest first */
	char	   *free;			/* room left in the newest */
	Size		room;
	Size		held;			/* bytes of all blocks */
	Size		live;			/* bytes of the rows kept */
};

/* sample.c */

/*
 * The sample cut to its allotment (the rows with the smallest keys), the
 * rows kept in TID order.
 */
extern void dp_cut_to_allotment(DPSample *s);

/* store.c: the columns ANALYZE would analyze */

/*
 * The VacAttrStats of column 'attnum' of 'rel' (the table, or one of its
 * indexes when 'expr' is that index column's expression) as ANALYZE
 * prepares it; NULL when ANALYZE would skip the column.
 */
extern VacAttrStats *dp_examine(DPSample *s, Relation rel, int attnum,
								Node *expr);

/*
 * The table's indexes opened, and their expression columns examined (the
 * sample grows to what they ask for); dp_close_indexes closes them.
 */
extern void dp_examine_indexes(DPSample *s);
extern void dp_close_indexes(DPSample *s);

/* store.c: the statistics computed and stored */

/* Each analyzed column's statistics, by its compute function. */
extern void dp_compute_columns(DPSample *s, double reltuples);

/* A column's pg_statistic row, inserted or replacing the one there. */
extern void dp_store_column(Relation pg_statistic, Oid relid,
							const VacAttrStats *stats);

/*
 * An index's expression columns' statistics and its size, from its share
 * of the sample.
 */
extern void dp_store_index(DPSample *s, DPIndexSample *ix,
						   Relation pg_statistic, double reltuples);

/*
 * A store of the table's statistics, remembered so that its rows are
 * taken off the table's changes at commit.
 */
extern void dp_remember_analyzed(Relation as, double rows);

#endif							/* DP_STATS_PRIVATE_H */
