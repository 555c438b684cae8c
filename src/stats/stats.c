/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Statistics gathered while a load writes, so that a table a load
 *	  fills from empty is ready to be planned for when the load ends,
 *	  without an ANALYZE: a sample's life, from its beginning to its store.
 *
 * ANALYZE reads a sample of a table's rows (two stages: random blocks,
 * then a reservoir of their rows), hands each analyzed column to its
 * type's analyze support (typanalyze, else std_typanalyze, which choose
 * the sample size and the compute function), stores what the functions
 * computed in pg_statistic, the relation's size in pg_class, and tells the
 * cumulative statistics that the table was analyzed.  A load that fills
 * an empty relation sees every row go by, so it can do the same without
 * reading anything back:
 *
 * 1. Begin (dp_sample_begin, when the load starts writing the relation,
 *	  empty then): the columns ANALYZE would analyze (not dropped, not
 *	  virtual, a statistics target other than 0) get their VacAttrStats
 *	  from their type's analyze support exactly as ANALYZE prepares them
 *	  (store.c), and the sample size is the largest minrows they ask for
 *	  (at least 100) or the table's extended statistics objects ask for,
 *	  as ANALYZE's.
 * 2. Sample (sample.c): each page, as it is handed to be written, offers
 *	  its rows to the sample, which keeps a uniform random share of them
 *	  (a random key per row, the rows below a falling threshold kept, the
 *	  rows passed over counted off whole pages at a time).  A kept row is
 *	  copied with its TID; TOASTed values stay pointers, fetched by the
 *	  compute functions as ANALYZE's are.
 * 3. Store (dp_sample_store, after every page is written): the rows with
 *	  the smallest keys, as many as the sample's allotment, in TID order
 *	  (the order ANALYZE gives them, which the correlation statistic
 *	  needs; sample.c), each column's compute function with the load's
 *	  exact row count (every row offered; the relation was empty) as the
 *	  total, the column's n_distinct option applied, a pg_statistic row per
 *	  column (replacing an older one, as ANALYZE does), the indexes' sizes
 *	  and expression statistics (store.c), relpages, reltuples and
 *	  relallvisible in pg_class (vac_update_relstats, as ANALYZE updates
 *	  them, in place), and pgstat_report_analyze, whose rows are taken off
 *	  the table's changes at commit (store.c).  The table's extended
 *	  statistics objects (CREATE STATISTICS) are built from the same sample
 *	  by core's BuildRelationExtStatistics, as ANALYZE builds them.
 *
 * The allotment: for a load into one table, targrows rows, or every row
 * when it has no more (then the statistics are exactly ANALYZE's); the
 * samples of a load that fills many partitions share the sampling, and
 * each keeps less (sample.c).  Statistics from an allotment smaller than
 * ANALYZE's sample serve the planner at once but are not ANALYZE's: such
 * a table is not reported as analyzed, so autovacuum still counts the
 * loaded rows as changes and analyzes it with a whole sample.
 *
 * What is left to ANALYZE (load.c says so): a partitioned parent's
 * statistics over its partitions (each leaf the load fills gets its own),
 * and the column statistics of a table that had rows, whose pg_class size
 * only is brought up to date (dp_stats_appended): a sample of the new rows
 * says nothing about the old ones, and merging it into ANALYZE's
 * statistics of them would not be ANALYZE's result.
 *
 * Invariants: a sample only ever holds rows of pages handed to be written,
 * in the relation that was empty when the load began writing it, so the
 * statistics describe exactly the rows the load wrote; the caller stores
 * only when no row was taken back after it was written.
 *
 *-------------------------------------------------------------------------
 */
#include "stats/stats_private.h"

#include "access/multixact.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_statistic.h"
#include "commands/vacuum.h"
#include "common/settings.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "statistics/statistics.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"
#include "utils/timestamp.h"

DPSample *
dp_sample_begin(Relation rel, Relation as, DPSampleGroup *group,
				const char **why)
{
	MemoryContext mcxt;
	MemoryContext old;
	DPSample   *s;
	int			natts = RelationGetDescr(rel)->natts;

	if (!dp_load_statistics)
	{
		*why = "directpath.load_statistics is off";
		return NULL;
	}
	if (as == NULL)
		as = rel;
	if (!DP_MAY_ANALYZE(as))
	{
		*why = "the user may not ANALYZE the table";
		return NULL;
	}

	mcxt = AllocSetContextCreate(CurrentMemoryContext, "directpath sample",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(mcxt);
	s = palloc0(sizeof(DPSample));
	s->rel = rel;
	s->as = as;
	s->mcxt = mcxt;
	s->columns = palloc(Max(natts, 1) * sizeof(VacAttrStats *));
	s->targrows = 100;
	for (int attnum = 1; attnum <= natts; attnum++)
	{
		VacAttrStats *stats = dp_examine(s, as, attnum, NULL);

		if (stats == NULL)
			continue;
		s->columns[s->ncolumns++] = stats;
		s->targrows = Max(s->targrows, stats->minrows);
	}
	if (s->ncolumns == 0)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(mcxt);
		*why = "no column of the table is analyzed";
		return NULL;
	}
	dp_examine_indexes(s);
	dp_close_indexes(s);
	/* extended statistics objects may ask for a larger sample */
	s->targrows = Max(s->targrows,
					  ComputeExtStatisticsRows(rel, s->ncolumns, s->columns));
	s->maxrows = 1024;
	s->rows = palloc(s->maxrows * sizeof(HeapTuple));
	s->keys = palloc(s->maxrows * sizeof(double));
	s->skip = -1;
	sampler_random_init_state(pg_prng_uint32(&pg_global_prng_state),
							  &s->random);
	MemoryContextSwitchTo(old);
	s->group = group;
	group->samples = lappend(group->samples, s);
	return s;
}

/* The sample's memory freed, and the sample out of its group. */
static void
release(DPSample *s)
{
	DPSampleGroup *g = s->group;

	g->kept -= s->numrows;
	g->samples = list_delete_ptr(g->samples, s);
	dp_close_indexes(s);
	MemoryContextDelete(s->mcxt);
}

void
dp_sample_discard(DPSample *s)
{
	release(s);
}

int
dp_sample_store(DPSample *s, bool frozen, bool *cut)
{
	Relation	as = s->as;
	MemoryContext old;
	Relation	pg_statistic;
	double		reltuples = s->seen;
	int			sampled;

	/* no rows: only the sizes, as ANALYZE of an empty table */
	if (s->seen == 0)
	{
		*cut = false;
		DP_UPDATE_RELSTATS(s->rel, s->pages, 0, 0, 0);
		release(s);
		return 0;
	}
	dp_cut_to_allotment(s);
	sampled = s->numrows;
	/* fewer rows than ANALYZE's sample would have */
	*cut = sampled < Min(s->targrows, s->seen);
	dp_compute_columns(s, reltuples);

	pg_statistic = table_open(StatisticRelationId, RowExclusiveLock);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->columns[i]->stats_valid)
			dp_store_column(pg_statistic, RelationGetRelid(as), s->columns[i]);
	old = MemoryContextSwitchTo(s->mcxt);
	dp_examine_indexes(s);
	for (int i = 0; i < s->nindexes; i++)
		dp_store_index(s, &s->indexes[i], pg_statistic, reltuples);
	MemoryContextSwitchTo(old);
	table_close(pg_statistic, RowExclusiveLock);
	/* the table's extended statistics objects, from the same sample */
	BuildRelationExtStatistics(as, false, reltuples, s->numrows, s->rows,
							   s->ncolumns, s->columns);

	DP_UPDATE_RELSTATS(s->rel, s->pages, reltuples, frozen ? s->pages : 0,
					   frozen ? s->pages : 0);
	/* a cut sample is not ANALYZE's: autovacuum still analyzes the table */
	if (!*cut)
	{
		DP_REPORT_ANALYZE(as, (PgStat_Counter) reltuples);
		dp_remember_analyzed(as, reltuples);
	}
	release(s);
	return sampled;
}

bool
dp_stats_appended(Relation rel, double rows, BlockNumber pages, bool frozen)
{
	Form_pg_class cls = rel->rd_rel;

	if (!dp_load_statistics || cls->reltuples < 0 || !DP_MAY_ANALYZE(rel))
		return false;
	DP_UPDATE_RELSTATS(rel, RelationGetNumberOfBlocks(rel),
					   cls->reltuples + rows,
					   cls->relallvisible + (frozen ? pages : 0),
					   DP_REL_ALLFROZEN(rel) + (frozen ? pages : 0));
	return true;
}
