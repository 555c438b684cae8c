/*-------------------------------------------------------------------------
 *
 * stats/stats.h
 *	  Statistics gathered while a load writes: a sample of the rows of a
 *	  relation the load fills from empty, taken from its pages as they are
 *	  written, and at the end the statistics ANALYZE would compute from it,
 *	  stored as ANALYZE stores them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_STATS_H
#define DP_STATS_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

typedef struct DPSample DPSample;
typedef struct DPSampleGroup DPSampleGroup;

/*
 * The samples of one load share the sampling (a load into many empty
 * partitions keeps a share of ANALYZE's sample size for each): a group in
 * the current memory context, given to each dp_sample_begin.
 */
extern DPSampleGroup *dp_sample_group(void);

/*
 * A sample for the rows about to be written into 'rel', which is empty;
 * NULL, with the reason in *why, when this load gathers none for it (the
 * setting is off, the user may not ANALYZE it, no column is analyzed).
 * With 'as', the statistics are that relation's, of the same columns (a
 * materialized view whose new heap 'rel' is): its columns' statistics
 * targets, the right to ANALYZE it, and where the statistics, extended
 * statistics and analyze counters are stored; the sizes stay rel's.
 */
extern DPSample *dp_sample_begin(Relation rel, Relation as,
								 DPSampleGroup *group, const char **why);

/* The rows of a page as it is written: block 'blkno' of the relation. */
extern void dp_sample_page(DPSample *s, Page page, BlockNumber blkno);

/*
 * After every page was written: compute and store the statistics of the
 * columns and of the indexes' expressions, the sizes of the relation (the
 * pages and rows offered: it was empty; 'frozen': every page all-visible)
 * and of its indexes, and the analyze counters.  *cut: the sample was
 * smaller than ANALYZE's, as the leaf's share of its group's, so the table
 * is left to be analyzed again (the analyze counters are not touched).
 * Returns the rows the statistics were computed from.  The sample is gone
 * after it, or after dp_sample_discard.
 */
extern int	dp_sample_store(DPSample *s, bool frozen, bool *cut);
extern void dp_sample_discard(DPSample *s);

/*
 * A load appended 'rows' rows on 'pages' new pages ('frozen': all-visible
 * and frozen) to 'rel', which had rows: its size in pg_class brought up to
 * date (relpages its blocks, reltuples the old estimate plus the rows),
 * unless it was never sized (reltuples -1), the setting is off or the user
 * may not ANALYZE it (false then).  Column statistics stay ANALYZE's.
 */
extern bool dp_stats_appended(Relation rel, double rows, BlockNumber pages,
							  bool frozen);

#endif							/* DP_STATS_H */
