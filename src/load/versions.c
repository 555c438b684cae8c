/*-------------------------------------------------------------------------
 *
 * versions.c
 *	  INSERT ... ON CONFLICT DO UPDATE's and MERGE's updates in bulk: the
 *	  new versions of the rows that meet a row of the table are placed by
 *	  the page builder and indexed by the sorted index work, and each old
 *	  version's page is changed once, in place, and logged as one full-page
 *	  image.
 *
 * Core updates a conflicting row on its own: it locks the row (a WAL
 * record), writes the new version where there is room (on a settled table,
 * another page: a second record) and inserts an entry into every index,
 * each a descent of the tree and a record.  Here the rows that conflict
 * (conflict.c keeps them, with the entry that found the row they meet;
 * MERGE's matched rows carry the target row's ctid) are sorted by that
 * TID, so the old versions are visited page by page, in block order, after
 * the load's own rows are written:
 *
 *	evaluate	for each row, with its old page pinned: the live version of
 *				the HOT chain the entry points at (a dirty snapshot, as
 *				core's conflict check), then core's own expressions of the
 *				statement's ModifyTable node - DO UPDATE's WHERE clause and
 *				SET projection (EXCLUDED is the proposed row), or MERGE's
 *				first WHEN MATCHED action whose condition holds (an UPDATE's
 *				projection; DO NOTHING changes nothing) - and the table's
 *				NOT NULL and CHECK constraints, with core's errors; the new
 *				version goes to a page builder of its own
 *				(xmin this transaction, HEAP_UPDATED, not frozen), its TID
 *				known at once;
 *	apply		every 16384 rows, at a page boundary: the builder's pages
 *				are written (multi-insert records, as any direct load's),
 *				the old pages' VM bits cleared and logged (visibility.c),
 *				then each old page is locked once and its rows' headers set
 *				as heap_update sets them (xmax, cmax or a combo id, t_ctid
 *				to the new version, no HOT) or, where the WHERE clause was
 *				false, as heap_lock_tuple locks them (FOR NO KEY UPDATE),
 *				PD_ALL_VISIBLE cleared, the page logged as a full image;
 *	index		then the new versions' entries go in through the leaf's
 *				index work (indexes.c: sorted per index, or row by row).
 *
 * Why the outcome is core's.  The rows are decided as core decides them
 * (conflict.c); the same expressions run on the same rows (this command's
 * inserted rows are invisible to its snapshot either way); a row whose
 * key two rows of the statement meet is updated by the first that passes
 * the WHERE clause, and a later one raises core's cardinality error, as
 * when core's tuple lock finds the row updated by this command (MERGE
 * likewise, with its own message; its DO NOTHING takes no lock).  The
 * headers are exactly heap_update's and heap_lock_tuple's for a row no
 * other transaction locks.  The order differs: old versions are visited
 * in TID order, not input order, which only an error can show (the first
 * row that fails, here, is the first in TID order).
 *
 * What makes it safe.  The statement holds ShareRowExclusiveLock; the run
 * takes ExclusiveLock too, if it can at once, so no other transaction can
 * lock a row (FOR SHARE/UPDATE) between the evaluation and the change; if
 * another transaction holds ROW SHARE, every row goes to core's path.  A
 * row another transaction left locked, or this transaction locked before,
 * goes to core's path too (upsert.c runs those after the run), as does
 * one whose live version cannot be found.  WAL: an old page's image is
 * logged after every change to it, its VM bits were cleared and logged
 * before; a new version's page is written and logged before the old
 * version's t_ctid points at it, and before an index entry does; the
 * transaction's commit record comes after all of them, so a crash or a
 * standby replaying an unfinished run sees old versions whose xmax never
 * committed.  Logical decoding could not read images as UPDATEs, so a
 * logically logged table is not taken.
 *
 * Not taken (the updates are core's, upsert.c, and the report says why):
 * a partitioned table or a partition, row triggers of any kind (foreign
 * keys included), row security or a view's CHECK OPTION, stored generated
 * columns, RETURNING, SERIALIZABLE (predicate locks), an index that is
 * deferrable or an exclusion constraint, MERGE's DELETE and WHEN NOT
 * MATCHED BY SOURCE actions, and directpath.bulk_update off.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"

#include "access/heapam.h"
#include "access/htup_details.h"
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
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"

/* Rows evaluated between two applications (ended at a page boundary). */
#define DP_VERSIONS_CHUNK 16384

/* A change to one old version's header. */
typedef struct DPChange
{
	BlockNumber blkno;
	OffsetNumber off;
	bool		update;			/* else locked: the WHERE clause was false */
	ItemPointerData newtid;		/* the new version (update) */
} DPChange;

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
	bool		merge;			/* MERGE's matched rows, else DO UPDATE's */
	TupleTableSlot *row;		/* a kept row: DO UPDATE's proposed row
								 * (EXCLUDED), MERGE's subplan row */
	TupleTableSlot *existing;	/* the old version, for the expressions */
	TupleTableSlot *heapslot;	/* a new version, for the index work */
	SnapshotData dirty;
	DPHeapBuilder *builder;
	DPIndexes  *indexes;
	MemoryContext chunk_cxt;	/* the chunk's new versions and changes */
	HeapTuple  *versions;		/* the chunk's new versions, TID order */
	int			nversions;
	DPChange   *changes;		/* the chunk's changes, block order */
	int			nchanges;
	int			cap;
	BlockNumber blkno;			/* the old page being evaluated */
	Buffer		buf;			/* ... pinned, or InvalidBuffer */
	int			page_first;		/* its first change in 'changes' */
	/* what happened */
	uint64		updated;
	uint64		changed;		/* headers changed (updated or locked) */
	uint64		to_core;
	const char *core_why;		/* why rows went to core's path, or NULL */
};

/* MERGE's own reasons (its actions), or NULL. */
static const char *
merge_refusal(ResultRelInfo *rri)
{
	ListCell   *lc;

	if (DP_MERGE_BY_SOURCE_ACTIONS(rri) != NIL)
		return "MERGE has WHEN NOT MATCHED BY SOURCE actions";
	foreach(lc, DP_MERGE_MATCHED_ACTIONS(rri))
		if (((MergeActionState *) lfirst(lc))->mas_action->commandType == CMD_DELETE)
			return "MERGE deletes matched rows";
	if (rri->ri_oldTupleSlot == NULL || rri->ri_RowIdAttNo == InvalidAttrNumber)
		return "MERGE has no matched action";
	return NULL;
}

const char *
dp_versions_refusal(ModifyTableState *mt)
{
	ResultRelInfo *rri = mt->resultRelInfo;
	Relation	rel = rri->ri_RelationDesc;
	TriggerDesc *trig = rel->trigdesc;
	ModifyTable *plan = (ModifyTable *) mt->ps.plan;
	const char *why;

	if (!dp_bulk_update)
		return "directpath.bulk_update is off";
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relispartition)
		return "the target is partitioned or a partition";
	if (mt->mt_nrels != 1)
		return "the statement has more than one result relation";
	if (mt->operation == CMD_MERGE && (why = merge_refusal(rri)) != NULL)
		return why;
	if (mt->operation == CMD_INSERT && rri->ri_onConflict == NULL)
		return "the statement has no DO UPDATE";
	if (RelationIsLogicallyLogged(rel))
		return "the table is logically logged (logical decoding reads updates from UPDATE records)";
	if (trig && (trig->trig_insert_before_row || trig->trig_insert_after_row ||
				 trig->trig_insert_instead_row || trig->trig_update_before_row ||
				 trig->trig_update_after_row || trig->trig_update_instead_row ||
				 trig->trig_insert_new_table || trig->trig_update_old_table ||
				 trig->trig_update_new_table))
		return "the table has row triggers (foreign keys included) or transition tables";
	if (rel->rd_rel->relrowsecurity || rri->ri_WithCheckOptions != NIL)
		return "row security or a view's CHECK OPTION applies";
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		return "the table has stored generated columns";
	if (plan->returningLists != NIL)
		return "the statement has RETURNING";
	if (IsolationIsSerializable())
		return "the transaction is SERIALIZABLE (its predicate locks are taken row by row)";
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (!idx->rd_index->indimmediate ||
			rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return "an index is deferrable or an exclusion constraint";
	}
	return NULL;
}

DPVersions *
dp_versions_begin(EState *estate, ModifyTableState *mt)
{
	DPVersions *v = palloc0(sizeof(DPVersions));
	bool		merge = mt->operation == CMD_MERGE;
	/* MERGE keeps its subplan's rows (junk columns too), DO UPDATE rows */
	TupleDesc	desc = merge ? ExecGetResultType(outerPlanState(mt)) :
		RelationGetDescr(mt->resultRelInfo->ri_RelationDesc);
	TupleDesc	sortdesc;
	AttrNumber	keys[2];
	Oid			ops[2] = {Int8LessOperator, Int8LessOperator};
	Oid			colls[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	v->merge = merge;
	v->rri = mt->resultRelInfo;
	v->rel = v->rri->ri_RelationDesc;
	v->estate = estate;
	v->mt = mt;
	v->xid = GetCurrentTransactionId();
	v->cid = GetCurrentCommandId(true);
	v->natts = desc->natts;

	/* the target's columns, then the entry's TID and the arrival */
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
	v->existing = v->merge ? v->rri->ri_oldTupleSlot :
		v->rri->ri_onConflict->oc_Existing;
	v->heapslot = ExecInitExtraTupleSlot(estate, RelationGetDescr(v->rel),
										  &TTSOpsHeapTuple);
	return v;
}

void
dp_versions_keep(DPVersions *v, TupleTableSlot *slot, ItemPointer found)
{
	if (found == NULL)
	{
		/* MERGE: the target row the join matched, by its ctid */
		bool		isnull;
		Datum		ctid = ExecGetJunkAttribute(slot, v->rri->ri_RowIdAttNo,
												&isnull);

		Assert(v->merge && !isnull);
		found = (ItemPointer) DatumGetPointer(ctid);
	}
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

/* The change already recorded for an old version of the current page. */
static DPChange *
change_of(DPVersions *v, OffsetNumber off)
{
	for (int i = v->page_first; i < v->nchanges; i++)
		if (v->changes[i].off == off)
			return &v->changes[i];
	return NULL;
}

static DPChange *
add_change(DPVersions *v, OffsetNumber off)
{
	DPChange   *c;

	if (v->nchanges == v->cap)
	{
		v->cap *= 2;
		v->changes = repalloc(v->changes, sizeof(DPChange) * v->cap);
	}
	c = &v->changes[v->nchanges++];
	c->blkno = v->blkno;
	c->off = off;
	c->update = false;
	ItemPointerSetInvalid(&c->newtid);
	return c;
}

/*
 * The live version of the HOT chain at *tid on the pinned page (*tid moved
 * to it), as core's conflict check sees it; *free: may its header change?
 */
static bool
find_old(DPVersions *v, ItemPointer tid, HeapTuple tuple, bool *free)
{
	bool		all_dead;
	bool		found;

	LockBuffer(v->buf, BUFFER_LOCK_SHARE);
	found = heap_hot_search_buffer(tid, v->rel, v->buf, &v->dirty, tuple,
								   &all_dead, true);
	*free = found && header_free(tuple->t_data) &&
		!TransactionIdIsValid(v->dirty.xmin) &&
		!TransactionIdIsValid(v->dirty.xmax);
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
	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
	/* translator: %s is a SQL command name */
			 errmsg("%s command cannot affect row a second time",
					v->merge ? "MERGE" : "ON CONFLICT DO UPDATE"),
			 v->merge ?
			 errhint("Ensure that not more than one source row matches any one target row.") :
			 errhint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")));
}

/*
 * One kept row: its old version found on the pinned page, core's DO UPDATE
 * or MERGE expressions run on it, its new version placed (or the row
 * locked).
 */
static void
evaluate_row(DPVersions *v, ItemPointer entry, Tuplestorestate *rest)
{
	ExprContext *econtext = v->mt->ps.ps_ExprContext;
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
	c = change_of(v, ItemPointerGetOffsetNumber(&tid));
	if (c != NULL && c->update)
		affected_twice(v);
	if (!free_header)
	{
		to_core(v, rest, "a row was locked by a transaction (or earlier in this one)");
		return;
	}

	ResetExprContext(econtext);
	ExecStoreBufferHeapTuple(&tuple, v->existing, v->buf);
	econtext->ecxt_scantuple = v->existing;
	econtext->ecxt_innertuple = v->row;
	econtext->ecxt_outertuple = NULL;
	newslot = v->merge ? merge_matched(v, econtext) :
		on_conflict(v, econtext, &lock);
	if (newslot == NULL)
	{
		if (lock && c == NULL)
			add_change(v, ItemPointerGetOffsetNumber(&tid));
		ExecClearTuple(v->existing);
		return;
	}
	/* as ExecUpdate: no triggers, no generated columns, not a partition */
	if (v->rel->rd_att->constr)
		ExecConstraints(v->rri, newslot, v->estate);
	old = MemoryContextSwitchTo(v->chunk_cxt);
	newtup = ExecCopySlotHeapTuple(newslot);
	MemoryContextSwitchTo(old);
	ExecClearTuple(v->existing);
	if (c == NULL)
		c = add_change(v, ItemPointerGetOffsetNumber(&tid));
	c->update = true;
	dp_heap_add_version(v->builder, newtup, &c->newtid);
	v->versions[v->nversions++] = newtup;
	if (v->mt->canSetTag)
		v->estate->es_processed++;
}

/* Set one old version's header as heap_update or heap_lock_tuple would. */
static void
set_header(DPVersions *v, HeapTupleHeader h, DPChange *c, CommandId cmax,
		   bool iscombo, ItemPointer self)
{
	h->t_infomask &= ~HEAP_XMAX_BITS;
	h->t_infomask2 &= ~HEAP_KEYS_UPDATED;
	HeapTupleHeaderClearHotUpdated(h);
	HeapTupleHeaderSetXmax(h, v->xid);
	if (c->update)
	{
		h->t_infomask &= ~HEAP_MOVED;
		HeapTupleHeaderSetCmax(h, cmax, iscombo);
		h->t_ctid = c->newtid;
	}
	else
	{
		/* FOR NO KEY UPDATE: SET assigns no column of a unique index */
		h->t_infomask |= HEAP_XMAX_LOCK_ONLY | HEAP_XMAX_EXCL_LOCK;
		h->t_ctid = *self;
	}
}

/* The changes [first, end) of one old page, made and logged. */
static void
apply_page(DPVersions *v, int first, int end)
{
	BlockNumber blkno = v->changes[first].blkno;
	Buffer		buf = ReadBuffer(v->rel, blkno);
	Page		page;
	CommandId  *cmax = palloc(sizeof(CommandId) * (end - first));
	bool	   *iscombo = palloc(sizeof(bool) * (end - first));
	bool		any_update = false;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	/* combo command ids are allocated outside the critical section */
	for (int i = first; i < end; i++)
	{
		HeapTupleHeader h = (HeapTupleHeader)
			PageGetItem(page, PageGetItemId(page, v->changes[i].off));

		cmax[i - first] = v->cid;
		iscombo[i - first] = false;
		if (v->changes[i].update)
		{
			HeapTupleHeaderAdjustCmax(h, &cmax[i - first], &iscombo[i - first]);
			any_update = true;
		}
	}
	START_CRIT_SECTION();
	for (int i = first; i < end; i++)
	{
		ItemPointerData self;
		HeapTupleHeader h = (HeapTupleHeader)
			PageGetItem(page, PageGetItemId(page, v->changes[i].off));

		ItemPointerSet(&self, blkno, v->changes[i].off);
		set_header(v, h, &v->changes[i], cmax[i - first], iscombo[i - first],
				   &self);
	}
	if (any_update)
		PageSetPrunable(page, v->xid);
	PageClearAllVisible(page);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(v->rel))
		log_newpage_buffer(buf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
	dp_fault("versions_page");
	pfree(cmax);
	pfree(iscombo);
}

/*
 * The chunk's changes made: new versions written, the old pages' VM bits
 * cleared, each old page changed and logged, then the new versions'
 * index entries.
 */
static void
apply_chunk(DPVersions *v)
{
	BlockNumber *blocks;
	int			nblocks = 0;
	int			first = 0;

	if (v->nchanges == 0)
		return;
	dp_heap_flush(v->builder, true);
	blocks = MemoryContextAlloc(v->chunk_cxt, sizeof(BlockNumber) * v->nchanges);
	for (int i = 0; i < v->nchanges; i++)
		if (nblocks == 0 || blocks[nblocks - 1] != v->changes[i].blkno)
			blocks[nblocks++] = v->changes[i].blkno;
	dp_vm_clear_logged(v->rel, blocks, nblocks);
	for (int i = 1; i <= v->nchanges; i++)
		if (i == v->nchanges || v->changes[i].blkno != v->changes[first].blkno)
		{
			apply_page(v, first, i);
			first = i;
		}
	if (dp_indexes_strategy(v->indexes) == DP_INDEX_SORTED)
		dp_indexes_batch(v->indexes, v->estate, v->heapslot, v->versions,
						 NULL, v->nversions, NULL);
	else if (dp_indexes_strategy(v->indexes) == DP_INDEX_ROW)
		for (int i = 0; i < v->nversions; i++)
		{
			ExecStoreHeapTuple(v->versions[i], v->heapslot, false);
			dp_indexes_row(v->indexes, v->heapslot, v->estate, NULL);
			ExecClearTuple(v->heapslot);
		}
	for (int i = 0; i < v->nchanges; i++)
		v->updated += v->changes[i].update;
	v->changed += v->nchanges;
	v->nversions = 0;
	v->nchanges = 0;
	MemoryContextReset(v->chunk_cxt);
	v->versions = MemoryContextAlloc(v->chunk_cxt, sizeof(HeapTuple) * DP_VERSIONS_CHUNK);
	v->changes = MemoryContextAlloc(v->chunk_cxt, sizeof(DPChange) * v->cap);
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
		v->nchanges >= DP_VERSIONS_CHUNK - MaxHeapTuplesPerPage)
		apply_chunk(v);
	v->page_first = v->nchanges;
}

/* The run's page builder, index work and first chunk. */
static void
start_run(DPVersions *v)
{
	v->builder = dp_heap_begin(v->rel, false, v->xid, v->cid, NULL);
	v->indexes = dp_indexes_begin(v->rri, false, true);
	InitDirtySnapshot(v->dirty);
	v->chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath new versions",
										 ALLOCSET_DEFAULT_SIZES);
	v->cap = DP_VERSIONS_CHUNK;
	v->versions = MemoryContextAlloc(v->chunk_cxt, sizeof(HeapTuple) * DP_VERSIONS_CHUNK);
	v->changes = MemoryContextAlloc(v->chunk_cxt, sizeof(DPChange) * v->cap);
}

uint64
dp_versions_run(DPVersions *v, Tuplestorestate *rest)
{
	bool		bulk;
	ItemPointerData entry;

	/* the run's state (builder, index work, chunks) lives with v's */
	MemoryContext caller = MemoryContextSwitchTo(GetMemoryChunkContext(v));

	tuplesort_performsort(v->sort);
	/* no row locks from now on: see the header comment */
	bulk = ConditionalLockRelation(v->rel, ExclusiveLock);
	if (bulk)
		start_run(v);
	v->buf = InvalidBuffer;
	v->blkno = InvalidBlockNumber;
	/* EXPLAIN ANALYZE: the node ran, as when core's executor takes the rows */
	if (v->mt->ps.instrument)
		InstrStartNode(v->mt->ps.instrument);
	while (tuplesort_gettupleslot(v->sort, true, false, v->got, NULL))
	{
		CHECK_FOR_INTERRUPTS();
		read_row(v, &entry);
		if (!bulk)
		{
			to_core(v, rest, "another transaction holds ROW SHARE on the table (row locks)");
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
		dp_heap_finish(v->builder);
		dp_indexes_finish(v->indexes);
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
	int			n = snprintf(buf, len, "%llu in bulk",
							 (unsigned long long) v->updated);

	if (v->changed > v->updated && n < (int) len)
		n += snprintf(buf + n, len - n, " (%llu more locked: WHERE false)",
					  (unsigned long long) (v->changed - v->updated));
	if (v->to_core > 0 && n < (int) len)
		snprintf(buf + n, len - n, ", %llu rows by core's executor: %s",
				 (unsigned long long) v->to_core, v->core_why);
}

void
dp_versions_end(DPVersions *v)
{
	if (v->sort)
		tuplesort_end(v->sort);
	ExecDropSingleTupleTableSlot(v->put);
	ExecDropSingleTupleTableSlot(v->got);
}
