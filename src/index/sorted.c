/*-------------------------------------------------------------------------
 *
 * sorted.c
 *	  DP_INDEX_SORTED: each batch's entries of each index sorted by key,
 *	  then appended at the index's right edge, written run by run into its
 *	  leaves, or inserted in key order; and the entries of the indexes that
 *	  may wait, kept for the end of the statement.
 *
 * Per batch (dp_indexes_batch; the default where it applies).  After the
 * flush, each index's entries for the batch's rows are formed (partial-index
 * predicates and expressions evaluated as ExecInsert does) and sorted by key
 * with the same tuplesort an index build uses.  When the first sorts after
 * every entry of the index (keys from a sequence, an identity, a time of
 * arrival), the entries become new leaf pages at the index's right edge
 * (btappend.c, reported as "append"; directpath.index_append).  Otherwise
 * runs of at least 256 entries that fall between two neighbouring keys of
 * the index become new leaf pages there (btappend.c, "runs";
 * directpath.index_runs), and the other entries are inserted in key order
 * with index_insert: consecutive keys land on the same leaf page one after
 * another, instead of every row visiting a random leaf of every index.
 * Uniqueness is checked by the insertion itself, against the table and the
 * rows before in key order, with a plain INSERT's message; when a batch
 * holds several duplicates, the one reported can differ from the first in
 * input order.  The append checks each entry against the one before, and the
 * first against the index's last (by key: an equal key is inserted instead),
 * with the same message.  For COPY the error context names the line of the
 * row whose entry failed.
 *
 * Sorting pays only where the input scatters the keys: an index whose keys
 * arrive (nearly) in order, such as a sequence-fed key, or in a few
 * interleaved ascending streams, already touches few leaf pages, and sorting
 * it costs 10-20% when the entries are then inserted one by one.  So an
 * index whose batch could not be appended is judged on it: when, in key
 * order, the rows' TIDs go backwards for fewer than one entry in ten, later
 * batches of the statement insert that index's entries in input order.
 *
 * A non-unique, non-temporary btree whose entries may wait (no trigger
 * could read the leaf through it before the end: DPIndexes.may_wait;
 * directpath.index_merge), and a unique one of a table that had no block
 * when the load began (directpath.index_spool; no ON CONFLICT), may wait
 * instead: its entries go into a sort of its own (a spool) kept for the
 * end of the statement, and are then appended at the right edge (for a
 * table that started empty, a build: the append checks a unique index's
 * entries against each other, with INSERT's error but no input line), or,
 * when they are many against the entries the index holds, merged into a
 * rewrite of the index (btmerge.c), or inserted in key order.  A unique
 * btree of a leaf that had rows when the load began starts waiting only
 * once the load's rows are many against it (can_spool_late); its spool's
 * sort raises the duplicates among its entries, and the merge those with
 * the index's live rows, as INSERT's error without an input line.  If the
 * leaf's rows go row by row after all (dp_indexes_row_by_row), the spools
 * are inserted at once.  When every index of the leaf waits so
 * (DPIndexes.spool_rows), each row's entries go into the spools as the row
 * is placed, from its own values (dp_sorted_spool_row), and the row needs
 * no batch work at all for its indexes.
 *
 * A load beside other writers (DPIndexes.beside) neither appends nor
 * writes runs nor waits: its entries are inserted, sorted or in input
 * order, by index_insert, which other sessions' insertions and unique
 * checks meet as they meet a plain INSERT's.
 *
 * Invariants: entries are formed after the flush that wrote their rows'
 * pages, so an index never points at a page that is not on disk yet; for
 * COPY, each entry inserted names its row's input line first (name_line),
 * so the error context of a failed insertion names that line.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* A batch's rows, for naming the input line of the entry being inserted. */
typedef struct DPBatchRows
{
	HeapTuple  *tuples;			/* in ascending TID order */
	uint64	   *linenos;		/* their input lines, or NULL */
	int			ntuples;
	uint64	   *error_line;		/* the load's error line (COPY), or NULL */
} DPBatchRows;

/* Entries below which a spool is inserted, not merged (worth_merging). */
#define DP_MERGE_MIN_ENTRIES 50000

/* Rows of a load before a unique btree may start waiting (can_spool_late). */
#define DP_LATE_MIN_ROWS (DP_MERGE_MIN_ENTRIES / 4)

static bool can_spool_late(DPIndexes *ix, int i);
static void begin_late_spool(DPIndexes *ix, int i);

/*
 * About to insert the entry of 'tid': the load's error line names the
 * row's input line (the load's error context reports it).
 */
static void
name_line(DPBatchRows *b, ItemPointer tid)
{
	int			lo = 0,
				hi = b->ntuples - 1;

	if (b->error_line == NULL || b->linenos == NULL)
		return;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			cmp = ItemPointerCompare(&b->tuples[mid]->t_self, tid);

		if (cmp == 0)
		{
			*b->error_line = b->linenos[mid];
			return;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
}

/*
 * How core's insertion checks index i's entries: a unique index's for
 * uniqueness, unless they repeat their old versions' keys
 * (dp_indexes_keys_repeat) and the index is valid and immediate.  An
 * invalid one (a failed CREATE UNIQUE INDEX CONCURRENTLY) may hold
 * duplicates, which core's check of an unchanged key reports.
 */
static IndexUniqueCheck
unique_check(DPIndexes *ix, int i)
{
	Form_pg_index ind = ix->rri->ri_IndexRelationDescs[i]->rd_index;

	if (!ind->indisunique ||
		(ix->keys_repeat && ind->indisvalid && ind->indimmediate))
		return UNIQUE_CHECK_NO;
	return UNIQUE_CHECK_YES;
}

/*
 * One index's entries for the batch: formed (partial-index predicate and
 * expressions evaluated as ExecInsert does) and inserted in input order,
 * or put into 'sorted' when there is one.
 */
static void
form_entries(DPIndexes *ix, int i, EState *estate, TupleTableSlot *slot,
			 DPBatchRows *b, DPBtreeBuild *sorted)
{
	ResultRelInfo *rri = ix->rri;
	Relation	heap = rri->ri_RelationDesc;
	Relation	idx = rri->ri_IndexRelationDescs[i];
	IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
	ExprContext *econtext = GetPerTupleExprContext(estate);
	IndexUniqueCheck check = unique_check(ix, i);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	for (int r = 0; r < b->ntuples; r++)
	{
		ItemPointer tid = &b->tuples[r]->t_self;

		ResetExprContext(econtext);
		ExecStoreHeapTuple(b->tuples[r], slot, false);
		if (!dp_index_entry_values(rri, i, estate, slot, values, isnull))
			continue;
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
	IndexUniqueCheck check;		/* unique_check's */
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
				 o->check, false, o->rri->ri_IndexRelationInfo[o->i]);
	o->inserted++;
}

/*
 * Insert one index's sorted entries in key order.  Returns whether the
 * index should still be sorted: not when, in key order, the TIDs went
 * backwards for fewer than one entry in ten (its keys arrive in order).
 */
static bool
insert_sorted(DPIndexes *ix, int i, DPBtreeBuild *sorted, DPBatchRows *b)
{
	DPInsertOne one = {ix->rri, i, b, unique_check(ix, i), 0};
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
	DPInsertOne one = {ix->rri, i, b, unique_check(ix, i), 0};
	int			runs;
	int			merges;

	if (!dp_index_runs || ix->beside)
	{
		ix->used |= 1 << DP_INDEX_SORTED;
		return insert_sorted(ix, i, sorted, b);
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
	if (dp_index_append && !ix->beside &&
		dp_btree_append(sorted, name_line_cb, b))
	{
		ix->used |= 1 << DP_INDEX_APPEND;
		return;
	}
	ix->sort[i] = insert_in_key_order(ix, i, sorted, b);
}

/* dp_indexes_batch: each index's entries for the batch, as it can. */
void
dp_sorted_batch(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				HeapTuple *tuples, uint64 *linenos, int ntuples,
				uint64 *error_line)
{
	ResultRelInfo *rri = ix->rri;
	DPBatchRows b = {tuples, linenos, ntuples, error_line};

	ix->rows += ntuples;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		DPBtreeBuild *sorted = NULL;

		if (ix->summarize[i])
			continue;
		if ((ix->spools == NULL || ix->spools[i] == NULL) &&
			can_spool_late(ix, i))
			begin_late_spool(ix, i);
		if (ix->spools != NULL && ix->spools[i] != NULL)
		{
			form_entries(ix, i, estate, slot, &b, ix->spools[i]);
			continue;
		}
		if (ix->sort[i])
		{
			sorted = dp_btree_begin(rri->ri_RelationDesc,
									rri->ri_IndexRelationDescs[i],
									maintenance_work_mem, false);
			if (unique_check(ix, i) == UNIQUE_CHECK_NO)
				dp_btree_skip_unique(sorted);
		}
		else
			ix->used |= 1 << DP_INDEX_SORTED;
		form_entries(ix, i, estate, slot, &b, sorted);
		if (sorted == NULL)
			continue;
		add_sorted(ix, i, sorted, &b);
		dp_btree_discard(sorted);
	}
}

/*
 * Is 'idx' a btree, not temporary, of a leaf whose entries may wait
 * (DPIndexes.may_wait)?  What can_spool and can_spool_late both require.
 */
static bool
btree_may_wait(DPIndexes *ix, Relation idx)
{
	return ix->may_wait && idx->rd_rel->relam == BTREE_AM_OID &&
		idx->rd_rel->relpersistence != RELPERSISTENCE_TEMP;
}

/*
 * May this index's entries wait for the end of the statement (and then be
 * appended, merged or inserted at once)?  A btree of a leaf whose triggers
 * could not look the rows up through the index before the end, as they
 * could after their batch (DPIndexes.may_wait): a non-unique one
 * (directpath.index_merge), or a unique one of a table that had no block
 * when the load began (directpath.index_spool): its duplicates can only be
 * among the load's own rows, and the append at the end finds them, but
 * names no input line.
 */
static bool
can_spool(DPIndexes *ix, int i)
{
	Relation	idx = ix->rri->ri_IndexRelationDescs[i];

	if (!btree_may_wait(ix, idx))
		return false;
	if (!idx->rd_index->indisunique)
		return dp_index_merge;
	/* the table's own keys: none, and no other writer until we commit */
	return dp_index_spool && ix->empty && idx->rd_index->indimmediate;
}

/*
 * Entries a leaf page of any btree holds at most, to estimate from its
 * size how many an index has when pg_class does not say: the smallest
 * leaf item (an 8-byte header and one aligned 4-byte key) and its line
 * pointer in three quarters of a page.
 */
#define DP_MOST_PER_LEAF (BLCKSZ * 3 / 4 / 20)

/*
 * May unique btree 'i' of a leaf that had rows when the load began start
 * waiting now (DPIndexes.unique_late)?  Once the load's rows reach
 * DP_LATE_MIN_ROWS and a sixteenth of what the index holds, its later
 * entries may well be many enough against it to be merged into a rewrite
 * at the end, which checks them as they meet the old entries (btmerge.c).
 * Until then they are inserted per batch, so a small load's duplicate
 * names its input line as the plain statement's does.
 */
static bool
can_spool_late(DPIndexes *ix, int i)
{
	Relation	idx = ix->rri->ri_IndexRelationDescs[i];
	double		density = DP_MOST_PER_LEAF;

	if (!ix->unique_late || !dp_index_merge || !dp_index_spool ||
		ix->rows < DP_LATE_MIN_ROWS || !btree_may_wait(ix, idx) ||
		!idx->rd_index->indisunique || !idx->rd_index->indimmediate ||
		IsolationIsSerializable())
		return false;
	/* its entries per page as pg_class last counted them, as the planner */
	if (idx->rd_rel->reltuples > 0 && idx->rd_rel->relpages > 0)
		density = idx->rd_rel->reltuples / idx->rd_rel->relpages;
	return ix->rows * 16 >=
		(double) RelationGetNumberOfBlocks(idx) * density;
}

/* Unique btree 'i' waits from this batch on: its spool, checking duplicates. */
static void
begin_late_spool(DPIndexes *ix, int i)
{
	ResultRelInfo *rri = ix->rri;
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(ix));
	int			n = 1;

	if (ix->spools == NULL)
		ix->spools = palloc0(sizeof(DPBtreeBuild *) * rri->ri_NumIndices);
	for (int j = 0; j < rri->ri_NumIndices; j++)
		n += ix->spools[j] != NULL;
	ix->spools[i] = dp_btree_begin(rri->ri_RelationDesc,
								   rri->ri_IndexRelationDescs[i],
								   Max(maintenance_work_mem / n, 1024), true);
	MemoryContextSwitchTo(old);
}

/* The spools of the indexes that may wait, sharing maintenance_work_mem. */
DPBtreeBuild **
dp_sorted_begin_spools(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	int			n = 0;
	DPBtreeBuild **spools;

	for (int i = 0; i < rri->ri_NumIndices; i++)
		n += can_spool(ix, i);
	if (n == 0)
		return NULL;
	spools = palloc0(sizeof(DPBtreeBuild *) * rri->ri_NumIndices);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (can_spool(ix, i))
			spools[i] = dp_btree_begin(rri->ri_RelationDesc,
									   rri->ri_IndexRelationDescs[i],
									   Max(maintenance_work_mem / n, 1024),
									   false);
	return spools;
}

/*
 * dp_indexes_spool for DP_INDEX_SORTED whose every entry waits: a placed
 * row's entry into each index's spool, formed from the row's own values
 * (partial-index predicates and expressions evaluated as form_entries
 * does), so the row is not kept for its batch nor deformed again.
 */
void
dp_sorted_spool_row(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
					ItemPointer tid)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	for (int i = 0; i < ix->rri->ri_NumIndices; i++)
		if (ix->spools[i] != NULL &&	/* else summarized at the end */
			dp_index_entry_values(ix->rri, i, estate, slot, values, isnull))
			dp_btree_add(ix->spools[i], tid, values, isnull);
}

/*
 * Is merging the spooled entries into a rewrite of the index cheaper than
 * inserting them?  Yes from an eighth of the entries the index holds
 * (estimated from its size and the entries' size): a merge reads and
 * writes every page once, an insertion costs a descent and a WAL record.
 * Below DP_MERGE_MIN_ENTRIES insertion is cheap enough either way, and
 * does not lock the index until the commit.
 */
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
 * the right edge, merged into a rewrite, or inserted in key order.  Not
 * merged in parallel mode (a parallel load's foreign key sets found
 * beside the index work, load/fkahead.c): the rewrite's new storage is a
 * catalog update, which parallel mode forbids.  Returns whether it was
 * rewritten.
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
	else if (!IsolationIsSerializable() && !IsInParallelMode() &&
			 worth_merging(idx, spool) &&
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

/* One spool, finished at the end or inserted now (spool_as_insert). */
typedef struct DPSpoolDone
{
	DPIndexes  *ix;
	int			i;				/* the index */
	bool		rewritten;		/* merged into a rewrite */
} DPSpoolDone;

static void
spool_finish(void *arg)
{
	DPSpoolDone *d = (DPSpoolDone *) arg;

	d->rewritten = finish_spool(d->ix, d->i);
}

static void
spool_insert(void *arg)
{
	DPSpoolDone *d = (DPSpoolDone *) arg;
	DPBatchRows none = {0};

	insert_sorted(d->ix, d->i, d->ix->spools[d->i], &none);
	dp_btree_discard(d->ix->spools[d->i]);
}

/*
 * fn (spool_finish or spool_insert) for index 'i'.  A unique index's
 * spool begun late checks its duplicates in its sort, whose error is then
 * reported as INSERT's.  Returns whether the index was rewritten.
 */
static bool
spool_as_insert(DPIndexes *ix, int i, void (*fn) (void *arg))
{
	DPSpoolDone d = {ix, i, false};
	Relation	idx = ix->rri->ri_IndexRelationDescs[i];

	if (idx->rd_index->indisunique)
		dp_as_insert(fn, &d, RelationGetRelationName(idx),
					 ix->rri->ri_RelationDesc);
	else
		fn(&d);
	return d.rewritten;
}

/* The spools' entries inserted in key order now (rows go row by row). */
void
dp_sorted_insert_spools(DPIndexes *ix)
{
	for (int i = 0; i < ix->rri->ri_NumIndices; i++)
		if (ix->spools[i] != NULL)
			spool_as_insert(ix, i, spool_insert);
	ix->spools = NULL;
}

/* Every spooled index at the end; returns how many were rewritten. */
int
dp_sorted_finish_spools(DPIndexes *ix)
{
	int			n = ix->rri->ri_NumIndices;
	int			merged = 0;

	for (int i = 0; i < n; i++)
		if (ix->spools[i] != NULL)
			merged += spool_as_insert(ix, i, spool_finish);
	return merged;
}
