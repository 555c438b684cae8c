/*-------------------------------------------------------------------------
 *
 * store.c
 *	  The statistics of a load's sample, computed and stored as ANALYZE
 *	  computes and stores them: the columns' and the indexes' pg_statistic
 *	  rows, the indexes' sizes, and the table's changes at commit.
 *
 * The columns: when the sample begins, each column ANALYZE would analyze
 * gets its VacAttrStats as ANALYZE prepares it (dp_examine: its type's
 * analyze support chooses the compute function and minrows), and so does
 * each expression column of the table's indexes (dp_examine_indexes).
 * The indexes are opened then, for the sample's size, and again when the
 * sample is stored, and closed in between (dp_close_indexes): the load
 * may rebuild an index, and REINDEX refuses one that is open.
 *
 * Compute: the sample rows are deformed once into an array of each
 * column's values (unless the table is very wide), and each column's
 * compute function reads them in sequence, with the load's exact row
 * count as the total; the column's n_distinct option is applied after it
 * (dp_compute_columns).  Store: a pg_statistic row per column, inserted
 * or replacing the one there, as ANALYZE's update_attstats does
 * (dp_store_column).
 *
 * Indexes: as ANALYZE does, each index's reltuples and relpages are set
 * (its predicate's share of the sample for a partial index) and its
 * expression columns get statistics computed from their values on the
 * sample rows (FormIndexDatum), stored under the index (dp_store_index).
 *
 * Autovacuum: pgstat_report_analyze resets the table's count of changes
 * since the last analyze, but core adds the transaction's inserted rows to
 * it when the transaction commits, after the analyze, so the rows the
 * statistics describe would count as changes and autovacuum would analyze
 * the table again at once (as after an ANALYZE run inside the loading
 * transaction).  So each store is remembered with its subtransaction
 * (dp_remember_analyzed), and at the top-level commit (XACT_EVENT_COMMIT,
 * which core calls before it moves the transaction's counts into the
 * pending ones) the rows stored are taken off the relation's pending
 * changes, never more than the transaction inserted into it; a store
 * whose subtransaction aborted is forgotten, and so is every store of a
 * transaction that is prepared (its counts travel in the two-phase state;
 * autovacuum analyzes once more).
 *
 * Invariants: the VacAttrStats and the values computed live in the
 * sample's memory context, and the compute functions get the sample rows
 * in TID order; the list of stores lives in TopTransactionContext and is
 * emptied at the end of every transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "stats/stats_private.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/attoptcache.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

/* ---- the columns ANALYZE would analyze ---- */

/*
 * The VacAttrStats of column 'attnum' of 'rel' (the table, or one of its
 * indexes when 'expr' is that index column's expression) as ANALYZE
 * prepares it: its type's analyze support chose the compute function and
 * minrows.  NULL when ANALYZE would skip the column.
 */
VacAttrStats *
dp_examine(DPSample *s, Relation rel, int attnum, Node *expr)
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
void
dp_examine_indexes(DPSample *s)
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
			stats = dp_examine(s, ix->index, i + 1, (Node *) lfirst(expr));
			expr = lnext(ix->info->ii_Expressions, expr);
			if (stats == NULL)
				continue;
			ix->columns[ix->ncolumns++] = stats;
			s->targrows = Max(s->targrows, stats->minrows);
		}
	}
}

/* The indexes dp_examine_indexes opened, closed. */
void
dp_close_indexes(DPSample *s)
{
	for (int i = 0; i < s->nindexes; i++)
		index_close(s->indexes[i].index, AccessShareLock);
	s->nindexes = 0;
}

/* ---- compute ---- */

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

/* Each analyzed column's statistics, by its compute function. */
void
dp_compute_columns(DPSample *s, double reltuples)
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

/* ---- store ---- */

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
void
dp_store_column(Relation pg_statistic, Oid relid, const VacAttrStats *stats)
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
void
dp_store_index(DPSample *s, DPIndexSample *ix, Relation pg_statistic,
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
			dp_store_column(pg_statistic, RelationGetRelid(ix->index), stats);
	}
	DP_UPDATE_RELSTATS(ix->index, RelationGetNumberOfBlocks(ix->index),
					   indexrows, 0, 0);
}

/* ---- the changes since the analyze, at commit ---- */

/* A store of this transaction, to be taken off the changes at commit. */
typedef struct DPAnalyzed
{
	PgStat_TableStatus *pending;	/* the relation's pending counters */
	double		rows;			/* rows the statistics describe */
	SubTransactionId subid;		/* the subtransaction that stored them */
} DPAnalyzed;

static List *analyzed = NIL;	/* DPAnalyzed *, in TopTransactionContext */

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

void
dp_remember_analyzed(Relation as, double rows)
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
