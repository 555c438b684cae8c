/*-------------------------------------------------------------------------
 *
 * btprobe.c
 *	  Sorted keys looked up in a btree leaf by leaf: the entries that
 *	  ON CONFLICT's arbiter check (load/conflict.c) has to look at.
 *
 * Core looks a key up with a fresh descent from the root (an index scan,
 * or _bt_check_unique's search), four buffer lookups and binary searches
 * for each of a load's rows.  Here the keys come sorted in the index's
 * order, and each is searched first on the leaf where the previous one
 * was: while the key sorts before the leaf's high key it can only be on
 * that leaf (it does not sort before the previous key), so a binary search
 * of the leaf settles it; otherwise one descent (_bt_search, as core's
 * uniqueness check: by key alone, no heap TID) finds its leaf.  A batch of
 * keys denser than the leaves costs one descent per leaf it touches.
 *
 * For each key, the entries equal to it by key alone (_bt_compare with no
 * heap TID) are visited in order, every heap TID of a posting list too,
 * entries marked LP_DEAD skipped (as _bt_check_unique skips them), moving
 * right while the leaf's high key does not end them, until the visitor
 * says the key is settled (each TID given as a copy, which the visitor may
 * change).  The visitor runs with the leaf share-locked
 * (it may read the heap, as _bt_check_unique does under its lock) and
 * must not wait for anything.
 *
 * Invariants the caller provides: the keys ascend (equal keys allowed);
 * nobody else inserts into, or vacuums, the index meanwhile (the load's
 * ShareRowExclusiveLock excludes both; readers only set LP_DEAD hints);
 * the index is a heapkeyspace (version 4) btree, else dp_btree_probe
 * returns false at once and the caller probes otherwise.  An index without
 * a root yet (empty) has no entries to visit.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index.h"

#include "access/nbtree.h"

/* The leaf's first item not before 'key', by binary search (or max + 1). */
static OffsetNumber
first_not_before(Relation index, BTScanInsert key, Page page)
{
	OffsetNumber lo = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber hi = OffsetNumberNext(PageGetMaxOffsetNumber(page));

	while (lo < hi)
	{
		OffsetNumber mid = lo + (hi - lo) / 2;

		if (_bt_compare(index, key, page, mid) > 0)
			lo = OffsetNumberNext(mid);
		else
			hi = mid;
	}
	return lo;
}

/*
 * Visit one entry's heap TIDs; true once the visitor settled the key.  The
 * visitor gets a copy of each TID, never the page's own: a heap fetch
 * moves its TID argument along the HOT chain to the tuple it finds
 * (heap_hot_search_buffer), which on the page itself would repoint the
 * entry from the chain's root to a heap-only tuple.
 */
static bool
visit_item(IndexTuple itup, int k, DPProbeVisit visit, void *arg)
{
	ItemPointerData tid;

	if (!BTreeTupleIsPosting(itup))
	{
		tid = itup->t_tid;
		return visit(arg, k, &tid);
	}
	for (int i = 0; i < BTreeTupleGetNPosting(itup); i++)
	{
		tid = *BTreeTupleGetPostingN(itup, i);
		if (visit(arg, k, &tid))
			return true;
	}
	return false;
}

/*
 * The entries equal to key 'k' from the leaf in *bufp on, moving right
 * while they may go on.  Leaves *bufp on the last leaf read.
 */
static void
probe_key(Relation index, BTScanInsert key, int k, Buffer *bufp,
		  DPProbeVisit visit, void *arg)
{
	for (;;)
	{
		Page		page = BufferGetPage(*bufp);
		BTPageOpaque opaque = BTPageGetOpaque(page);
		OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
		OffsetNumber off;

		for (off = first_not_before(index, key, page); off <= maxoff;
			 off = OffsetNumberNext(off))
		{
			ItemId		iid = PageGetItemId(page, off);

			if (_bt_compare(index, key, page, off) != 0)
				return;			/* past the key */
			if (ItemIdIsDead(iid))
				continue;
			if (visit_item((IndexTuple) PageGetItem(page, iid), k, visit, arg))
				return;
		}
		/*
		 * Every item to the end was the key's: may it go on to the right?
		 * Not if the key sorts before the high key.  A high key equal to it
		 * carries a heap TID (the leaf was split among the key's entries,
		 * as versions of one row make them), and the entries after that
		 * TID are on the right, as _bt_check_unique moves right while the
		 * high key is equal.
		 */
		if (P_RIGHTMOST(opaque) || _bt_compare(index, key, page, P_HIKEY) < 0)
			return;
		do
		{
			*bufp = _bt_relandgetbuf(index, *bufp, opaque->btpo_next, BT_READ);
			opaque = BTPageGetOpaque(BufferGetPage(*bufp));
		} while (P_IGNORE(opaque) && !P_RIGHTMOST(opaque));
	}
}

/* May 'key' be on the leaf in 'buf' (given that no earlier key passed it)? */
static bool
on_this_leaf(Relation index, BTScanInsert key, Buffer buf)
{
	Page		page = BufferGetPage(buf);

	return P_RIGHTMOST(BTPageGetOpaque(page)) ||
		_bt_compare(index, key, page, P_HIKEY) < 0;
}

/*
 * Key 'k''s values into 'key' (made by _bt_mkscankey for every key
 * column): its arguments and NULL flags, as _bt_mkscankey sets them.
 */
static void
set_key(BTScanInsert key, int nkeyatts, Datum *values, bool *isnull, int k)
{
	key->anynullkeys = false;
	for (int j = 0; j < nkeyatts; j++)
	{
		ScanKey		sk = &key->scankeys[j];

		sk->sk_argument = isnull[k * nkeyatts + j] ? (Datum) 0 :
			values[k * nkeyatts + j];
		sk->sk_flags &= ~SK_ISNULL;
		if (isnull[k * nkeyatts + j])
		{
			sk->sk_flags |= SK_ISNULL;
			key->anynullkeys = true;
		}
	}
}

bool
dp_btree_probe(Relation heap, Relation index, int nkeys, Datum *values,
			   bool *isnull, DPProbeVisit visit, void *arg)
{
	TupleDesc	desc = RelationGetDescr(index);
	int			nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);
	Datum		v[INDEX_MAX_KEYS];
	bool		n[INDEX_MAX_KEYS];
	Buffer		buf = InvalidBuffer;
	BTScanInsert key;
	bool		heapkeyspace;
	bool		allequalimage;

	_bt_metaversion(index, &heapkeyspace, &allequalimage);
	if (!heapkeyspace || nkeys == 0)
		return heapkeyspace;

	/* one insertion scan key, its arguments replaced key after key */
	for (int j = 0; j < desc->natts; j++)
	{
		v[j] = (Datum) 0;
		n[j] = true;
	}
	key = _bt_mkscankey(index, index_form_tuple(desc, v, n));
	key->scantid = NULL;		/* by key alone, as _bt_check_unique */
	for (int k = 0; k < nkeys; k++)
	{
		set_key(key, nkeyatts, values, isnull, k);
		if (!BufferIsValid(buf) || !on_this_leaf(index, key, buf))
		{
			BTStack		stack;

			if (BufferIsValid(buf))
				_bt_relbuf(index, buf);
			stack = DP_BT_SEARCH(index, heap, key, &buf, BT_READ);
			_bt_freestack(stack);
			if (!BufferIsValid(buf))
				break;			/* no root: the index is empty */
		}
		probe_key(index, key, k, &buf, visit, arg);
	}
	if (BufferIsValid(buf))
		_bt_relbuf(index, buf);
	pfree(key);
	return true;
}
