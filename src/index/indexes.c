/*-------------------------------------------------------------------------
 *
 * indexes.c
 *	  Index maintenance for directly written rows: every strategy, and the
 *	  choice among them, behind dp_indexes_begin / _batch / _row / _finish.
 *
 * Three strategies, chosen per leaf relation when the statement first
 * writes it (dp_indexes_begin: 1 or 2 for existing storage, 3 where the
 * storage is new), reported as DPIndexStrategy:
 *
 * 1. Per batch, row by row (dp_indexes_row).  The after-insert queue
 *	  (queue.c) inserts each row's index entries with
 *	  ExecInsertIndexTuples after the flush that wrote the row's page, so an
 *	  index never points at a page that is not on disk yet; unique,
 *	  exclusion and deferrable constraints behave exactly as for a plain
 *	  INSERT.  Cost is proportional to the rows loaded.  Used where 2 is
 *	  not: an index that is not a btree, a deferrable unique or exclusion
 *	  constraint, COPY's rejects with a unique index (duplicates are found
 *	  row by row), or directpath.index_sort off.
 *
 * 2. Per batch, sorted (dp_indexes_batch; the default where it applies).
 *	  After the flush, each index's entries for the batch's rows are formed
 *	  (partial-index predicates and expressions evaluated as ExecInsert
 *	  does) and sorted by key with the same tuplesort an index build uses.
 *	  When the first sorts after every entry of the index (keys from a
 *	  sequence, an identity, a time of arrival), the entries become new
 *	  leaf pages at the index's right edge (btappend.c, reported as
 *	  "append"; directpath.index_append).  Otherwise runs of at least 256
 *	  entries that fall between two neighbouring keys of the index become
 *	  new leaf pages there (btappend.c, "runs"; directpath.index_runs), and
 *	  the other entries are inserted in key order with index_insert:
 *	  consecutive keys land on the same leaf page one after another,
 *	  instead of every row visiting a random leaf of every index.  Uniqueness is checked by the insertion
 *	  itself, against the table and the rows before in key order, with a
 *	  plain INSERT's message; when a batch holds several duplicates, the
 *	  one reported can differ from the first in input order.  The append
 *	  checks each entry against the one before, and the first against the
 *	  index's last (by key: an equal key is inserted instead), with the same
 *	  message.  For COPY the error context names the line of the row whose
 *	  entry failed.
 *	  Sorting pays only where the input scatters the keys: an index whose
 *	  keys arrive (nearly) in order, such as a sequence-fed key, or in a few
 *	  interleaved ascending streams, already touches few leaf pages, and
 *	  sorting it costs 10-20% when the entries are then inserted one by one.
 *	  So an index whose batch could not be appended is judged on it: when,
 *	  in key order, the rows' TIDs go backwards for fewer than one entry in
 *	  ten, later batches of the statement insert that index's entries in
 *	  input order.
 *
 * 3. Built at the end from entries sorted during the load (DP_INDEX_BUILD:
 *	  dp_indexes_spool, dp_indexes_finish), when the relation's storage and
 *	  its indexes' were created or truncated in this transaction and were
 *	  empty when the load began, every index is an immediate btree (no
 *	  exclusion constraint) and directpath.index_rebuild and
 *	  directpath.index_spool are on.  Each placed row's entry goes into a
 *	  tuplesort per index (partial-index predicates and expressions
 *	  evaluated as ExecInsert does; maintenance_work_mem shared among the
 *	  indexes); at the end each sorted stream becomes the index's pages
 *	  through our btree page builder (btree.c).  The heap is not read
 *	  again, so its pages stay out of shared buffers.  Uniqueness is
 *	  checked by the sort, as CREATE INDEX checks it, and reported with the
 *	  plain path's message and SQLSTATE.
 *
 * 4. Rebuild at the end (dp_indexes_finish), when the relation's storage was created or
 *	  truncated in this transaction (so its indexes are new and private to
 *	  us too) and directpath.index_rebuild is on.  No entry is inserted
 *	  during the load; after the last flush every index is rebuilt once by
 *	  core's reindex_index (sorted, bottom-up build), which also checks
 *	  uniqueness.  Not used when an index backs a deferrable or exclusion
 *	  constraint, whose semantics need per-row insertion.  A duplicate found
 *	  by the build is reported with the plain path's message and SQLSTATE.
 *
 * BRIN indexes of a leaf without triggers take no part in 2 and 3: they
 * get no entry per row, and the ranges the load wrote are summarized once
 * at the end (brin.c; directpath.brin_summarize), reported as "summarize".
 * Other index kinds, and BRIN indexes of a leaf with triggers, keep 1 (or
 * 4 for new storage).
 *
 * A leaf whose held rows end up inserted on the normal path (a small
 * statement, load.c) gets its entries row by row (dp_indexes_row_by_row).
 * A leaf of ON CONFLICT DO NOTHING never gets 3 or 4: its probes must find
 * the entries of earlier batches in the index, and the keys kept for them
 * meanwhile would otherwise grow with the whole load (load/conflict.c).
 *
 * reindex_index refuses an index that the session has open, so the
 * executor's index relations are closed around the rebuild and reopened
 * for ExecEndModifyTable to close as usual.
 *
 * Long: over 700 lines.  The three strategies share one per-leaf state
 * (DPIndexes: the open indexes, their expression states, their sorts) and
 * the choice among them; the callers see only dp_indexes_*, and keeping the
 * strategies together keeps that state private.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/tuplesort.h"
#include "utils/elog.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

struct DPIndexes
{
	ResultRelInfo *rri;			/* the leaf; its indexes are open */
	DPIndexStrategy strategy;
	bool	   *sort;			/* DP_INDEX_SORTED: per index, still worth
								 * sorting?  Else NULL */
	DPBtreeBuild **spools;		/* DP_INDEX_SORTED: per index, its entries
								 * for the end of the statement, or NULL */
	DPBtreeBuild **builds;		/* DP_INDEX_BUILD: per index (NULL for a
								 * BRIN index) */
	bool	   *summarize;		/* DP_INDEX_SORTED and _BUILD: per index, a
								 * BRIN index summarized at the end? Else
								 * NULL */
	BlockNumber first_new;		/* the heap's first block the load writes */
	bool		has_unique;		/* any immediate unique index? */
	uint32		used;			/* bit (1 << DPIndexStrategy) per one used */
	BufferAccessStrategy ring;	/* heap reads of leaf merges: one ring for
								 * the statement, so that its pages leave
								 * few buffers behind */
};

/* May this leaf's indexes be rebuilt at the end instead of maintained? */
static bool
can_rebuild(ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;

	if (!dp_index_rebuild || !dp_storage_new_in_xact(rel))
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];

		if (!idx->rd_index->indimmediate || ii->ii_ExclusionOps != NULL)
			return false;
		/* the index's storage must be as new as the heap's */
		if (!dp_storage_new_in_xact(idx))
			return false;
	}
	return true;
}

/*
 * May this leaf's indexes be built from entries sorted during the load?
 * Rebuilding must be allowed, every index a btree (or a BRIN index
 * summarized at the end), and the heap and the indexes empty (no earlier
 * statement of the transaction wrote them).
 */
static bool
can_build(ResultRelInfo *rri)
{
	if (!dp_index_spool || !can_rebuild(rri) ||
		RelationGetNumberOfBlocks(rri->ri_RelationDesc) != 0)
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (dp_brin_can_defer(rri, i))
			continue;
		if (idx->rd_rel->relam != BTREE_AM_OID ||
			RelationGetNumberOfBlocks(idx) != 1)
			return false;
	}
	return true;
}

/* One sorted build per btree, sharing maintenance_work_mem. */
static DPBtreeBuild **
begin_builds(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	int			n = rri->ri_NumIndices;
	DPBtreeBuild **builds = palloc0(sizeof(DPBtreeBuild *) * n);
	int			nbtrees = 0;

	for (int i = 0; i < n; i++)
		nbtrees += !ix->summarize[i];
	for (int i = 0; i < n; i++)
		if (!ix->summarize[i])
			builds[i] = dp_btree_begin(rri->ri_RelationDesc,
									   rri->ri_IndexRelationDescs[i],
									   Max(maintenance_work_mem / nbtrees, 1024),
									   true);
	return builds;
}

/*
 * Which indexes are BRIN indexes summarized at the end (brin.c), and, when
 * there are any, from which heap block on.
 */
static bool *
begin_summaries(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	bool	   *summarize = palloc(sizeof(bool) * rri->ri_NumIndices);
	bool		any = false;

	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		summarize[i] = dp_brin_can_defer(rri, i);
		any |= summarize[i];
	}
	/* under the load's lock, nobody else extends the heap */
	if (any)
		ix->first_new = RelationGetNumberOfBlocks(rri->ri_RelationDesc);
	return summarize;
}

/*
 * May this index's entries wait for the end of the statement (and then be
 * appended, merged or inserted at once)?  A non-unique btree (no error to
 * name a row for) of a leaf without triggers (none could look the rows up
 * through the index before the end, as it could after their batch).
 */
static bool
can_spool(ResultRelInfo *rri, int i)
{
	Relation	idx = rri->ri_IndexRelationDescs[i];

	return dp_index_merge && rri->ri_TrigDesc == NULL &&
		idx->rd_rel->relam == BTREE_AM_OID && !idx->rd_index->indisunique &&
		idx->rd_rel->relpersistence != RELPERSISTENCE_TEMP;
}

/* The spools of the indexes that may wait, sharing maintenance_work_mem. */
static DPBtreeBuild **
begin_spools(ResultRelInfo *rri)
{
	int			n = 0;
	DPBtreeBuild **spools;

	for (int i = 0; i < rri->ri_NumIndices; i++)
		n += can_spool(rri, i);
	if (n == 0)
		return NULL;
	spools = palloc0(sizeof(DPBtreeBuild *) * rri->ri_NumIndices);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (can_spool(rri, i))
			spools[i] = dp_btree_begin(rri->ri_RelationDesc,
									   rri->ri_IndexRelationDescs[i],
									   Max(maintenance_work_mem / n, 1024),
									   false);
	return spools;
}

/* May this leaf's entries be inserted sorted, per batch? */
static bool
can_sort(ResultRelInfo *rri)
{
	if (!dp_index_sort)
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (dp_brin_can_defer(rri, i))
			continue;
		if (idx->rd_rel->relam != BTREE_AM_OID ||
			!idx->rd_index->indimmediate ||
			rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return false;
	}
	return true;
}

DPIndexes *
dp_indexes_begin(ResultRelInfo *rri, bool reject_duplicates, bool per_batch)
{
	DPIndexes  *ix = palloc0(sizeof(DPIndexes));

	ix->rri = rri;
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (rri->ri_IndexRelationDescs[i]->rd_index->indisunique &&
			rri->ri_IndexRelationDescs[i]->rd_index->indimmediate)
			ix->has_unique = true;

	/* duplicates to be rejected can only be found row by row */
	if (rri->ri_NumIndices == 0)
		ix->strategy = DP_INDEX_NONE;
	else if (reject_duplicates && ix->has_unique)
		ix->strategy = DP_INDEX_ROW;
	else if (!per_batch && can_build(rri))
	{
		ix->strategy = DP_INDEX_BUILD;
		ix->summarize = begin_summaries(ix);
		ix->builds = begin_builds(ix);
	}
	else if (!per_batch && can_rebuild(rri))
		ix->strategy = DP_INDEX_REBUILD;
	else if (can_sort(rri))
	{
		ix->strategy = DP_INDEX_SORTED;
		ix->sort = palloc(sizeof(bool) * rri->ri_NumIndices);
		memset(ix->sort, true, sizeof(bool) * rri->ri_NumIndices);
		ix->spools = begin_spools(rri);
		ix->summarize = begin_summaries(ix);
	}
	else
		ix->strategy = DP_INDEX_ROW;
	return ix;
}

DPIndexStrategy
dp_indexes_strategy(DPIndexes *ix)
{
	return ix->strategy;
}

uint32
dp_indexes_used(DPIndexes *ix)
{
	/* sorted per batch reports what each batch did; others themselves */
	if (ix->strategy == DP_INDEX_SORTED)
		return ix->used;
	return ix->strategy == DP_INDEX_NONE ? 0 :
		(1 << ix->strategy) | (ix->used & (1 << DP_INDEX_SUMMARIZE));
}

bool
dp_indexes_has_unique(DPIndexes *ix)
{
	return ix->has_unique;
}

List *
dp_indexes_row(DPIndexes *ix, TupleTableSlot *slot, EState *estate,
			   bool *conflict)
{
	Assert(ix->strategy == DP_INDEX_ROW);
	if (conflict != NULL && ix->has_unique)
		return DP_INSERT_INDEX_TUPLES_NODUP(ix->rri, slot, estate, conflict);
	return DP_INSERT_INDEX_TUPLES(ix->rri, slot, estate);
}

/* A batch's rows, for naming the input line of the entry being inserted. */
typedef struct DPBatchRows
{
	HeapTuple  *tuples;			/* in ascending TID order */
	uint64	   *linenos;		/* their input lines, or NULL */
	int			ntuples;
	DPInputLine *input;			/* COPY's input position, or NULL */
} DPBatchRows;

/*
 * About to insert the entry of 'tid': point COPY's error context at the
 * row's line (line number only: the line's text is gone by now).
 */
static void
name_line(DPBatchRows *b, ItemPointer tid)
{
	int			lo = 0,
				hi = b->ntuples - 1;

	if (b->input == NULL || b->linenos == NULL)
		return;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			cmp = ItemPointerCompare(&b->tuples[mid]->t_self, tid);

		if (cmp == 0)
		{
			*b->input->lineno = b->linenos[mid];
			*b->input->line_valid = false;
			return;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
}

/*
 * One index's entries for the batch: formed (partial-index predicate and
 * expressions evaluated as ExecInsert does) and inserted in input order,
 * or put into 'sorted' when there is one.
 */
static void
form_entries(ResultRelInfo *rri, int i, EState *estate, TupleTableSlot *slot,
			 DPBatchRows *b, DPBtreeBuild *sorted)
{
	Relation	heap = rri->ri_RelationDesc;
	Relation	idx = rri->ri_IndexRelationDescs[i];
	IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
	ExprContext *econtext = GetPerTupleExprContext(estate);
	IndexUniqueCheck check = idx->rd_index->indisunique ?
		UNIQUE_CHECK_YES : UNIQUE_CHECK_NO;
	ExprState  *predicate = NULL;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	if (ii->ii_Predicate != NIL)
	{
		if (ii->ii_PredicateState == NULL)
			ii->ii_PredicateState = ExecPrepareQual(ii->ii_Predicate, estate);
		predicate = ii->ii_PredicateState;
	}
	for (int r = 0; r < b->ntuples; r++)
	{
		ItemPointer tid = &b->tuples[r]->t_self;

		ResetExprContext(econtext);
		ExecStoreHeapTuple(b->tuples[r], slot, false);
		econtext->ecxt_scantuple = slot;
		if (predicate != NULL && !ExecQual(predicate, econtext))
			continue;
		FormIndexDatum(ii, slot, estate, values, isnull);
		if (sorted != NULL)
			dp_btree_add(sorted, tid, values, isnull);
		else
		{
			name_line(b, tid);
			index_insert(idx, values, isnull, tid, heap, check, false, ii);
		}
	}
	ExecClearTuple(slot);
	ResetExprContext(econtext);
}

/* One index entry inserted by core (also dp_btree_insert_runs's callback). */
typedef struct DPInsertOne
{
	ResultRelInfo *rri;
	int			i;				/* the index */
	DPBatchRows *rows;
	uint64		inserted;
} DPInsertOne;

static void
insert_one(void *arg, IndexTuple itup)
{
	DPInsertOne *o = (DPInsertOne *) arg;
	Relation	idx = o->rri->ri_IndexRelationDescs[o->i];
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	index_deform_tuple(itup, RelationGetDescr(idx), values, isnull);
	name_line(o->rows, &itup->t_tid);
	index_insert(idx, values, isnull, &itup->t_tid, o->rri->ri_RelationDesc,
				 idx->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
				 false, o->rri->ri_IndexRelationInfo[o->i]);
	o->inserted++;
}

/*
 * Insert one index's sorted entries in key order.  Returns whether the
 * index should still be sorted: not when, in key order, the TIDs went
 * backwards for fewer than one entry in ten (its keys arrive in order).
 */
static bool
insert_sorted(ResultRelInfo *rri, int i, DPBtreeBuild *sorted,
			  DPBatchRows *b)
{
	DPInsertOne one = {rri, i, b, 0};
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath index entries",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	IndexTuple	itup;
	ItemPointerData prev;
	int			nentries = 0;
	int			backwards = 0;

	while ((itup = dp_btree_next(sorted)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		if (nentries++ > 0 && ItemPointerCompare(&itup->t_tid, &prev) < 0)
			backwards++;
		prev = itup->t_tid;
		insert_one(&one, itup);
		MemoryContextReset(cxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return !(nentries >= 1000 && backwards * 10 < nentries);
}

static void
name_line_cb(void *arg, ItemPointer tid)
{
	name_line((DPBatchRows *) arg, tid);
}

/*
 * One index's sorted entries that cannot be appended: written run by run
 * into the leaves they follow (btappend.c), the entries that start no run
 * inserted in key order; or, with directpath.index_runs off, all inserted.
 * Returns whether the index should still be sorted (insert_sorted).
 */
static bool
insert_in_key_order(DPIndexes *ix, int i, DPBtreeBuild *sorted,
					DPBatchRows *b)
{
	DPInsertOne one = {ix->rri, i, b, 0};
	int			runs;
	int			merges;

	if (!dp_index_runs)
	{
		ix->used |= 1 << DP_INDEX_SORTED;
		return insert_sorted(ix->rri, i, sorted, b);
	}
	if (ix->ring == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(ix));

		ix->ring = GetAccessStrategy(BAS_BULKREAD);
		MemoryContextSwitchTo(old);
	}
	runs = dp_btree_insert_runs(sorted, name_line_cb, b, insert_one, &one,
								ix->ring, &merges);
	if (runs > merges)
		ix->used |= 1 << DP_INDEX_RUNS;
	if (merges > 0)
		ix->used |= 1 << DP_INDEX_LEAF_MERGE;
	if (one.inserted > 0)
		ix->used |= 1 << DP_INDEX_SORTED;
	return true;
}

/*
 * One index's sorted entries for the batch: appended at the right edge
 * when they all sort after the index's entries, else in key order.
 */
static void
add_sorted(DPIndexes *ix, int i, DPBtreeBuild *sorted, DPBatchRows *b)
{
	if (dp_index_append && dp_btree_append(sorted, name_line_cb, b))
	{
		ix->used |= 1 << DP_INDEX_APPEND;
		return;
	}
	ix->sort[i] = insert_in_key_order(ix, i, sorted, b);
}

void
dp_indexes_batch(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				 HeapTuple *tuples, uint64 *linenos, int ntuples,
				 DPInputLine *input)
{
	ResultRelInfo *rri = ix->rri;
	DPBatchRows b = {tuples, linenos, ntuples, input};

	Assert(ix->strategy == DP_INDEX_SORTED);
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		DPBtreeBuild *sorted = NULL;

		if (ix->summarize[i])
			continue;
		if (ix->spools != NULL && ix->spools[i] != NULL)
		{
			form_entries(rri, i, estate, slot, &b, ix->spools[i]);
			continue;
		}
		if (ix->sort[i])
			sorted = dp_btree_begin(rri->ri_RelationDesc,
									rri->ri_IndexRelationDescs[i],
									maintenance_work_mem, false);
		else
			ix->used |= 1 << DP_INDEX_SORTED;
		form_entries(rri, i, estate, slot, &b, sorted);
		if (sorted == NULL)
			continue;
		add_sorted(ix, i, sorted, &b);
		dp_btree_discard(sorted);
	}
}

void
dp_indexes_row_by_row(DPIndexes *ix)
{
	if (ix->spools != NULL)
	{
		DPBatchRows none = {0};

		for (int i = 0; i < ix->rri->ri_NumIndices; i++)
			if (ix->spools[i] != NULL)
			{
				insert_sorted(ix->rri, i, ix->spools[i], &none);
				dp_btree_discard(ix->spools[i]);
			}
		ix->spools = NULL;
	}
	if (ix->strategy == DP_INDEX_BUILD)
	{
		for (int i = 0; i < ix->rri->ri_NumIndices; i++)
			if (ix->builds[i] != NULL)
				dp_btree_discard(ix->builds[i]);
		ix->builds = NULL;
	}
	/* the row-by-row path maintains BRIN indexes itself */
	ix->summarize = NULL;
	if (ix->strategy != DP_INDEX_NONE)
		ix->strategy = DP_INDEX_ROW;
}

/*
 * Turn the build's "could not create unique index" into the message an
 * INSERT gives for the same duplicate.
 */
static void
rethrow_as_insert_error(ErrorData *edata, const char *index_name,
						Relation heap)
{
	char	   *detail = edata->detail ? pstrdup(edata->detail) : NULL;
	const char *suffix = " is duplicated.";

	if (detail && strlen(detail) > strlen(suffix) &&
		strcmp(detail + strlen(detail) - strlen(suffix), suffix) == 0)
	{
		detail[strlen(detail) - strlen(suffix)] = '\0';
		detail = psprintf("%s already exists.", detail);
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					index_name),
			 detail ? errdetail_internal("%s", detail) : 0,
			 errtableconstraint(heap, index_name)));
}

/*
 * Run fn(arg), work on the index 'index_name' of 'heap'; a unique
 * violation it raises (a sort's or a build's) is reported as a plain
 * INSERT reports it.
 */
static void
as_insert(void (*fn) (void *arg), void *arg, const char *index_name,
		  Relation heap)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		rethrow_as_insert_error(edata, index_name, heap);
	}
	PG_END_TRY();
}

/* An entry for one index's sorted build. */
typedef struct DPSpoolEntry
{
	DPBtreeBuild *build;
	ItemPointer tid;
	Datum	   *values;
	bool	   *isnull;
} DPSpoolEntry;

static void
spool_one(void *arg)
{
	DPSpoolEntry *e = (DPSpoolEntry *) arg;

	dp_btree_add(e->build, e->tid, e->values, e->isnull);
}

void
dp_indexes_spool(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				 ItemPointer tid)
{
	ResultRelInfo *rri = ix->rri;
	ExprContext *econtext = GetPerTupleExprContext(estate);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DPSpoolEntry e = {NULL, tid, values, isnull};

	Assert(ix->strategy == DP_INDEX_BUILD);
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];

		if (ix->builds[i] == NULL)
			continue;			/* summarized at the end */
		if (ii->ii_Predicate != NIL)
		{
			if (ii->ii_PredicateState == NULL)
				ii->ii_PredicateState = ExecPrepareQual(ii->ii_Predicate, estate);
			if (!ExecQual(ii->ii_PredicateState, econtext))
				continue;
		}
		FormIndexDatum(ii, slot, estate, values, isnull);
		e.build = ix->builds[i];
		/* only a unique index's sort can raise a duplicate */
		if (idx->rd_index->indisunique)
			as_insert(spool_one, &e, RelationGetRelationName(idx),
					  rri->ri_RelationDesc);
		else
			spool_one(&e);
	}
}

static void
build_one(void *arg)
{
	dp_btree_finish((DPBtreeBuild *) arg);
}

/* An index for core's reindex_index. */
typedef struct DPReindex
{
	Oid			indexoid;
	char		persistence;
} DPReindex;

static void
reindex_one(void *arg)
{
	DPReindex  *r = (DPReindex *) arg;
	ReindexParams params = {0};

	DP_REINDEX_INDEX(r->indexoid, r->persistence, &params);
}

/*
 * Is merging the spooled entries into a rewrite of the index cheaper than
 * inserting them?  Yes from an eighth of the entries the index holds
 * (estimated from its size and the entries' size): a merge reads and
 * writes every page once, an insertion costs a descent and a WAL record.
 * Below DP_MERGE_MIN_ENTRIES insertion is cheap enough either way, and
 * does not lock the index until the commit.
 */
#define DP_MERGE_MIN_ENTRIES 50000

static bool
worth_merging(Relation idx, DPBtreeBuild *spool)
{
	Size		entry = IndexTupleSize(dp_btree_peek(spool)) + sizeof(ItemIdData);
	double		existing = (double) RelationGetNumberOfBlocks(idx) *
		(BLCKSZ * 3 / 4) / entry;

	return dp_btree_count(spool) >= DP_MERGE_MIN_ENTRIES &&
		dp_btree_count(spool) * 8 >= existing;
}

/*
 * A spooled index at the end of the statement: its entries appended at
 * the right edge, merged into a rewrite, or inserted in key order.
 * Returns whether it was rewritten.
 */
static bool
finish_spool(DPIndexes *ix, int i)
{
	DPBtreeBuild *spool = ix->spools[i];
	Relation	idx = ix->rri->ri_IndexRelationDescs[i];
	DPBatchRows none = {0};

	ix->spools[i] = NULL;
	if (dp_btree_peek(spool) == NULL)
		;
	else if (dp_index_append && dp_btree_append(spool, NULL, NULL))
		ix->used |= 1 << DP_INDEX_APPEND;
	else if (!IsolationIsSerializable() && worth_merging(idx, spool) &&
			 ConditionalLockRelationOid(RelationGetRelid(idx),
										AccessExclusiveLock))
	{
		dp_btree_merge(spool);	/* releases it */
		ix->used |= 1 << DP_INDEX_MERGE;
		return true;
	}
	else
		insert_in_key_order(ix, i, spool, &none);
	dp_btree_discard(spool);
	return false;
}

/* The BRIN indexes whose summaries waited for the end (brin.c). */
static void
finish_summaries(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;

	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (ix->summarize[i])
		{
			dp_brin_summarize_new(rri->ri_RelationDesc,
								  rri->ri_IndexRelationDescs[i],
								  ix->first_new);
			ix->used |= 1 << DP_INDEX_SUMMARIZE;
		}
}

/* The strategy's work at the end; returns how many indexes it rewrote. */
static int
finish_strategy(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	int			n = rri->ri_NumIndices;
	Oid		   *oids;

	if (ix->strategy == DP_INDEX_SORTED && ix->spools != NULL)
	{
		int			merged = 0;

		for (int i = 0; i < n; i++)
			if (ix->spools[i] != NULL)
				merged += finish_spool(ix, i);
		return merged;
	}

	if (ix->strategy == DP_INDEX_BUILD)
	{
		int			built = 0;

		dp_fault("before_index_rebuild");
		for (int i = 0; i < n; i++)
			if (ix->builds[i] != NULL)
			{
				as_insert(build_one, ix->builds[i],
						  RelationGetRelationName(rri->ri_IndexRelationDescs[i]),
						  rri->ri_RelationDesc);
				built++;
			}
		dp_fault("after_index_rebuild");
		return built;
	}
	if (ix->strategy != DP_INDEX_REBUILD)
		return 0;
	oids = palloc(sizeof(Oid) * n);
	for (int i = 0; i < n; i++)
		oids[i] = RelationGetRelid(rri->ri_IndexRelationDescs[i]);
	ExecCloseIndices(rri);

	dp_fault("before_index_rebuild");
	for (int i = 0; i < n; i++)
	{
		DPReindex	r = {oids[i], rri->ri_RelationDesc->rd_rel->relpersistence};

		as_insert(reindex_one, &r, get_rel_name(oids[i]), rri->ri_RelationDesc);
	}
	dp_fault("after_index_rebuild");

	ExecOpenIndices(rri, false);
	pfree(oids);
	return n;
}

int
dp_indexes_finish(DPIndexes *ix)
{
	int			rewritten = finish_strategy(ix);

	if (ix->summarize != NULL)
		finish_summaries(ix);
	return rewritten;
}
