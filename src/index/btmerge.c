/*-------------------------------------------------------------------------
 *
 * btmerge.c
 *	  Merge-rebuild: an existing btree rewritten once, its entries merged
 *	  with a load's sorted entries, into new storage.
 *
 * Used at the end of a load (sorted.c) for a btree whose new entries do
 * not all sort after its existing ones and are many against it: one pass
 * that reads the old leaf level in key order and writes full new pages
 * costs less than a descent, a leaf lock and a WAL record per entry, and
 * leaves the index as compact as a fresh CREATE INDEX.
 *
 * Algorithm.
 * 1. The caller locks the index AccessExclusiveLock, held to the end of
 *	  the transaction as REINDEX does, if it can without waiting (no query
 *	  is using the index): queries that would plan on the table then wait
 *	  for the commit.
 * 2. Remember the old storage's identity and give the index new storage
 *	  (the old is dropped at commit, the new at abort, as for REINDEX).
 * 3. Read the old leaf level from its leftmost page by right links,
 *	  through shared buffers under the old storage's identity (so pages
 *	  still dirty there are read as they are), a bulk-read ring, one page
 *	  copied at a time; merge its items (posting lists as they are) with
 *	  the sorted new entries in btree order (key columns by their opclass
 *	  procedures, DESC and NULLS FIRST as declared, then heap TID), into
 *	  the btree page builder (btree.c), which writes the new tree as an
 *	  index build does, equal keys merged into posting lists.
 *
 * A unique index is checked as the streams meet.  Two entries of equal
 * keys (NULLs aside, unless NULLS NOT DISTINCT) are adjacent in btree
 * order, and when the first of a key is returned, the other stream's head
 * holds that key too if that stream has it at all: so a key both streams
 * hold is seen as two heads of equal keys, and only then is a group
 * opened.  While the merged entries keep the group's key, each old one is
 * judged by its rows as core's uniqueness check judges them (btrun.c,
 * dp_bt_judge_entry: a dirty snapshot; no other session can be writing
 * the table, the load holds ShareRowExclusiveLock), and the group raises
 * INSERT's error when it holds a new entry and either a live old one or a
 * second new one.  An old entry whose rows' inserters all aborted (a failed
 * load's, that a retry repeats) is left out, as btrun.c's leaf merge drops
 * it.  Duplicates among the new entries alone are raised by their sort
 * (sorted.c begins a unique spool with check_unique).
 *
 * Serializable readers' predicate locks on the old pages become a lock on
 * the table (as for REINDEX); a serializable load does not merge (its
 * entries are inserted, conflicts checked per leaf as for a plain INSERT).
 *
 * Invariants: every entry of the old index and every new entry is in the
 * new index exactly once, in order; nothing but this backend can see the
 * index between steps 1 and the commit; an error or a crash before the
 * commit leaves the old storage, untouched, as the index's.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "catalog/index.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"

/* The old leaf level, read page by page. */
typedef struct DPOldLeaves
{
	DPRelLocator locator;		/* the old storage */
	bool		permanent;
	BufferAccessStrategy ring;
	Page		page;			/* copy of the leaf being read */
	OffsetNumber off;			/* its next item */
	BlockNumber next;			/* the leaf after it, or P_NONE */
} DPOldLeaves;

/* The two streams being merged. */
typedef struct DPMerge
{
	Relation	index;
	DPBtreeBuild *b;			/* the new entries */
	DPOldLeaves old;
	IndexTuple	old_item;		/* head of each stream, NULL at its end */
	IndexTuple	new_item;
	bool		took_old;		/* the head returned last, to advance */
	bool		took_new;
	/* a unique index's key that both streams hold (a group), or NULL */
	IndexTuple	group;			/* a copy of the key's first new entry */
	int			group_new;		/* new entries of the key returned */
	bool		group_live;		/* an old one's row is live */
	DPBtAppend	judge;			/* heap and ring to judge old entries by */
} DPMerge;

/* Copy block 'blkno' of the old storage into old->page. */
static void
read_old(DPOldLeaves *old, BlockNumber blkno)
{
	Buffer		buf = ReadBufferWithoutRelcache(old->locator, MAIN_FORKNUM,
												blkno, RBM_NORMAL, old->ring,
												old->permanent);

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	memcpy(old->page, BufferGetPage(buf), BLCKSZ);
	UnlockReleaseBuffer(buf);
}

/* Position on the leftmost leaf: down the first downlinks from the root. */
static void
first_leaf(DPOldLeaves *old)
{
	BTMetaPageData *meta;
	BTPageOpaque opaque;
	BlockNumber blkno;

	read_old(old, BTREE_METAPAGE);
	meta = BTPageGetMeta(old->page);
	blkno = meta->btm_root;
	old->next = P_NONE;
	old->off = InvalidOffsetNumber;
	if (blkno == P_NONE)
		return;					/* an empty index */
	for (;;)
	{
		read_old(old, blkno);
		opaque = BTPageGetOpaque(old->page);
		/* a deleted or half-dead page: its right sibling has its keys */
		if (P_IGNORE(opaque))
			blkno = opaque->btpo_next;
		else if (!P_ISLEAF(opaque))
			blkno = BTreeTupleGetDownLink((IndexTuple)
										  PageGetItem(old->page,
													  PageGetItemId(old->page,
																	P_FIRSTDATAKEY(opaque))));
		else
			break;
	}
	old->off = P_FIRSTDATAKEY(opaque);
	old->next = opaque->btpo_next;
}

/* The old leaf level's next item, or NULL at its end. */
static IndexTuple
next_old(DPOldLeaves *old)
{
	for (;;)
	{
		BTPageOpaque opaque;

		if (old->off != InvalidOffsetNumber &&
			old->off <= PageGetMaxOffsetNumber(old->page))
		{
			ItemId		iid = PageGetItemId(old->page, old->off++);

			return (IndexTuple) PageGetItem(old->page, iid);
		}
		if (old->next == P_NONE)
			return NULL;
		CHECK_FOR_INTERRUPTS();
		read_old(old, old->next);
		opaque = BTPageGetOpaque(old->page);
		old->next = opaque->btpo_next;
		old->off = P_IGNORE(opaque) ? InvalidOffsetNumber :
			P_FIRSTDATAKEY(opaque);
	}
}

/*
 * A unique index: the heads of both streams have equal keys.  Open a group
 * for their key (unless one is open for it already, or a NULL makes them
 * distinct).
 */
static void
open_group(DPMerge *m)
{
	if (m->group != NULL &&
		dp_bt_duplicates(m->index, m->group, m->new_item))
		return;
	if (m->group != NULL)
		pfree(m->group);
	m->group = NULL;
	if (!dp_bt_duplicates(m->index, m->old_item, m->new_item))
		return;
	m->group = CopyIndexTuple(m->new_item);
	m->group_new = 0;
	m->group_live = false;
}

/*
 * A unique index: 'itup', about to be returned, in the open group or past
 * it.  Raises INSERT's error once the group holds a new entry beside a
 * live old one or a second new one.  Returns false for an old entry whose
 * rows' inserters all aborted (a failed load's, which the retry repeats):
 * it is left out of the new index, as a leaf merge drops it.
 */
static bool
check_group(DPMerge *m, IndexTuple itup, bool is_new)
{
	DPBtRepeat	r;

	if (!dp_bt_duplicates(m->index, m->group, itup))
	{
		pfree(m->group);
		m->group = NULL;
		return true;
	}
	if (is_new)
		m->group_new++;
	else
	{
		r = dp_bt_judge_entry(&m->judge, itup);
		if (r == DP_BT_ABORTED)
			return false;
		m->group_live |= r == DP_BT_CONFLICT;
	}
	if (m->group_new > 0 && (m->group_live || m->group_new > 1))
		dp_bt_report_duplicate(&m->judge, m->group);
	return true;
}

/*
 * Which head comes first, the new one?  A unique index's heads of equal
 * keys open a group (open_group).
 */
static bool
head_is_new(DPMerge *m)
{
	int			cmp;

	if (m->new_item == NULL || m->old_item == NULL)
		return m->new_item != NULL;
	if (!m->judge.unique)
		return dp_btree_compare(m->index, m->old_item, m->new_item, false) > 0;
	cmp = dp_btree_compare(m->index, m->old_item, m->new_item, true);
	if (cmp == 0)
	{
		open_group(m);
		cmp = dp_btree_compare(m->index, m->old_item, m->new_item, false);
	}
	return cmp > 0;
}

/*
 * The merged stream, for the builder: the smaller head of the two.  A
 * head stays valid until the next call (it lives in the page copy or in
 * the sort), so the stream it came from advances only then.
 */
static IndexTuple
next_merged(void *arg)
{
	DPMerge    *m = (DPMerge *) arg;

	if (m->took_old)
		m->old_item = next_old(&m->old);
	if (m->took_new)
		m->new_item = dp_btree_next(m->b);
	m->took_old = m->took_new = false;

	for (;;)
	{
		bool		is_new = head_is_new(m);
		IndexTuple	head = is_new ? m->new_item : m->old_item;

		if (m->group != NULL && head != NULL && !check_group(m, head, is_new))
		{
			/* an aborted row's entry: the next old one instead */
			m->old_item = next_old(&m->old);
			continue;
		}
		m->took_new = is_new;
		m->took_old = !is_new && head != NULL;
		return head;
	}
}

void
dp_btree_merge(DPBtreeBuild *b)
{
	Relation	index = dp_btree_index(b);
	DPMerge		m = {0};

	/* step 1 (taken by the caller when it could be without waiting) */
	Assert(CheckRelationLockedByMe(index, AccessExclusiveLock, false));

	/* step 2 */
	m.index = index;
	m.b = b;
	m.old.locator = *DP_REL_LOCATOR(index);
	m.old.permanent = index->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;
	m.old.ring = GetAccessStrategy(BAS_BULKREAD);
	m.old.page = DP_ALLOC_PAGE();
	m.judge.index = index;
	m.judge.heap = dp_btree_heap(b);
	m.judge.unique = index->rd_index->indisunique;
	m.judge.ring = m.old.ring;
	/* serializable readers' locks on its pages now cover the whole table */
	TransferPredicateLocksToHeapRelation(index);
	DP_SET_NEW_STORAGE(index);

	/* step 3 */
	first_leaf(&m.old);
	m.old_item = next_old(&m.old);
	m.new_item = dp_btree_next(b);
	dp_btree_build(b, next_merged, &m);
	if (BufferIsValid(m.judge.heap_buf))
		ReleaseBuffer(m.judge.heap_buf);

	pfree(m.old.page);
	FreeAccessStrategy(m.old.ring);
}
