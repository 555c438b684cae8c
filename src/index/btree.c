/*-------------------------------------------------------------------------
 *
 * btree.c
 *	  The btree page builder: turns a stream of index tuples sorted in
 *	  btree order into btree pages.  Two users, which differ only in where
 *	  a page's block comes from and where a finished page goes (DPBtSink):
 *
 * - a build (dp_btree_finish), where an index's storage is new in the
 *	 transaction and empty when the load begins (rebuild.c): the load puts
 *	 each row's index tuple into a sort (keysort.c) as it places the row,
 *	 and at the end the whole tree is built here from the sorted stream, without
 *	 reading the heap again; its pages go to disk through the append layer
 *	 (append.c), as the heap page builder's do (pages.c);
 * - the right-edge append to an existing index (btappend.c), which drives
 *	 the leaf level only (dp_btree_put_item, _put_entry) and writes the
 *	 pages through shared buffers; core adds their downlinks.
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
 * The entries are sorted by keysort.c where every key column is an integer,
 * oid, date, timestamp or uuid under its default operator class, a unique
 * build's duplicates found there too, else (or once an entry has a NULL
 * key) by core's btree tuplesort.
 *
 * Invariants of a build: the metapage is written last, so until then the
 * index is the empty index it was; pages are handed to the append layer in
 * block order; the caller holds the index's storage new in this
 * transaction and exclusively (nobody else can see it).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "heap/heap.h"

#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "common/fault.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* Finished pages handed to the append layer at a time (a build). */
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
	DPKeySort  *sort;			/* the load's entries */
	double		nentries;		/* how many */
	double		ntaken;			/* how many dp_btree_next returned */
	IndexTuple	peeked;			/* next entry, read ahead (dp_btree_peek) */
	BTScanInsert inskey;		/* for suffix truncation, equal-key tests */
	bool		deduplicate;	/* posting lists on the leaves */
	DPBtSink	sink;			/* where pages come from and go */
	DPBtLevel	leaves;			/* the leaf level */
	DPBtPivots *pivots;			/* the leaves' pivots (a build), or NULL */
	BTDedupState dedup;			/* equal keys being merged, or NULL */
	Size		hikey_room;		/* kept free on leaves for a given high key */
	/* a build's sink: the append layer */
	DPAppend   *append;			/* where finished pages go */
	BlockNumber next_blkno;		/* block of the next page started */
	Page		pending[DP_BT_WRITE_BATCH]; /* finished, not handed on */
	int			npending;
	MemoryContext cxt;			/* keys and pivots */
	bool		skip_unique;	/* no entry can meet a live duplicate */
};

DPBtreeBuild *
dp_btree_begin(Relation heap, Relation index, int workmem, bool check_unique)
{
	DPBtreeBuild *b = palloc0(sizeof(DPBtreeBuild));

	b->heap = heap;
	b->index = index;
	b->cxt = AllocSetContextCreate(CurrentMemoryContext, "directpath btree",
								   ALLOCSET_DEFAULT_SIZES);
	b->sort = dp_keysort_begin(heap, index, workmem, check_unique);
	b->inskey = _bt_mkscankey(index, NULL);
	_bt_metaversion(index, &b->inskey->heapkeyspace,
					&b->inskey->allequalimage);
	b->deduplicate = b->inskey->allequalimage &&
		!index->rd_index->indisunique && BTGetDeduplicateItems(index);
	return b;
}

void
dp_btree_add(DPBtreeBuild *b, ItemPointer tid, Datum *values, bool *isnull)
{
	dp_keysort_add(b->sort, tid, values, isnull);
	b->nentries++;
}

double
dp_btree_count(DPBtreeBuild *b)
{
	return b->nentries;
}

static IndexTuple
copy_tuple_in(MemoryContext cxt, IndexTuple itup)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	IndexTuple	copy = CopyIndexTuple(itup);

	MemoryContextSwitchTo(old);
	return copy;
}

IndexTuple
dp_btree_peek(DPBtreeBuild *b)
{
	/* read ahead in place: the sort is not asked again until it is used */
	if (b->peeked == NULL)
		b->peeked = dp_keysort_next(b->sort);
	return b->peeked;
}

IndexTuple
dp_btree_next(DPBtreeBuild *b)
{
	IndexTuple	itup = b->peeked;

	if (itup != NULL)
		b->peeked = NULL;
	else
		itup = dp_keysort_next(b->sort);
	b->ntaken += (itup != NULL);
	return itup;
}

double
dp_btree_taken(DPBtreeBuild *b)
{
	return b->ntaken;
}

void
dp_btree_discard(DPBtreeBuild *b)
{
	dp_keysort_end(b->sort);
	MemoryContextDelete(b->cxt);
	pfree(b);
}

/* A fresh page for the level, its block from the sink. */
static void
new_page(DPBtreeBuild *b, DPBtLevel *lev)
{
	BlockNumber blkno;
	Page		page = b->sink.new_page(b->sink.arg, &blkno);
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
	lev->blkno = blkno;
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

/*
 * The level's page, with its low key, becomes a pivot of the next level
 * (when pivots are kept).
 */
static void
add_pivot(DPBtreeBuild *b, DPBtPivots *pivots, DPBtLevel *lev,
		  BlockNumber blkno)
{
	MemoryContext old;

	if (pivots == NULL)
		return;
	old = MemoryContextSwitchTo(b->cxt);
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
	if (pivots != NULL)
		lev->lowkey = copy_tuple_in(b->cxt, oitup);
	BTPageGetOpaque(opage)->btpo_next = lev->blkno;
	b->sink.page_done(b->sink.arg, opage, oblkno);
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
	if (lev->page == NULL && pivots == NULL)
		new_page(b, lev);
	else if (lev->page == NULL)
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
	if (space < size + (leaf ? MAXALIGN(sizeof(ItemPointerData)) + b->hikey_room : 0) ||
		(space + lastextra < lev->full && lev->lastoff > P_FIRSTKEY))
		split_off(b, lev, pivots);
	lev->lastoff = OffsetNumberNext(lev->lastoff);
	put_item(lev->page, itup, lev->lastoff,
			 !leaf && lev->lastoff == P_FIRSTKEY);
}

void
dp_btree_rightmost_image(Page page)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	ItemId		prev = PageGetItemId(page, P_HIKEY);

	/* slide the line pointers back over the unused high-key slot */
	for (OffsetNumber off = P_FIRSTKEY; off <= maxoff; off++)
	{
		ItemId		cur = PageGetItemId(page, off);

		*prev = *cur;
		prev = cur;
	}
	((PageHeader) page)->pd_lower -= sizeof(ItemIdData);
}

void
dp_btree_high_key_image(Page page, IndexTuple hikey)
{
	PageHeader	ph = (PageHeader) page;
	Size		size = MAXALIGN(IndexTupleSize(hikey));

	/* the slot's line pointer is reserved; the tuple goes below pd_upper */
	if (PageGetFreeSpace(page) + sizeof(ItemIdData) < size)
		elog(ERROR, "directpath: no room for a high key on a btree page");
	ph->pd_upper -= size;
	memcpy((char *) page + ph->pd_upper, hikey, IndexTupleSize(hikey));
	ItemIdSetNormal(PageGetItemId(page, P_HIKEY), ph->pd_upper,
					IndexTupleSize(hikey));
}

int
dp_btree_compare(Relation index, IndexTuple a, IndexTuple b, bool keys_only)
{
	TupleDesc	desc = RelationGetDescr(index);
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	int			bkeys = Min(nkeys, BTreeTupleGetNAtts(b, index));
	ItemPointer btid;

	for (int att = 1; att <= bkeys; att++)
	{
		int16		option = index->rd_indoption[att - 1];
		bool		anull,
					bnull;
		Datum		ad = index_getattr(a, att, desc, &anull);
		Datum		bd = index_getattr(b, att, desc, &bnull);
		int32		r;

		if (anull && bnull)
			continue;
		if (anull || bnull)
			return (anull == ((option & INDOPTION_NULLS_FIRST) != 0)) ? -1 : 1;
		r = DatumGetInt32(FunctionCall2Coll(index_getprocinfo(index, att, BTORDER_PROC),
											index->rd_indcollation[att - 1],
											ad, bd));
		if (r != 0)
			return (option & INDOPTION_DESC) ? (r < 0 ? 1 : -1) : r;
	}
	/* a truncated column or heap TID of a pivot is minus infinity */
	if (bkeys < nkeys)
		return 1;
	if (keys_only)
		return 0;
	btid = BTreeTupleGetHeapTID(b);
	if (btid == NULL)
		return 1;
	return ItemPointerCompare(BTreeTupleGetHeapTID(a), btid);
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

	if (page == NULL)
		return P_NONE;
	if (lev->npages == 1)
		BTPageGetOpaque(page)->btpo_flags |= BTP_ROOT;
	else
		add_pivot(b, pivots, lev, lev->blkno);
	dp_btree_rightmost_image(page);
	b->sink.page_done(b->sink.arg, page, lev->blkno);
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

void
dp_btree_leaves_begin(DPBtreeBuild *b, const DPBtSink *sink, Size hikey_room)
{
	b->sink = *sink;
	b->hikey_room = hikey_room;
	level_init(&b->leaves, 0, b->index);
	if (b->deduplicate)
	{
		BTDedupState d = b->dedup;
		ItemPointer htids;

		/* a fresh state (runs of btappend.c reuse its memory) */
		if (d == NULL)
		{
			d = MemoryContextAlloc(b->cxt, sizeof(BTDedupStateData));
			d->htids = NULL;
		}
		htids = d->htids;
		memset(d, 0, sizeof(BTDedupStateData));
		/* at most a tenth of a page, core's limit for index builds */
		d->deduplicate = true;
		d->maxpostingsize = MAXALIGN_DOWN(BLCKSZ * 10 / 100) -
			sizeof(ItemIdData);
		/*
		 * Room for any posting list: an existing one (a merge, a leaf's
		 * items) may hold more TIDs than this limit lets us merge, and
		 * _bt_dedup_start_pending copies all of them.
		 */
		d->htids = htids ? htids : MemoryContextAlloc(b->cxt, BLCKSZ);
		b->dedup = d;
	}
}

void
dp_btree_put_item(DPBtreeBuild *b, IndexTuple itup)
{
	Size		extra = BTreeTupleIsPosting(itup) ?
		IndexTupleSize(itup) - BTreeTupleGetPostingOffset(itup) : 0;

	add_item(b, &b->leaves, itup, extra, b->pivots);
}

/* The pending posting list (or lone tuple) goes onto the leaf level. */
static void
put_pending(DPBtreeBuild *b)
{
	BTDedupState d = b->dedup;

	if (d->nitems == 1)
		dp_btree_put_item(b, d->base);
	else
	{
		IndexTuple	posting = _bt_form_posting(d->base, d->htids, d->nhtids);

		dp_btree_put_item(b, posting);
		pfree(posting);
	}
	d->nhtids = d->nitems = 0;
	pfree(d->base);
	d->base = NULL;
}

void
dp_btree_put_entry(DPBtreeBuild *b, IndexTuple itup)
{
	BTDedupState d = b->dedup;
	int			keysz = IndexRelationGetNumberOfKeyAttributes(b->index);

	if (d == NULL)
	{
		dp_btree_put_item(b, itup);
		return;
	}
	if (d->base != NULL &&
		_bt_keep_natts_fast(b->index, d->base, itup) > keysz &&
		_bt_dedup_save_htid(d, itup))
		return;
	if (d->base != NULL)
		put_pending(b);
	_bt_dedup_start_pending(d, CopyIndexTuple(itup), InvalidOffsetNumber);
}

void
dp_btree_leaves_end(DPBtreeBuild *b)
{
	if (b->dedup != NULL && b->dedup->base != NULL)
		put_pending(b);
}

/* ---- a build: the append layer as the sink ---- */

/* Hand the finished pages on, in block order. */
static void
write_pending(DPBtreeBuild *b, bool drain)
{
	dp_append_write(b->append, b->pending, b->npending, drain);
	b->npending = 0;
}

static Page
build_new_page(void *arg, BlockNumber *blkno)
{
	DPBtreeBuild *b = (DPBtreeBuild *) arg;

	*blkno = b->next_blkno++;
	return dp_append_page(b->append);
}

static void
build_page_done(void *arg, Page page, BlockNumber blkno)
{
	DPBtreeBuild *b = (DPBtreeBuild *) arg;

	b->pending[b->npending++] = page;
	if (b->npending == DP_BT_WRITE_BATCH)
		write_pending(b, false);
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

/* The leaf level from a sorted stream; returns its last page's block. */
static BlockNumber
build_leaves(DPBtreeBuild *b, DPBtStream next, void *arg, DPBtPivots *pivots)
{
	DPBtSink	sink = {build_new_page, build_page_done, b};
	IndexTuple	itup;

	b->pivots = pivots;
	dp_btree_leaves_begin(b, &sink, 0);
	while ((itup = next(arg)) != NULL)
		dp_btree_put_entry(b, itup);
	dp_btree_leaves_end(b);
	return finish_level(b, &b->leaves, pivots);
}

/* Storage just created has no metapage yet: an empty one, logged. */
static void
ensure_metapage(DPBtreeBuild *b)
{
	Buffer		buf;

	if (RelationGetNumberOfBlocks(b->index) > 0)
		return;
	buf = DP_EXTEND_BY_ONE(b->index);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	START_CRIT_SECTION();
	_bt_initmetapage(BufferGetPage(buf), P_NONE, 0, b->inskey->allequalimage);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(b->index))
		log_newpage_buffer(buf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
}

static IndexTuple
next_sorted(void *arg)
{
	return dp_btree_next((DPBtreeBuild *) arg);
}

void
dp_btree_finish(DPBtreeBuild *b)
{
	dp_btree_build(b, next_sorted, b);
}

/*
 * Build the leaves, then each level from the one below until a level has
 * one page, then the metapage.
 */
void
dp_btree_build(DPBtreeBuild *b, DPBtStream next, void *arg)
{
	DPBtPivots below = {0};
	DPBtLevel	lev;
	BlockNumber root;
	uint32		level = 0;

	/* the metapage of the empty index does not know yet */
	b->inskey->allequalimage = _bt_allequalimage(b->index, false);
	b->deduplicate = b->inskey->allequalimage &&
		!b->index->rd_index->indisunique && BTGetDeduplicateItems(b->index);
	ensure_metapage(b);
	if (RelationGetNumberOfBlocks(b->index) != 1)
		elog(ERROR, "directpath: index \"%s\" is not empty",
			 RelationGetRelationName(b->index));
	b->append = dp_append_begin(b->index, false, NULL);
	b->next_blkno = dp_append_first_block(b->append);

	root = build_leaves(b, next, arg, &below);
	write_pending(b, false);
	dp_fault("btree_leaves");
	lev = b->leaves;
	while (lev.npages > 1)
	{
		DPBtPivots	above = {0};

		level_init(&lev, ++level, b->index);
		for (int i = 0; i < below.n; i++)
			add_item(b, &lev, below.items[i], 0, &above);
		root = finish_level(b, &lev, &above);
		below = above;
	}
	write_pending(b, true);
	dp_append_finish(b->append);
	write_metapage(b, root, root == P_NONE ? 0 : level);
	dp_btree_discard(b);
}

Relation
dp_btree_index(DPBtreeBuild *b)
{
	return b->index;
}

Relation
dp_btree_heap(DPBtreeBuild *b)
{
	return b->heap;
}

bool
dp_btree_checks_unique(DPBtreeBuild *b)
{
	return b->index->rd_index->indisunique && !b->skip_unique;
}

void
dp_btree_skip_unique(DPBtreeBuild *b)
{
	b->skip_unique = true;
}
