/*-------------------------------------------------------------------------
 *
 * fklock.c
 *	  The referenced rows of a foreign key set's chunk locked FOR KEY SHARE
 *	  page by page, each page changed once and logged as one image.
 *
 * Core's check locks every referenced row it finds with heap_lock_tuple:
 * a buffer lock, a visibility test and a WAL record per row, and a
 * full-page image the first time each page changes after a checkpoint.
 * For a large load's set check (fkset.c) that is one call per distinct key:
 * on TPC-H's lineitem, 2.3M rows of orders and partsupp locked, 480 MB of
 * WAL, most of it the pages' images.
 *
 * Algorithm.  The set's find (fkfind.c) returns, instead of locking, the
 * TID and xmin of every row it finds, with a fresh snapshot as core's
 * check.  When it found as many rows as the chunk has keys,
 * dp_fklock_rows sorts them by TID (a radix sort, or none when they come
 * in order), clears the all-frozen bit of their pages in the visibility
 * map (visibility.c, logged before any heap page changes; heap_lock_tuple
 * clears it too, and all-visible stays), and visits each page once under
 * an exclusive buffer lock.  A row that no transaction has set a live
 * xmax on (HEAP_XMAX_INVALID, no xmax, or the lock of a transaction that
 * has ended, such as an earlier load's) gets the header heap_lock_tuple
 * gives it: xmax this (sub)transaction,
 * HEAP_XMAX_LOCK_ONLY | HEAP_XMAX_KEYSHR_LOCK, HEAP_KEYS_UPDATED and
 * HEAP_HOT_UPDATED clear, t_ctid the row itself.  Where the page's next
 * WAL record would carry a full-page image anyway (its first change since
 * the checkpoint) or the table is not logged, the rows are set here and
 * the page marked dirty and logged as one image (redo restores it; row
 * locks are not decoded): one image instead of an image and a record per
 * row.  On a page imaged since, a record per row is smaller than an
 * image: those rows are locked by heap_lock_tuple itself, after the page.
 * A row this transaction locked already needs nothing (heap_lock_tuple
 * returns at once for it too).
 *
 * A row that is no longer the version the find saw (its line pointer not
 * normal, another xmin), or whose xmax is an update, a delete, a
 * MultiXact or a running transaction's lock, is left alone, as is every
 * row after a heap_lock_tuple that did not return TM_Ok, and the function
 * returns false: the caller checks the chunk with its check query, whose
 * FOR KEY SHARE follows core's rules (waiting, a MultiXact, the newest
 * version under READ COMMITTED).
 *
 * Invariants: a page's rows change together under its buffer lock, inside
 * one critical section with their image; the table is locked ROW SHARE,
 * as FOR KEY SHARE locks it.
 *
 *-------------------------------------------------------------------------
 */
#include "load/fkeys_private.h"

#include "common/radix.h"
#include "heap/heap.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/visibilitymapdefs.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/rel.h"

/* A row the find query returned. */
typedef struct DPLockRow
{
	uint64		order;			/* its TID as one word (dp_pack_tid) */
	ItemPointerData tid;
	TransactionId xmin;			/* raw, as the query saw it */
} DPLockRow;

/* What a row needs. */
typedef enum DPRowLock
{
	DP_LOCK_SET,				/* no live xmax: lock it here */
	DP_LOCK_HELD,				/* this transaction locked it already */
	DP_LOCK_OTHER,				/* changed since the query, or locked by
								 * another running transaction */
} DPRowLock;

/* The locking of one chunk's rows. */
typedef struct DPRowLocker
{
	Relation	rel;
	TransactionId xid;			/* the current (sub)transaction's */
	TransactionId ended;		/* the last locker found to have ended */
	ItemPointerData *later;		/* rows for heap_lock_tuple */
	int			nlater;
	bool		all;			/* no row DP_LOCK_OTHER so far */
} DPRowLocker;

static int
row_cmp(const void *a, const void *b)
{
	uint64		x = ((const DPLockRow *) a)->order;
	uint64		y = ((const DPLockRow *) b)->order;

	return (x > y) - (x < y);
}

/*
 * The rows in TID order: as they are when the referenced table's key
 * order is its rows' order (a table loaded in key order), else by a radix
 * sort on the bytes of their TIDs that vary (common/radix.c), or core's
 * sort where that would not pay.
 */
static void
sort_rows(DPLockRow *rows, uint64 n)
{
	static const Size offs[] = {offsetof(DPLockRow, order)};
	uint64		i = 1;

	while (i < n && rows[i - 1].order <= rows[i].order)
		i++;
	if (i >= n)
		return;
	if (!dp_radix_sort(rows, n, sizeof(DPLockRow), offs, 1,
					   (Size) work_mem * 1024))
		qsort(rows, n, sizeof(DPLockRow), row_cmp);
}

/* What 'row' on 'page' needs (see the file's comment). */
static DPRowLock
row_lock(DPRowLocker *lk, Page page, DPLockRow *row)
{
	OffsetNumber off = ItemPointerGetOffsetNumber(&row->tid);
	ItemId		lp;
	HeapTupleHeader h;
	TransactionId xmax;

	if (off < FirstOffsetNumber || off > PageGetMaxOffsetNumber(page))
		return DP_LOCK_OTHER;
	lp = PageGetItemId(page, off);
	if (!ItemIdIsNormal(lp))
		return DP_LOCK_OTHER;
	h = (HeapTupleHeader) PageGetItem(page, lp);
	if (HeapTupleHeaderGetRawXmin(h) != row->xmin)
		return DP_LOCK_OTHER;
	if ((h->t_infomask & HEAP_XMAX_INVALID) != 0)
		return DP_LOCK_SET;
	if ((h->t_infomask & HEAP_XMAX_IS_MULTI) != 0)
		return DP_LOCK_OTHER;
	xmax = HeapTupleHeaderGetRawXmax(h);
	if (!TransactionIdIsValid(xmax))
		return DP_LOCK_SET;
	if (!HEAP_XMAX_IS_LOCKED_ONLY(h->t_infomask))
		return DP_LOCK_OTHER;
	/* any lock of this transaction is at least FOR KEY SHARE */
	if (TransactionIdIsCurrentTransactionId(xmax))
		return DP_LOCK_HELD;
	/* a lock of a transaction that has ended (a committed load's) */
	if (xmax != lk->ended)
	{
		if (TransactionIdIsInProgress(xmax))
			return DP_LOCK_OTHER;
		lk->ended = xmax;
	}
	return DP_LOCK_SET;
}

/*
 * The rows [0, n) of one page: locked here, logged as one image, when the
 * page's next WAL record would carry an image anyway (its first change
 * since the checkpoint) or needs none; otherwise left for heap_lock_tuple,
 * whose record per row is smaller than an image.
 */
static void
lock_page(DPRowLocker *lk, DPLockRow *rows, int n)
{
	Buffer		buf = ReadBuffer(lk->rel, ItemPointerGetBlockNumber(&rows[0].tid));
	bool	   *set = palloc0(sizeof(bool) * n);
	bool		here;
	int			nset = 0;
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	here = !RelationNeedsWAL(lk->rel) || XLogCheckBufferNeedsBackup(buf);
	for (int i = 0; i < n; i++)
	{
		/* the same row twice (two keys equal but for their bytes) */
		if (i > 0 && ItemPointerEquals(&rows[i].tid, &rows[i - 1].tid))
			continue;
		switch (row_lock(lk, page, &rows[i]))
		{
			case DP_LOCK_SET:
				if (here)
				{
					set[i] = true;
					nset++;
				}
				else
					lk->later[lk->nlater++] = rows[i].tid;
				break;
			case DP_LOCK_HELD:
				break;
			case DP_LOCK_OTHER:
				lk->all = false;
				break;
		}
	}
	if (nset > 0)
	{
		START_CRIT_SECTION();
		for (int i = 0; i < n; i++)
		{
			HeapTupleHeader h;

			if (!set[i])
				continue;
			h = (HeapTupleHeader)
				PageGetItem(page, PageGetItemId(page, ItemPointerGetOffsetNumber(&rows[i].tid)));
			dp_tuple_set_lock(h, lk->xid, HEAP_XMAX_KEYSHR_LOCK, &rows[i].tid);
		}
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(lk->rel))
			log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
	}
	UnlockReleaseBuffer(buf);
	pfree(set);
}

/* The rows left to core's heap_lock_tuple, as FOR KEY SHARE locks them. */
static void
lock_later(DPRowLocker *lk)
{
	for (int i = 0; i < lk->nlater && lk->all; i++)
	{
		HeapTupleData tuple;
		Buffer		buf;
		TM_FailureData tmfd;

		CHECK_FOR_INTERRUPTS();
		tuple.t_self = lk->later[i];
		tuple.t_tableOid = RelationGetRelid(lk->rel);
		if (heap_lock_tuple(lk->rel, &tuple, GetCurrentCommandId(false),
							LockTupleKeyShare, LockWaitBlock, true, &buf,
							&tmfd) != TM_Ok)
			lk->all = false;
		ReleaseBuffer(buf);
	}
}

bool
dp_fklock_rows(Oid pkrel, const DPFkeyRow *found, uint64 nfound)
{
	DPRowLocker lk = {0};
	DPLockRow  *rows;
	BlockNumber *blocks;
	int			nblocks = 0;
	int			first = 0;

	if (nfound == 0)
		return true;
	rows = palloc(sizeof(DPLockRow) * nfound);
	blocks = palloc(sizeof(BlockNumber) * nfound);
	for (uint64 i = 0; i < nfound; i++)
	{
		rows[i].tid = found[i].tid;
		rows[i].order = (uint64) dp_pack_tid(&rows[i].tid);
		rows[i].xmin = found[i].xmin;
	}
	sort_rows(rows, nfound);
	for (uint64 i = 0; i < nfound; i++)
		if (nblocks == 0 ||
			blocks[nblocks - 1] != ItemPointerGetBlockNumber(&rows[i].tid))
			blocks[nblocks++] = ItemPointerGetBlockNumber(&rows[i].tid);

	lk.rel = table_open(pkrel, RowShareLock);
	lk.xid = GetCurrentTransactionId();
	lk.later = palloc(sizeof(ItemPointerData) * nfound);
	lk.all = true;
	dp_vm_clear_logged(lk.rel, blocks, nblocks, VISIBILITYMAP_ALL_FROZEN);
	for (uint64 i = 1; i <= nfound; i++)
		if (i == nfound || ItemPointerGetBlockNumber(&rows[i].tid) !=
			ItemPointerGetBlockNumber(&rows[first].tid))
		{
			CHECK_FOR_INTERRUPTS();
			lock_page(&lk, rows + first, i - first);
			first = i;
		}
	lock_later(&lk);
	table_close(lk.rel, NoLock);
	pfree(rows);
	pfree(blocks);
	pfree(lk.later);
	return lk.all;
}
