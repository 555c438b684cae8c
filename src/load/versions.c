/*-------------------------------------------------------------------------
 *
 * versions.c
 *	  Updates and deletes in bulk: INSERT ... ON CONFLICT DO UPDATE's and
 *	  MERGE's updates, a hinted UPDATE's and DELETE's (rewrite.c).  New
 *	  versions are placed by a page builder and indexed by the sorted index
 *	  work; each old version's page is changed once, in place, and logged
 *	  as one full-page image (oldpages.c).
 *
 * Core changes a row on its own: it locks or updates it (a WAL record),
 * writes the new version where there is room (on a settled table, another
 * page: a second record) and inserts an entry into every index, each a
 * descent of the tree and a record; a delete is one record per row.  Here
 * the rows are kept with the TID of the version they change (conflict.c
 * keeps DO UPDATE's with the entry that found the row they meet; MERGE's
 * matched rows and an UPDATE's or DELETE's plan rows carry the target's
 * ctid), sorted by that TID, so the old versions are visited page by page,
 * in block order, after the statement's own inserted rows are written:
 *
 *	evaluate	for each row, with its old page pinned: DO UPDATE's entry
 *				leads to the live version of a HOT chain (a dirty snapshot,
 *				as core's conflict check); a ctid names the very version the
 *				statement's snapshot saw, which must still be live and
 *				unlocked.  Then core's own expressions of the statement's
 *				ModifyTable node - DO UPDATE's WHERE clause and SET
 *				projection (EXCLUDED is the proposed row), MERGE's first
 *				WHEN MATCHED action whose condition holds, an UPDATE's
 *				new-tuple projection; a DELETE has none - and the table's
 *				NOT NULL and CHECK constraints, with core's errors; the new
 *				version goes to a page builder of its own (xmin this
 *				transaction, HEAP_UPDATED, not frozen; TOAST values it
 *				shares with the old version kept, the others deleted, as
 *				heap_update does), its TID known at once;
 *	apply		every 16384 rows, at a page boundary: the builder's pages
 *				are written (multi-insert records, as any direct load's),
 *				then the old pages changed (oldpages.c: VM bits, headers
 *				as heap_update, heap_lock_tuple or heap_delete set them,
 *				one image per page, a deleted row's TOAST values);
 *	index		then the new versions' entries go in through the target's
 *				index work (indexes.c: sorted per index, or row by row).
 *
 * An UPDATE's or a DELETE's rows need not wait for the plan to end when
 * the plan is a scan of the target that gives them in TID order
 * (scan_in_tid_order): each is evaluated as it comes (stream_row), and
 * only rows after one out of order (a synchronized scan's wrap-around)
 * are sorted.
 *
 * Why the outcome is core's.  The rows are decided as core decides them
 * (conflict.c, or core's plan); the same expressions run on the same rows
 * (this command's own rows are invisible to its snapshot either way).  A
 * row whose old version two rows of the statement meet: DO UPDATE updates
 * it for the first that passes the WHERE clause and a later one raises
 * core's cardinality error, as when core's tuple lock finds the row updated
 * by this command (MERGE likewise, with its own message); an UPDATE or a
 * DELETE changes it for the first and skips the others, as core does
 * (TM_SelfModified).  The order differs: old versions are visited in TID
 * order, not input order, which only an error can show (the first row that
 * fails, here, is the first in TID order).
 *
 * What makes it safe.  The run takes ExclusiveLock, if it can at once, so
 * no other transaction writes or locks a row (FOR SHARE/UPDATE) between
 * the evaluation and the change; if another transaction holds a lock that
 * excludes it (row locks, writes, VACUUM), every row goes to core's path.
 * A row another transaction changed or left locked, or this transaction
 * locked before, goes to core's path too (upsert.c runs those after the
 * run: EvalPlanQual under READ COMMITTED, a serialization failure above),
 * as does one whose version cannot be found.  WAL: a new version's page is
 * written and logged before the old version's t_ctid points at it, and
 * before an index entry does; the transaction's commit record comes after
 * all of it, so a crash or a standby replaying an unfinished run sees old
 * versions whose xmax never committed.  Logical decoding could not read
 * images as UPDATEs or DELETEs, so a logically logged table is not taken.
 *
 * Not taken (the rows are core's, upsert.c, and the report says why): what
 * bulkrules.c refuses.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "common/fault.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"

/* Rows evaluated between two applications (ended at a page boundary). */
#define DP_VERSIONS_CHUNK 16384

struct DPVersions
{
	ResultRelInfo *rri;
	Relation	rel;
	EState	   *estate;
	ModifyTableState *mt;
	TransactionId xid;
	CommandId	cid;
	int			natts;
	/* the kept rows, sorted by (entry TID, arrival) */
	Tuplesortstate *sort;
	TupleTableSlot *put;		/* virtual: the row, TID, arrival */
	TupleTableSlot *got;		/* ... read back */
	uint64		kept;
	/* the run */
	CmdType		op;				/* CMD_INSERT (DO UPDATE), CMD_MERGE,
								 * CMD_UPDATE or CMD_DELETE */
	TupleTableSlot *row;		/* a kept row: DO UPDATE's proposed row
								 * (EXCLUDED), else the subplan's row */
	TupleTableSlot *existing;	/* the old version, for the expressions
								 * (NULL for a DELETE) */
	TupleTableSlot *heapslot;	/* a new version, for the index work */
	SnapshotData dirty;
	DPHeapBuilder *builder;
	DPIndexes  *indexes;
	DPOldPages *old;			/* the chunk's changes to old versions */
	MemoryContext chunk_cxt;	/* the chunk's new versions */
	HeapTuple  *versions;		/* the chunk's new versions, TID order */
	int			nversions;
	BlockNumber blkno;			/* the old page being evaluated */
	Buffer		buf;			/* ... pinned, or InvalidBuffer */
	Tuplestorestate *rest;		/* rows for core's path (upsert.c) */
	/* an UPDATE's or DELETE's rows, changed as they arrive in TID order */
	bool		stream;			/* may still stream */
	bool		streamed;		/* the run began while the plan ran */
	bool		bulk;			/* the run holds ExclusiveLock */
	ItemPointerData last;		/* the last row streamed */
	/* what happened */
	uint64		updated;
	uint64		locked;
	uint64		deleted;
	uint64		pages;			/* new versions' pages written */
	uint64		to_core;
	const char *core_why;		/* why rows went to core's path, or NULL */
};

static bool stream_row(DPVersions *v, TupleTableSlot *slot, ItemPointer tid);

/*
 * The new-tuple projection of an UPDATE, built as core's ModifyTable node
 * builds it for its first row (and then uses, for the rows left to it): the
 * subplan's new values of the assigned columns, the old version's others.
 */
static void
update_projection(ModifyTableState *mt, ResultRelInfo *rri)
{
	ModifyTable *plan = (ModifyTable *) mt->ps.plan;
	EState	   *estate = mt->ps.state;
	Relation	rel = rri->ri_RelationDesc;
	MemoryContext old;

	if (rri->ri_projectNewInfoValid)
		return;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	rri->ri_oldTupleSlot = table_slot_create(rel, &estate->es_tupleTable);
	rri->ri_newTupleSlot = table_slot_create(rel, &estate->es_tupleTable);
	if (mt->ps.ps_ExprContext == NULL)
		ExecAssignExprContext(estate, &mt->ps);
	rri->ri_projectNew =
		ExecBuildUpdateProjection(outerPlan(plan)->targetlist, false,
								  linitial(plan->updateColnosLists),
								  RelationGetDescr(rel), mt->ps.ps_ExprContext,
								  rri->ri_newTupleSlot, &mt->ps);
	rri->ri_projectNewInfoValid = true;
	MemoryContextSwitchTo(old);
}

/*
 * May the plan give the target's rows in TID order?  A sequential, bitmap
 * or TID range scan of the target itself does (a synchronized sequential
 * scan starts mid-table and wraps around once: the stream then ends once,
 * and no page is visited twice), and an index scan of it does where the
 * index follows the table's order (a purge by a timestamp the rows were
 * appended in); where it does not, the stream ends at its first step back
 * and a page is visited at most twice, once streamed and once sorted.  A
 * join's order follows its outer side only while its hash table fits in
 * one batch, so a plan that is not a scan of the target is sorted:
 * streaming it could visit, and log, every page twice.
 */
static bool
scan_in_tid_order(PlanState *ps, Relation target)
{
	if (!IsA(ps, SeqScanState) && !IsA(ps, BitmapHeapScanState) &&
		!IsA(ps, TidRangeScanState) && !IsA(ps, IndexScanState))
		return false;
	return RelationGetRelid(((ScanState *) ps)->ss_currentRelation) ==
		RelationGetRelid(target);
}

DPVersions *
dp_versions_begin(EState *estate, ModifyTableState *mt, Tuplestorestate *rest)
{
	DPVersions *v = palloc0(sizeof(DPVersions));
	CmdType		op = mt->operation;

	/* DO UPDATE keeps rows of the target; the others, subplan rows */
	TupleDesc	desc = op != CMD_INSERT ? ExecGetResultType(outerPlanState(mt)) :
		RelationGetDescr(mt->resultRelInfo->ri_RelationDesc);
	TupleDesc	sortdesc;
	AttrNumber	keys[2];
	Oid			ops[2] = {Int8LessOperator, Int8LessOperator};
	Oid			colls[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	v->op = op;
	v->rest = rest;
	v->stream = (op == CMD_UPDATE || op == CMD_DELETE) &&
		scan_in_tid_order(outerPlanState(mt), mt->resultRelInfo->ri_RelationDesc);
	ItemPointerSet(&v->last, 0, InvalidOffsetNumber);	/* below every TID */
	v->rri = mt->resultRelInfo;
	v->rel = v->rri->ri_RelationDesc;
	v->estate = estate;
	v->mt = mt;
	v->xid = GetCurrentTransactionId();
	v->cid = GetCurrentCommandId(true);
	v->natts = desc->natts;

	/* the kept row's columns, then the entry's TID and the arrival */
	sortdesc = CreateTemplateTupleDesc(v->natts + 2);
	for (int i = 1; i <= v->natts; i++)
		TupleDescCopyEntry(sortdesc, i, desc, i);
	TupleDescInitEntry(sortdesc, v->natts + 1, "entry", INT8OID, -1, 0);
	TupleDescInitEntry(sortdesc, v->natts + 2, "arrival", INT8OID, -1, 0);
	keys[0] = v->natts + 1;
	keys[1] = v->natts + 2;
	v->sort = tuplesort_begin_heap(sortdesc, 2, keys, ops, colls, nulls_first,
								   work_mem, NULL, TUPLESORT_NONE);
	v->put = MakeSingleTupleTableSlot(sortdesc, &TTSOpsVirtual);
	v->got = MakeSingleTupleTableSlot(sortdesc, &TTSOpsMinimalTuple);
	v->row = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	if (op == CMD_UPDATE)
		update_projection(mt, v->rri);
	v->existing = op == CMD_DELETE ? NULL :
		op == CMD_INSERT ? v->rri->ri_onConflict->oc_Existing :
		v->rri->ri_oldTupleSlot;
	v->heapslot = ExecInitExtraTupleSlot(estate, RelationGetDescr(v->rel),
										  &TTSOpsHeapTuple);
	return v;
}

void
dp_versions_keep(DPVersions *v, TupleTableSlot *slot, ItemPointer found)
{
	if (found == NULL)
	{
		/* MERGE, UPDATE, DELETE: the target row the plan found, by ctid */
		bool		isnull;
		Datum		ctid = ExecGetJunkAttribute(slot, v->rri->ri_RowIdAttNo,
												&isnull);

		Assert(v->op != CMD_INSERT && !isnull);
		found = (ItemPointer) DatumGetPointer(ctid);
	}
	if (v->stream && stream_row(v, slot, found))
		return;
	ExecClearTuple(v->put);
	slot_getallattrs(slot);
	memcpy(v->put->tts_values, slot->tts_values, sizeof(Datum) * v->natts);
	memcpy(v->put->tts_isnull, slot->tts_isnull, sizeof(bool) * v->natts);
	v->put->tts_values[v->natts] =
		Int64GetDatum(((int64) ItemPointerGetBlockNumber(found) << 16) |
					  ItemPointerGetOffsetNumber(found));
	v->put->tts_values[v->natts + 1] = Int64GetDatum((int64) v->kept++);
	v->put->tts_isnull[v->natts] = v->put->tts_isnull[v->natts + 1] = false;
	ExecStoreVirtualTuple(v->put);
	tuplesort_puttupleslot(v->sort, v->put);
}

/* The row read back into 'row'; its entry's TID. */
static void
read_row(DPVersions *v, ItemPointer entry)
{
	int64		packed;

	slot_getallattrs(v->got);
	ExecClearTuple(v->row);
	memcpy(v->row->tts_values, v->got->tts_values, sizeof(Datum) * v->natts);
	memcpy(v->row->tts_isnull, v->got->tts_isnull, sizeof(bool) * v->natts);
	ExecStoreVirtualTuple(v->row);
	v->row->tts_tableOid = RelationGetRelid(v->rel);
	packed = DatumGetInt64(v->got->tts_values[v->natts]);
	ItemPointerSet(entry, (BlockNumber) (packed >> 16),
				   (OffsetNumber) (packed & 0xFFFF));
}

/* A row for core's path (upsert.c runs it after the run). */
static void
to_core(DPVersions *v, Tuplestorestate *rest, const char *why)
{
	tuplestore_puttupleslot(rest, v->row);
	v->to_core++;
	if (v->core_why == NULL)
		v->core_why = why;
}

/*
 * May the bulk path change this old version's header?  Only if no other
 * transaction's xmax is live on it: none, or a lock whose holder ended.
 * This transaction's own earlier lock is left to core, which combines it.
 */
static bool
header_free(HeapTupleHeader h)
{
	TransactionId xmax = HeapTupleHeaderGetRawXmax(h);

	if (h->t_infomask & HEAP_XMAX_INVALID)
		return true;
	if ((h->t_infomask & HEAP_XMAX_IS_MULTI) || !HEAP_XMAX_IS_LOCKED_ONLY(h->t_infomask))
		return false;
	return !TransactionIdIsCurrentTransactionId(xmax) &&
		!TransactionIdIsInProgress(xmax);
}

/*
 * The old version a kept row leads to, on the pinned page; *free: may its
 * header change?  DO UPDATE's entry leads to a HOT chain, whose live
 * version counts (a dirty snapshot, as core's conflict check; *tid moves
 * to it).  A plan's ctid (MERGE, UPDATE, DELETE) names the version the
 * statement's snapshot saw: that version must still be the live one, or
 * core's executor takes the row (EvalPlanQual under READ COMMITTED, a
 * serialization failure above it).
 */
static bool
find_old(DPVersions *v, ItemPointer tid, HeapTuple tuple, bool *free)
{
	bool		found;

	LockBuffer(v->buf, BUFFER_LOCK_SHARE);
	if (v->op == CMD_INSERT)
	{
		bool		all_dead;

		found = heap_hot_search_buffer(tid, v->rel, v->buf, &v->dirty, tuple,
									   &all_dead, true);
		*free = found && header_free(tuple->t_data) &&
			!TransactionIdIsValid(v->dirty.xmin) &&
			!TransactionIdIsValid(v->dirty.xmax);
	}
	else
	{
		Page		page = BufferGetPage(v->buf);
		OffsetNumber off = ItemPointerGetOffsetNumber(tid);
		ItemId		lp = PageGetItemId(page, off);

		found = off <= PageGetMaxOffsetNumber(page) && ItemIdIsNormal(lp);
		if (found)
		{
			tuple->t_data = (HeapTupleHeader) PageGetItem(page, lp);
			tuple->t_len = ItemIdGetLength(lp);
			tuple->t_self = *tid;
			tuple->t_tableOid = RelationGetRelid(v->rel);
		}
		*free = found && header_free(tuple->t_data);
	}
	LockBuffer(v->buf, BUFFER_LOCK_UNLOCK);
	return found;
}

/*
 * DO UPDATE's expressions, as ExecOnConflictUpdate runs them once the row
 * is locked: the new version's values, or NULL when the WHERE clause is
 * false (the row stays locked, *lock).
 */
static TupleTableSlot *
on_conflict(DPVersions *v, ExprContext *econtext, bool *lock)
{
	OnConflictSetState *oc = v->rri->ri_onConflict;

	InstrCountTuples2(&v->mt->ps, 1);
	if (!ExecQual(oc->oc_WhereClause, econtext))
	{
		InstrCountFiltered1(&v->mt->ps, 1);
		*lock = true;
		return NULL;
	}
	return ExecProject(oc->oc_ProjInfo);
}

/*
 * MERGE's WHEN MATCHED actions, as ExecMergeMatched picks one: the first
 * whose condition holds; its UPDATE's new values, or NULL (DO NOTHING, or
 * no action; neither locks the row).
 */
static TupleTableSlot *
merge_matched(DPVersions *v, ExprContext *econtext)
{
	ListCell   *lc;

	foreach(lc, DP_MERGE_MATCHED_ACTIONS(v->rri))
	{
		MergeActionState *action = lfirst(lc);

		if (!ExecQual(action->mas_whenqual, econtext))
			continue;
		if (action->mas_action->commandType != CMD_UPDATE)
			return NULL;
		v->mt->mt_merge_updated += 1;
		return ExecProject(action->mas_proj);
	}
	return NULL;
}

/* Core's error for a row this command already updated. */
static void
affected_twice(DPVersions *v)
{
	bool		merge = v->op == CMD_MERGE;

	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
	/* translator: %s is a SQL command name */
			 errmsg("%s command cannot affect row a second time",
					merge ? "MERGE" : "ON CONFLICT DO UPDATE"),
			 merge ?
			 errhint("Ensure that not more than one source row matches any one target row.") :
			 errhint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")));
}

/* The new version's values, or NULL (no update: the row may stay locked). */
static TupleTableSlot *
new_values(DPVersions *v, HeapTuple old, bool *lock)
{
	ExprContext *econtext = v->mt->ps.ps_ExprContext;

	ResetExprContext(econtext);
	ExecStoreBufferHeapTuple(old, v->existing, v->buf);
	if (v->op == CMD_UPDATE)
		return ExecGetUpdateNewTuple(v->rri, v->row, v->existing);
	econtext->ecxt_scantuple = v->existing;
	econtext->ecxt_innertuple = v->row;
	econtext->ecxt_outertuple = NULL;
	return v->op == CMD_MERGE ? merge_matched(v, econtext) :
		on_conflict(v, econtext, lock);
}

/*
 * One kept row: its old version found on the pinned page, then deleted,
 * or core's expressions run on it and its new version placed (or the row
 * locked).
 */
static void
evaluate_row(DPVersions *v, ItemPointer entry, Tuplestorestate *rest)
{
	HeapTupleData tuple;
	ItemPointerData tid = *entry;
	bool		free_header;
	bool		lock = false;
	DPChange   *c;
	TupleTableSlot *newslot;
	HeapTuple	newtup;
	MemoryContext old;

	if (!find_old(v, &tid, &tuple, &free_header))
	{
		to_core(v, rest, "a row's live version was not where its index entry led");
		return;
	}
	c = dp_oldpages_find(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid));
	/* UPDATE and DELETE skip a row met again, as core's TM_SelfModified */
	if (c != NULL && (v->op == CMD_UPDATE || v->op == CMD_DELETE))
		return;
	if (c != NULL && c->kind == DP_CHANGE_UPDATE)
		affected_twice(v);
	if (!free_header)
	{
		to_core(v, rest, "a row was locked or changed by a transaction (or earlier in this one)");
		return;
	}
	if (v->op == CMD_DELETE)
	{
		dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid),
						DP_CHANGE_DELETE);
		if (HeapTupleHasExternal(&tuple))
			dp_oldpages_toasted(v->old, &tuple);
		if (v->mt->canSetTag)
			v->estate->es_processed++;
		return;
	}

	newslot = new_values(v, &tuple, &lock);
	if (newslot == NULL)
	{
		if (lock && c == NULL)
			dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid),
							DP_CHANGE_LOCK);
		ExecClearTuple(v->existing);
		return;
	}
	/* as ExecUpdate: no triggers, no generated columns, not a partition */
	if (v->rel->rd_att->constr)
		ExecConstraints(v->rri, newslot, v->estate);
	old = MemoryContextSwitchTo(v->chunk_cxt);
	newtup = ExecCopySlotHeapTuple(newslot);
	MemoryContextSwitchTo(old);
	if (c == NULL)
		c = dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid),
							DP_CHANGE_UPDATE);
	c->kind = DP_CHANGE_UPDATE;
	/* TOAST values the new version keeps are shared, the others deleted */
	dp_heap_add_version(v->builder, newtup, &tuple, &c->newtid);
	ExecClearTuple(v->existing);
	v->versions[v->nversions++] = newtup;
	if (v->mt->canSetTag)
		v->estate->es_processed++;
}

/*
 * The chunk's changes made: new versions written, the old versions'
 * pages changed (oldpages.c), then the new versions' index entries.
 */
static void
apply_chunk(DPVersions *v)
{
	if (dp_oldpages_count(v->old) == 0)
		return;
	if (v->builder)
		dp_heap_flush(v->builder, true);
	dp_oldpages_apply(v->old);
	if (v->indexes == NULL || v->nversions == 0)
		;
	else if (dp_indexes_strategy(v->indexes) == DP_INDEX_SORTED)
		dp_indexes_batch(v->indexes, v->estate, v->heapslot, v->versions,
						 NULL, v->nversions, NULL);
	else if (dp_indexes_strategy(v->indexes) == DP_INDEX_ROW)
		for (int i = 0; i < v->nversions; i++)
		{
			ExecStoreHeapTuple(v->versions[i], v->heapslot, false);
			dp_indexes_row(v->indexes, v->heapslot, v->estate, NULL);
			ExecClearTuple(v->heapslot);
		}
	v->nversions = 0;
	MemoryContextReset(v->chunk_cxt);
	v->versions = MemoryContextAlloc(v->chunk_cxt, sizeof(HeapTuple) * DP_VERSIONS_CHUNK);
}

/* Leave the current old page; apply the chunk when it is full. */
static void
leave_page(DPVersions *v)
{
	if (BufferIsValid(v->buf))
		ReleaseBuffer(v->buf);
	v->buf = InvalidBuffer;
	v->blkno = InvalidBlockNumber;
	if (v->nversions >= DP_VERSIONS_CHUNK - MaxHeapTuplesPerPage ||
		dp_oldpages_count(v->old) >= DP_VERSIONS_CHUNK - MaxHeapTuplesPerPage)
		apply_chunk(v);
}

/* The run's page builder and index work (none for a DELETE). */
static void
start_run(DPVersions *v)
{
	v->old = dp_oldpages_begin(v->rel, v->xid, v->cid);
	if (v->op != CMD_DELETE)
	{
		v->builder = dp_heap_begin(v->rel, false, v->xid, v->cid, NULL);
		v->indexes = dp_indexes_begin(v->rri, false, true);
	}
	InitDirtySnapshot(v->dirty);
	v->chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath new versions",
										 ALLOCSET_DEFAULT_SIZES);
	v->versions = MemoryContextAlloc(v->chunk_cxt, sizeof(HeapTuple) * DP_VERSIONS_CHUNK);
}

/*
 * The run's start: ExclusiveLock, if it can be had at once (no row locks
 * from now on: see the header comment), and the run's state.
 */
static void
begin_run(DPVersions *v)
{
	v->bulk = ConditionalLockRelation(v->rel, ExclusiveLock);
	if (v->bulk)
		start_run(v);
	v->buf = InvalidBuffer;
	v->blkno = InvalidBlockNumber;
}

/*
 * An UPDATE's or DELETE's row as a scan of the target gives it: while the
 * rows arrive in TID order, each is evaluated at once,
 * with no sort and no second pass - core changes rows while its plan runs
 * too, and neither this command's changes nor its new pages are visible to
 * the plan's snapshot.  The first row out of order ends the stream: the
 * chunk so far is applied, and that row and every later one are sorted
 * (a row of the stream met again is then found changed: core's path skips
 * it, as TM_SelfModified).  False: the caller keeps the row for the sort.
 */
static bool
stream_row(DPVersions *v, TupleTableSlot *slot, ItemPointer tid)
{
	MemoryContext caller;

	if (!v->streamed)
	{
		caller = MemoryContextSwitchTo(GetMemoryChunkContext(v));
		begin_run(v);
		MemoryContextSwitchTo(caller);
		v->streamed = true;
		if (!v->bulk)
		{
			v->stream = false;
			return false;
		}
	}
	caller = MemoryContextSwitchTo(GetMemoryChunkContext(v));
	if (ItemPointerCompare(tid, &v->last) < 0)
	{
		ereport(DEBUG1,
				(errmsg_internal("directpath: rows stopped arriving in TID order after (%u,%u): the rest are sorted",
								 ItemPointerGetBlockNumber(&v->last),
								 ItemPointerGetOffsetNumber(&v->last))));
		leave_page(v);
		apply_chunk(v);
		v->stream = false;
		MemoryContextSwitchTo(caller);
		return false;
	}
	v->last = *tid;
	slot_getallattrs(slot);
	ExecClearTuple(v->row);
	memcpy(v->row->tts_values, slot->tts_values, sizeof(Datum) * v->natts);
	memcpy(v->row->tts_isnull, slot->tts_isnull, sizeof(bool) * v->natts);
	ExecStoreVirtualTuple(v->row);
	v->row->tts_tableOid = RelationGetRelid(v->rel);
	if (ItemPointerGetBlockNumber(tid) != v->blkno)
	{
		leave_page(v);
		v->blkno = ItemPointerGetBlockNumber(tid);
		v->buf = ReadBuffer(v->rel, v->blkno);
	}
	evaluate_row(v, tid, v->rest);
	MemoryContextSwitchTo(caller);
	return true;
}

uint64
dp_versions_run(DPVersions *v)
{
	ItemPointerData entry;
	Tuplestorestate *rest = v->rest;
	bool		bulk;

	/* the run's state (builder, index work, chunks) lives with v's */
	MemoryContext caller = MemoryContextSwitchTo(GetMemoryChunkContext(v));

	tuplesort_performsort(v->sort);
	if (!v->streamed)
		begin_run(v);
	bulk = v->bulk;
	/* EXPLAIN ANALYZE: the node ran, as when core's executor takes the rows */
	if (v->mt->ps.instrument)
		InstrStartNode(v->mt->ps.instrument);
	while (tuplesort_gettupleslot(v->sort, true, false, v->got, NULL))
	{
		CHECK_FOR_INTERRUPTS();
		read_row(v, &entry);
		if (!bulk)
		{
			to_core(v, rest, "another transaction holds a lock on the table that excludes EXCLUSIVE (row locks, writes or VACUUM)");
			continue;
		}
		if (ItemPointerGetBlockNumber(&entry) != v->blkno)
		{
			leave_page(v);
			v->blkno = ItemPointerGetBlockNumber(&entry);
			v->buf = ReadBuffer(v->rel, v->blkno);
		}
		evaluate_row(v, &entry, rest);
	}
	if (bulk)
	{
		leave_page(v);
		apply_chunk(v);
		dp_oldpages_counts(v->old, &v->updated, &v->locked, &v->deleted);
		if (v->builder)
			v->pages = dp_heap_finish(v->builder);
		if (v->indexes)
			dp_indexes_finish(v->indexes);
		dp_oldpages_end(v->old);
		MemoryContextDelete(v->chunk_cxt);
	}
	if (v->mt->ps.instrument)
		InstrStopNode(v->mt->ps.instrument, 0);
	tuplesort_end(v->sort);
	v->sort = NULL;
	MemoryContextSwitchTo(caller);
	return v->to_core;
}

void
dp_versions_describe(DPVersions *v, char *buf, size_t len)
{
	int			n;

	if (v->op == CMD_UPDATE || v->op == CMD_DELETE)
		n = snprintf(buf, len, "%llu rows %s in bulk",
					 (unsigned long long) (v->updated + v->deleted),
					 v->op == CMD_UPDATE ? "updated" : "deleted");
	else
		n = snprintf(buf, len, "%llu in bulk", (unsigned long long) v->updated);
	if (v->locked > 0 && n < (int) len)
		n += snprintf(buf + n, len - n, " (%llu more locked: WHERE false)",
					  (unsigned long long) v->locked);
	if (v->to_core > 0 && n < (int) len)
		snprintf(buf + n, len - n, ", %llu rows by core's executor: %s",
				 (unsigned long long) v->to_core, v->core_why);
}

uint64
dp_versions_pages(DPVersions *v)
{
	return v->pages;
}

void
dp_versions_end(DPVersions *v)
{
	if (v->sort)
		tuplesort_end(v->sort);
	ExecDropSingleTupleTableSlot(v->put);
	ExecDropSingleTupleTableSlot(v->got);
}
