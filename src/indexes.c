/*-------------------------------------------------------------------------
 *
 * indexes.c
 *	  Index maintenance for directly written rows.
 *
 * Three strategies, chosen per leaf relation when the statement first
 * writes it (1 or 2 for existing storage, 3 where the storage is new):
 *
 * 1. Per batch, row by row.  load.c inserts each row's index entries with
 *	  ExecInsertIndexTuples after the flush that wrote the row's page, so an
 *	  index never points at a page that is not on disk yet; unique,
 *	  exclusion and deferrable constraints behave exactly as for a plain
 *	  INSERT.  Cost is proportional to the rows loaded.  Used where 2 is
 *	  not: an index that is not a btree, a deferrable unique or exclusion
 *	  constraint, COPY's rejects with a unique index (duplicates are found
 *	  row by row), or directpath.index_sort off.
 *
 * 2. Per batch, sorted (the default where it applies).
 *	  After the flush, each index's entries for the batch's rows are formed
 *	  (partial-index predicates and expressions evaluated as ExecInsert
 *	  does), sorted by key with the same tuplesort an index build uses, and
 *	  inserted in key order with index_insert: consecutive keys land on the
 *	  same leaf page one after another, instead of every row visiting a
 *	  random leaf of every index.  Uniqueness is checked by the insertion
 *	  itself, against the table and the rows before in key order, with a
 *	  plain INSERT's message; when a batch holds several duplicates, the
 *	  one reported can differ from the first in input order.  For COPY the
 *	  error context names the line of the row whose entry failed.
 *	  Sorting pays only where the input scatters the keys: an index whose
 *	  keys arrive (nearly) in order, such as a sequence-fed key, or in a few
 *	  interleaved ascending streams, already touches few leaf pages, and
 *	  sorting it costs 10-20%.  So each index is judged on the batches it
 *	  sees: when, in key order, the rows' TIDs go backwards for fewer than
 *	  one entry in ten, later batches of the statement insert that index's
 *	  entries in input order.
 *
 * 3. Rebuild at the end, when the relation's storage was created or
 *	  truncated in this transaction (so its indexes are new and private to
 *	  us too) and directpath.index_rebuild is on.  No entry is inserted
 *	  during the load; after the last flush every index is rebuilt once by
 *	  core's reindex_index (sorted, bottom-up build), which also checks
 *	  uniqueness.  Not used when an index backs a deferrable or exclusion
 *	  constraint, whose semantics need per-row insertion.  A duplicate found
 *	  by the build is reported with the plain path's message and SQLSTATE.
 *
 * reindex_index refuses an index that the session has open, so the
 * executor's index relations are closed around the rebuild and reopened
 * for ExecEndModifyTable to close as usual.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/genam.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/tuplesort.h"
#include "utils/elog.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* May this leaf's indexes be rebuilt at the end instead of maintained? */
bool
dp_can_defer_indexes(ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;

	if (!dp_index_rebuild || rri->ri_NumIndices == 0 ||
		!dp_storage_new_in_xact(rel))
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

/* Rebuild every index of the leaf; returns how many. */
int
dp_rebuild_indexes(ResultRelInfo *rri)
{
	Relation	heap = rri->ri_RelationDesc;
	int			n = rri->ri_NumIndices;
	Oid		   *oids = palloc(sizeof(Oid) * n);
	ReindexParams params = {0};

	for (int i = 0; i < n; i++)
		oids[i] = RelationGetRelid(rri->ri_IndexRelationDescs[i]);
	ExecCloseIndices(rri);

	for (int i = 0; i < n; i++)
	{
		MemoryContext cxt = CurrentMemoryContext;

		PG_TRY();
		{
			DP_REINDEX_INDEX(oids[i], heap->rd_rel->relpersistence, &params);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
				PG_RE_THROW();
			FlushErrorState();
			rethrow_as_insert_error(edata, get_rel_name(oids[i]), heap);
		}
		PG_END_TRY();
	}

	ExecOpenIndices(rri, false);
	pfree(oids);
	return n;
}

/* May this leaf's entries be inserted sorted, per batch (strategy 2)? */
bool
dp_can_sort_indexes(ResultRelInfo *rri)
{
	if (!dp_index_sort || rri->ri_NumIndices == 0)
		return false;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (idx->rd_rel->relam != BTREE_AM_OID ||
			!idx->rd_index->indimmediate ||
			rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return false;
	}
	return true;
}

/*
 * Insert the index entries of 'ntuples' written rows (t_self set, in
 * ascending TID order) into every index of the leaf, each index in key
 * order.  'slot' is a heap-tuple slot of the leaf's row type.
 */
void
dp_insert_indexes_sorted(ResultRelInfo *rri, EState *estate,
						 TupleTableSlot *slot, HeapTuple *tuples, int ntuples,
						 bool *sort, DPIndexEntryHook hook, void *arg)
{
	Relation	heap = rri->ri_RelationDesc;
	ExprContext *econtext = GetPerTupleExprContext(estate);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath index entries",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = CurrentMemoryContext;

	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		IndexUniqueCheck check = idx->rd_index->indisunique ?
			UNIQUE_CHECK_YES : UNIQUE_CHECK_NO;
		ExprState  *predicate = NULL;
		Tuplesortstate *sorter;
		IndexTuple	itup;
		ItemPointerData prev;
		int			nentries = 0;
		int			backwards = 0;

		if (ii->ii_Predicate != NIL)
		{
			if (ii->ii_PredicateState == NULL)
				ii->ii_PredicateState = ExecPrepareQual(ii->ii_Predicate, estate);
			predicate = ii->ii_PredicateState;
		}

		sorter = !sort[i] ? NULL :
			tuplesort_begin_index_btree(heap, idx, false, false,
										maintenance_work_mem, NULL,
										TUPLESORT_NONE);
		for (int r = 0; r < ntuples; r++)
		{
			ResetExprContext(econtext);
			ExecStoreHeapTuple(tuples[r], slot, false);
			econtext->ecxt_scantuple = slot;
			if (predicate != NULL && !ExecQual(predicate, econtext))
				continue;
			FormIndexDatum(ii, slot, estate, values, isnull);
			if (sorter != NULL)
				tuplesort_putindextuplevalues(sorter, idx, &tuples[r]->t_self,
											  values, isnull);
			else
			{
				/* keys arrive in order: insert in input order */
				if (hook)
					hook(arg, &tuples[r]->t_self);
				index_insert(idx, values, isnull, &tuples[r]->t_self, heap,
							 check, false, ii);
			}
		}
		ExecClearTuple(slot);
		ResetExprContext(econtext);
		if (sorter == NULL)
			continue;

		tuplesort_performsort(sorter);
		MemoryContextSwitchTo(cxt);
		while ((itup = tuplesort_getindextuple(sorter, true)) != NULL)
		{
			CHECK_FOR_INTERRUPTS();
			if (nentries++ > 0 && ItemPointerCompare(&itup->t_tid, &prev) < 0)
				backwards++;
			prev = itup->t_tid;
			index_deform_tuple(itup, RelationGetDescr(idx), values, isnull);
			if (hook)
				hook(arg, &itup->t_tid);
			index_insert(idx, values, isnull, &itup->t_tid, heap, check,
						 false, ii);
			MemoryContextReset(cxt);
		}
		MemoryContextSwitchTo(old);
		tuplesort_end(sorter);

		/* input order was (nearly) key order: stop sorting this index */
		if (nentries >= 1000 && backwards * 10 < nentries)
			sort[i] = false;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}
