/*-------------------------------------------------------------------------
 *
 * btappend.c
 *	  Sorted entries appended at the right edge of an existing btree.
 *
 * Used per batch (indexes.c) when every entry of the batch sorts after the
 * index's last entry, as the keys of a sequence, an identity column or a
 * time of arrival do.  Instead of one descent, one leaf lock and one WAL
 * record per entry, the entries become full leaf pages attached at the
 * right edge of the tree, and core adds one downlink per page.
 *
 * Algorithm.
 *
 * 1. Descend as core's insertion of the first entry would, which completes
 *	  any split left incomplete on the way (and creates the root of an
 *	  index that has none), and check that the leaf reached is the
 *	  rightmost, "the tail", and that the first entry sorts after its last
 *	  item: by key and heap TID, and in a unique index by key alone, so
 *	  that no entry of the index can be its duplicate.  If not, nothing is
 *	  written and the caller inserts the entries one by one.
 *
 * 2. The tail's items, then the entries, go through the btree page builder
 *	  (btree.c): its first page takes the tail's block, each further page a
 *	  new block from core's allocator.  Entries are checked against the one
 *	  before for a unique index's duplicates (INSERT's error, naming the
 *	  row) and merged into posting lists where the index deduplicates.
 *	  What does not fit in the tail below its fillfactor moves right.
 *
 * 3. Pages are written in chunks through shared buffers: the finished pages
 *	  so far (at most 31), each with its high key, its right link and
 *	  BTP_INCOMPLETE_SPLIT, and the page still filling, written as the new
 *	  rightmost page (no high key), all exclusively locked, as one WAL
 *	  record of full-page images (XLOG_FPI).  A chunk's first page is the
 *	  previous chunk's filling page (at first, the tail), written again.
 *	  When the tail is the root, the first chunk is the tail and one page.
 *
 * 4. After each chunk, core completes each finished page's split
 *	  (_bt_finish_split): the downlink to its right sibling goes into the
 *	  rightmost page of level 1 (a stack we set up, so core finds it at
 *	  once), core's insertion splitting parents and growing a new root as
 *	  needed, and clearing the flag, WAL-logged as any insertion.
 *
 * Invariants.
 * - The tree is valid after every WAL record, for readers on the primary
 *	 and on a standby and after a crash.  A chunk's new pages are reachable
 *	 only through the right link of its first page, which the record
 *	 restores last (block references are registered right to left).  A
 *	 page without a downlink is the right sibling of a page marked
 *	 BTP_INCOMPLETE_SPLIT: the state core's own page split passes through,
 *	 which readers cross by right links, amcheck accepts, and any later
 *	 inserter completes.
 * - A new block is all zeros until its chunk's record: a crash or an
 *	 error before leaves nothing reachable, and VACUUM recycles it.
 * - Only readers use the index meanwhile: the direct path holds
 *	 ShareRowExclusiveLock on the table (no other writer, no VACUUM), so
 *	 the tail is ours to rewrite once we lock it; a reader may only set
 *	 LP_DEAD hints, which the rewrite drops.
 * - The rows the entries point to are on disk (the caller's batch flush
 *	 came first), as for any index entry the direct path makes.
 * - Serializable transactions see what a plain insertion shows them: the
 *	 entries all go into the tail's key range, so a serializable load
 *	 checks for conflicts on the tail, and every new page inherits the
 *	 tail's predicate locks, as the right half of a split does.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"

/* Pages in one WAL record: as many block references as a record takes. */
#define DP_BT_CHUNK XLR_MAX_BLOCK_ID

/* A page of the chunk: its buffer (pinned) and its image. */
typedef struct DPBtChunkPage
{
	Buffer		buf;
	Page		image;
} DPBtChunkPage;

typedef struct DPBtAppend
{
	DPBtreeBuild *b;
	Relation	index;
	Relation	heap;
	BlockNumber tail;			/* the rightmost leaf when we began */
	BlockNumber tail_prev;		/* its left sibling */
	bool		tail_root;		/* it was the root (a one-page tree) */
	bool		first_chunk;	/* no chunk written yet */
	DPBtChunkPage done[DP_BT_CHUNK - 1];	/* finished, not written */
	int			ndone;
	DPBtChunkPage filling;		/* the page still filling */
	IndexTuple	prev;			/* unique index: the entry before */
	DPNameRow	name;			/* names a duplicate's row */
	void	   *name_arg;
} DPBtAppend;

/*
 * Are the keys of x and y equal for uniqueness (every key column equal by
 * its opclass, no NULL unless NULLS NOT DISTINCT)?
 */
static bool
duplicates(Relation index, IndexTuple x, IndexTuple y)
{
	TupleDesc	desc = RelationGetDescr(index);
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);

	for (int att = 1; att <= nkeys; att++)
	{
		bool		xnull,
					ynull;
		Datum		xd = index_getattr(x, att, desc, &xnull);
		Datum		yd = index_getattr(y, att, desc, &ynull);

		if (xnull || ynull)
		{
			if (xnull && ynull && index->rd_index->indnullsnotdistinct)
				continue;
			return false;
		}
		if (DatumGetInt32(FunctionCall2Coll(index_getprocinfo(index, att,
															  BTORDER_PROC),
											index->rd_indcollation[att - 1],
											xd, yd)) != 0)
			return false;
	}
	return true;
}

/* INSERT's error for a unique index's duplicate, naming the row. */
static void
report_duplicate(DPBtAppend *a, IndexTuple itup)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *key;

	if (a->name != NULL)
		a->name(a->name_arg, &itup->t_tid);
	index_deform_tuple(itup, RelationGetDescr(a->index), values, isnull);
	key = BuildIndexValueDescription(a->index, values, isnull);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(a->index)),
			 key ? errdetail("Key %s already exists.", key) : 0,
			 errtableconstraint(a->heap, RelationGetRelationName(a->index))));
}

/*
 * Step 1: the leaf where 'first' goes, write-locked, by core's descent for
 * an insertion, which on its way completes the splits a crash or an error
 * left incomplete, here on the right edge most likely (ours).
 * InvalidBuffer when the index is not one we append to (a btree from
 * before PostgreSQL 12's heap-TID keys).  An index without a root gets one.
 */
static Buffer
find_leaf(DPBtAppend *a, BTScanInsert key)
{
	Buffer		buf;

	if (!key->heapkeyspace)
		return InvalidBuffer;
	_bt_freestack(DP_BT_SEARCH(a->index, a->heap, key, &buf, BT_WRITE));
	return buf;
}

/*
 * Is that leaf the tail, and does 'first' ('key') sort after all of its
 * items (by key and TID; in a unique index by key alone)?  An empty tail
 * qualifies only as the root.
 */
static bool
beyond_tail(DPBtAppend *a, Page page, BTScanInsert key)
{
	BTPageOpaque opaque = BTPageGetOpaque(page);
	OffsetNumber last = PageGetMaxOffsetNumber(page);

	if (!P_RIGHTMOST(opaque))
		return false;
	if (last < P_FIRSTDATAKEY(opaque))
		return P_ISROOT(opaque);
	if (_bt_compare(a->index, key, page, last) <= 0)
		return false;
	if (a->index->rd_index->indisunique)
	{
		ItemPointer tid = key->scantid;
		bool		beyond;

		key->scantid = NULL;
		beyond = _bt_compare(a->index, key, page, last) > 0;
		key->scantid = tid;
		return beyond;
	}
	return true;
}

/* The sink: the first page started is the tail, the others new blocks. */
static Page
chunk_new_page(void *arg, BlockNumber *blkno)
{
	DPBtAppend *a = (DPBtAppend *) arg;
	Buffer		buf;

	if (BufferIsValid(a->filling.buf))
	{
		/* the page filling is being finished: page_done follows */
		Assert(a->ndone < DP_BT_CHUNK - 1);
		a->done[a->ndone++] = a->filling;
		buf = DP_BT_NEW_BUFFER(a->index, a->heap);
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	}
	else
		buf = ReadBuffer(a->index, a->tail);
	/* a serializable reader's lock on the tail's key range covers it too */
	if (BufferGetBlockNumber(buf) != a->tail)
		PredicateLockPageSplit(a->index, a->tail, BufferGetBlockNumber(buf));
	a->filling.buf = buf;
	a->filling.image = DP_ALLOC_PAGE();
	*blkno = BufferGetBlockNumber(buf);
	return a->filling.image;
}

/* Put the images into their buffers, as one WAL record (step 3). */
static void
write_chunk(DPBtAppend *a, DPBtChunkPage *pages, int n)
{
	XLogRecPtr	lsn;
	bool		wal = RelationNeedsWAL(a->index);

	for (int i = 0; i < n; i++)
		LockBuffer(pages[i].buf, BUFFER_LOCK_EXCLUSIVE);
	START_CRIT_SECTION();
	for (int i = 0; i < n; i++)
	{
		memcpy(BufferGetPage(pages[i].buf), pages[i].image, BLCKSZ);
		MarkBufferDirty(pages[i].buf);
	}
	if (wal)
	{
		XLogBeginInsert();
		/* right to left: replay restores the linking page last */
		for (int i = n - 1; i >= 0; i--)
			XLogRegisterBuffer(n - 1 - i, pages[i].buf,
							   REGBUF_FORCE_IMAGE | REGBUF_STANDARD);
		lsn = XLogInsert(RM_XLOG_ID, XLOG_FPI);
		for (int i = 0; i < n; i++)
			PageSetLSN(BufferGetPage(pages[i].buf), lsn);
	}
	END_CRIT_SECTION();
	for (int i = 0; i < n; i++)
		LockBuffer(pages[i].buf, BUFFER_LOCK_UNLOCK);
}

/*
 * Step 4: core adds the downlink of the page right of 'buf' (pinned,
 * marked BTP_INCOMPLETE_SPLIT) and releases it.
 */
static void
complete_split(DPBtAppend *a, Buffer buf)
{
	BTStackData stack;
	BTStack		parent = NULL;

	if (!(a->tail_root && BufferGetBlockNumber(buf) == a->tail))
	{
		/* the parent is the rightmost page of level 1, its last downlink */
		Buffer		pbuf = DP_BT_GET_ENDPOINT(a->index, 1, true);

		stack.bts_blkno = BufferGetBlockNumber(pbuf);
		stack.bts_offset = PageGetMaxOffsetNumber(BufferGetPage(pbuf));
		stack.bts_parent = NULL;
		_bt_relbuf(a->index, pbuf);
		parent = &stack;
	}
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (!P_INCOMPLETE_SPLIT(BTPageGetOpaque(BufferGetPage(buf))))
		elog(ERROR, "directpath: block %u of index \"%s\" lost its split flag",
			 BufferGetBlockNumber(buf), RelationGetRelationName(a->index));
	DP_BT_FINISH_SPLIT(a->index, a->heap, buf, parent);
}

/* The tail's block keeps its left sibling; as the root, its root flag. */
static void
fix_tail(DPBtAppend *a, DPBtChunkPage *p, bool rightmost)
{
	BTPageOpaque opaque = BTPageGetOpaque(p->image);

	if (BufferGetBlockNumber(p->buf) != a->tail)
		return;
	opaque->btpo_prev = a->tail_prev;
	if (rightmost && a->tail_root)
		opaque->btpo_flags |= BTP_ROOT;
}

/*
 * Write the finished pages and the page filling (as the rightmost page;
 * 'last': for good), then complete the finished pages' splits.
 */
static void
flush_chunk(DPBtAppend *a, bool last)
{
	DPBtChunkPage pages[DP_BT_CHUNK];
	int			n = a->ndone;

	memcpy(pages, a->done, sizeof(DPBtChunkPage) * n);
	pages[n].buf = a->filling.buf;
	pages[n].image = DP_ALLOC_PAGE();
	memcpy(pages[n].image, a->filling.image, BLCKSZ);
	dp_btree_rightmost_image(pages[n].image);
	for (int i = 0; i <= n; i++)
		fix_tail(a, &pages[i], i == n);

	write_chunk(a, pages, n + 1);
	a->first_chunk = false;
	dp_fault("btree_append_chunk");
	for (int i = 0; i < n; i++)
	{
		complete_split(a, pages[i].buf);
		pfree(pages[i].image);
	}
	pfree(pages[n].image);
	a->ndone = 0;
	if (last)
	{
		ReleaseBuffer(a->filling.buf);
		pfree(a->filling.image);
	}
}

/* The sink: a finished page; a full chunk is written. */
static void
chunk_page_done(void *arg, Page page, BlockNumber blkno)
{
	DPBtAppend *a = (DPBtAppend *) arg;

	Assert(a->ndone > 0 && a->done[a->ndone - 1].image == page);
	BTPageGetOpaque(page)->btpo_flags |= BTP_INCOMPLETE_SPLIT;
	/* a root tail gets its one right sibling (and a new root) alone */
	if (a->ndone == DP_BT_CHUNK - 1 || (a->tail_root && a->first_chunk))
		flush_chunk(a, false);
}

/* Step 2, first: the tail's items, as they are, from a copy of the tail. */
static void
put_tail(DPBtAppend *a, Page page)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	for (OffsetNumber off = P_FIRSTDATAKEY(BTPageGetOpaque(page));
		 off <= maxoff; off++)
		dp_btree_put_item(a->b, (IndexTuple)
						  PageGetItem(page, PageGetItemId(page, off)));
}

/*
 * Step 2, then: the entries, a unique index's checked against the one
 * before ('prev' has room for any entry).
 */
static void
put_entries(DPBtAppend *a)
{
	bool		unique = a->index->rd_index->indisunique;
	IndexTuple	prev = unique ? palloc(BLCKSZ) : NULL;
	bool		have_prev = false;
	IndexTuple	itup;

	while ((itup = dp_btree_next(a->b)) != NULL)
	{
		if (unique)
		{
			if (have_prev && duplicates(a->index, prev, itup))
				report_duplicate(a, itup);
			memcpy(prev, itup, IndexTupleSize(itup));
			have_prev = true;
		}
		dp_btree_put_entry(a->b, itup);
	}
	if (prev != NULL)
		pfree(prev);
}

bool
dp_btree_append(DPBtreeBuild *b, DPNameRow name, void *arg)
{
	DPBtAppend	a = {0};
	DPBtSink	sink = {chunk_new_page, chunk_page_done, &a};
	IndexTuple	first = dp_btree_peek(b);
	BTScanInsert key;
	Buffer		buf;
	Page		tail;
	bool		beyond;

	if (first == NULL)
		return true;
	a.b = b;
	a.index = dp_btree_index(b);
	a.heap = dp_btree_heap(b);
	a.name = name;
	a.name_arg = arg;
	a.first_chunk = true;
	a.filling.buf = InvalidBuffer;

	/* step 1: the tail (copied, so no lock is held while pages are built) */
	key = _bt_mkscankey(a.index, first);
	buf = find_leaf(&a, key);
	if (!BufferIsValid(buf))
		return false;
	tail = DP_ALLOC_PAGE();
	memcpy(tail, BufferGetPage(buf), BLCKSZ);
	a.tail = BufferGetBlockNumber(buf);
	_bt_relbuf(a.index, buf);
	beyond = beyond_tail(&a, tail, key);
	pfree(key);
	if (!beyond)
	{
		pfree(tail);
		return false;
	}
	a.tail_prev = BTPageGetOpaque(tail)->btpo_prev;
	a.tail_root = P_ISROOT(BTPageGetOpaque(tail));

	/* steps 2-4; a serializable load conflicts as inserting into the tail */
	CheckForSerializableConflictIn(a.index, NULL, a.tail);
	XLogEnsureRecordSpace(DP_BT_CHUNK - 1, 0);
	RelationSetTargetBlock(a.index, InvalidBlockNumber);
	dp_btree_leaves_begin(b, &sink);
	put_tail(&a, tail);
	pfree(tail);
	put_entries(&a);
	dp_btree_leaves_end(b);
	flush_chunk(&a, true);
	return true;
}
