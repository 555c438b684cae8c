/*-------------------------------------------------------------------------
 *
 * btchunk.c
 *	  A run's leaf pages written into an existing btree (steps 3 and 4 of
 *	  btappend.c's algorithm): in chunks through shared buffers, one WAL
 *	  record each, and each new page's downlink added by core.
 *
 * The page builder (btree.c) hands its pages to the sink here: the first
 * page started is the leaf's block, each further one a new block from
 * core's allocator, and each finished page waits for its chunk.  Core's
 * allocator extends the index a block at a time, and each block's zeros
 * are written to the file (a tenth of a large right-edge run's time); so
 * once it has extended, a long run at the right edge adds blocks ahead,
 * many at once (add_spares: as many as the run will surely fill, which
 * the file system allocates without writing them), and takes them in
 * order.
 *
 * 3. Pages are written in chunks through shared buffers: the finished pages
 *	  so far, each with its high key, its right link and
 *	  BTP_INCOMPLETE_SPLIT, and the page still filling, written as the last
 *	  page of the run: at the right edge without a high key, else with the
 *	  leaf's old high key and right link, and the right sibling's left link
 *	  pointed at it (unless it is the leaf, which the link names already:
 *	  a leaf merge that needed no new page).  All are exclusively locked,
 *	  left to right, and logged as one WAL record of full-page images
 *	  (XLOG_FPI).  A chunk's first page is the previous chunk's filling
 *	  page (at first, the leaf), written again.  When the leaf is the root,
 *	  the first chunk is the leaf and one page.
 *
 * 4. After each chunk, core completes each finished page's split
 *	  (_bt_finish_split): the downlink to its right sibling goes into the
 *	  leaf's parent (the descent's stack; at the right edge, the rightmost
 *	  page of level 1), core's insertion splitting parents and growing a
 *	  new root as needed, and clearing the flag, WAL-logged as any
 *	  insertion.
 *
 * A run into a gap in the middle of a leaf first makes the gap the end of
 * the leaf: the leaf is split there as core would (one WAL record: the
 * new right half, the left half, the right sibling's left link), and core
 * adds the new half's downlink.  The run then goes between the halves.
 *
 * Invariants.
 * - The tree is valid after every WAL record, for readers on the primary
 *	 and on a standby and after a crash.  A chunk's new pages are reachable
 *	 only through the right link of its first page and, inside the tree,
 *	 the left link of the right sibling.  Redo restores a record's pages
 *	 one at a time, in the order they were registered: the new pages right
 *	 to left, then the first page, then the right sibling.  Before the
 *	 first page no reader can reach a new page; between it and the right
 *	 sibling, a backward scan leaving the right sibling finds its left
 *	 link stale and walks right from there, which core does for at most
 *	 four pages (_bt_lock_and_validate_left, _bt_walk_left on 15-16): so
 *	 a chunk inside the tree adds at most four pages (DP_BT_GAP_CHUNK),
 *	 one at the right edge up to a record's limit.  (Core's split redo
 *	 holds its pages until the sibling is fixed; XLOG_FPI's redo cannot.)
 *	 A page without a downlink is the right sibling of a page marked
 *	 BTP_INCOMPLETE_SPLIT: the state core's own page split passes
 *	 through, which readers cross by right links, amcheck accepts, and any
 *	 later inserter completes.
 * - A new block is all zeros until its chunk's record: a crash or an
 *	 error before leaves nothing reachable, and VACUUM recycles it (so
 *	 does a block added ahead that the run did not fill).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "common/fault.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"

/*
 * Blocks added ahead, for a right-edge run (16+): once core's allocator
 * had to extend the index (its free space map had no page to give) and the
 * run has taken DP_BT_SPARES_AFTER new pages, as many blocks as the run
 * will surely fill, up to DP_BT_SPARES: nine tenths of its remaining
 * entries at the entries per new page so far.  None when that is fewer
 * than nine (below that the file system writes the zeros anyway).
 */
static void
add_spares(DPBtAppend *a)
{
	double		per_page;
	double		want;

	a->nspares = a->spare_next = 0;
	if (!a->extended || a->right != P_NONE ||
		a->pages_new < DP_BT_SPARES_AFTER)
		return;
	per_page = (dp_btree_taken(a->b) - a->taken0) / a->pages_new;
	want = 0.9 * (dp_btree_count(a->b) - dp_btree_taken(a->b)) /
		Max(per_page, 1.0);
	if (want >= 9)
		a->nspares = dp_extend_by(a->index, (int) Min(want, DP_BT_SPARES),
								  a->spares);
}

/* A new block for the run, pinned and unlocked: added ahead, or core's. */
static Buffer
new_block(DPBtAppend *a)
{
	Buffer		buf;

	a->pages_new++;
	if (a->spare_next == a->nspares)
		add_spares(a);
	if (a->spare_next < a->nspares)
		return a->spares[a->spare_next++];
	buf = DP_BT_NEW_BUFFER(a->index, a->heap);
	/* (a run inside the tree takes few pages: not asked, no lseek) */
	a->extended = a->right == P_NONE &&
		BufferGetBlockNumber(buf) + 1 == RelationGetNumberOfBlocks(a->index);
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	return buf;
}

/* The sink: the first page started is the leaf, the others new blocks. */
Page
dp_bt_chunk_new_page(void *arg, BlockNumber *blkno)
{
	DPBtAppend *a = (DPBtAppend *) arg;
	Buffer		buf;

	if (BufferIsValid(a->filling.buf))
	{
		/* the page filling is being finished: page_done follows */
		Assert(a->ndone < DP_BT_CHUNK - 1);
		a->done[a->ndone++] = a->filling;
		buf = new_block(a);
	}
	else
		buf = ReadBuffer(a->index, a->leaf);
	/* a serializable reader's lock on the leaf's key range covers it too */
	if (BufferGetBlockNumber(buf) != a->leaf)
		PredicateLockPageSplit(a->index, a->leaf, BufferGetBlockNumber(buf));
	a->filling.buf = buf;
	a->filling.image = DP_ALLOC_PAGE();
	*blkno = BufferGetBlockNumber(buf);
	return a->filling.image;
}

/*
 * Put the images into their buffers, and point the right sibling (when
 * 'right' is valid) back at the last of them, as one WAL record (step 3).
 */
static void
write_chunk(DPBtAppend *a, DPBtChunkPage *pages, int n, Buffer right)
{
	XLogRecPtr	lsn;
	bool		wal = RelationNeedsWAL(a->index);

	for (int i = 0; i < n; i++)
		LockBuffer(pages[i].buf, BUFFER_LOCK_EXCLUSIVE);
	if (BufferIsValid(right))
		LockBuffer(right, BUFFER_LOCK_EXCLUSIVE);
	START_CRIT_SECTION();
	for (int i = 0; i < n; i++)
	{
		memcpy(BufferGetPage(pages[i].buf), pages[i].image, BLCKSZ);
		MarkBufferDirty(pages[i].buf);
	}
	if (BufferIsValid(right))
	{
		BTPageGetOpaque(BufferGetPage(right))->btpo_prev =
			BufferGetBlockNumber(pages[n - 1].buf);
		MarkBufferDirty(right);
	}
	if (wal)
	{
		XLogBeginInsert();
		/* new pages right to left, the linking page, the right sibling */
		for (int i = n - 1; i >= 0; i--)
			XLogRegisterBuffer(n - 1 - i, pages[i].buf,
							   REGBUF_FORCE_IMAGE | REGBUF_STANDARD);
		if (BufferIsValid(right))
			XLogRegisterBuffer(n, right, REGBUF_FORCE_IMAGE | REGBUF_STANDARD);
		lsn = XLogInsert(RM_XLOG_ID, XLOG_FPI);
		for (int i = 0; i < n; i++)
			PageSetLSN(BufferGetPage(pages[i].buf), lsn);
		if (BufferIsValid(right))
			PageSetLSN(BufferGetPage(right), lsn);
	}
	END_CRIT_SECTION();
	for (int i = 0; i < n; i++)
		LockBuffer(pages[i].buf, BUFFER_LOCK_UNLOCK);
	if (BufferIsValid(right))
		LockBuffer(right, BUFFER_LOCK_UNLOCK);
}

/*
 * Step 4: core adds the downlink of the page right of 'buf' (pinned,
 * marked BTP_INCOMPLETE_SPLIT) and releases it.
 */
static void
complete_split(DPBtAppend *a, Buffer buf)
{
	BTStackData stack;
	BTStack		parent = a->stack;

	if (a->right == P_NONE && a->gap == InvalidOffsetNumber &&
		!(a->leaf_root && BufferGetBlockNumber(buf) == a->leaf))
	{
		/* the parent is the rightmost page of level 1, its last downlink */
		Buffer		pbuf = DP_BT_GET_ENDPOINT(a->index, 1, true);

		stack.bts_blkno = BufferGetBlockNumber(pbuf);
		stack.bts_offset = PageGetMaxOffsetNumber(BufferGetPage(pbuf));
		stack.bts_parent = NULL;
		_bt_relbuf(a->index, pbuf);
		parent = &stack;
	}
	else if (a->right == P_NONE && a->gap == InvalidOffsetNumber)
		parent = NULL;
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (!P_INCOMPLETE_SPLIT(BTPageGetOpaque(BufferGetPage(buf))))
		elog(ERROR, "directpath: block %u of index \"%s\" lost its split flag",
			 BufferGetBlockNumber(buf), RelationGetRelationName(a->index));
	DP_BT_FINISH_SPLIT(a->index, a->heap, buf, parent);
}

/* The leaf's block keeps its left sibling; as the root, its root flag. */
static void
fix_leaf(DPBtAppend *a, DPBtChunkPage *p, bool last)
{
	BTPageOpaque opaque = BTPageGetOpaque(p->image);

	if (BufferGetBlockNumber(p->buf) != a->leaf)
		return;
	opaque->btpo_prev = a->leaf_prev;
	if (last && a->leaf_root)
		opaque->btpo_flags |= BTP_ROOT;
}

/* The page filling, as the run's last page so far: rightmost, or linked. */
static Page
last_page_image(DPBtAppend *a)
{
	Page		image = DP_ALLOC_PAGE();

	memcpy(image, a->filling.image, BLCKSZ);
	if (a->right == P_NONE)
		dp_btree_rightmost_image(image);
	else
	{
		dp_btree_high_key_image(image, a->hikey);
		BTPageGetOpaque(image)->btpo_next = a->right;
	}
	return image;
}

/*
 * Write the finished pages and the page filling (as the run's last page;
 * 'last': for good), then complete the finished pages' splits.
 */
void
dp_bt_flush_chunk(DPBtAppend *a, bool last)
{
	DPBtChunkPage pages[DP_BT_CHUNK];
	int			n = a->ndone;
	Buffer		right = InvalidBuffer;

	memcpy(pages, a->done, sizeof(DPBtChunkPage) * n);
	pages[n].buf = a->filling.buf;
	pages[n].image = last_page_image(a);
	for (int i = 0; i <= n; i++)
		fix_leaf(a, &pages[i], i == n);

	/* the right sibling's left link changes only if a new page is last */
	if (a->right != P_NONE && BufferGetBlockNumber(pages[n].buf) != a->leaf)
		right = ReadBuffer(a->index, a->right);
	write_chunk(a, pages, n + 1, right);
	if (BufferIsValid(right))
		ReleaseBuffer(right);
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
		/* blocks added ahead and not filled stay zero, as after a crash */
		while (a->spare_next < a->nspares)
			ReleaseBuffer(a->spares[a->spare_next++]);
	}
}

/* The sink: a finished page; a full chunk is written. */
void
dp_bt_chunk_page_done(void *arg, Page page, BlockNumber blkno)
{
	DPBtAppend *a = (DPBtAppend *) arg;

	Assert(a->ndone > 0 && a->done[a->ndone - 1].image == page);
	BTPageGetOpaque(page)->btpo_flags |= BTP_INCOMPLETE_SPLIT;
	/* a root leaf gets its one right sibling (and a new root) alone */
	if (a->ndone == a->chunk_max || (a->leaf_root && a->first_chunk))
		dp_bt_flush_chunk(a, false);
}

/* Add 'itup' as the next item of a page being assembled. */
static void
add_to_image(Page image, IndexTuple itup)
{
	if (PageAddItem(image, (Item) itup, IndexTupleSize(itup), InvalidOffsetNumber,
					false, false) == InvalidOffsetNumber)
		elog(ERROR, "directpath: failed to add an item to a btree page");
}

/*
 * The two halves of a split of the leaf (a copy) at a->gap: the items
 * before it with the separator as high key, marked BTP_INCOMPLETE_SPLIT;
 * the items from it on, with the leaf's high key, on a new page.
 */
static void
split_images(DPBtAppend *a, Page page, Page left, Page right,
			 BlockNumber rblkno)
{
	BTPageOpaque old = BTPageGetOpaque(page);
	BTPageOpaque lop,
				rop;
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	_bt_pageinit(left, BLCKSZ);
	_bt_pageinit(right, BLCKSZ);
	lop = BTPageGetOpaque(left);
	rop = BTPageGetOpaque(right);
	*lop = *old;
	lop->btpo_flags = BTP_LEAF | BTP_INCOMPLETE_SPLIT;
	lop->btpo_next = rblkno;
	lop->btpo_cycleid = 0;
	*rop = *old;
	rop->btpo_flags = BTP_LEAF;
	rop->btpo_prev = a->leaf;
	rop->btpo_cycleid = 0;

	add_to_image(left, a->hikey);
	for (OffsetNumber off = P_FIRSTDATAKEY(old); off < a->gap; off++)
		add_to_image(left, (IndexTuple) PageGetItem(page, PageGetItemId(page, off)));
	if (!P_RIGHTMOST(old))
		add_to_image(right, (IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)));
	for (OffsetNumber off = a->gap; off <= maxoff; off++)
		add_to_image(right, (IndexTuple) PageGetItem(page, PageGetItemId(page, off)));
}

/*
 * Make the gap the end of the leaf: split the leaf there, as core would
 * (one WAL record: the new right half, the left half, the right sibling's
 * left link), and have core add the new half's downlink.  The run then
 * goes between the halves.
 */
void
dp_bt_split_at_gap(DPBtAppend *a, Page page)
{
	DPBtChunkPage halves[2];
	Buffer		right = InvalidBuffer;
	BlockNumber rblkno;

	halves[0].buf = ReadBuffer(a->index, a->leaf);
	halves[1].buf = DP_BT_NEW_BUFFER(a->index, a->heap);
	LockBuffer(halves[1].buf, BUFFER_LOCK_UNLOCK);
	rblkno = BufferGetBlockNumber(halves[1].buf);
	PredicateLockPageSplit(a->index, a->leaf, rblkno);
	halves[0].image = DP_ALLOC_PAGE();
	halves[1].image = DP_ALLOC_PAGE();
	split_images(a, page, halves[0].image, halves[1].image, rblkno);
	if (a->right != P_NONE)
		right = ReadBuffer(a->index, a->right);
	write_chunk(a, halves, 2, right);
	if (BufferIsValid(right))
		ReleaseBuffer(right);
	ReleaseBuffer(halves[1].buf);
	dp_fault("btree_append_chunk");
	complete_split(a, halves[0].buf);
	pfree(halves[0].image);
	pfree(halves[1].image);
	a->right = rblkno;
}
