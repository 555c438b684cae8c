/*-------------------------------------------------------------------------
 *
 * btappend.c
 *	  Sorted entries written as new leaf pages of an existing btree: at its
 *	  right edge, in a gap after the last item of an inner leaf, or merged
 *	  among a leaf's items.
 *
 * Used per batch (sorted.c).  Instead of one descent, one leaf lock and
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
 *	 merge (below) when at least DP_BT_MIN_MERGE entries go into the leaf,
 *	 and so does a run shorter than DP_BT_MIN_RUN (btrun.c,
 *	 dp_bt_widen_to_merge: a btree of few distinct keys takes each key's
 *	 new entries after its old ones, a short run per key, many per leaf).
 *	 An entry that starts neither a run of at least DP_BT_MIN_RUN entries
 *	 nor a leaf merge is inserted by core (index_insert, through the
 *	 caller), and after DP_BT_MAX_MISSES such entries in a row the rest of
 *	 the batch is too.
 *
 * Algorithm, for one run.
 *
 * 1. Find the leaf and the run (btrun.c): core's descent for the first
 *	  entry, which must sort after the leaf's last item; the run is the
 *	  entries below the leaf's high key (none at the right edge), so that
 *	  no entry of the index can be a duplicate of one of them.
 *
 * 2. The leaf's items, then the run's entries, go through the btree page
 *	  builder (btree.c): its first page takes the leaf's block, each further
 *	  page a new block from core's allocator.  Entries are checked against
 *	  the one before for a unique index's duplicates (INSERT's error,
 *	  naming the row) and merged into posting lists where the index
 *	  deduplicates.  What does not fit in the leaf below its fillfactor
 *	  moves right.
 *
 * 3. Pages are written in chunks through shared buffers, each chunk one
 *	  WAL record of full-page images (btchunk.c).
 *
 * 4. After each chunk, core completes each finished page's split: the
 *	  downlink to its right sibling goes into the leaf's parent (btchunk.c).
 *
 * A leaf merge is the same run with steps 1 and 2 widened: the run is
 * every entry below the leaf's high key, and step 2 merges the leaf's items
 * with the entries in btree order, but for the items of a unique index
 * that step 1 judged to be an aborted row's entry and drops (btrun.c).  A
 * non-unique index keeps every item.
 *
 * Invariants.
 * - The tree is valid after every WAL record, for readers on the primary
 *	 and on a standby and after a crash (btchunk.c).
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
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/predicate.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* New pages in one WAL record inside the tree (see btchunk.c). */
#define DP_BT_GAP_CHUNK 4

/* Entries a run needs to be written as pages rather than inserted. */
#define DP_BT_MIN_RUN 256

/* Entries in a row that start no run before the rest are inserted. */
#define DP_BT_MAX_MISSES 8

/* INSERT's error for a unique index's duplicate, naming the row. */
void
dp_bt_report_duplicate(DPBtAppend *a, IndexTuple itup)
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

/* The run's next entry: read ahead, else from the sort while below the high key. */
static IndexTuple
next_entry(DPBtAppend *a)
{
	IndexTuple	itup;

	if (a->next_ahead < a->nahead)
		return a->ahead[a->next_ahead++];
	itup = dp_btree_peek(a->b);
	if (itup == NULL || !dp_bt_below_high_key(a, itup))
		return NULL;
	return dp_btree_next(a->b);
}

/*
 * Step 2: the leaf's items (before the gap; all of them in a leaf merge,
 * but those dropped) and the run's entries, in btree order.  A unique
 * index's entries are checked against the entry before ('prev' has room
 * for any entry); an item whose key an entry repeats was judged by
 * dp_bt_merge_ready (btrun.c).
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
			if (have_prev && dp_bt_duplicates(a->index, prev, itup))
				dp_bt_report_duplicate(a, itup);
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
	DPBtSink	sink = {dp_bt_chunk_new_page, dp_bt_chunk_page_done, a};

	a->first_chunk = true;
	a->taken0 = dp_btree_taken(a->b);
	a->filling.buf = InvalidBuffer;
	/* a serializable load conflicts as inserting into the leaf */
	CheckForSerializableConflictIn(a->index, NULL, a->leaf);
	XLogEnsureRecordSpace(DP_BT_CHUNK - 1, 0);
	RelationSetTargetBlock(a->index, InvalidBlockNumber);
	if (a->gap != InvalidOffsetNumber)
		dp_bt_split_at_gap(a, page);
	/* pages finished per record: the first is not new, the filling one is */
	a->chunk_max = a->right == P_NONE ? DP_BT_CHUNK - 1 : DP_BT_GAP_CHUNK;
	dp_btree_leaves_begin(a->b, &sink,
						  a->hikey ? MAXALIGN(IndexTupleSize(a->hikey)) : 0);
	put_merged(a, page);
	dp_btree_leaves_end(a->b);
	dp_bt_flush_chunk(a, true);
}

static void
init_append(DPBtAppend *a, DPBtreeBuild *b, DPNameRow name, void *arg)
{
	memset(a, 0, sizeof(DPBtAppend));
	a->b = b;
	a->index = dp_btree_index(b);
	a->heap = dp_btree_heap(b);
	a->unique = dp_btree_checks_unique(b);
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
	page = dp_bt_target_leaf(&a, first, true);
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
		   (itup = dp_btree_peek(a->b)) != NULL && dp_bt_below_high_key(a, itup))
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
	bool		ready;

	init_append(&a, b, name, arg);
	a.ring = ring;
	page = dp_bt_target_leaf(&a, dp_btree_peek(b), false);
	if (page == NULL)
	{
		insert(iarg, dp_btree_next(b));
		return false;
	}
	if (a.merge)
		ready = dp_bt_merge_ready(&a, page);
	else
	{
		ready = read_ahead(&a);
		/* too short on its own: the leaf merged with all its entries? */
		if (!ready && dp_bt_widen_to_merge(&a, page))
			ready = dp_bt_merge_ready(&a, page);
	}
	if (!ready)
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
