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
 *				An UPDATE's or DELETE's AFTER ROW trigger events and
 *				RETURNING row are made then (newvalues.c), from the old
 *				version on its pinned page and the new version placed;
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
	TupleConversionMap *to_root;	/* DO UPDATE of a leaf: its rows for
									 * core, in the target's format */
	TupleTableSlot *rootslot;	/* ... converted */
	/* an UPDATE's or DELETE's rows, each followed by dp_changed_row */
	bool		per_row;		/* AFTER ROW triggers, view checks, RETURNING */
	Tuplestorestate *retstore;	/* RETURNING rows, or NULL */
	TupleTableSlot *oldslot;	/* a deleted row's old version */
	/* an UPDATE's or DELETE's rows, changed as they arrive in TID order */
	bool		stream;			/* may still stream */
	bool		streamed;		/* the run began while the plan ran */
	bool		bulk;			/* the run holds ExclusiveLock */
	ItemPointerData last;		/* the last row streamed */
	/* a DELETE's rows (without RETURNING): their TIDs sorted alone */
	Tuplesortstate *tids;		/* packed TIDs (int8) */
	Tuplestorestate *plan_rows; /* the rows, in arrival order, for core */
	TupleTableSlot *planslot;	/* ... read back */
	int64	   *core_tids;		/* TIDs whose rows go to core, ascending */
	int			ncore;
	int			core_cap;
	/* what happened */
	uint64		updated;
	uint64		locked;
	uint64		deleted;
	uint64		pages;			/* new versions' pages written */
	uint64		to_core;
	const char *core_why;		/* why rows went to core's path, or NULL */
};

static bool stream_row(DPVersions *v, TupleTableSlot *slot, ItemPointer tid);

DPVersions *
dp_versions_begin(EState *estate, ModifyTableState *mt, ResultRelInfo *rri,
				  Tuplestorestate *rest, Tuplestorestate *retstore)
{
	DPVersions *v = palloc0(sizeof(DPVersions));
	CmdType		op = mt->operation;
	bool		plain_dml = op == CMD_UPDATE || op == CMD_DELETE;
	TriggerDesc *trig = rri->ri_TrigDesc;

	/* DO UPDATE keeps rows of the target; the others, subplan rows */
	TupleDesc	desc = op != CMD_INSERT ? ExecGetResultType(outerPlanState(mt)) :
		RelationGetDescr(rri->ri_RelationDesc);
	TupleDesc	sortdesc;
	AttrNumber	keys[2];
	Oid			ops[2] = {Int8LessOperator, Int8LessOperator};
	Oid			colls[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	v->op = op;
	v->rest = rest;
	if (plain_dml && rri->ri_projectReturning != NULL)
		v->retstore = retstore;
	/* AFTER ROW triggers of the event (a referenced side's actions too) */
	v->per_row = plain_dml &&
		(v->retstore != NULL || mt->mt_transition_capture != NULL ||
		 rri->ri_WithCheckOptions != NIL ||
		 (trig != NULL && (op == CMD_DELETE ? trig->trig_delete_after_row :
						   trig->trig_update_after_row)));
	v->stream = plain_dml &&
		dp_versions_may_stream(outerPlanState(mt), rri->ri_RelationDesc);
	ItemPointerSet(&v->last, 0, InvalidOffsetNumber);	/* below every TID */
	v->rri = rri;
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
		dp_update_projection(mt, v->rri);
	v->existing = op == CMD_DELETE ? NULL :
		op == CMD_INSERT ? v->rri->ri_onConflict->oc_Existing :
		v->rri->ri_oldTupleSlot;
	v->heapslot = ExecInitExtraTupleSlot(estate, RelationGetDescr(v->rel),
										  &TTSOpsHeapTuple);
	if (op == CMD_INSERT && (v->to_root = ExecGetChildToRootMap(rri)) != NULL)
		v->rootslot = ExecInitExtraTupleSlot(estate,
											 RelationGetDescr(mt->rootResultRelInfo->ri_RelationDesc),
											 &TTSOpsVirtual);
	if (op == CMD_DELETE && v->per_row)
		v->oldslot = table_slot_create(v->rel, &estate->es_tupleTable);
	if (op == CMD_DELETE && v->retstore == NULL)
	{
		/* a sort of int8s, in memory where a wide one would spill */
		v->tids = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid,
										false, Max(work_mem, maintenance_work_mem),
										NULL, TUPLESORT_NONE);
		v->plan_rows = tuplestore_begin_heap(false, false, work_mem);
		v->planslot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	}
	return v;
}

static int
int64_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
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
	if (v->tids != NULL)
	{
		/* a DELETE needs no column of the row: only core might (EPQ) */
		tuplestore_puttupleslot(v->plan_rows, slot);
		tuplesort_putdatum(v->tids, Int64GetDatum(dp_pack_tid(found)), false);
		v->kept++;
		return;
	}
	ExecClearTuple(v->put);
	slot_getallattrs(slot);
	memcpy(v->put->tts_values, slot->tts_values, sizeof(Datum) * v->natts);
	memcpy(v->put->tts_isnull, slot->tts_isnull, sizeof(bool) * v->natts);
	v->put->tts_values[v->natts] = Int64GetDatum(dp_pack_tid(found));
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
	dp_unpack_tid(packed, entry);
}

/* A row for core's path (upsert.c runs it after the run). */
static void
row_to_core(DPVersions *v, TupleTableSlot *row, const char *why)
{
	if (v->to_root != NULL)
		row = execute_attr_map_slot(v->to_root->attrMap, row, v->rootslot);
	tuplestore_puttupleslot(v->rest, row);
	v->to_core++;
	if (v->core_why == NULL)
		v->core_why = why;
}

static void
to_core(DPVersions *v, const char *why)
{
	row_to_core(v, v->row, why);
}

#define WHY_GONE "a row's version was not where the plan or its index entry found it"
#define WHY_LOCKED "a row was locked or changed by a transaction (or earlier in this one)"
#define WHY_NO_LOCK "another transaction holds a lock on the table that excludes EXCLUSIVE (row locks, writes or VACUUM)"

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

/* A row found live and free on the current page, deleted. */
static void
delete_found(DPVersions *v, HeapTuple tuple)
{
	dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tuple->t_self),
					DP_CHANGE_DELETE);
	if (HeapTupleHasExternal(tuple))
		dp_oldpages_toasted(v->old, tuple);
	if (v->per_row)
	{
		/* RETURNING reads the deleted header, as core's refetch does */
		if (v->retstore != NULL)
			dp_oldpages_store_deleted(v->old, tuple, v->oldslot);
		else
			ExecStoreBufferHeapTuple(tuple, v->oldslot, v->buf);
		dp_changed_row(v->mt, v->rri, &tuple->t_self, v->oldslot, NULL, v->row,
					   v->retstore);
		ExecClearTuple(v->oldslot);
	}
	if (v->mt->canSetTag)
		v->estate->es_processed++;
}

/*
 * One kept row: its old version found on the pinned page, then deleted,
 * or core's expressions run on it and its new version placed (or the row
 * locked).
 */
static void
evaluate_row(DPVersions *v, ItemPointer entry)
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
		to_core(v, WHY_GONE);
		return;
	}
	c = dp_oldpages_find(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid));
	/* UPDATE and DELETE skip a row met again, as core's TM_SelfModified */
	if (c != NULL && (v->op == CMD_UPDATE || v->op == CMD_DELETE))
		return;
	if (c != NULL && c->kind == DP_CHANGE_UPDATE)
		dp_affected_twice(v->op);
	if (!free_header)
	{
		to_core(v, WHY_LOCKED);
		return;
	}
	if (v->op == CMD_DELETE)
	{
		delete_found(v, &tuple);
		return;
	}

	newslot = dp_new_values(v->mt, v->rri, v->row, v->existing, &tuple,
							v->buf, &lock);
	if (newslot == NULL)
	{
		if (lock && c == NULL)
			dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid),
							DP_CHANGE_LOCK);
		ExecClearTuple(v->existing);
		return;
	}
	dp_check_new_version(v->mt, v->rri, newslot);
	old = MemoryContextSwitchTo(v->chunk_cxt);
	newtup = ExecCopySlotHeapTuple(newslot);
	MemoryContextSwitchTo(old);
	if (c == NULL)
		c = dp_oldpages_add(v->old, v->blkno, ItemPointerGetOffsetNumber(&tid),
							DP_CHANGE_UPDATE);
	c->kind = DP_CHANGE_UPDATE;
	/* TOAST values the new version keeps are shared, the others deleted */
	dp_heap_add_version(v->builder, newtup, &tuple, &c->newtid);
	if (v->per_row)
	{
		ExecStoreHeapTuple(newtup, v->heapslot, false);
		v->heapslot->tts_tableOid = RelationGetRelid(v->rel);
		dp_changed_row(v->mt, v->rri, &tid, v->existing, v->heapslot, v->row,
					   v->retstore);
		ExecClearTuple(v->heapslot);
	}
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
		v->indexes = dp_indexes_begin(v->rri, false, false, true, true);
		dp_indexes_keys_repeat(v->indexes);
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
	evaluate_row(v, tid);
	MemoryContextSwitchTo(caller);
	return true;
}

/*
 * A DELETE's sorted TIDs: each deleted once (a TID met again is skipped,
 * as core's TM_SelfModified skips it), or noted for core when its version
 * is gone, locked or changed since the snapshot (delete_rows_to_core then
 * hands core every row with that TID).
 */
static void
delete_by_tid(DPVersions *v)
{
	Datum		d;
	bool		isnull;
	int64		prev = -1;

	if (!v->bulk)
		return;					/* every row goes to core */
	tuplesort_performsort(v->tids);
	while (DP_TUPLESORT_GETDATUM(v->tids, &d, &isnull))
	{
		int64		packed = DatumGetInt64(d);
		ItemPointerData tid;
		HeapTupleData tuple;
		bool		free_header;

		CHECK_FOR_INTERRUPTS();
		if (packed == prev)
			continue;
		prev = packed;
		dp_unpack_tid(packed, &tid);
		if (ItemPointerGetBlockNumber(&tid) != v->blkno)
		{
			leave_page(v);
			v->blkno = ItemPointerGetBlockNumber(&tid);
			v->buf = ReadBuffer(v->rel, v->blkno);
		}
		if (find_old(v, &tid, &tuple, &free_header) && free_header)
		{
			delete_found(v, &tuple);
			continue;
		}
		if (v->ncore == v->core_cap)
		{
			v->core_cap = Max(64, v->core_cap * 2);
			v->core_tids = v->core_tids == NULL ?
				palloc(sizeof(int64) * v->core_cap) :
				repalloc(v->core_tids, sizeof(int64) * v->core_cap);
		}
		v->core_tids[v->ncore++] = packed;
	}
}

/*
 * The rows for core, read back in arrival order: every one without the
 * run's lock, else those of the TIDs noted.
 */
static void
delete_rows_to_core(DPVersions *v)
{
	if (v->bulk && v->ncore == 0)
		return;
	while (tuplestore_gettupleslot(v->plan_rows, true, false, v->planslot))
	{
		bool		isnull;
		int64		packed = dp_pack_tid((ItemPointer) DatumGetPointer(
			ExecGetJunkAttribute(v->planslot, v->rri->ri_RowIdAttNo, &isnull)));

		if (!v->bulk)
			row_to_core(v, v->planslot, WHY_NO_LOCK);
		else if (bsearch(&packed, v->core_tids, v->ncore, sizeof(int64), int64_cmp))
			row_to_core(v, v->planslot, WHY_LOCKED);
	}
}

uint64
dp_versions_run(DPVersions *v)
{
	ItemPointerData entry;
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
			to_core(v, WHY_NO_LOCK);
			continue;
		}
		if (ItemPointerGetBlockNumber(&entry) != v->blkno)
		{
			leave_page(v);
			v->blkno = ItemPointerGetBlockNumber(&entry);
			v->buf = ReadBuffer(v->rel, v->blkno);
		}
		evaluate_row(v, &entry);
	}
	if (v->tids != NULL)
		delete_by_tid(v);
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
	if (v->tids != NULL)
		delete_rows_to_core(v);
	if (v->mt->ps.instrument)
		InstrStopNode(v->mt->ps.instrument, 0);
	tuplesort_end(v->sort);
	v->sort = NULL;
	MemoryContextSwitchTo(caller);
	return v->to_core;
}

void
dp_versions_counts(DPVersions *v, uint64 *changed, uint64 *locked,
				   uint64 *to_core, const char **core_why)
{
	*changed += v->updated + v->deleted;
	*locked += v->locked;
	*to_core += v->to_core;
	if (*core_why == NULL)
		*core_why = v->core_why;
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
	if (v->tids)
	{
		tuplesort_end(v->tids);
		tuplestore_end(v->plan_rows);
		ExecDropSingleTupleTableSlot(v->planslot);
	}
	ExecDropSingleTupleTableSlot(v->put);
	ExecDropSingleTupleTableSlot(v->got);
}
