/*-------------------------------------------------------------------------
 *
 * indexes.c
 *	  Index maintenance for directly written rows.
 *
 * Two strategies, chosen per leaf relation when the statement first writes
 * it:
 *
 * 1. Per batch (the default).  exec.c inserts each row's index entries with
 *	  ExecInsertIndexTuples after the flush that wrote the row's page, so an
 *	  index never points at a page that is not on disk yet; unique,
 *	  exclusion and deferrable constraints behave exactly as for a plain
 *	  INSERT.  Cost is proportional to the rows loaded.
 *
 * 2. Rebuild at the end, when the relation's storage was created or
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

#include "catalog/index.h"
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
