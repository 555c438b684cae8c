/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Statistics gathered while a load writes, so that a table a load
 *	  fills from empty is ready to be planned for when the load ends,
 *	  without an ANALYZE.
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
 * 1. Begin (when the load starts writing the relation, empty then): the
 *	  columns ANALYZE would analyze (not dropped, not virtual, a statistics
 *	  target other than 0) get their VacAttrStats from their type's
 *	  analyze support exactly as ANALYZE prepares them, and the sample size
 *	  is the largest minrows they ask for (at least 100) or the table's
 *	  extended statistics objects ask for, as ANALYZE's.
 * 2. Sample: each page, as it is handed to be written, offers its rows to
 *	  the sample, which keeps a uniform random share of them (section 2
 *	  below: a random key per row, the rows below a falling threshold
 *	  kept, the rows passed over counted off whole pages at a time).  A
 *	  kept row is copied with its TID; TOASTed values stay pointers,
 *	  fetched by the compute functions as ANALYZE's are.
 * 3. Store (after every page is written): the rows with the smallest keys,
 *	  as many as the sample's allotment, in TID order (the order ANALYZE
 *	  gives them, which the correlation statistic needs), each column's
 *	  compute function with the load's exact row count (every row
 *	  offered; the relation was empty) as the total, the column's
 *	  n_distinct option applied, a pg_statistic row per column (replacing
 *	  an older one, as ANALYZE does), relpages, reltuples and
 *	  relallvisible in pg_class (vac_update_relstats, as ANALYZE updates
 *	  them, in place), and pgstat_report_analyze.  The table's extended
 *	  statistics objects (CREATE STATISTICS) are built from the same
 *	  sample by core's BuildRelationExtStatistics, as ANALYZE builds them.
 *
 * The allotment: for a load into one table, targrows rows, or every row
 * when it has no more (then the statistics are exactly ANALYZE's).  A
 * load that fills many partitions would pay for an ANALYZE of each, and
 * hold a sample of targrows rows for each (sorting each column of 30,000
 * rows costs more than loading a partition of 50,000 narrow rows); so
 * the samples of a load form a group that shares the sampling: a leaf's
 * allotment is targrows times its part of the group's rows, raised to one
 * row in DP_ROWS_PER_SAMPLE_ROW of its own as long as the group's samples
 * add up to no more than DP_SAMPLES_PER_LOAD samples, and to ANALYZE's
 * smallest sample; never more than targrows or its rows.  A load whose
 * rows add up to no more than a sample keeps every row of every leaf.
 * The allotment's share of a leaf's rows only falls as the load goes on,
 * so the threshold can follow it down, and the group sweeps its samples
 * down to their thresholds whenever the rows kept have doubled: what a
 * load holds stays within a small multiple of what it will keep.
 * Statistics from an allotment smaller than ANALYZE's sample serve the
 * planner at once but are not ANALYZE's: such a table is not reported as
 * analyzed, so autovacuum still counts the loaded rows as changes and
 * analyzes it with a whole sample.

 * Autovacuum: pgstat_report_analyze resets the table's count of changes
 * since the last analyze, but core adds the transaction's inserted rows to
 * it when the transaction commits, after the analyze, so the rows the
 * statistics describe would count as changes and autovacuum would analyze
 * the table again at once (as after an ANALYZE run inside the loading
 * transaction).  So each store is remembered with its subtransaction, and
 * at the top-level commit (XACT_EVENT_COMMIT, which core calls before it
 * moves the transaction's counts into the pending ones) the rows stored
 * are taken off the relation's pending changes, never more than the
 * transaction inserted into it; a store whose subtransaction aborted is
 * forgotten, and so is every store of a transaction that is prepared (its
 * counts travel in the two-phase state; autovacuum analyzes once more).
 *
 * Indexes: as ANALYZE does, each index's reltuples and relpages are set
 * (its predicate's share of the sample for a partial index) and its
 * expression columns get statistics computed from their values on the
 * sample rows (FormIndexDatum), stored under the index.
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
 * Long: over 700 lines.  ANALYZE's steps in order (the columns, the
 * sample, the compute functions, the stores for the table and its indexes,
 * the counters at commit); they share the sample and change together.
 *
 *-------------------------------------------------------------------------
 */
#include "stats/stats.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "pgstat.h"
#include "statistics/statistics.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/attoptcache.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/relcache.h"
#include "utils/sampling.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

/* An index of the table: its size and its expression columns' statistics. */
typedef struct DPIndexSample
{
	Relation	index;
	IndexInfo  *info;
	VacAttrStats **columns;		/* its expression columns analyzed */
	int			ncolumns;
} DPIndexSample;

/*
 * The sampling a load's leaves share (see "Shared among a load's leaves"
 * above): a leaf's sample is its part of the load's rows times targrows,
 * or one row in DP_ROWS_PER_SAMPLE_ROW of its own while the load's samples
 * add up to no more than DP_SAMPLES_PER_LOAD samples, but no fewer than
 * DP_SAMPLE_MIN_ROWS rows (ANALYZE's smallest sample) and no more than
 * targrows or its rows.
 */
#define DP_ROWS_PER_SAMPLE_ROW	32
#define DP_SAMPLES_PER_LOAD		32
#define DP_SAMPLE_MIN_ROWS		100

/* The group is swept no sooner than it keeps this many rows. */
#define DP_SWEEP_MIN_ROWS		1024

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

/* A store of this transaction, to be taken off the changes at commit. */
typedef struct DPAnalyzed
{
	PgStat_TableStatus *pending;	/* the relation's pending counters */
	double		rows;			/* rows the statistics describe */
	SubTransactionId subid;		/* the subtransaction that stored them */
} DPAnalyzed;

static List *analyzed = NIL;	/* DPAnalyzed *, in TopTransactionContext */

/* ---- 1. the columns ANALYZE would analyze ---- */

/*
 * The VacAttrStats of column 'attnum' of 'rel' (the table, or one of its
 * indexes when 'expr' is that index column's expression) as ANALYZE
 * prepares it: its type's analyze support chose the compute function and
 * minrows.  NULL when ANALYZE would skip the column.
 */
static VacAttrStats *
examine(DPSample *s, Relation rel, int attnum, Node *expr)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	VacAttrStats *stats;
	HeapTuple	typtup;
	int			target;
	bool		ok;

	if (att->attisdropped || DP_ATT_IS_VIRTUAL(att))
		return NULL;
	target = dp_attstattarget(rel, attnum);
	if (target == 0)
		return NULL;

	stats = palloc0(sizeof(VacAttrStats));
	DP_VACATTR_SET_TARGET(stats, att, target);
	if (expr)
	{
		/* the expression's type, not the opclass's storage type */
		stats->attrtypid = exprType(expr);
		stats->attrtypmod = exprTypmod(expr);
		stats->attrcollid = OidIsValid(rel->rd_indcollation[attnum - 1]) ?
			rel->rd_indcollation[attnum - 1] : exprCollation(expr);
	}
	else
	{
		stats->attrtypid = att->atttypid;
		stats->attrtypmod = att->atttypmod;
		stats->attrcollid = att->attcollation;
	}
	typtup = SearchSysCacheCopy1(TYPEOID, ObjectIdGetDatum(stats->attrtypid));
	if (!HeapTupleIsValid(typtup))
		elog(ERROR, "cache lookup failed for type %u", stats->attrtypid);
	stats->attrtype = (Form_pg_type) GETSTRUCT(typtup);
	stats->anl_context = s->mcxt;
	stats->tupattnum = attnum;
	/* what the slots hold defaults to the column's type */
	for (int i = 0; i < STATISTIC_NUM_SLOTS; i++)
	{
		stats->statypid[i] = stats->attrtypid;
		stats->statyplen[i] = stats->attrtype->typlen;
		stats->statypbyval[i] = stats->attrtype->typbyval;
		stats->statypalign[i] = stats->attrtype->typalign;
	}
	if (OidIsValid(stats->attrtype->typanalyze))
		ok = DatumGetBool(OidFunctionCall1(stats->attrtype->typanalyze,
										   PointerGetDatum(stats)));
	else
		ok = std_typanalyze(stats);
	if (!ok || stats->compute_stats == NULL || stats->minrows <= 0)
		return NULL;
	return stats;
}

/*
 * The table's indexes, for their sizes, and the expression columns of
 * those that have any, for their statistics (as ANALYZE's
 * compute_index_stats); the sample grows to what they ask for.  Opened
 * when the sample begins (for its size) and again when it is stored, and
 * closed in between: the load may rebuild an index (REINDEX refuses one
 * that is open).
 */
static void
examine_indexes(DPSample *s)
{
	List	   *oids = RelationGetIndexList(s->rel);
	ListCell   *lc;

	s->nindexes = 0;
	s->indexes = palloc0(Max(list_length(oids), 1) * sizeof(DPIndexSample));
	foreach(lc, oids)
	{
		DPIndexSample *ix = &s->indexes[s->nindexes++];
		ListCell   *expr;
		int			natts;

		ix->index = index_open(lfirst_oid(lc), AccessShareLock);
		ix->info = BuildIndexInfo(ix->index);
		natts = ix->info->ii_NumIndexAttrs;
		ix->columns = palloc(Max(natts, 1) * sizeof(VacAttrStats *));
		expr = list_head(ix->info->ii_Expressions);
		for (int i = 0; i < natts; i++)
		{
			VacAttrStats *stats;

			if (ix->info->ii_IndexAttrNumbers[i] != 0)
				continue;
			stats = examine(s, ix->index, i + 1, (Node *) lfirst(expr));
			expr = lnext(ix->info->ii_Expressions, expr);
			if (stats == NULL)
				continue;
			ix->columns[ix->ncolumns++] = stats;
			s->targrows = Max(s->targrows, stats->minrows);
		}
	}
}

/* The indexes examine_indexes opened, closed. */
static void
close_indexes(DPSample *s)
{
	for (int i = 0; i < s->nindexes; i++)
		index_close(s->indexes[i].index, AccessShareLock);
	s->nindexes = 0;
}

DPSampleGroup *
dp_sample_group(void)
{
	DPSampleGroup *g = palloc0(sizeof(DPSampleGroup));

	g->next_sweep = DP_SWEEP_MIN_ROWS;
	return g;
}

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
		VacAttrStats *stats = examine(s, as, attnum, NULL);

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
	examine_indexes(s);
	close_indexes(s);
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

/* ---- 2. the sample ---- */

/*
 * How rows are drawn.  In effect every row of a leaf gets a random key,
 * uniform in [0, 1); the leaf keeps the rows whose key is below its
 * threshold, which only ever falls, and at the end the rows with the
 * smallest keys, as many as its allotment then: a uniform random sample
 * of its rows (any threshold above the last one admits every row the end
 * takes).  Keys are drawn only for the rows kept: the rows passed over
 * before the next one kept are a geometric number (the chance of each is
 * the threshold), counted off a page at a time, and a kept row's key is
 * uniform below the threshold it was drawn for.
 */

/* The rows the sample is to end with, as far as the load has gone. */
static double
allotment(const DPSample *s)
{
	double		part = s->seen / Max(s->group->offered, s->seen);
	double		rows = s->targrows * part;

	rows = Max(rows, Min(s->seen / DP_ROWS_PER_SAMPLE_ROW,
						 DP_SAMPLES_PER_LOAD * s->targrows * part));
	rows = Max(rows, DP_SAMPLE_MIN_ROWS);
	return Min(rows, Min(s->targrows, s->seen));
}

/*
 * The chance a row offered now is kept: a tenth more than the allotment's
 * share of the rows, and 64 rows, so that the end finds enough rows below
 * its threshold.  Both terms only fall as rows are offered (the allotment
 * grows no faster than the rows seen).
 */
static double
threshold(const DPSample *s)
{
	if (s->seen <= 0)
		return 1.0;
	return Min(1.0, (1.1 * allotment(s) + 64) / s->seen);
}

/*
 * Rows to pass before the next one kept, each kept with chance 'p';
 * 'log_q' is log1p(-p), taken once per page.
 */
static int64
draw_skip(DPSample *s, double p, double log_q)
{
	double		u = sampler_random_fract(&s->random);
	double		skip;

	if (p >= 1.0)
		return 0;
	skip = floor(log(u) / log_q);
	return skip < (double) PG_INT64_MAX / 2 ? (int64) skip : PG_INT64_MAX / 2;
}

/* MAXALIGNed bytes of a kept row of 'len' tuple bytes. */
#define ROW_BYTES(len)	MAXALIGN(HEAPTUPLESIZE + (len))

/* Room for a kept row of 'bytes' (ROW_BYTES) in the sample's blocks. */
static void *
row_space(DPSample *s, Size bytes)
{
	void	   *r;

	if (bytes > s->room)
	{
		Size		size = Max(DP_ROW_BLOCK, offsetof(DPRowBlock, data) + bytes);
		DPRowBlock *b = MemoryContextAlloc(s->mcxt, size);

		b->next = s->blocks;
		s->blocks = b;
		s->free = (char *) MAXALIGN(b->data);
		s->room = size - (s->free - (char *) b);
		s->held += size;
	}
	r = s->free;
	s->free += bytes;
	s->room -= bytes;
	s->live += bytes;
	return r;
}

/* The kept rows copied into new blocks, the old ones freed. */
static void
compact_rows(DPSample *s)
{
	DPRowBlock *old = s->blocks;

	s->blocks = NULL;
	s->room = 0;
	s->held = 0;
	s->live = 0;
	for (int r = 0; r < s->numrows; r++)
	{
		HeapTuple	t = s->rows[r];
		HeapTuple	c = row_space(s, ROW_BYTES(t->t_len));

		memcpy(c, t, HEAPTUPLESIZE + t->t_len);
		c->t_data = (HeapTupleHeader) ((char *) c + HEAPTUPLESIZE);
		s->rows[r] = c;
	}
	while (old != NULL)
	{
		DPRowBlock *next = old->next;

		pfree(old);
		old = next;
	}
}

/* Keep the row at 'off' of the page, block 'blkno', with key 'key'. */
static void
keep(DPSample *s, Page page, BlockNumber blkno, OffsetNumber off, double key)
{
	ItemId		lp = PageGetItemId(page, off);
	uint32		len = ItemIdGetLength(lp);
	HeapTuple	t;

	if (s->numrows == s->maxrows)
	{
		s->maxrows *= 2;
		s->rows = repalloc(s->rows, s->maxrows * sizeof(HeapTuple));
		s->keys = repalloc(s->keys, s->maxrows * sizeof(double));
	}
	t = row_space(s, ROW_BYTES(len));
	t->t_len = len;
	ItemPointerSet(&t->t_self, blkno, off);
	t->t_tableOid = RelationGetRelid(s->rel);
	t->t_data = (HeapTupleHeader) ((char *) t + HEAPTUPLESIZE);
	memcpy(t->t_data, PageGetItem(page, lp), len);
	s->rows[s->numrows] = t;
	s->keys[s->numrows++] = key;
	s->group->kept++;
}

/*
 * The rows kept whose key is 'below' or more dropped, but for the first
 * 'ties' whose key equals it (order kept).
 */
static void
drop_keys_from(DPSample *s, double below, int ties)
{
	int			n = 0;

	for (int r = 0; r < s->numrows; r++)
	{
		if (s->keys[r] < below || (s->keys[r] == below && ties-- > 0))
		{
			s->rows[n] = s->rows[r];
			s->keys[n++] = s->keys[r];
		}
		else
			s->live -= ROW_BYTES(s->rows[r]->t_len);
	}
	s->group->kept -= s->numrows - n;
	s->numrows = n;
}

/*
 * Every sample of the group brought down to its threshold, once the rows
 * kept have doubled since the last sweep: the rows held stay within about
 * twice what the samples will end with.
 */
static void
sweep(DPSampleGroup *g)
{
	ListCell   *lc;

	foreach(lc, g->samples)
	{
		DPSample   *s = lfirst(lc);

		drop_keys_from(s, threshold(s), 0);
		if (s->live < s->held / 2)
			compact_rows(s);
	}
	g->next_sweep = Max(DP_SWEEP_MIN_ROWS, 2 * g->kept);
}

void
dp_sample_page(DPSample *s, Page page, BlockNumber blkno)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	OffsetNumber off = FirstOffsetNumber;
	double		p = threshold(s);
	double		log_q = p < 1.0 ? log1p(-p) : 0.0;

	s->pages++;
	while (off <= maxoff)
	{
		int			left = maxoff - off + 1;

		if (s->skip < 0)
		{
			s->skip = draw_skip(s, p, log_q);
			s->skip_below = p;
		}
		if (s->skip >= left)
		{
			s->skip -= left;
			break;
		}
		off += (OffsetNumber) s->skip;
		keep(s, page, blkno, off++,
			 s->skip_below * sampler_random_fract(&s->random));
		s->skip = -1;
	}
	s->seen += maxoff;
	s->group->offered += maxoff;
	if (s->group->kept > s->group->next_sweep)
		sweep(s->group);
}

/* ---- 3. compute and store ---- */

/*
 * The sample rows deformed once into an array of each column's values (and
 * null flags), column after column, so that each column's compute function
 * reads its values in sequence, without walking every row's earlier
 * columns again (for a column after a variable-width one, heap_getattr
 * walks the tuple from its start on every call).  NULL when the array
 * would pass DP_DEFORMED_MAX_BYTES (a very wide table): then heap_getattr.
 */
#define DP_DEFORMED_MAX_BYTES	(64 * 1024 * 1024)

static Datum *
deform_sample(DPSample *s, bool **isnull)
{
	TupleDesc	desc = RelationGetDescr(s->rel);
	Size		cells = (Size) s->numrows * desc->natts;
	Datum	   *values;
	Datum	   *row;
	bool	   *rownull;

	if (cells * (sizeof(Datum) + sizeof(bool)) > DP_DEFORMED_MAX_BYTES)
		return NULL;
	values = palloc(cells * sizeof(Datum));
	*isnull = palloc(cells * sizeof(bool));
	row = palloc(desc->natts * sizeof(Datum));
	rownull = palloc(desc->natts * sizeof(bool));
	for (int r = 0; r < s->numrows; r++)
	{
		heap_deform_tuple(s->rows[r], desc, row, rownull);
		for (int a = 0; a < desc->natts; a++)
		{
			values[(Size) a * s->numrows + r] = row[a];
			(*isnull)[(Size) a * s->numrows + r] = rownull[a];
		}
	}
	pfree(row);
	pfree(rownull);
	return values;
}

/* The compute functions' access to a column of sample row 'rownum'. */
static Datum
fetch_value(VacAttrStatsP stats, int rownum, bool *isNull)
{
	return heap_getattr(stats->rows[rownum], stats->tupattnum, stats->tupDesc,
						isNull);
}

/* The compute functions' access to an index expression's value. */
static Datum
fetch_expression(VacAttrStatsP stats, int rownum, bool *isNull)
{
	int			i = rownum * stats->rowstride;

	*isNull = stats->exprnulls[i];
	return stats->exprvals[i];
}

/* A float4[] of a slot's numbers. */
static Datum
numbers_array(const VacAttrStats *stats, int k)
{
	Datum	   *d = palloc(stats->numnumbers[k] * sizeof(Datum));

	for (int n = 0; n < stats->numnumbers[k]; n++)
		d[n] = Float4GetDatum(stats->stanumbers[k][n]);
	return PointerGetDatum(construct_array_builtin(d, stats->numnumbers[k],
												   FLOAT4OID));
}

/* A column's pg_statistic row, inserted or replacing the one there. */
static void
store_column(Relation pg_statistic, Oid relid, const VacAttrStats *stats)
{
	Datum		values[Natts_pg_statistic];
	bool		nulls[Natts_pg_statistic];
	bool		replaces[Natts_pg_statistic];
	HeapTuple	old;
	HeapTuple	tup;

	memset(nulls, false, sizeof(nulls));
	memset(replaces, true, sizeof(replaces));
	values[Anum_pg_statistic_starelid - 1] = ObjectIdGetDatum(relid);
	values[Anum_pg_statistic_staattnum - 1] = Int16GetDatum(stats->tupattnum);
	values[Anum_pg_statistic_stainherit - 1] = BoolGetDatum(false);
	values[Anum_pg_statistic_stanullfrac - 1] = Float4GetDatum(stats->stanullfrac);
	values[Anum_pg_statistic_stawidth - 1] = Int32GetDatum(stats->stawidth);
	values[Anum_pg_statistic_stadistinct - 1] = Float4GetDatum(stats->stadistinct);
	for (int k = 0; k < STATISTIC_NUM_SLOTS; k++)
	{
		int			numbers = Anum_pg_statistic_stanumbers1 - 1 + k;
		int			vals = Anum_pg_statistic_stavalues1 - 1 + k;

		values[Anum_pg_statistic_stakind1 - 1 + k] = Int16GetDatum(stats->stakind[k]);
		values[Anum_pg_statistic_staop1 - 1 + k] = ObjectIdGetDatum(stats->staop[k]);
		values[Anum_pg_statistic_stacoll1 - 1 + k] = ObjectIdGetDatum(stats->stacoll[k]);
		nulls[numbers] = stats->numnumbers[k] <= 0;
		values[numbers] = nulls[numbers] ? (Datum) 0 : numbers_array(stats, k);
		nulls[vals] = stats->numvalues[k] <= 0;
		values[vals] = nulls[vals] ? (Datum) 0 :
			PointerGetDatum(construct_array(stats->stavalues[k],
											stats->numvalues[k],
											stats->statypid[k],
											stats->statyplen[k],
											stats->statypbyval[k],
											stats->statypalign[k]));
	}

	old = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
						  Int16GetDatum(stats->tupattnum), BoolGetDatum(false));
	if (HeapTupleIsValid(old))
	{
		tup = heap_modify_tuple(old, RelationGetDescr(pg_statistic), values,
								nulls, replaces);
		ReleaseSysCache(old);
		CatalogTupleUpdate(pg_statistic, &tup->t_self, tup);
	}
	else
	{
		tup = heap_form_tuple(RelationGetDescr(pg_statistic), values, nulls);
		CatalogTupleInsert(pg_statistic, tup);
	}
	heap_freetuple(tup);
}

/*
 * An index's share of the sample (the rows its predicate takes), its
 * expression columns' statistics from their values on those rows, and its
 * size, as ANALYZE's compute_index_stats makes them.
 */
static void
store_index(DPSample *s, DPIndexSample *ix, Relation pg_statistic,
			double reltuples)
{
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(s->rel),
													&TTSOpsHeapTuple);
	ExprState  *predicate = ExecPrepareQual(ix->info->ii_Predicate, estate);
	int			stride = ix->ncolumns;
	Datum	   *vals = palloc(Max(s->numrows * stride, 1) * sizeof(Datum));
	bool	   *nulls = palloc(Max(s->numrows * stride, 1) * sizeof(bool));
	int			taken = 0;
	double		indexrows;

	econtext->ecxt_scantuple = slot;
	for (int r = 0; r < s->numrows; r++)
	{
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		ResetExprContext(econtext);
		ExecStoreHeapTuple(s->rows[r], slot, false);
		if (predicate != NULL && !ExecQual(predicate, econtext))
			continue;
		if (stride > 0)
			FormIndexDatum(ix->info, slot, estate, values, isnull);
		for (int k = 0; k < stride; k++)
		{
			VacAttrStats *stats = ix->columns[k];
			int			col = stats->tupattnum - 1;
			int			at = taken * stride + k;

			nulls[at] = isnull[col];
			vals[at] = isnull[col] ? (Datum) 0 :
				datumCopy(values[col], stats->attrtype->typbyval,
						  stats->attrtype->typlen);
		}
		taken++;
	}
	ExecDropSingleTupleTableSlot(slot);
	FreeExecutorState(estate);

	indexrows = s->numrows > 0 ? ceil(taken * reltuples / s->numrows) : 0;
	for (int k = 0; k < stride; k++)
	{
		VacAttrStats *stats = ix->columns[k];

		stats->exprvals = vals + k;
		stats->exprnulls = nulls + k;
		stats->rowstride = stride;
		stats->compute_stats(stats, fetch_expression, taken, indexrows);
		if (stats->stats_valid)
			store_column(pg_statistic, RelationGetRelid(ix->index), stats);
	}
	DP_UPDATE_RELSTATS(ix->index, RelationGetNumberOfBlocks(ix->index),
					   indexrows, 0, 0);
}

/* ---- 3b. the changes since the analyze, at commit ---- */

static void
analyzed_xact(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event == XACT_EVENT_COMMIT)
		foreach(lc, analyzed)
		{
			DPAnalyzed *a = lfirst(lc);
			PgStat_TableXactStatus *trans = a->pending->trans;
			PgStat_Counter left;

			if (trans == NULL)
				continue;
			/* what the transaction inserted, less earlier stores' rows */
			left = trans->tuples_inserted;
			for (ListCell *e = list_head(analyzed); lfirst(e) != a;
				 e = lnext(analyzed, e))
				if (((DPAnalyzed *) lfirst(e))->pending == a->pending)
					left -= (PgStat_Counter) ((DPAnalyzed *) lfirst(e))->rows;
			if (left > 0)
				DP_PENDING_CHANGED(a->pending) -=
					Min((PgStat_Counter) a->rows, left);
		}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PRE_PREPARE)
		analyzed = NIL;			/* the list went with TopTransactionContext */
}

static void
analyzed_subxact(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	/* stores made in the aborted subtransaction or below were rolled back */
	foreach(lc, analyzed)
		if (((DPAnalyzed *) lfirst(lc))->subid >= mySubid)
			analyzed = foreach_delete_current(analyzed, lc);
}

static void
remember_analyzed(Relation as, double rows)
{
	static bool registered = false;
	DPAnalyzed *a;
	MemoryContext old;

	if (!pgstat_should_count_relation(as))
		return;
	if (!registered)
	{
		RegisterXactCallback(analyzed_xact, NULL);
		RegisterSubXactCallback(analyzed_subxact, NULL);
		registered = true;
	}
	a = MemoryContextAlloc(TopTransactionContext, sizeof(DPAnalyzed));
	a->pending = as->pgstat_info;
	a->rows = rows;
	a->subid = GetCurrentSubTransactionId();
	old = MemoryContextSwitchTo(TopTransactionContext);
	analyzed = lappend(analyzed, a);
	MemoryContextSwitchTo(old);
}

/* The sample's memory freed, and the sample out of its group. */
static void
release(DPSample *s)
{
	DPSampleGroup *g = s->group;

	g->kept -= s->numrows;
	g->samples = list_delete_ptr(g->samples, s);
	close_indexes(s);
	MemoryContextDelete(s->mcxt);
}

void
dp_sample_discard(DPSample *s)
{
	release(s);
}

/* Each analyzed column's statistics, by its compute function. */
static void
compute_columns(DPSample *s, double reltuples)
{
	MemoryContext column_cxt;
	MemoryContext old;
	Datum	   *deformed;
	bool	   *isnull = NULL;

	column_cxt = AllocSetContextCreate(CurrentMemoryContext,
									   "directpath column statistics",
									   ALLOCSET_DEFAULT_SIZES);
	deformed = deform_sample(s, &isnull);
	for (int i = 0; i < s->ncolumns; i++)
	{
		VacAttrStats *stats = s->columns[i];
		AttributeOpts *opts;

		stats->rows = s->rows;
		stats->tupDesc = RelationGetDescr(s->rel);
		if (deformed != NULL)
		{
			/* the expression columns' access, over the column's values */
			stats->exprvals = deformed + (Size) (stats->tupattnum - 1) * s->numrows;
			stats->exprnulls = isnull + (Size) (stats->tupattnum - 1) * s->numrows;
			stats->rowstride = 1;
		}
		old = MemoryContextSwitchTo(column_cxt);
		stats->compute_stats(stats, deformed ? fetch_expression : fetch_value,
							 s->numrows, reltuples);
		MemoryContextSwitchTo(old);
		MemoryContextReset(column_cxt);
		stats->exprvals = NULL;
		stats->exprnulls = NULL;
		stats->rowstride = 0;
		opts = get_attribute_options(RelationGetRelid(s->rel), stats->tupattnum);
		if (opts != NULL && opts->n_distinct != 0.0)
			stats->stadistinct = opts->n_distinct;
	}
	MemoryContextDelete(column_cxt);
	if (deformed != NULL)
	{
		pfree(deformed);
		pfree(isnull);
	}
}

/*
 * The n-th smallest of 'keys' (1 <= n <= count), found by selection
 * (Hoare's, the middle element as the pivot); 'keys' is reordered.
 */
static double
nth_smallest(double *keys, int count, int n)
{
	int			lo = 0;
	int			hi = count - 1;
	int			want = n - 1;

	while (lo < hi)
	{
		double		pivot = keys[lo + (hi - lo) / 2];
		int			i = lo;
		int			j = hi;

		while (i <= j)
		{
			while (keys[i] < pivot)
				i++;
			while (keys[j] > pivot)
				j--;
			if (i <= j)
			{
				double		t = keys[i];

				keys[i++] = keys[j];
				keys[j--] = t;
			}
		}
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			break;				/* keys[j + 1 .. i - 1] equal the pivot */
	}
	return keys[want];
}

/*
 * The sample cut to its allotment: the rows with the smallest keys.  The
 * allotment's largest key is found by selection, and the rows are kept
 * in place, so they stay in TID order (the order they were written in,
 * which ANALYZE's compute functions get too: correlation needs it).
 */
static void
cut_to_allotment(DPSample *s)
{
	int			n = (int) Min(ceil(allotment(s)), (double) s->numrows);
	double	   *keys;
	double		last;
	int			ties;			/* rows with the key 'last' to keep */

	if (n >= s->numrows)
		return;
	keys = palloc(s->numrows * sizeof(double));
	memcpy(keys, s->keys, s->numrows * sizeof(double));
	last = nth_smallest(keys, s->numrows, n);
	pfree(keys);
	ties = n;
	for (int r = 0; r < s->numrows; r++)
		ties -= s->keys[r] < last;
	drop_keys_from(s, last, ties);
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
	cut_to_allotment(s);
	sampled = s->numrows;
	/* fewer rows than ANALYZE's sample would have */
	*cut = sampled < Min(s->targrows, s->seen);
	compute_columns(s, reltuples);

	pg_statistic = table_open(StatisticRelationId, RowExclusiveLock);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->columns[i]->stats_valid)
			store_column(pg_statistic, RelationGetRelid(as), s->columns[i]);
	old = MemoryContextSwitchTo(s->mcxt);
	examine_indexes(s);
	for (int i = 0; i < s->nindexes; i++)
		store_index(s, &s->indexes[i], pg_statistic, reltuples);
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
		remember_analyzed(as, reltuples);
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
