/*-------------------------------------------------------------------------
 *
 * rebuild.c
 *	  DP_INDEX_BUILD and DP_INDEX_REBUILD: a leaf's indexes, new in this
 *	  transaction, built or rebuilt once at the end of the load instead of
 *	  maintained during it.
 *
 * Build (DP_INDEX_BUILD).  Each placed row's entry goes into a tuplesort
 * per index (partial-index predicates and expressions evaluated as
 * ExecInsert does; maintenance_work_mem shared among the indexes); at the
 * end each sorted stream becomes the index's pages through our btree page
 * builder (btree.c).  The heap is not read again, so its pages stay out of
 * shared buffers.  Uniqueness is checked by the sort, as CREATE INDEX
 * checks it, and reported with the plain path's message and SQLSTATE.
 *
 * Rebuild (DP_INDEX_REBUILD).  No entry is inserted during the load; after
 * the last flush every index is rebuilt once by core's reindex_index
 * (sorted, bottom-up build), which also checks uniqueness.  A duplicate
 * found by the build is reported with the plain path's message and
 * SQLSTATE.
 *
 * reindex_index refuses an index that the session has open, so the
 * executor's index relations are closed around the rebuild and reopened
 * for ExecEndModifyTable to close as usual.
 *
 * Invariants: the indexes' storage is new in this transaction, so nobody
 * else can see them before the commit; a unique violation raised by a
 * sort or a build is reported as a plain INSERT reports it (dp_as_insert).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "catalog/index.h"
#include "common/fault.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/elog.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* One sorted build per btree, sharing maintenance_work_mem. */
DPBtreeBuild **
dp_rebuild_begin_builds(DPIndexes *ix)
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
void
dp_as_insert(void (*fn) (void *arg), void *arg, const char *index_name,
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

/* dp_indexes_spool: a placed row's entry into each index's sort. */
void
dp_rebuild_spool(DPIndexes *ix, EState *estate, TupleTableSlot *slot,
				 ItemPointer tid)
{
	ResultRelInfo *rri = ix->rri;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DPSpoolEntry e = {NULL, tid, values, isnull};

	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (ix->builds[i] == NULL ||	/* summarized at the end */
			!dp_index_entry_values(rri, i, estate, slot, values, isnull))
			continue;
		e.build = ix->builds[i];
		/* only a unique index's sort can raise a duplicate */
		if (idx->rd_index->indisunique)
			dp_as_insert(spool_one, &e, RelationGetRelationName(idx),
						 rri->ri_RelationDesc);
		else
			spool_one(&e);
	}
}


/* The rows go row by row after all: the sorted builds are dropped. */
void
dp_rebuild_discard_builds(DPIndexes *ix)
{
	for (int i = 0; i < ix->rri->ri_NumIndices; i++)
		if (ix->builds[i] != NULL)
			dp_btree_discard(ix->builds[i]);
	ix->builds = NULL;
}

static void
build_one(void *arg)
{
	dp_btree_finish((DPBtreeBuild *) arg);
}

/* Every index built from its sorted entries; returns how many. */
int
dp_rebuild_finish_builds(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	int			n = rri->ri_NumIndices;
	int			built = 0;

	dp_fault("before_index_rebuild");
	for (int i = 0; i < n; i++)
		if (ix->builds[i] != NULL)
		{
			dp_as_insert(build_one, ix->builds[i],
						 RelationGetRelationName(rri->ri_IndexRelationDescs[i]),
						 rri->ri_RelationDesc);
			built++;
		}
	dp_fault("after_index_rebuild");
	return built;
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

/* Every index rebuilt by core's reindex_index; returns how many. */
int
dp_rebuild_reindex(DPIndexes *ix)
{
	ResultRelInfo *rri = ix->rri;
	int			n = rri->ri_NumIndices;
	Oid		   *oids;

	oids = palloc(sizeof(Oid) * n);
	for (int i = 0; i < n; i++)
		oids[i] = RelationGetRelid(rri->ri_IndexRelationDescs[i]);
	ExecCloseIndices(rri);

	dp_fault("before_index_rebuild");
	for (int i = 0; i < n; i++)
	{
		DPReindex	r = {oids[i], rri->ri_RelationDesc->rd_rel->relpersistence};

		dp_as_insert(reindex_one, &r, get_rel_name(oids[i]), rri->ri_RelationDesc);
	}
	dp_fault("after_index_rebuild");

	ExecOpenIndices(rri, false);
	pfree(oids);
	return n;
}
