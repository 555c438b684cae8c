/*-------------------------------------------------------------------------
 *
 * btree.c
 *	  The btree page builder: turns a stream of index tuples sorted in
 *	  btree order into a complete btree (leaf pages, internal levels, the
 *	  metapage), whose pages go to disk through the append layer
 *	  (append.c), as the heap page builder's do (pages.c).
 *
 * Used where an index's storage is new in the transaction and empty when
 * the load begins (indexes.c): the load puts each row's index tuple into a
 * tuplesort as it places the row, and at the end the tree is built here
 * from the sorted stream, without reading the heap again.
 *
 * Algorithm.  The tree is built one level at a time, bottom-up, so that
 * its pages take consecutive blocks in the order they are written: block 0
 * is the metapage, then every leaf page left to right, then every page of
 * level 1, and so on up to the root.  Within a level, a page's right
 * sibling is therefore always the next block, and its left sibling the
 * previous one.  A page is filled until its free space drops below the
 * fillfactor reserve (the index's fillfactor on leaves, 70% on internal
 * pages), keeping at least two data items per page.  When the next item
 * does not fit, the page's last item moves to a new page and becomes the
 * old page's high key: on leaves, the separator between the last item left
 * and the item moved, suffix-truncated by core's _bt_truncate; on internal
 * pages the item itself.  The high key is also the new page's low key.
 * Each finished page contributes one pivot to the level above: its low key
 * (minus infinity for the leftmost page) with a downlink to it.  The first
 * data item of an internal page is stored as minus infinity (no key
 * attributes).  The rightmost page of a level has no high key, and a level
 * of one page is the root.  The metapage, last, names the root.
 *
 * Leaf tuples with equal keys are merged into posting lists, with core's
 * deduplication routines and limits, when the index allows deduplication
 * (all key columns "equal image", not unique, deduplicate_items on), as
 * CREATE INDEX does.  An item too large for a page fails with core's error
 * (_bt_check_third_page).
 *
 * Invariants: the metapage is written last, so until then the index is the
 * empty index it was; pages are handed to the append layer in block order;
 * the caller holds the index's storage new in this transaction and
 * exclusively (nobody else can see it).
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"

/* Finished pages handed to the append layer at a time. */
#define DP_BT_WRITE_BATCH 32

/* The page of one level that is still filling. */
typedef struct DPBtLevel
{
	uint32		level;			/* 0: the leaves */
	Page		page;			/* the page filling, NULL before the first */
	BlockNumber blkno;			/* its block */
	OffsetNumber lastoff;		/* its last item */
	Size		lastextra;		/* posting-list bytes of that item */
	Size		full;			/* free space below which a page is full */
	IndexTuple	lowkey;			/* its low key */
	int			npages;			/* pages of the level so far */
} DPBtLevel;

/* Pivots of one level's pages (low key, downlink): the next level's input. */
typedef struct DPBtPivots
{
	IndexTuple *items;
	int			n;
	int			max;
} DPBtPivots;

struct DPBtreeBuild
{
	Relation	heap;			/* for error reports */
	Relation	index;
	Tuplesortstate *sort;		/* the load's entries */
	BTScanInsert inskey;		/* for suffix truncation, equal-key tests */
	bool		deduplicate;	/* posting lists on the leaves */
	DPAppend   *append;			/* where finished pages go */
	BlockNumber next_blkno;		/* block of the next page started */
	Page		pending[DP_BT_WRITE_BATCH]; /* finished, not handed on */
	int			npending;
	MemoryContext cxt;			/* keys and pivots */
};

DPBtreeBuild *
dp_btree_begin(Relation heap, Relation index, int workmem)
{
	DPBtreeBuild *b = palloc0(sizeof(DPBtreeBuild));

	if (RelationGetNumberOfBlocks(index) != 1)
		elog(ERROR, "directpath: index \"%s\" is not empty",
			 RelationGetRelationName(index));
	b->heap = heap;
	b->index = index;
	b->cxt = AllocSetContextCreate(CurrentMemoryContext, "directpath btree",
								   ALLOCSET_DEFAULT_SIZES);
	b->sort = tuplesort_begin_index_btree(heap, index,
										  index->rd_index->indisunique,
										  index->rd_index->indnullsnotdistinct,
										  workmem, NULL, TUPLESORT_NONE);
	b->inskey = _bt_mkscankey(index, NULL);
	b->inskey->allequalimage = _bt_allequalimage(index, false);
	b->deduplicate = b->inskey->allequalimage &&
		!index->rd_index->indisunique && BTGetDeduplicateItems(index);
	return b;
}

void
dp_btree_add(DPBtreeBuild *b, ItemPointer tid, Datum *values, bool *isnull)
{
	tuplesort_putindextuplevalues(b->sort, b->index, tid, values, isnull);
}

void
dp_btree_discard(DPBtreeBuild *b)
{
	tuplesort_end(b->sort);
	MemoryContextDelete(b->cxt);
}

/* Hand the finished pages on, in block order. */
static void
write_pending(DPBtreeBuild *b, bool drain)
{
	dp_append_write(b->append, b->pending, b->npending, drain);
	b->npending = 0;
}

static void
page_done(DPBtreeBuild *b, Page page)
{
	b->pending[b->npending++] = page;
	if (b->npending == DP_BT_WRITE_BATCH)
		write_pending(b, false);
}

/* A fresh page for the level, taking the next block. */
static void
new_page(DPBtreeBuild *b, DPBtLevel *lev)
{
	Page		page = dp_append_page(b->append);
	BTPageOpaque opaque;

	_bt_pageinit(page, BLCKSZ);
	opaque = BTPageGetOpaque(page);
	opaque->btpo_prev = lev->page ? lev->blkno : P_NONE;
	opaque->btpo_next = P_NONE;
	opaque->btpo_level = lev->level;
	opaque->btpo_flags = lev->level > 0 ? 0 : BTP_LEAF;
	opaque->btpo_cycleid = 0;
	/* room for the high key's line pointer, filled when the page is full */
	((PageHeader) page)->pd_lower += sizeof(ItemIdData);

	lev->page = page;
	lev->blkno = b->next_blkno++;
	lev->lastoff = P_HIKEY;
	lev->npages++;
}

/* Put an item at 'off'; the first data item of an internal page as -inf. */
static void
put_item(Page page, IndexTuple itup, OffsetNumber off, bool minus_infinity)
{
	IndexTupleData trunc;
	Size		size = IndexTupleSize(itup);

	if (minus_infinity)
	{
		trunc = *itup;
		trunc.t_info = sizeof(IndexTupleData);
		BTreeTupleSetNAtts(&trunc, 0, false);
		itup = &trunc;
		size = sizeof(IndexTupleData);
	}
	if (PageAddItem(page, (Item) itup, size, off, false, false) == InvalidOffsetNumber)
		elog(ERROR, "directpath: failed to add an item to a btree page");
}

/* The level's page, with its low key, becomes a pivot of the next level. */
static void
add_pivot(DPBtreeBuild *b, DPBtPivots *pivots, DPBtLevel *lev,
		  BlockNumber blkno)
{
	MemoryContext old = MemoryContextSwitchTo(b->cxt);

	if (pivots->n == pivots->max)
	{
		pivots->max = Max(pivots->max * 2, 64);
		pivots->items = pivots->items == NULL ?
			palloc(sizeof(IndexTuple) * pivots->max) :
			repalloc_huge(pivots->items, sizeof(IndexTuple) * pivots->max);
	}
	BTreeTupleSetDownLink(lev->lowkey, blkno);
	pivots->items[pivots->n++] = lev->lowkey;
	lev->lowkey = NULL;
	MemoryContextSwitchTo(old);
}

static IndexTuple
copy_tuple(DPBtreeBuild *b, IndexTuple itup)
{
	MemoryContext old = MemoryContextSwitchTo(b->cxt);
	IndexTuple	copy = CopyIndexTuple(itup);

	MemoryContextSwitchTo(old);
	return copy;
}

/*
 * The level's page is full: its last item moves to a new page and becomes
 * its high key (truncated on leaves); the page is finished and linked.
 */
static void
split_off(DPBtreeBuild *b, DPBtLevel *lev, DPBtPivots *pivots)
{
	Page		opage = lev->page;
	BlockNumber oblkno = lev->blkno;
	bool		leaf = lev->level == 0;
	OffsetNumber lastoff = lev->lastoff;
	ItemId		ii = PageGetItemId(opage, lastoff);
	IndexTuple	oitup = (IndexTuple) PageGetItem(opage, ii);
	ItemId		hii;

	new_page(b, lev);
	put_item(lev->page, oitup, P_FIRSTKEY, !leaf);

	/* the moved item's line pointer becomes the high key's */
	hii = PageGetItemId(opage, P_HIKEY);
	*hii = *ii;
	ItemIdSetUnused(ii);
	((PageHeader) opage)->pd_lower -= sizeof(ItemIdData);
	if (leaf)
	{
		IndexTuple	lastleft = (IndexTuple)
			PageGetItem(opage, PageGetItemId(opage, OffsetNumberPrev(lastoff)));
		IndexTuple	hikey = _bt_truncate(b->index, lastleft, oitup, b->inskey);

		if (!PageIndexTupleOverwrite(opage, P_HIKEY, (Item) hikey,
									 IndexTupleSize(hikey)))
			elog(ERROR, "directpath: failed to add a high key to a btree page");
		pfree(hikey);
		oitup = (IndexTuple) PageGetItem(opage, PageGetItemId(opage, P_HIKEY));
	}

	/* the old page's pivot; its high key is the new page's low key */
	add_pivot(b, pivots, lev, oblkno);
	lev->lowkey = copy_tuple(b, oitup);
	BTPageGetOpaque(opage)->btpo_next = lev->blkno;
	page_done(b, opage);
	lev->lastoff = P_FIRSTKEY;
}

/*
 * Add an item to the level: on the page filling, or on a new one when the
 * page is full (its free space below the reserve with two items on it, or
 * too small for the item).  'extra' is the item's posting-list overhead.
 */
static void
add_item(DPBtreeBuild *b, DPBtLevel *lev, IndexTuple itup, Size extra,
		 DPBtPivots *pivots)
{
	bool		leaf = lev->level == 0;
	Size		size = MAXALIGN(IndexTupleSize(itup));
	Size		lastextra = lev->lastextra;
	Size		space;

	CHECK_FOR_INTERRUPTS();
	if (lev->page == NULL)
	{
		new_page(b, lev);
		lev->lowkey = MemoryContextAllocZero(b->cxt, sizeof(IndexTupleData));
		lev->lowkey->t_info = sizeof(IndexTupleData);
		BTreeTupleSetNAtts(lev->lowkey, 0, false);
	}
	lev->lastextra = extra;
	space = PageGetFreeSpace(lev->page);
	if (size > DP_BT_MAX_ITEM_SIZE(lev->page))
		_bt_check_third_page(b->index, b->heap, leaf, lev->page, itup);
	if (space < size + (leaf ? MAXALIGN(sizeof(ItemPointerData)) : 0) ||
		(space + lastextra < lev->full && lev->lastoff > P_FIRSTKEY))
		split_off(b, lev, pivots);
	lev->lastoff = OffsetNumberNext(lev->lastoff);
	put_item(lev->page, itup, lev->lastoff,
			 !leaf && lev->lastoff == P_FIRSTKEY);
}

/*
 * The level's input ended: its last page is rightmost (no high key) and,
 * alone on its level, the root.  Returns its block, or P_NONE when the
 * level is empty.
 */
static BlockNumber
finish_level(DPBtreeBuild *b, DPBtLevel *lev, DPBtPivots *pivots)
{
	Page		page = lev->page;
	OffsetNumber maxoff;
	ItemId		prev;

	if (page == NULL)
		return P_NONE;
	if (lev->npages == 1)
		BTPageGetOpaque(page)->btpo_flags |= BTP_ROOT;
	else
		add_pivot(b, pivots, lev, lev->blkno);

	/* slide the line pointers back over the unused high-key slot */
	maxoff = PageGetMaxOffsetNumber(page);
	prev = PageGetItemId(page, P_HIKEY);
	for (OffsetNumber off = P_FIRSTKEY; off <= maxoff; off++)
	{
		ItemId		cur = PageGetItemId(page, off);

		*prev = *cur;
		prev = cur;
	}
	((PageHeader) page)->pd_lower -= sizeof(ItemIdData);
	page_done(b, page);
	return lev->blkno;
}

static void
level_init(DPBtLevel *lev, uint32 level, Relation index)
{
	memset(lev, 0, sizeof(DPBtLevel));
	lev->level = level;
	lev->full = level > 0 ?
		BLCKSZ * (100 - BTREE_NONLEAF_FILLFACTOR) / 100 :
		BTGetTargetPageFreeSpace(index);
}

/* Leaves from the sorted stream, without deduplication. */
static void
load_plain(DPBtreeBuild *b, DPBtLevel *leaf, DPBtPivots *pivots)
{
	IndexTuple	itup;

	while ((itup = tuplesort_getindextuple(b->sort, true)) != NULL)
		add_item(b, leaf, itup, 0, pivots);
}

/* A pending posting list goes onto the leaf level. */
static void
add_pending(DPBtreeBuild *b, DPBtLevel *leaf, BTDedupState d,
			DPBtPivots *pivots)
{
	if (d->nitems == 1)
		add_item(b, leaf, d->base, 0, pivots);
	else
	{
		IndexTuple	posting = _bt_form_posting(d->base, d->htids, d->nhtids);

		add_item(b, leaf, posting,
				 IndexTupleSize(posting) - BTreeTupleGetPostingOffset(posting),
				 pivots);
		pfree(posting);
	}
	d->nhtids = d->nitems = 0;
	pfree(d->base);
}

/*
 * Leaves from the sorted stream, equal keys merged into posting lists of
 * at most a tenth of a page (core's limit for index builds).
 */
static void
load_dedup(DPBtreeBuild *b, DPBtLevel *leaf, DPBtPivots *pivots)
{
	int			keysz = IndexRelationGetNumberOfKeyAttributes(b->index);
	BTDedupState d = palloc0(sizeof(BTDedupStateData));
	IndexTuple	itup;

	d->deduplicate = true;
	d->maxpostingsize = MAXALIGN_DOWN(BLCKSZ * 10 / 100) - sizeof(ItemIdData);
	d->htids = palloc(d->maxpostingsize);
	while ((itup = tuplesort_getindextuple(b->sort, true)) != NULL)
	{
		if (d->base != NULL &&
			_bt_keep_natts_fast(b->index, d->base, itup) > keysz &&
			_bt_dedup_save_htid(d, itup))
			continue;
		if (d->base != NULL)
			add_pending(b, leaf, d, pivots);
		_bt_dedup_start_pending(d, CopyIndexTuple(itup), InvalidOffsetNumber);
	}
	if (d->base != NULL)
		add_pending(b, leaf, d, pivots);
	pfree(d->htids);
	pfree(d);
}

/* Point the metapage at the root, through the buffer manager, logged. */
static void
write_metapage(DPBtreeBuild *b, BlockNumber root, uint32 level)
{
	Buffer		buf = ReadBuffer(b->index, BTREE_METAPAGE);

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	START_CRIT_SECTION();
	_bt_initmetapage(BufferGetPage(buf), root, level,
					 b->inskey->allequalimage);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(b->index))
		log_newpage_buffer(buf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);

	/* our backend's cached copy of the empty metapage is stale */
	if (b->index->rd_amcache != NULL)
	{
		pfree(b->index->rd_amcache);
		b->index->rd_amcache = NULL;
	}
}

/*
 * Build each level from the one below until a level has one page, then
 * the metapage.
 */
void
dp_btree_finish(DPBtreeBuild *b)
{
	DPBtPivots below = {0};
	DPBtLevel	lev;
	BlockNumber root;
	uint32		level = 0;

	tuplesort_performsort(b->sort);
	b->append = dp_append_begin(b->index, false, NULL);
	b->next_blkno = dp_append_first_block(b->append);

	level_init(&lev, 0, b->index);
	if (b->deduplicate)
		load_dedup(b, &lev, &below);
	else
		load_plain(b, &lev, &below);
	root = finish_level(b, &lev, &below);
	write_pending(b, false);
	dp_fault("btree_leaves");
	while (lev.npages > 1)
	{
		DPBtPivots above = {0};

		level_init(&lev, ++level, b->index);
		for (int i = 0; i < below.n; i++)
			add_item(b, &lev, below.items[i], 0, &above);
		root = finish_level(b, &lev, &above);
		below = above;
	}
	write_pending(b, true);
	dp_append_finish(b->append);
	write_metapage(b, root, root == P_NONE ? 0 : level);

	tuplesort_end(b->sort);
	MemoryContextDelete(b->cxt);
}
