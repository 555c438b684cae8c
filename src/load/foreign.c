/*-------------------------------------------------------------------------
 *
 * foreign.c
 *	  Rows that a direct-path load routes to a foreign partition.
 *
 * A partitioned target may have partitions that are foreign tables (say,
 * postgres_fdw tables on other servers).  Their rows cannot go to a page
 * writer; they go to the foreign-data wrapper, as ExecInsert would send
 * them, while the statement's local partitions keep the direct path.
 *
 * A postgres_fdw partition's rows are streamed to its server as one COPY
 * (remote/shard.c) unless the statement needs what only the wrapper's INSERT
 * gives (stream_refusal): each row back (RETURNING, AFTER ROW triggers,
 * view checks), ON CONFLICT, or the server's connection free for reading
 * a foreign table of the same server in the same statement.  Each
 * foreign partition's path, and why not COPY, goes to the report.
 *
 * Otherwise tuple routing (ExecInitPartitionInfo) has already begun the
 * wrapper's insert (BeginForeignInsert) and asked it for its batch size
 * (GetForeignModifyBatchSize: postgres_fdw's batch_size option, 1 when
 * RETURNING, row triggers or view checks need each row back at once).  With
 * a batch size of 1 each row goes to ExecForeignInsert at once; otherwise
 * rows are copied into slots of our own and sent with ExecForeignBatchInsert
 * when batch-size rows wait, and at the end of the load, as core's
 * ExecBatchInsert does.  Each row the wrapper reports inserted gets, when
 * its leaf needs it, ExecInsert's work after the insert at once (AFTER ROW
 * triggers, view checks, RETURNING: queue.c's dp_queue_post_row), as in
 * core; rows it reports not inserted are returned as a count, so that the
 * load keeps the command tag the wrapper's.  A row that needs that work
 * and is sent at once (no batching) must not overtake the rows before it:
 * dp_foreign_needs_order() tells the load to write and process those
 * first.  Routing's cleanup (ExecCleanupTupleRouting) ends the wrapper's
 * insert.
 *
 * Invariants: rows reach the wrapper, or the stream, in input order; no
 * row is left in a batch or a stream after dp_foreign_flush_all().
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "remote/remote.h"

#include "common/report.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

struct DPForeign
{
	ResultRelInfo *rri;
	MemoryContext cxt;			/* the query's: slots live as long */
	int			batch_size;
	TupleTableSlot **slots;		/* rows waiting for the batch */
	int			nslots;
	int			ninit;			/* slots made so far */
	DPShard    *shard;			/* the COPY stream instead, or NULL */
	struct pg_conn *conn;		/* a batched postgres_fdw partition's
								 * connection, which streams may hold */
};

/*
 * Does the statement read a foreign table of 'serverid'?  (The target's own
 * entry, 'target', is not a read.)
 */
static const char *
reads_server(EState *estate, Oid serverid, Index target)
{
	ListCell   *lc;
	Index		rti = 0;

	foreach(lc, estate->es_range_table)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (++rti != target && rte->rtekind == RTE_RELATION &&
			rte->relkind == RELKIND_FOREIGN_TABLE &&
			GetForeignTable(rte->relid)->serverid == serverid)
			return get_rel_name(rte->relid);
	}
	return NULL;
}

/* Why the leaf's rows cannot be streamed as a COPY, or NULL. */
static const char *
stream_refusal(DPLeaf *leaf, DPLeafSet *set)
{
	Relation	rel = leaf->rri->ri_RelationDesc;
	const char *read;

	if (!dp_foreign_copy)
		return "directpath.foreign_copy is off";
	if (leaf->needs_post)
		return "RETURNING, an AFTER ROW trigger or a view check needs each row back";
	if (set->on_conflict)
		return "ON CONFLICT is the wrapper's to send";
	read = reads_server(set->estate, GetForeignTable(RelationGetRelid(rel))->serverid,
						set->mtstate->rootResultRelInfo->ri_RangeTableIndex);
	if (read)
		return dp_report_reason("the statement reads \"%s\" through the same server",
								read);
	return NULL;
}

DPForeign *
dp_foreign_begin(DPLeaf *leaf, DPLeafSet *set)
{
	ResultRelInfo *rri = leaf->rri;
	EState	   *estate = set->estate;
	DPForeign  *f = MemoryContextAllocZero(estate->es_query_cxt, sizeof(DPForeign));
	const char *why = stream_refusal(leaf, set);
	StringInfo	paths = &set->foreign_paths;

	if (why == NULL)
		f->shard = dp_shard_open(rri, estate, &why);
	appendStringInfo(paths, "%s%s", paths->len > 0 ? "; " : "",
					 RelationGetRelationName(rri->ri_RelationDesc));
	if (f->shard)
	{
		set->streams++;
		appendStringInfo(paths, ": COPY %s",
						 dp_shard_binary(f->shard) ? "binary" : "text");
		return f;
	}
	appendStringInfo(paths, ": batched (%s)", why);

	f->rri = rri;
	/* NULL for another wrapper ('why' is said already) */
	f->conn = dp_fdwconn_of(rri, &why);
	f->cxt = estate->es_query_cxt;
	f->batch_size = Max(rri->ri_BatchSize, 1);
	if (rri->ri_FdwRoutine->ExecForeignBatchInsert == NULL)
		f->batch_size = 1;
	if (f->batch_size > 1)
		f->slots = MemoryContextAllocZero(f->cxt, sizeof(TupleTableSlot *) * f->batch_size);
	return f;
}

/* The wrapper inserted the row: ExecInsert's work after the insert. */
static void
inserted(DPLeaf *leaf, DPQueue *q, TupleTableSlot *slot)
{
	slot->tts_tableOid = RelationGetRelid(leaf->rri->ri_RelationDesc);
	if (leaf->needs_post)
		dp_queue_post_row(q, leaf, slot);
}

/* Send the waiting rows; returns how many the wrapper did not insert. */
static uint64
send_batch(DPLeaf *leaf, EState *estate, DPQueue *q)
{
	DPForeign  *f = leaf->foreign;
	ResultRelInfo *rri = f->rri;
	int			n = f->nslots;
	int			ninserted = n;
	TupleTableSlot **rslots;

	if (n == 0)
		return 0;
	if (f->conn)
		dp_shard_free_connection(f->conn);
	rslots = rri->ri_FdwRoutine->ExecForeignBatchInsert(estate, rri, f->slots,
														 f->slots, &ninserted);
	for (int i = 0; i < ninserted; i++)
		inserted(leaf, q, rslots[i]);
	for (int i = 0; i < n; i++)
		ExecClearTuple(f->slots[i]);
	f->nslots = 0;
	return n - ninserted;
}

/*
 * One row for the foreign partition: inserted now, or added to the batch
 * (sending the batch first when it is full).  Returns how many rows the
 * wrapper did not insert.
 */
uint64
dp_foreign_insert(DPLeaf *leaf, EState *estate, TupleTableSlot *slot,
				  DPQueue *q, uint64 lineno)
{
	DPForeign  *f = leaf->foreign;
	ResultRelInfo *rri = f->rri;
	uint64		skipped = 0;

	if (f->shard)
	{
		dp_shard_row(f->shard, slot, lineno);
		return 0;
	}
	if (f->batch_size == 1)
	{
		TupleTableSlot *r;

		if (f->conn)
			dp_shard_free_connection(f->conn);
		r = rri->ri_FdwRoutine->ExecForeignInsert(estate, rri, slot, slot);

		if (r == NULL)
			return 1;
		inserted(leaf, q, r);
		return 0;
	}

	if (f->nslots == f->batch_size)
		skipped = send_batch(leaf, estate, q);
	if (f->nslots == f->ninit)
	{
		MemoryContext old = MemoryContextSwitchTo(f->cxt);

		/* a descriptor of its own per slot, as ExecInsert does */
		f->slots[f->ninit++] =
			MakeSingleTupleTableSlot(CreateTupleDescCopy(slot->tts_tupleDescriptor),
									 &TTSOpsVirtual);
		MemoryContextSwitchTo(old);
	}
	ExecCopySlot(f->slots[f->nslots++], slot);
	return skipped;
}

bool
dp_foreign_needs_order(DPLeaf *leaf)
{
	return leaf->needs_post && leaf->foreign->shard == NULL &&
		leaf->foreign->batch_size == 1;
}

uint64
dp_foreign_flush_all(DPLeafSet *set, DPQueue *q)
{
	uint64		skipped = 0;

	/* every stream ends before any result is awaited */
	for (DPLeaf *leaf = set->list; leaf; leaf = leaf->next)
		if (leaf->foreign && leaf->foreign->shard)
			dp_shard_end_input(leaf->foreign->shard);
	for (DPLeaf *leaf = set->list; leaf; leaf = leaf->next)
	{
		if (leaf->foreign == NULL)
			continue;
		if (leaf->foreign->shard)
			skipped += dp_shard_collect(leaf->foreign->shard);
		else
			skipped += send_batch(leaf, set->estate, q);
	}
	return skipped;
}

void
dp_foreign_end(DPForeign *f)
{
	if (f->shard)
		dp_shard_close(f->shard);
	Assert(f->nslots == 0);
	for (int i = 0; i < f->ninit; i++)
		ExecDropSingleTupleTableSlot(f->slots[i]);
	f->ninit = 0;
}
