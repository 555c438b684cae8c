/*-------------------------------------------------------------------------
 *
 * btappend.c
 *	  Sorted entries written as new leaf pages of an existing btree: at its
 *	  right edge, in a gap after the last item of an inner leaf, or merged
 *	  among a leaf's items.
 *
 * Used per batch (indexes.c).  Instead of one descent, one leaf lock and
 * one WAL record per entry, a run of entries that all go after the last
 * item of one leaf page and before its high key becomes that leaf's new
 * content plus new leaf pages linked in after it, and core adds one
 * downlink per new page.  Two users:
 *
 * - dp_btree_append: every entry of the batch sorts after the index's last
 *	 entry (the keys of a sequence, an identity column, a time of arrival);
 *	 the leaf is the rightmost, "the tail", and the run is the whole batch.
 * - dp_btree_insert_runs: any batch, run by run.  Each run starts with a
 *	 descent for its first entry; keys that arrive in several interleaved
 *	 ascending streams (per account, per device, per shard) give one long
 *	 run per stream, each after the last item of its stream's leaf.  A
 *	 first entry that sorts among the leaf's items instead starts a leaf
 *	 merge (below) when at least DP_BT_MIN_MERGE entries go into the leaf.
 *	 An entry that starts neither a run of at least DP_BT_MIN_RUN entries
 *	 nor a leaf merge is inserted by core (index_insert, through the
 *	 caller), and after DP_BT_MAX_MISSES such entries in a row the rest of
 *	 the batch is too.
 *
 * Algorithm, for one run.
 *
 * 1. Descend as core's insertion of the first entry would, which completes
 *	  any split left incomplete on the way (and creates the root of an
 *	  index that has none), and check that the first entry sorts after the
 *	  leaf's last item: by key and heap TID, and in a unique index by key
 *	  alone, so that no entry of the index can be its duplicate.  The run
 *	  is the entries below the leaf's high key (none at the right edge): by
 *	  key and TID, and in a unique index by key alone, so that no entry
 *	  right of the leaf can be a duplicate either.
 *
 * 2. The leaf's items, then the run's entries, go through the btree page
 *	  builder (btree.c): its first page takes the leaf's block, each further
 *	  page a new block from core's allocator.  Entries are checked against
 *	  the one before for a unique index's duplicates (INSERT's error,
 *	  naming the row) and merged into posting lists where the index
 *	  deduplicates.  What does not fit in the leaf below its fillfactor
 *	  moves right.
 *
 * 3. Pages are written in chunks through shared buffers: the finished pages
 *	  so far, each with its high key, its right link and
 *	  BTP_INCOMPLETE_SPLIT, and the page still filling, written as the last
 *	  page of the run: at the right edge without a high key, else with the
 *	  leaf's old high key and right link, and the right sibling's left link
 *	  pointed at it (unless it is the leaf, which the link names already:
 *	  a leaf merge that needed no new page).  All are exclusively locked,
 *	  left to right, and logged
 *	  as one WAL record of full-page images (XLOG_FPI).  A chunk's first
 *	  page is the previous chunk's filling page (at first, the leaf),
 *	  written again.  When the leaf is the root, the first chunk is the
 *	  leaf and one page.
 *
 * 4. After each chunk, core completes each finished page's split
 *	  (_bt_finish_split): the downlink to its right sibling goes into the
 *	  leaf's parent (the descent's stack; at the right edge, the rightmost
 *	  page of level 1), core's insertion splitting parents and growing a
 *	  new root as needed, and clearing the flag, WAL-logged as any
 *	  insertion.
 *
 * A leaf merge is the same run with steps 1 and 2 widened: the run is
 * every entry below the leaf's high key, and step 2 merges the leaf's items
 * with the entries in btree order.  Its common case is the retry of a
 * failed or killed load, whose dead entries hold the very keys of the
 * retry: core would visit each one's heap tuple to prove it no duplicate,
 * and its deletion passes would visit them again, pulling the failed
 * load's heap into shared buffers.  Here, in a unique index, each leaf item
 * whose key an entry repeats is judged once, from its row's heap tuple
 * read through a small ring and without setting hint bits: the entry of a
 * row whose inserter aborted (or crashed) is dropped from the leaf; one
 * that a dirty snapshot does not see (a deleted row) stays beside the new
 * entry; a live or in-progress one stops the merge, and core inserts the
 * entries (waiting or reporting the duplicate as for a plain INSERT).  For
 * that the unique index's descent goes, as core's uniqueness check does,
 * to the first leaf where the key can be, so no item left of the leaf
 * repeats a key, and the high key bounds the run by key alone, so none
 * right of it does.  Dropping an aborted row's entry needs no recovery
 * conflict on a standby (no snapshot could see the row: core's own
 * deletion computes no conflict horizon from such a tuple either), and the
 * leaf's full-page image carries the removal.  A non-unique index keeps
 * every item.
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
 *	 holds its pages until the sibling is fixed; XLOG_FPI's redo cannot.)  A page without a
 *	 downlink is the right sibling of a page marked BTP_INCOMPLETE_SPLIT:
 *	 the state core's own page split passes through, which readers cross
 *	 by right links, amcheck accepts, and any later inserter completes.
 * - A new block is all zeros until its chunk's record: a crash or an
 *	 error before leaves nothing reachable, and VACUUM recycles it.
 * - Only readers use the index meanwhile: the direct path holds
 *	 ShareRowExclusiveLock on the table (no other writer, no VACUUM), so
 *	 the leaf is ours to rewrite once we lock it; a reader may only set
 *	 LP_DEAD hints, which the rewrite drops.
 * - The rows the entries point to are on disk (the caller's batch flush
 *	 came first), as for any index entry the direct path makes.
 * - Serializable transactions see what a plain insertion shows them: the
 *	 entries all go into the leaf's key range, so a serializable load
 *	 checks for conflicts on the leaf, and every new page inherits the
 *	 leaf's predicate locks, as the right half of a split does.
 *
 * Long: over 700 lines.  One algorithm (find a run, judge a leaf's
 * repeated keys, build the run's pages, write them in chunks, complete the
 * splits) whose steps share one state (DPBtAppend) and one locking protocol
 * for a leaf and its right sibling; split across files, that state and
 * protocol would have to be exposed to each part.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "storage/procarray.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* Pages in one WAL record at the right edge: as many as a record takes. */
#define DP_BT_CHUNK XLR_MAX_BLOCK_ID

/* New pages in one WAL record inside the tree (see the file header). */
#define DP_BT_GAP_CHUNK 4

/* Entries a run needs to be written as pages rather than inserted. */
#define DP_BT_MIN_RUN 256

/* Entries a leaf merge needs to be written as pages rather than inserted. */
#define DP_BT_MIN_MERGE 64

/* Entries read ahead, at most, to judge a leaf merge. */
#define DP_BT_MERGE_AHEAD (4 * MaxIndexTuplesPerPage)

/* Entries in a row that start no run before the rest are inserted. */
#define DP_BT_MAX_MISSES 8

/* What the heap says of an existing entry whose key a new entry repeats. */
typedef enum DPBtRepeat
{
	DP_BT_ABORTED,				/* its row's inserter aborted: dropped */
	DP_BT_INVISIBLE,			/* no conflict (e.g. deleted): kept */
	DP_BT_CONFLICT				/* live or in progress: core decides */
} DPBtRepeat;

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
	bool		unique;
	BlockNumber leaf;			/* the leaf the run goes into */
	BlockNumber leaf_prev;		/* its left sibling */
	bool		leaf_root;		/* it was the root (a one-page tree) */
	BlockNumber right;			/* its right sibling; P_NONE at the right
								 * edge */
	IndexTuple	hikey;			/* the run's bound: the leaf's high key
								 * (NULL at the right edge), or the
								 * separator at the gap */
	OffsetNumber gap;			/* the leaf's first item after the run, or
								 * InvalidOffsetNumber: after its last */
	BTStack		stack;			/* the descent to it (inside the tree) */
	int			chunk_max;		/* finished pages per chunk */
	bool		first_chunk;	/* no chunk written yet */
	DPBtChunkPage done[DP_BT_CHUNK - 1];	/* finished, not written */
	int			ndone;
	DPBtChunkPage filling;		/* the page still filling */
	bool		merge;			/* the run is merged among all the leaf's
								 * items (a leaf merge) */
	bool	   *drop;			/* per item of the leaf: dropped by a leaf
								 * merge (an aborted row's entry) */
	bool		dropping;		/* some are */
	TransactionId aborted;		/* an inserter known to have aborted */
	Buffer		heap_buf;		/* the heap page read last (pinned) */
	BufferAccessStrategy ring;	/* heap pages read to judge repeated keys */
	IndexTuple *ahead;			/* the run's first entries, read ahead */
	int			nahead;
	int			next_ahead;
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
 * Step 1: a copy of the leaf where 'first' goes, found by core's descent
 * for an insertion, which on its way completes the splits a crash or an
 * error left incomplete; a->stack keeps the descent.  NULL when the index
 * is not one we write pages into (a btree from before PostgreSQL 12's
 * heap-TID keys).  An index without a root gets one.
 */
static Page
find_leaf(DPBtAppend *a, BTScanInsert key)
{
	Buffer		buf;
	Page		copy;
	ItemPointer tid = key->scantid;

	if (!key->heapkeyspace)
		return NULL;
	/* as core's uniqueness check: the first leaf where the key can be */
	if (a->unique && !key->anynullkeys)
		key->scantid = NULL;
	a->stack = DP_BT_SEARCH(a->index, a->heap, key, &buf, BT_WRITE);
	key->scantid = tid;
	copy = DP_ALLOC_PAGE();
	memcpy(copy, BufferGetPage(buf), BLCKSZ);
	a->leaf = BufferGetBlockNumber(buf);
	_bt_relbuf(a->index, buf);
	return copy;
}

/*
 * The leaf's first item that sorts after 'first' ('key'; in a unique index
 * by key alone, so that an equal key is not passed), by binary search:
 * P_FIRSTDATAKEY up to one past the last item.
 */
static OffsetNumber
first_after(DPBtAppend *a, Page page, BTScanInsert key)
{
	OffsetNumber lo = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber hi = OffsetNumberNext(PageGetMaxOffsetNumber(page));
	ItemPointer tid = key->scantid;

	if (a->unique)
		key->scantid = NULL;
	while (lo < hi)
	{
		OffsetNumber mid = lo + (hi - lo) / 2;

		if (_bt_compare(a->index, key, page, mid) >= 0)
			lo = OffsetNumberNext(mid);
		else
			hi = mid;
	}
	key->scantid = tid;
	return lo;
}

/*
 * Where does the run of 'first' ('key') go in the leaf (a copy)?  After an
 * item that sorts strictly before it (in a unique index by key alone: no
 * entry of the index can be its duplicate), at the end or in a gap before
 * a->gap; an empty leaf qualifies only as the root.  Sets the run's bound:
 * the leaf's high key, or at a gap the separator core's suffix truncation
 * makes between the items around it.
 */
static bool
place_run(DPBtAppend *a, Page page, BTScanInsert key)
{
	BTPageOpaque opaque = BTPageGetOpaque(page);
	OffsetNumber first = P_FIRSTDATAKEY(opaque);
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	OffsetNumber after;
	ItemPointer tid = key->scantid;
	bool		strict;

	if (maxoff < first)
		return P_ISROOT(opaque);
	after = first_after(a, page, key);
	if (after == first)
		return false;			/* nothing before it on this leaf */
	if (a->unique)
		key->scantid = NULL;
	strict = _bt_compare(a->index, key, page, OffsetNumberPrev(after)) > 0;
	key->scantid = tid;
	if (!strict)
		return false;
	if (after > maxoff)
	{
		a->gap = InvalidOffsetNumber;
		a->hikey = P_RIGHTMOST(opaque) ? NULL :
			CopyIndexTuple((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)));
		return true;
	}
	if (P_ISROOT(opaque))
		return false;			/* a one-page index: not worth a split */
	a->gap = after;
	a->hikey = _bt_truncate(a->index,
							(IndexTuple) PageGetItem(page, PageGetItemId(page, OffsetNumberPrev(after))),
							(IndexTuple) PageGetItem(page, PageGetItemId(page, after)),
							key);
	return true;
}

/* Is 'itup' below the run's bound (in a unique index, by key alone)? */
static bool
below_high_key(DPBtAppend *a, IndexTuple itup)
{
	return a->hikey == NULL ||
		dp_btree_compare(a->index, itup, a->hikey, a->unique) < 0;
}

/*
 * Step 1 for 'first': the leaf found and judged; on success a has the
 * leaf's place in the tree and the run's, and returns the leaf's copy,
 * else NULL.
 */
static Page
target_leaf(DPBtAppend *a, IndexTuple first, bool right_edge_only)
{
	BTScanInsert key = _bt_mkscankey(a->index, first);
	Page		page = find_leaf(a, key);
	BTPageOpaque opaque;

	if (page == NULL)
	{
		pfree(key);
		return NULL;
	}
	opaque = BTPageGetOpaque(page);
	a->leaf_prev = opaque->btpo_prev;
	a->leaf_root = P_ISROOT(opaque);
	a->right = P_RIGHTMOST(opaque) ? P_NONE : opaque->btpo_next;
	if (right_edge_only)
	{
		if (a->right != P_NONE || !place_run(a, page, key) ||
			a->gap != InvalidOffsetNumber || !below_high_key(a, first))
		{
			pfree(page);
			page = NULL;
		}
	}
	else if (!place_run(a, page, key) || !below_high_key(a, first))
	{
		/* not after an item: a leaf merge, if the entry is below the high key */
		a->merge = true;
		a->gap = InvalidOffsetNumber;
		a->hikey = P_RIGHTMOST(opaque) ? NULL :
			CopyIndexTuple((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)));
		if (!dp_index_leaf_merge || a->leaf_root ||
			PageGetMaxOffsetNumber(page) < P_FIRSTDATAKEY(opaque) ||
			!below_high_key(a, first))
		{
			pfree(page);
			page = NULL;
		}
	}
	pfree(key);
	return page;
}

/*
 * Did the inserter of this heap tuple abort (or crash)?  Decided from the
 * tuple's xmin as core's visibility checks decide it (in-progress before
 * committed), but without setting hint bits: a hint would dirty the page,
 * and with data checksums log it, so the read ring could not reuse its
 * buffer and the heap would fill shared buffers after all.
 */
static bool
inserter_aborted(DPBtAppend *a, HeapTupleHeader tuple)
{
	TransactionId xmin = HeapTupleHeaderGetRawXmin(tuple);

	if (HeapTupleHeaderXminInvalid(tuple))
		return true;
	if (HeapTupleHeaderXminCommitted(tuple) ||
		(tuple->t_infomask & HEAP_MOVED) != 0)
		return false;
	/* a failed load's rows share one inserter: look it up once */
	if (TransactionIdEquals(xmin, a->aborted))
		return true;
	if (TransactionIdIsCurrentTransactionId(xmin) ||
		TransactionIdIsInProgress(xmin) ||
		TransactionIdDidCommit(xmin))
		return false;
	a->aborted = xmin;
	return true;
}

/*
 * A leaf merge's judgement of an existing entry whose key a new entry
 * repeats, by its heap tuple (one of a posting list's), read through
 * a->ring so that the heap does not fill shared buffers: aborted when its
 * inserter aborted (the entry of a failed load: no snapshot can see it,
 * so dropping it needs no recovery conflict on a standby); otherwise as
 * core's uniqueness check sees it (a dirty snapshot), a conflict when the
 * row is live or its inserter or deleter in progress, else invisible.
 */
static DPBtRepeat
judge_tid(DPBtAppend *a, ItemPointer tid)
{
	BlockNumber blkno = ItemPointerGetBlockNumber(tid);
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	Buffer		buf = a->heap_buf;
	Page		page;
	DPBtRepeat	r = DP_BT_INVISIBLE;

	/* consecutive entries' rows often share a page: keep it pinned */
	if (!BufferIsValid(buf) || BufferGetBlockNumber(buf) != blkno)
	{
		if (BufferIsValid(buf))
			ReleaseBuffer(buf);
		buf = a->heap_buf = ReadBufferExtended(a->heap, MAIN_FORKNUM, blkno,
											   RBM_NORMAL, a->ring);
	}
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (off <= PageGetMaxOffsetNumber(page) &&
		ItemIdIsNormal(PageGetItemId(page, off)) &&
		inserter_aborted(a, (HeapTupleHeader)
						 PageGetItem(page, PageGetItemId(page, off))))
		r = DP_BT_ABORTED;
	else
	{
		ItemPointerData probe = *tid;
		SnapshotData dirty;
		HeapTupleData tuple;
		bool		all_dead;

		InitDirtySnapshot(dirty);
		if (heap_hot_search_buffer(&probe, a->heap, buf, &dirty, &tuple,
								   &all_dead, true))
			r = DP_BT_CONFLICT;
	}
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	return r;
}

/* judge_tid for every heap TID of an entry: the worst of them. */
static DPBtRepeat
judge_entry(DPBtAppend *a, IndexTuple itup)
{
	DPBtRepeat	r = DP_BT_ABORTED;
	int			n = BTreeTupleIsPosting(itup) ? BTreeTupleGetNPosting(itup) : 1;

	for (int i = 0; i < n && r != DP_BT_CONFLICT; i++)
		r = Max(r, judge_tid(a, BTreeTupleIsPosting(itup) ?
							 BTreeTupleGetPostingN(itup, i) : &itup->t_tid));
	return r;
}

/*
 * A unique index's leaf merge: judge each item of the leaf (a copy) whose
 * key an entry read ahead repeats; mark the aborted ones to be dropped.
 * Returns false at the first conflict (core then inserts the entries and
 * waits or reports, as for any insertion).
 */
static bool
judge_repeats(DPBtAppend *a, Page page)
{
	OffsetNumber off = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	int			i = 0;
	DPBtRepeat	r = DP_BT_ABORTED;

	a->drop = palloc0(sizeof(bool) * (maxoff + 1));
	while (off <= maxoff && i < a->nahead)
	{
		IndexTuple	item = (IndexTuple) PageGetItem(page, PageGetItemId(page, off));
		int			cmp = dp_btree_compare(a->index, item, a->ahead[i], true);

		if (cmp > 0)
			i++;
		else
		{
			/* equal in order is equal for uniqueness, NULLs aside */
			if (cmp == 0 &&
				((!IndexTupleHasNulls(item) && !IndexTupleHasNulls(a->ahead[i])) ||
				 duplicates(a->index, item, a->ahead[i])))
			{
				r = judge_entry(a, item);
				if (r == DP_BT_CONFLICT)
					break;
				a->drop[off] = r == DP_BT_ABORTED;
				a->dropping |= a->drop[off];
			}
			off++;
		}
	}
	if (BufferIsValid(a->heap_buf))
		ReleaseBuffer(a->heap_buf);
	a->heap_buf = InvalidBuffer;
	return r != DP_BT_CONFLICT;
}

/*
 * Is the leaf merge into the leaf (a copy) worth it and possible?  Reads
 * ahead the run's entries below the leaf's high key: at least
 * DP_BT_MIN_MERGE, and in a unique index every one that sorts among the
 * leaf's items (at most DP_BT_MERGE_AHEAD), which judge_repeats checks.
 */
static bool
merge_ready(DPBtAppend *a, Page page)
{
	IndexTuple	last = (IndexTuple) PageGetItem(page,
											   PageGetItemId(page, PageGetMaxOffsetNumber(page)));
	IndexTuple	itup;

	a->ahead = palloc(sizeof(IndexTuple) * DP_BT_MERGE_AHEAD);
	while ((itup = dp_btree_peek(a->b)) != NULL && below_high_key(a, itup) &&
		   (a->nahead < DP_BT_MIN_MERGE ||
			(a->unique && dp_btree_compare(a->index, itup, last, true) <= 0)))
	{
		if (a->nahead == DP_BT_MERGE_AHEAD)
			return false;		/* too many among the leaf's items */
		a->ahead[a->nahead++] = CopyIndexTuple(dp_btree_next(a->b));
	}
	if (!a->unique)
		return a->nahead >= DP_BT_MIN_MERGE;
	/* fewer entries are worth it when they drop an aborted row's entry */
	return judge_repeats(a, page) &&
		(a->nahead >= DP_BT_MIN_MERGE || a->dropping);
}

/* The sink: the first page started is the leaf, the others new blocks. */
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
static void
flush_chunk(DPBtAppend *a, bool last)
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
	}
}

/* The sink: a finished page; a full chunk is written. */
static void
chunk_page_done(void *arg, Page page, BlockNumber blkno)
{
	DPBtAppend *a = (DPBtAppend *) arg;

	Assert(a->ndone > 0 && a->done[a->ndone - 1].image == page);
	BTPageGetOpaque(page)->btpo_flags |= BTP_INCOMPLETE_SPLIT;
	/* a root leaf gets its one right sibling (and a new root) alone */
	if (a->ndone == a->chunk_max || (a->leaf_root && a->first_chunk))
		flush_chunk(a, false);
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
static void
split_at_gap(DPBtAppend *a, Page page)
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


/* The run's next entry: read ahead, else from the sort while below the high key. */
static IndexTuple
next_entry(DPBtAppend *a)
{
	IndexTuple	itup;

	if (a->next_ahead < a->nahead)
		return a->ahead[a->next_ahead++];
	itup = dp_btree_peek(a->b);
	if (itup == NULL || !below_high_key(a, itup))
		return NULL;
	return dp_btree_next(a->b);
}

/*
 * Step 2: the leaf's items (before the gap; all of them in a leaf merge,
 * but those dropped) and the run's entries, in btree order.  A unique
 * index's entries are checked against the entry before ('prev' has room
 * for any entry); an item whose key an entry repeats was judged by
 * merge_ready.
 */
static void
put_merged(DPBtAppend *a, Page page)
{
	OffsetNumber off = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber last = a->gap != InvalidOffsetNumber ?
		OffsetNumberPrev(a->gap) : PageGetMaxOffsetNumber(page);
	IndexTuple	prev = a->unique ? palloc(BLCKSZ) : NULL;
	bool		have_prev = false;
	IndexTuple	itup = next_entry(a);

	for (;;)
	{
		IndexTuple	item = off <= last ?
			(IndexTuple) PageGetItem(page, PageGetItemId(page, off)) : NULL;

		if (item != NULL && a->drop != NULL && a->drop[off])
		{
			off++;
			continue;
		}
		if (item != NULL &&
			(itup == NULL || dp_btree_compare(a->index, item, itup, false) < 0))
		{
			dp_btree_put_entry(a->b, item);
			off++;
			continue;
		}
		if (itup == NULL)
			break;
		if (a->unique)
		{
			if (have_prev && duplicates(a->index, prev, itup))
				report_duplicate(a, itup);
			memcpy(prev, itup, IndexTupleSize(itup));
			have_prev = true;
		}
		dp_btree_put_entry(a->b, itup);
		itup = next_entry(a);
	}
	if (prev != NULL)
		pfree(prev);
}

/* Steps 2-4 for the run into the leaf whose copy is 'page'. */
static void
write_run(DPBtAppend *a, Page page)
{
	DPBtSink	sink = {chunk_new_page, chunk_page_done, a};

	a->first_chunk = true;
	a->filling.buf = InvalidBuffer;
	/* a serializable load conflicts as inserting into the leaf */
	CheckForSerializableConflictIn(a->index, NULL, a->leaf);
	XLogEnsureRecordSpace(DP_BT_CHUNK - 1, 0);
	RelationSetTargetBlock(a->index, InvalidBlockNumber);
	if (a->gap != InvalidOffsetNumber)
		split_at_gap(a, page);
	/* pages finished per record: the first is not new, the filling one is */
	a->chunk_max = a->right == P_NONE ? DP_BT_CHUNK - 1 : DP_BT_GAP_CHUNK;
	dp_btree_leaves_begin(a->b, &sink,
						  a->hikey ? MAXALIGN(IndexTupleSize(a->hikey)) : 0);
	put_merged(a, page);
	dp_btree_leaves_end(a->b);
	flush_chunk(a, true);
}

static void
init_append(DPBtAppend *a, DPBtreeBuild *b, DPNameRow name, void *arg)
{
	memset(a, 0, sizeof(DPBtAppend));
	a->b = b;
	a->index = dp_btree_index(b);
	a->heap = dp_btree_heap(b);
	a->unique = a->index->rd_index->indisunique;
	a->name = name;
	a->name_arg = arg;
}

bool
dp_btree_append(DPBtreeBuild *b, DPNameRow name, void *arg)
{
	DPBtAppend	a;
	IndexTuple	first = dp_btree_peek(b);
	Page		page;

	if (first == NULL)
		return true;
	init_append(&a, b, name, arg);
	page = target_leaf(&a, first, true);
	if (page != NULL)
		write_run(&a, page);
	_bt_freestack(a.stack);
	if (page == NULL)
		return false;
	pfree(page);
	return true;
}

/*
 * Read ahead the run's first DP_BT_MIN_RUN entries (those below the
 * leaf's high key); returns whether there are that many.
 */
static bool
read_ahead(DPBtAppend *a)
{
	IndexTuple	itup;

	a->ahead = palloc(sizeof(IndexTuple) * DP_BT_MIN_RUN);
	while (a->nahead < DP_BT_MIN_RUN &&
		   (itup = dp_btree_peek(a->b)) != NULL && below_high_key(a, itup))
		a->ahead[a->nahead++] = CopyIndexTuple(dp_btree_next(a->b));
	return a->nahead == DP_BT_MIN_RUN;
}

/*
 * One run from the next entry (into a gap or a leaf merge), or that entry
 * (and a short run's others) handed to 'insert'; returns whether a run
 * was written and counts leaf merges in '*merges'.  Everything it
 * allocates is in the caller's short-lived context.
 */
static bool
one_run(DPBtreeBuild *b, DPNameRow name, void *arg, DPBtInsert insert,
		void *iarg, BufferAccessStrategy ring, int *merges)
{
	DPBtAppend	a;
	Page		page;

	init_append(&a, b, name, arg);
	a.ring = ring;
	page = target_leaf(&a, dp_btree_peek(b), false);
	if (page == NULL)
	{
		insert(iarg, dp_btree_next(b));
		return false;
	}
	if (a.merge ? !merge_ready(&a, page) : !read_ahead(&a))
	{
		/* the first entry, below the bound, is always read ahead */
		Assert(a.nahead > 0);
		for (int i = 0; i < a.nahead; i++)
			insert(iarg, a.ahead[i]);
		return false;
	}
	write_run(&a, page);
	if (a.merge)
		(*merges)++;
	return true;
}

int
dp_btree_insert_runs(DPBtreeBuild *b, DPNameRow name, void *arg,
					 DPBtInsert insert, void *iarg,
					 BufferAccessStrategy ring, int *merges)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath btree run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			misses = 0;
	int			runs = 0;
	IndexTuple	itup;

	*merges = 0;
	while (misses < DP_BT_MAX_MISSES && dp_btree_peek(b) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		if (one_run(b, name, arg, insert, iarg, ring, merges))
		{
			runs++;
			misses = 0;
		}
		else
			misses++;
		MemoryContextReset(cxt);
	}
	while ((itup = dp_btree_next(b)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		insert(iarg, itup);
		MemoryContextReset(cxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return runs;
}
