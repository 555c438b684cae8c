/*-------------------------------------------------------------------------
 *
 * btrun.c
 *	  Where a run of sorted entries goes in an existing btree (step 1 of
 *	  btappend.c's algorithm): its leaf and its bound, and for a leaf merge
 *	  whether it goes ahead, each leaf item whose key an entry repeats
 *	  judged from its row.
 *
 * Descend as core's insertion of the first entry would, which completes
 * any split left incomplete on the way (and creates the root of an index
 * that has none), and check that the first entry sorts after the leaf's
 * last item: by key and heap TID, and in a unique index by key alone, so
 * that no entry of the index can be its duplicate.  The run is the entries
 * below the leaf's high key (none at the right edge): by key and TID, and
 * in a unique index by key alone, so that no entry right of the leaf can
 * be a duplicate either.
 *
 * The first entry either sorts after the leaf's last item (the run goes
 * at the end of the leaf), or after an item in the middle of an inner
 * leaf (the run goes in a gap there, bounded by the separator core's
 * suffix truncation makes between the items around it), or among the
 * leaf's items: then the run is a leaf merge, if it goes ahead.
 *
 * A leaf merge goes ahead when at least DP_BT_MIN_MERGE entries go into the
 * leaf (fewer where they drop an aborted row's entry).  Its common case is
 * the retry of a failed or killed load, whose dead entries hold the very
 * keys of the retry: core would visit each one's heap tuple to prove it no
 * duplicate, and its deletion passes would visit them again, pulling the
 * failed load's heap into shared buffers.  Here, in a unique index, each
 * leaf item whose key an entry repeats is judged once, from its row's heap
 * tuple read through a small ring and without setting hint bits: the entry
 * of a row whose inserter aborted (or crashed) is dropped from the leaf; one
 * that a dirty snapshot does not see (a deleted row) stays beside the new
 * entry; a live or in-progress one stops the merge, and core inserts the
 * entries (waiting or reporting the duplicate as for a plain INSERT).  For
 * that the unique index's descent goes, as core's uniqueness check does, to
 * the first leaf where the key can be, so no item left of the leaf repeats a
 * key, and the high key bounds the run by key alone, so none right of it
 * does.  Dropping an aborted row's entry needs no recovery conflict on a
 * standby (no snapshot could see the row: core's own deletion computes no
 * conflict horizon from such a tuple either), and the leaf's full-page image
 * carries the removal.  A non-unique index keeps every item.
 *
 * Invariants.
 * - Nothing of the run is written here (core's descent may complete a
 *	 split or create a root, as for any insertion): the leaf is copied
 *	 under its lock and judged on the copy; the run's first entries are
 *	 read ahead (copied).
 * - The heap pages read to judge repeated keys go through the caller's
 *	 ring, and no hint bit is set on them, so they leave few buffers
 *	 behind.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/xact.h"
#include "common/settings.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* Entries a leaf merge needs to be written as pages rather than inserted. */
#define DP_BT_MIN_MERGE 64

/* Entries read ahead, at most, to judge a leaf merge. */
#define DP_BT_MERGE_AHEAD (4 * MaxIndexTuplesPerPage)

/*
 * Are the keys of x and y equal for uniqueness (every key column equal by
 * its opclass, no NULL unless NULLS NOT DISTINCT)?
 */
bool
dp_bt_duplicates(Relation index, IndexTuple x, IndexTuple y)
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
bool
dp_bt_below_high_key(DPBtAppend *a, IndexTuple itup)
{
	return a->hikey == NULL ||
		dp_btree_compare(a->index, itup, a->hikey, a->unique) < 0;
}

/*
 * Step 1 for 'first': the leaf found and judged; on success a has the
 * leaf's place in the tree and the run's, and returns the leaf's copy,
 * else NULL.
 */
Page
dp_bt_target_leaf(DPBtAppend *a, IndexTuple first, bool right_edge_only)
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
			a->gap != InvalidOffsetNumber || !dp_bt_below_high_key(a, first))
		{
			pfree(page);
			page = NULL;
		}
	}
	else if (!place_run(a, page, key) || !dp_bt_below_high_key(a, first))
	{
		/* not after an item: a leaf merge, if the entry is below the high key */
		if (!dp_bt_widen_to_merge(a, page) || !dp_bt_below_high_key(a, first))
		{
			pfree(page);
			page = NULL;
		}
	}
	pfree(key);
	return page;
}

/*
 * The run becomes a leaf merge: bounded by the leaf's high key instead of
 * a gap's separator, so that it takes every entry that goes into the leaf,
 * wherever among the items.  Used where the first entry sorts among the
 * leaf's items, and where a run after an item is too short to be written
 * on its own (btappend.c's one_run): entries that go into one leaf in many
 * short runs - a new TID after each key's existing ones in a btree of few
 * distinct keys, or after each key's old version - are one merge then, not
 * one insertion each.  The entries read ahead so far are below the
 * separator, so below the high key too, and are kept.  False if the leaf
 * takes no merge (directpath.index_leaf_merge off, the root, an empty leaf).
 */
bool
dp_bt_widen_to_merge(DPBtAppend *a, Page page)
{
	BTPageOpaque opaque = BTPageGetOpaque(page);

	if (!dp_index_leaf_merge || a->leaf_root ||
		PageGetMaxOffsetNumber(page) < P_FIRSTDATAKEY(opaque))
		return false;
	a->merge = true;
	a->gap = InvalidOffsetNumber;
	a->hikey = P_RIGHTMOST(opaque) ? NULL :
		CopyIndexTuple((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)));
	return true;
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
DPBtRepeat
dp_bt_judge_entry(DPBtAppend *a, IndexTuple itup)
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
				 dp_bt_duplicates(a->index, item, a->ahead[i])))
			{
				r = dp_bt_judge_entry(a, item);
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
bool
dp_bt_merge_ready(DPBtAppend *a, Page page)
{
	IndexTuple	last = (IndexTuple) PageGetItem(page,
											   PageGetItemId(page, PageGetMaxOffsetNumber(page)));
	IndexTuple	itup;
	IndexTuple *kept = a->ahead;

	/* a widened run's entries read ahead come first (fewer than a run's) */
	Assert(a->nahead <= DP_BT_MERGE_AHEAD && a->next_ahead == 0);
	a->ahead = palloc(sizeof(IndexTuple) * DP_BT_MERGE_AHEAD);
	if (a->nahead > 0)
		memcpy(a->ahead, kept, sizeof(IndexTuple) * a->nahead);
	while ((itup = dp_btree_peek(a->b)) != NULL && dp_bt_below_high_key(a, itup) &&
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
