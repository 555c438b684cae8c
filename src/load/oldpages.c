/*-------------------------------------------------------------------------
 *
 * oldpages.c
 *	  The old versions a bulk update, lock or delete changes, recorded
 *	  page by page and then changed in place: each old page locked once, its
 *	  rows' headers set as core's heap_update, heap_lock_tuple or
 *	  heap_delete sets them, and the page logged as one full-page image.
 *
 * versions.c evaluates the rows in TID order and records here, for each
 * old version it changes, what happens to it (DPChange: updated, with the
 * TID of its new version; locked; deleted).  The changes of one chunk are
 * in block order, and a page's changes are consecutive.  dp_oldpages_apply
 * then, for the chunk:
 *
 *	1. clears the visibility map bits of every old page, logged
 *	   (visibility.c), before any page changes: a crash between the two
 *	   leaves a page whose VM bit is clear, which is always safe;
 *	2. per page: a combo command id is found for each row that needs one
 *	   (outside the critical section: it may allocate), then, in one
 *	   critical section, every header is set, the page made prunable and
 *	   not all-visible, marked dirty and logged as a full image;
 *	3. the TOAST values of deleted rows are deleted, as heap_delete
 *	   deletes them once the row is.
 *
 * The headers are exactly what core's functions write for a row no other
 * transaction locks (versions.c sends every other row to core):
 *	update	xmax this transaction, cmax (or a combo id), t_ctid the new
 *			version, HEAP_KEYS_UPDATED clear (an update here never assigns
 *			a column of a unique index: existing.c), not HOT;
 *	lock	FOR NO KEY UPDATE: xmax, HEAP_XMAX_LOCK_ONLY |
 *			HEAP_XMAX_EXCL_LOCK, t_ctid the row itself (a false DO UPDATE
 *			WHERE clause locks the row, as core's ExecOnConflictUpdate);
 *	delete	xmax, cmax, HEAP_KEYS_UPDATED set, t_ctid the row itself.
 *
 * Why one image per page is enough: every change of the page since it was
 * read is in the image, and the image is logged before the lock on the page
 * is released.  The new versions were written (and logged) before, so a
 * t_ctid never points at a page a crash could lose; the transaction's commit
 * record follows all of it, so replay of an unfinished statement leaves old
 * versions whose xmax never committed.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"

#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/visibilitymapdefs.h"
#include "common/fault.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/combocid.h"
#include "utils/rel.h"

struct DPOldPages
{
	Relation	rel;
	TransactionId xid;
	CommandId	cid;
	MemoryContext cxt;			/* the chunk's changes and TOAST copies */
	DPChange   *changes;		/* block order */
	int			nchanges;
	int			cap;
	/* the current page's changes by offset, valid where slot_gen is gen */
	BlockNumber page_blkno;
	uint32		gen;
	uint32		slot_gen[MaxHeapTuplesPerPage + 1];
	int			slot_change[MaxHeapTuplesPerPage + 1];
	HeapTuple  *toasted;		/* deleted rows with TOAST values */
	int			ntoasted;
	int			toasted_cap;
	/* what happened, over every chunk */
	uint64		updated;
	uint64		locked;
	uint64		deleted;
};

DPOldPages *
dp_oldpages_begin(Relation rel, TransactionId xid, CommandId cid)
{
	DPOldPages *op = palloc0(sizeof(DPOldPages));

	op->rel = rel;
	op->xid = xid;
	op->cid = cid;
	op->cxt = AllocSetContextCreate(CurrentMemoryContext,
									"directpath old versions",
									ALLOCSET_DEFAULT_SIZES);
	op->cap = 1024;
	op->changes = MemoryContextAlloc(op->cxt, sizeof(DPChange) * op->cap);
	op->page_blkno = InvalidBlockNumber;
	return op;
}

DPChange *
dp_oldpages_find(DPOldPages *op, BlockNumber blkno, OffsetNumber off)
{
	Assert(off >= FirstOffsetNumber && off <= MaxHeapTuplesPerPage);
	if (blkno != op->page_blkno || op->slot_gen[off] != op->gen)
		return NULL;
	return &op->changes[op->slot_change[off]];
}

DPChange *
dp_oldpages_add(DPOldPages *op, BlockNumber blkno, OffsetNumber off,
				DPChangeKind kind)
{
	DPChange   *c;

	Assert(off >= FirstOffsetNumber && off <= MaxHeapTuplesPerPage);
	if (blkno != op->page_blkno)
	{
		/* a new page: every slot of the last one is stale at once */
		op->page_blkno = blkno;
		op->gen++;
	}
	op->slot_gen[off] = op->gen;
	op->slot_change[off] = op->nchanges;
	if (op->nchanges == op->cap)
	{
		op->cap *= 2;
		op->changes = repalloc(op->changes, sizeof(DPChange) * op->cap);
	}
	c = &op->changes[op->nchanges++];
	c->blkno = blkno;
	c->off = off;
	c->kind = kind;
	ItemPointerSetInvalid(&c->newtid);
	return c;
}

void
dp_oldpages_toasted(DPOldPages *op, HeapTuple old)
{
	if (op->ntoasted == op->toasted_cap)
	{
		op->toasted_cap = Max(64, op->toasted_cap * 2);
		op->toasted = op->toasted == NULL ?
			MemoryContextAlloc(op->cxt, sizeof(HeapTuple) * op->toasted_cap) :
			repalloc(op->toasted, sizeof(HeapTuple) * op->toasted_cap);
	}
	{
		MemoryContext caller = MemoryContextSwitchTo(op->cxt);

		op->toasted[op->ntoasted++] = heap_copytuple(old);
		MemoryContextSwitchTo(caller);
	}
}

int
dp_oldpages_count(DPOldPages *op)
{
	return op->nchanges;
}

/* Set one old version's header as core's function for its kind would. */
static void
set_header(DPOldPages *op, HeapTupleHeader h, DPChange *c, CommandId cmax,
		   bool iscombo, ItemPointer self)
{
	if (c->kind == DP_CHANGE_LOCK)
	{
		dp_tuple_set_lock(h, op->xid, HEAP_XMAX_EXCL_LOCK, self);
		return;
	}
	h->t_infomask &= ~(HEAP_XMAX_BITS | HEAP_MOVED);
	h->t_infomask2 &= ~HEAP_KEYS_UPDATED;
	HeapTupleHeaderClearHotUpdated(h);
	HeapTupleHeaderSetXmax(h, op->xid);
	HeapTupleHeaderSetCmax(h, cmax, iscombo);
	if (c->kind == DP_CHANGE_UPDATE)
		h->t_ctid = c->newtid;
	else
	{
		h->t_infomask2 |= HEAP_KEYS_UPDATED;
		h->t_ctid = *self;
	}
}

/*
 * The old version 'old' into 'slot' as its deletion will leave it (a copy:
 * xmax this transaction, cmax this command's, not a combo id): what core's
 * DELETE RETURNING reads, since core fetches the version after heap_delete.
 */
void
dp_oldpages_store_deleted(DPOldPages *op, HeapTuple old, TupleTableSlot *slot)
{
	HeapTuple	copy = heap_copytuple(old);
	DPChange	c = {.kind = DP_CHANGE_DELETE};

	set_header(op, copy->t_data, &c, op->cid, false, &old->t_self);
	ExecForceStoreHeapTuple(copy, slot, true);
	slot->tts_tableOid = RelationGetRelid(op->rel);
	slot->tts_tid = old->t_self;
}

/* The changes [first, end) of one old page, made and logged. */
static void
apply_page(DPOldPages *op, int first, int end)
{
	BlockNumber blkno = op->changes[first].blkno;
	Buffer		buf = ReadBuffer(op->rel, blkno);
	Page		page;
	CommandId  *cmax = palloc(sizeof(CommandId) * (end - first));
	bool	   *iscombo = palloc(sizeof(bool) * (end - first));
	bool		any_xmax = false;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	/* combo command ids are allocated outside the critical section */
	for (int i = first; i < end; i++)
	{
		HeapTupleHeader h = (HeapTupleHeader)
			PageGetItem(page, PageGetItemId(page, op->changes[i].off));

		cmax[i - first] = op->cid;
		iscombo[i - first] = false;
		if (op->changes[i].kind != DP_CHANGE_LOCK)
		{
			HeapTupleHeaderAdjustCmax(h, &cmax[i - first], &iscombo[i - first]);
			any_xmax = true;
		}
	}
	START_CRIT_SECTION();
	for (int i = first; i < end; i++)
	{
		ItemPointerData self;
		HeapTupleHeader h = (HeapTupleHeader)
			PageGetItem(page, PageGetItemId(page, op->changes[i].off));

		ItemPointerSet(&self, blkno, op->changes[i].off);
		set_header(op, h, &op->changes[i], cmax[i - first], iscombo[i - first],
				   &self);
	}
	if (any_xmax)
		PageSetPrunable(page, op->xid);
	PageClearAllVisible(page);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(op->rel))
		log_newpage_buffer(buf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
	dp_fault("versions_page");
	pfree(cmax);
	pfree(iscombo);
}

void
dp_oldpages_apply(DPOldPages *op)
{
	BlockNumber *blocks;
	int			nblocks = 0;
	int			first = 0;

	if (op->nchanges == 0)
		return;
	blocks = MemoryContextAlloc(op->cxt, sizeof(BlockNumber) * op->nchanges);
	for (int i = 0; i < op->nchanges; i++)
		if (nblocks == 0 || blocks[nblocks - 1] != op->changes[i].blkno)
			blocks[nblocks++] = op->changes[i].blkno;
	dp_vm_clear_logged(op->rel, blocks, nblocks, VISIBILITYMAP_VALID_BITS);
	for (int i = 1; i <= op->nchanges; i++)
		if (i == op->nchanges || op->changes[i].blkno != op->changes[first].blkno)
		{
			apply_page(op, first, i);
			first = i;
		}
	for (int i = 0; i < op->ntoasted; i++)
		heap_toast_delete(op->rel, op->toasted[i], false);
	for (int i = 0; i < op->nchanges; i++)
	{
		switch (op->changes[i].kind)
		{
			case DP_CHANGE_UPDATE:
				op->updated++;
				break;
			case DP_CHANGE_LOCK:
				op->locked++;
				break;
			case DP_CHANGE_DELETE:
				op->deleted++;
				pgstat_count_heap_delete(op->rel);
				break;
		}
	}
	op->nchanges = 0;
	op->page_blkno = InvalidBlockNumber;
	op->ntoasted = 0;
	op->toasted_cap = 0;
	op->toasted = NULL;
	MemoryContextReset(op->cxt);
	op->changes = MemoryContextAlloc(op->cxt, sizeof(DPChange) * op->cap);
}

void
dp_oldpages_counts(DPOldPages *op, uint64 *updated, uint64 *locked,
				   uint64 *deleted)
{
	*updated = op->updated;
	*locked = op->locked;
	*deleted = op->deleted;
}

void
dp_oldpages_end(DPOldPages *op)
{
	MemoryContextDelete(op->cxt);
	pfree(op);
}
