/*-------------------------------------------------------------------------
 *
 * indexes.c
 *	  Index maintenance for directly written rows: the choice among the
 *	  strategies, and the entries that lead to each (dp_indexes_begin /
 *	  _batch / _row / _spool / _finish).
 *
 * The strategies, chosen per leaf relation when the statement first
 * writes it (dp_indexes_begin: 1 or 2 for existing storage, 3 or 4 where
 * the storage is new), reported as DPIndexStrategy:
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
 * 2. Per batch, sorted (dp_indexes_batch, sorted.c; the default where it
 *	  applies).  After the flush, each index's entries for the batch's rows
 *	  are sorted by key, then appended at the index's right edge, written
 *	  run by run into its leaves, or inserted in key order.  Some indexes'
 *	  entries wait for the end of the statement instead (sorted.c's
 *	  spools): a non-unique btree's, and, on a table that had no block when
 *	  the load began, a unique one's too, so that a load into an empty
 *	  table builds each btree once, by one append at its end.
 *
 * 3. Built at the end from entries sorted during the load (DP_INDEX_BUILD:
 *	  dp_indexes_spool, dp_indexes_finish; rebuild.c), when the relation's
 *	  storage and its indexes' were created or truncated in this
 *	  transaction and were empty when the load began, every index is an
 *	  immediate btree (no exclusion constraint) and directpath.index_rebuild
 *	  and directpath.index_spool are on.
 *
 * 4. Rebuild at the end (dp_indexes_finish; rebuild.c), when the
 *	  relation's storage was created or truncated in this transaction (so
 *	  its indexes are new and private to us too) and
 *	  directpath.index_rebuild is on.  Not used when an index backs a
 *	  deferrable or exclusion constraint, whose semantics need per-row
 *	  insertion.
 *
 * BRIN indexes take no part in 2 and 3 when their entries may wait (see
 * may_wait): they get no entry per row, and the ranges the load wrote are
 * summarized once at the end (brin.c; directpath.brin_summarize), reported
 * as "summarize".  Other index kinds, and BRIN indexes whose
 * entries may not wait, keep 1 (or 4 for new storage).
 *
 * A load beside other writers (DPIndexes.beside) takes 2 with every entry
 * inserted by index_insert (sorted.c), or 1: other sessions insert into
 * the indexes meanwhile, so nothing is appended, written as runs, merged,
 * built or kept for the end.
 *
 * A leaf whose held rows end up inserted on the normal path (a small
 * statement, load.c) gets its entries row by row (dp_indexes_row_by_row).
 * A leaf of ON CONFLICT DO NOTHING never gets 3 or 4: its probes must find
 * the entries of earlier batches in the index, and the keys kept for them
 * meanwhile would otherwise grow with the whole load (load/conflict.c).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "heap/heap.h"

#include "catalog/partition.h"
#include "catalog/pg_am.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "common/progress.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "storage/bufmgr.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

/*
 * May the entries of this leaf's indexes wait for the end of the statement
 * (sorted.c's spools, brin.c's summaries; DPIndexes.may_wait)?  Only if
 * nothing run during the load can read the leaf through an index before
 * the end.  Row triggers could (the end here is before the statement's
 * AFTER triggers fire, but a user's trigger is not ours to reason about),
 * except foreign key checks (RI_FKey_check_ins, checked per batch or as a
 * set by load/fkeys.c): they read the referenced table only, so they are
 * harmless unless the referenced table is the leaf or one of its
 * ancestors.  Triggers on other
 * events, and statement triggers, fire before the load or after the end.
 * The relation's own trigger descriptor is read: the load may swap the
 * result relation's while it checks foreign keys in batches.
 */
static bool
may_wait(ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;
	TriggerDesc *td = rel->trigdesc;
	List	   *ancestors = NIL;
	bool		ok = true;

	if (td == NULL)
		return true;
	if (rel->rd_rel->relispartition)
		ancestors = get_partition_ancestors(RelationGetRelid(rel));
	for (int i = 0; i < td->numtriggers && ok; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (!TRIGGER_FOR_ROW(t->tgtype) || !TRIGGER_FOR_INSERT(t->tgtype))
			continue;
		ok = t->tgfoid == F_RI_FKEY_CHECK_INS &&
			t->tgconstrrelid != RelationGetRelid(rel) &&
			!list_member_oid(ancestors, t->tgconstrrelid);
	}
	list_free(ancestors);
	return ok;
}

/* Is index 'i' a BRIN index summarized at the end (brin.c)? */
static bool
summarized(DPIndexes *ix, int i)
{
	return ix->may_wait && dp_brin_can_defer(ix->rri, i);
}

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
can_build(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;

	if (!dp_index_spool || !can_rebuild(rri) ||
		RelationGetNumberOfBlocks(rri->ri_RelationDesc) != 0)
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (summarized(ix, i))
			continue;
		if (idx->rd_rel->relam != BTREE_AM_OID ||
			RelationGetNumberOfBlocks(idx) != 1)
			return false;
	}
	return true;
}

/* May this leaf's entries be inserted sorted, per batch? */
static bool
can_sort(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;

	if (!dp_index_sort)
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (summarized(ix, i))
			continue;
		if (idx->rd_rel->relam != BTREE_AM_OID ||
			!idx->rd_index->indimmediate ||
			rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return false;
	}
	return true;
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
		summarize[i] = summarized(ix, i);
		any |= summarize[i];
	}
	/* under the load's lock, nobody else extends the heap */
	if (any)
		ix->first_new = RelationGetNumberOfBlocks(rri->ri_RelationDesc);
	return summarize;
}

/* The entries a row gives: one per index but BRIN summarized at the end. */
static int
entries_per_row(DPIndexes *ix)
{
	int			n = 0;

	for (int i = 0; i < ix->rri->ri_NumIndices; i++)
		n += ix->summarize == NULL || !ix->summarize[i];
	return n;
}

/* DP_INDEX_SORTED: does every index's entry wait in a spool or a summary? */
static bool
every_entry_waits(DPIndexes *ix)
{
	if (ix->spools == NULL)
		return false;
	for (int i = 0; i < ix->rri->ri_NumIndices; i++)
		if (ix->spools[i] == NULL && !ix->summarize[i])
			return false;
	return true;
}

DPIndexes *
dp_indexes_begin(ResultRelInfo *rri, bool reject_duplicates, bool beside,
				 bool per_batch, bool updates)
{
	DPIndexes  *ix = palloc0(sizeof(DPIndexes));

	ix->rri = rri;
	ix->beside = beside;
	per_batch |= beside;
	ix->may_wait = !beside && may_wait(rri);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (rri->ri_IndexRelationDescs[i]->rd_index->indisunique &&
			rri->ri_IndexRelationDescs[i]->rd_index->indimmediate)
			ix->has_unique = true;

	/* duplicates to be rejected can only be found row by row */
	if (rri->ri_NumIndices == 0)
		ix->strategy = DP_INDEX_NONE;
	else if (reject_duplicates && ix->has_unique)
		ix->strategy = DP_INDEX_ROW;
	else if (!per_batch && can_build(ix))
	{
		ix->strategy = DP_INDEX_BUILD;
		ix->summarize = begin_summaries(ix);
		ix->builds = dp_rebuild_begin_builds(ix);
	}
	else if (!per_batch && can_rebuild(rri))
		ix->strategy = DP_INDEX_REBUILD;
	else if (can_sort(ix))
	{
		ix->strategy = DP_INDEX_SORTED;
		ix->sort = palloc(sizeof(bool) * rri->ri_NumIndices);
		memset(ix->sort, true, sizeof(bool) * rri->ri_NumIndices);
		ix->empty = !per_batch &&
			RelationGetNumberOfBlocks(rri->ri_RelationDesc) == 0;
		ix->unique_late = !per_batch && !updates && !ix->empty;
		ix->spools = dp_sorted_begin_spools(ix);
		ix->summarize = begin_summaries(ix);
		ix->spool_rows = every_entry_waits(ix);
	}
	else
		ix->strategy = DP_INDEX_ROW;
	ix->entries = entries_per_row(ix);
	return ix;
}

void
dp_indexes_keys_repeat(DPIndexes *ix)
{
	ix->keys_repeat = true;
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
	dp_progress_count_entries(ix->entries);
	if (conflict != NULL && ix->has_unique)
		return DP_INSERT_INDEX_TUPLES_NODUP(ix->rri, slot, estate, conflict);
	return DP_INSERT_INDEX_TUPLES(ix->rri, slot, estate);
}

void
dp_indexes_batch(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				 HeapTuple *tuples, uint64 *linenos, int ntuples,
				 uint64 *error_line)
{
	Assert(ix->strategy == DP_INDEX_SORTED);
	dp_progress_count_entries((uint64) ntuples * ix->entries);
	dp_sorted_batch(ix, estate, slot, tuples, linenos, ntuples, error_line);
}

void
dp_indexes_row_by_row(DPIndexes *ix)
{
	if (ix->spools != NULL)
		dp_sorted_insert_spools(ix);
	if (ix->strategy == DP_INDEX_BUILD)
		dp_rebuild_discard_builds(ix);
	/* the row-by-row path maintains BRIN indexes itself */
	ix->summarize = NULL;
	ix->spool_rows = false;
	ix->entries = entries_per_row(ix);
	if (ix->strategy != DP_INDEX_NONE)
		ix->strategy = DP_INDEX_ROW;
}

bool
dp_indexes_at_place(DPIndexes *ix)
{
	return ix->strategy == DP_INDEX_BUILD ||
		(ix->strategy == DP_INDEX_SORTED && ix->spool_rows);
}

void
dp_indexes_spool(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				 ItemPointer tid)
{
	Assert(dp_indexes_at_place(ix));
	dp_progress_count_entries(ix->entries);
	if (ix->strategy == DP_INDEX_BUILD)
		dp_rebuild_spool(ix, estate, slot, tid);
	else
		dp_sorted_spool_row(ix, estate, slot, tid);
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
	if (ix->strategy == DP_INDEX_SORTED && ix->spools != NULL)
		return dp_sorted_finish_spools(ix);
	if (ix->strategy == DP_INDEX_BUILD)
		return dp_rebuild_finish_builds(ix);
	if (ix->strategy != DP_INDEX_REBUILD)
		return 0;
	return dp_rebuild_reindex(ix);
}

int
dp_indexes_finish(DPIndexes *ix)
{
	int			rewritten = finish_strategy(ix);

	if (ix->summarize != NULL)
		finish_summaries(ix);
	return rewritten;
}
