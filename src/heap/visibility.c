/*-------------------------------------------------------------------------
 *
 * visibility.c
 *	  Tuple headers, freezing and visibility-map bits for directly written
 *	  pages.
 *
 * Tuple headers follow what heap_insert gives a new row of the current
 * (sub)transaction: xact bits cleared, xmax invalid, xmin = our XID, cmin
 * = the statement's command id.  A frozen tuple additionally carries
 * HEAP_XMIN_FROZEN (the real xmin stays, as in core).  A row locked in
 * place (load/oldpages.c, load/fklock.c) gets what heap_lock_tuple gives a
 * row no other transaction holds.
 *
 * Freezing is allowed only under COPY FREEZE's conditions, checked by
 * admission.c and leaf.c: the relation's storage was created or truncated in the current
 * subtransaction (so aborting it discards the rows with the storage), no
 * snapshot was registered before the statement and no cursor is open, and
 * nothing in the statement reads the target.  Then every page we build
 * holds only frozen tuples and is marked PD_ALL_VISIBLE before it is
 * logged and written.
 *
 * Visibility map.  visibilitymap_set() needs the heap page in a shared
 * buffer, which our pages never are.  After the heap pages are written we
 * therefore set the bits ourselves, per VM page, through the buffer
 * manager: pin (extending the map as needed), lock, OR in ALL_VISIBLE |
 * ALL_FROZEN for our block range, and WAL-log the VM page as a full image
 * (non-standard layout: the bitmap lives in the page's "hole").  The VM
 * page's LSN is after every heap image, so replay never sets a bit for a
 * page whose PD_ALL_VISIBLE is not yet restored.  Without WAL (wal_level
 * minimal on new storage) commit flushes the dirty VM buffers with the
 * relation.  The bitmap layout (2 bits per heap block, map starts after
 * the MAXALIGNed page header) is private to visibilitymap.c but unchanged
 * in 15-18.
 *
 *-------------------------------------------------------------------------
 */
#include "heap/heap.h"

#include "access/htup_details.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"

#define DP_VM_MAPSIZE			(BLCKSZ - MAXALIGN(SizeOfPageHeaderData))
#define DP_VM_BLOCKS_PER_BYTE	(BITS_PER_BYTE / BITS_PER_HEAPBLOCK)
#define DP_VM_BLOCKS_PER_PAGE	(DP_VM_MAPSIZE * DP_VM_BLOCKS_PER_BYTE)

/* Storage created or truncated in the current subtransaction? */
bool
dp_storage_new_in_subxact(Relation rel)
{
	SubTransactionId cur = GetCurrentSubTransactionId();

	return rel->rd_createSubid == cur || DP_REL_NEW_SUBID(rel) == cur;
}

/* Storage created or truncated anywhere in this transaction? */
bool
dp_storage_new_in_xact(Relation rel)
{
	return rel->rd_createSubid != InvalidSubTransactionId ||
		DP_REL_FIRST_SUBID(rel) != InvalidSubTransactionId;
}

void
dp_page_init(Page page, bool frozen)
{
	PageInit(page, BLCKSZ, 0);
	if (frozen)
		PageSetAllVisible(page);
}

void
dp_tuple_prepare(HeapTuple tup, Oid relid, TransactionId xid, CommandId cid,
				 bool frozen)
{
	HeapTupleHeader h = tup->t_data;

	h->t_infomask &= ~HEAP_XACT_MASK;
	h->t_infomask2 &= ~HEAP2_XACT_MASK;
	h->t_infomask |= HEAP_XMAX_INVALID;
	HeapTupleHeaderSetXmin(h, xid);
	if (frozen)
		HeapTupleHeaderSetXminFrozen(h);
	HeapTupleHeaderSetCmin(h, cid);
	HeapTupleHeaderSetXmax(h, 0);
	tup->t_tableOid = relid;
}

void
dp_tuple_set_lock(HeapTupleHeader h, TransactionId xid, uint16 lockbits,
				  ItemPointer self)
{
	h->t_infomask &= ~HEAP_XMAX_BITS;
	h->t_infomask2 &= ~HEAP_KEYS_UPDATED;
	h->t_infomask |= HEAP_XMAX_LOCK_ONLY | lockbits;
	HeapTupleHeaderClearHotUpdated(h);
	HeapTupleHeaderSetXmax(h, xid);
	h->t_ctid = *self;
}

/* Mark heap blocks [start, end) all-visible and all-frozen in the VM. */
void
dp_vm_set_frozen(Relation rel, BlockNumber start, BlockNumber end)
{
	BlockNumber blk = start;
	bool		needs_wal = RelationNeedsWAL(rel);

	while (blk < end)
	{
		Buffer		vmbuf = InvalidBuffer;
		BlockNumber page_end = (blk / DP_VM_BLOCKS_PER_PAGE + 1) * DP_VM_BLOCKS_PER_PAGE;
		uint8	   *map;

		if (page_end > end)
			page_end = end;

		visibilitymap_pin(rel, blk, &vmbuf);
		LockBuffer(vmbuf, BUFFER_LOCK_EXCLUSIVE);
		map = (uint8 *) PageGetContents(BufferGetPage(vmbuf));

		START_CRIT_SECTION();
		for (; blk < page_end; blk++)
		{
			uint32		byte = (blk % DP_VM_BLOCKS_PER_PAGE) / DP_VM_BLOCKS_PER_BYTE;
			uint8		shift = (blk % DP_VM_BLOCKS_PER_BYTE) * BITS_PER_HEAPBLOCK;

			map[byte] |= (VISIBILITYMAP_ALL_VISIBLE | VISIBILITYMAP_ALL_FROZEN) << shift;
		}
		MarkBufferDirty(vmbuf);
		if (needs_wal)
			log_newpage_buffer(vmbuf, false);
		END_CRIT_SECTION();

		UnlockReleaseBuffer(vmbuf);
	}
}

/* Log a VM page changed by visibilitymap_clear, as a full image. */
static void
log_cleared(Relation rel, Buffer vmbuf, bool changed)
{
	if (!changed || !RelationNeedsWAL(rel))
		return;
	LockBuffer(vmbuf, BUFFER_LOCK_EXCLUSIVE);
	START_CRIT_SECTION();
	MarkBufferDirty(vmbuf);
	log_newpage_buffer(vmbuf, false);
	END_CRIT_SECTION();
	LockBuffer(vmbuf, BUFFER_LOCK_UNLOCK);
}

/*
 * Clear the VM bits 'flags' of heap blocks 'blocks' (ascending), before
 * their pages change: both for an update or delete, all-frozen for a row
 * lock (load/fklock.c), as heap_lock_tuple clears it.  Core clears a bit
 * in the same WAL record as the heap change that needs it; a page changed
 * in place by directpath is logged as a full image instead
 * (load/versions.c, load/fklock.c), so the bits are cleared
 * first and each VM page changed is logged once, as an image, before any
 * heap page it covers is.  A map left cleared by a crash before the heap
 * pages change is only conservative (VACUUM sets it again); a map page
 * that does not exist is not created.
 */
void
dp_vm_clear_logged(Relation rel, const BlockNumber *blocks, int n,
				   uint8 flags)
{
	Buffer		vmbuf = InvalidBuffer;
	BlockNumber mapblk = InvalidBlockNumber;
	bool		changed = false;

	for (int i = 0; i < n; i++)
	{
		if (blocks[i] / DP_VM_BLOCKS_PER_PAGE != mapblk)
		{
			log_cleared(rel, vmbuf, changed);
			changed = false;
			mapblk = blocks[i] / DP_VM_BLOCKS_PER_PAGE;
		}
		/* get_status pins the map page, if it exists, without extending */
		if (visibilitymap_get_status(rel, blocks[i], &vmbuf) != 0 &&
			visibilitymap_clear(rel, blocks[i], vmbuf, flags))
			changed = true;
	}
	log_cleared(rel, vmbuf, changed);
	if (BufferIsValid(vmbuf))
		ReleaseBuffer(vmbuf);
}
