/*-------------------------------------------------------------------------
 *
 * finish.c
 *	  The end of a load: its last rows written, its indexes finished and
 *	  its statistics stored.
 *
 * The end comes in two steps (load.c).  dp_load_end_rows writes every row
 * and does their after-insert work, so that the errors of a row still
 * name it (COPY's line): the last flush, every page builder finished
 * (dp_load_finish_heaps); or, when the input ended before min_bytes, the
 * held rows inserted on the normal path (dp_load_finish_normal), the
 * report saying why.  dp_load_finish then builds the indexes of new
 * storage and adds the entries that waited for the end
 * (dp_load_finish_indexes), whose errors (a duplicate found by the build)
 * belong to no one line, and stores the statistics of the leaves the load
 * filled from empty, whose rows were sampled as their pages were written
 * (dp_load_finish_statistics, stats/stats.c; a leaf that had rows gets
 * only its size).
 *
 * Each step tells the load's progress the phase it enters (building or
 * merging indexes, checking foreign keys, statistics) where it has work.
 *
 * Invariant: no statistics and no size are stored when rows were taken
 * back or go to core's executor after the load; the report says so.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"
#include "stats/stats.h"

#include "access/xact.h"
#include "common/report.h"
#include "common/settings.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/rel.h"

/* The input ended before min_bytes: insert the held rows normally. */
void
dp_load_finish_normal(DPLoad *s)
{
	char		why[128];

	/* rows inserted one by one get their index entries one by one */
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		dp_indexes_row_by_row(leaf->indexes);
	dp_queue_insert_normal(s->queue, s->leaves.cid);

	if (s->report.rows > 0 && s->report.rows == s->foreign_rows &&
		s->leaves.streams > 0)
		s->report.direct = true;	/* streamed to their servers (shard.c) */
	else if (s->report.rows > s->foreign_rows)
	{
		snprintf(why, sizeof(why),
				 "the statement produced less than directpath.min_bytes (%d bytes) of rows",
				 dp_min_bytes);
		dp_report_normal(&s->report, false, s->kind, why);
	}
	else
		strlcpy(s->report.reason, s->report.rows > 0 ?
				"every row went to a foreign partition" :
				"the statement produced no rows", sizeof(s->report.reason));
}

/* The last flush: every row written, each page builder finished. */
void
dp_load_finish_heaps(DPLoad *s)
{
	s->plain = NULL;
	dp_load_flush(s, true);
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		if (leaf->writer == NULL)
			continue;
		leaf->pages_written = dp_heap_finish(leaf->writer);
		s->report.pages += leaf->pages_written;
		s->report.index_strategies |= dp_indexes_used(leaf->indexes);
	}
	s->state = DPS_WRITTEN;
}

/*
 * Indexes built at the end (new storage), and entries that waited for the
 * end (existing storage), once every row is written.
 */
void
dp_load_finish_indexes(DPLoad *s)
{
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->writer != NULL)
		{
			DPIndexStrategy st = dp_indexes_strategy(leaf->indexes);

			if (st == DP_INDEX_BUILD || st == DP_INDEX_REBUILD)
				dp_progress_phase(s, DP_PHASE_BUILDING, s->rows_in);
			else if (st == DP_INDEX_SORTED)
				dp_progress_phase(s, DP_PHASE_MERGING, s->rows_in);
			s->report.indexes_rebuilt += dp_indexes_finish(leaf->indexes);
			s->report.index_strategies |= dp_indexes_used(leaf->indexes);
		}
}

/*
 * The statistics of the leaves that sampled their rows, stored once every
 * row is written, unless rows were taken back or go to core's executor;
 * the sizes of those that had rows; the report says what was done.
 */
/*
 * The foreign keys checked as a set (fkeys.c): every leaf's, then core's
 * error for the first missing key in input order.  After the index work,
 * whose duplicates core would have raised first, at insert time; with no
 * input line, as core's checks, which run at the end of the statement.
 */
void
dp_load_finish_fkeys(DPLoad *s, DPFkeyAhead *ahead)
{
	DPFkeyFound found;

	dp_fkahead_end(ahead);
	found.found = false;
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->fkeys)
		{
			dp_progress_phase(s, DP_PHASE_FKEYS, s->rows_in);
			dp_fkeys_check_sets(leaf->fkeys, &found, &s->leaves.fk_sets);
		}
	dp_fkahead_free(ahead);
	if (found.found)
		dp_fkeys_report_found(&found);
}

/*
 * A load's foreign key sets found by a worker while the leader makes the
 * indexes (fkahead.c), or NULL.  Where the load ran workers (it asked for
 * cores), or for a serial load where max_parallel_maintenance_workers
 * allows one (the finds are maintenance work, as a parallel CREATE INDEX's
 * sort, which core starts unasked); where a leaf has a set; and where the
 * index work writes no catalog row, which parallel mode forbids: no
 * leaf's indexes rebuilt by core's reindex_index, and no spool of a leaf
 * that had rows, which a merge would rewrite into new storage (sorted.c
 * does not merge in parallel mode, it inserts: slower for such a spool).
 */
DPFkeyAhead *
dp_load_finish_ahead(DPLoad *s)
{
	bool		sets = false;

	if (!dp_fkey_sets_ahead || !IsUnderPostmaster || IsInParallelMode() ||
		(s->report.parallel_workers == 0 && max_parallel_maintenance_workers == 0))
		return NULL;
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		DPIndexStrategy st = leaf->writer ? dp_indexes_strategy(leaf->indexes) :
		DP_INDEX_NONE;

		if (st == DP_INDEX_REBUILD || (st == DP_INDEX_SORTED && leaf->appends))
			return NULL;
		sets |= dp_fkeys_has_sets(leaf->fkeys);
	}
	return sets ? dp_fkahead_begin(s) : NULL;
}

void
dp_load_finish_statistics(DPLoad *s)
{
	int			gathered = 0;
	int			cut = 0;
	int			sampled = 0;
	int			sized = 0;
	const char *blocked = NULL;
	StringInfoData left;		/* what is left to ANALYZE */

	initStringInfo(&left);
	if (dp_queue_deleted(s->queue) > 0)
		blocked = "rows were taken back after they were written";
	else if (s->upsert)
		blocked = "rows are inserted or updated by core after the load";
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		bool		reduced;

		if (leaf->appends && blocked == NULL &&
			dp_stats_appended(leaf->rri->ri_RelationDesc,
							  (double) dp_heap_rows(leaf->writer),
							  leaf->pages_written, leaf->frozen))
			sized++;
		if (leaf->sample == NULL)
			continue;
		if (blocked == NULL)
		{
			dp_progress_phase(s, DP_PHASE_STATISTICS, s->rows_in);
			sampled += dp_sample_store(leaf->sample, leaf->frozen, &reduced);
			gathered++;
			cut += reduced;
		}
		else
			dp_sample_discard(leaf->sample);
		leaf->sample = NULL;
	}
	if (cut > 0)
		appendStringInfo(&left, " (reduced for %d: autovacuum analyzes %s again)",
						 cut, cut > 1 ? "them" : "it");
	if (gathered > 0 &&
		s->leaves.mtstate->rootResultRelInfo->ri_RelationDesc->rd_rel->relkind ==
		RELKIND_PARTITIONED_TABLE)
		appendStringInfoString(&left,
							   "; the partitioned table's own left to ANALYZE");
	if (gathered > 0 && s->stats_why)
		appendStringInfo(&left, "; not for every partition: %s", s->stats_why);
	if (gathered > 0)
		snprintf(s->report.statistics, sizeof(s->report.statistics),
				 "gathered for %d relation%s from %d sample rows%s",
				 gathered, gathered > 1 ? "s" : "", sampled, left.data);
	else if (blocked || s->stats_why)
		snprintf(s->report.statistics, sizeof(s->report.statistics),
				 "left to ANALYZE: %s%s", blocked ? blocked : s->stats_why,
				 sized > 0 ? " (its size in pg_class updated)" : "");
}
