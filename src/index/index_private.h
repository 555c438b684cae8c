/*-------------------------------------------------------------------------
 *
 * index/index_private.h
 *	  The index stage's parts shared among its own files: a leaf's index
 *	  work (DPIndexes: indexes.c chooses, sorted.c and rebuild.c do the
 *	  strategies' work), the btree page builder (btree.c) and the sort of
 *	  its entries (keysort.c), its uses on existing trees (btappend.c with
 *	  btrun.c and btchunk.c, which share a run's state; btmerge.c), BRIN
 *	  summaries (brin.c).  What files outside src/index/ use is in index.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INDEX_PRIVATE_H
#define DP_INDEX_PRIVATE_H

#include "index/index.h"

#include "access/itup.h"
#include "access/nbtree.h"
#include "access/xlogrecord.h"
#include "utils/relcache.h"

typedef struct DPBtreeBuild DPBtreeBuild;

/* ---------- indexes.c, sorted.c, rebuild.c: a leaf's index work ---------- */

/* A leaf's index maintenance (indexes.c chooses its strategy). */
struct DPIndexes
{
	ResultRelInfo *rri;			/* the leaf; its indexes are open */
	DPIndexStrategy strategy;
	bool	   *sort;			/* DP_INDEX_SORTED: per index, still worth
								 * sorting?  Else NULL */
	DPBtreeBuild **spools;		/* DP_INDEX_SORTED: per index, its entries
								 * for the end of the statement, or NULL */
	DPBtreeBuild **builds;		/* DP_INDEX_BUILD: per index (NULL for a
								 * BRIN index) */
	bool	   *summarize;		/* DP_INDEX_SORTED and _BUILD: per index, a
								 * BRIN index summarized at the end? Else
								 * NULL */
	BlockNumber first_new;		/* the heap's first block the load writes */
	bool		has_unique;		/* any immediate unique index? */
	bool		keys_repeat;	/* new versions' entries, each repeating its
								 * old version's unique keys
								 * (dp_indexes_keys_repeat) */
	bool		beside;			/* other sessions write the table: every
								 * entry through index_insert, per batch */
	bool		may_wait;		/* may entries wait for the end (no trigger
								 * could read the leaf before)? indexes.c */
	bool		empty;			/* DP_INDEX_SORTED: the leaf had no block
								 * when the load began, and no probe needs
								 * its keys meanwhile (no ON CONFLICT) */
	bool		unique_late;	/* DP_INDEX_SORTED: the leaf had rows when
								 * the load began, no probe needs its keys
								 * meanwhile and no update frees one: a
								 * unique btree may wait once the load is
								 * large against it (sorted.c,
								 * can_spool_late) */
	double		rows;			/* DP_INDEX_SORTED: rows of the batches so
								 * far */
	bool		spool_rows;		/* DP_INDEX_SORTED: every index's entries
								 * wait (a spool, or a BRIN summary), so
								 * each is taken as its row is placed */
	int			entries;		/* entries a row gives (BRIN summarized at
								 * the end: none), for the progress */
	uint32		used;			/* bit (1 << DPIndexStrategy) per one used */
	BufferAccessStrategy ring;	/* heap reads of leaf merges: one ring for
								 * the statement, so that its pages leave
								 * few buffers behind */
};

/*
 * Index i's entry for the row in 'slot' (its partial-index predicate and
 * expressions evaluated as ExecInsert does, in the per-tuple context):
 * false when the predicate leaves the row out.
 */
extern bool dp_index_entry_values(ResultRelInfo *rri, int i, EState *estate,
								  TupleTableSlot *slot, Datum *values,
								  bool *isnull);

/* ---------- sorted.c: DP_INDEX_SORTED ---------- */

/* dp_indexes_batch's work (see index.h). */
extern void dp_sorted_batch(DPIndexes *ix, EState *estate,
							TupleTableSlot *slot, HeapTuple *tuples,
							uint64 *linenos, int ntuples, uint64 *error_line);

/* The spools of the indexes whose entries may wait for the end, or NULL. */
extern DPBtreeBuild **dp_sorted_begin_spools(DPIndexes *ix);

/* A placed row's entries into the spools (DPIndexes.spool_rows). */
extern void dp_sorted_spool_row(DPIndexes *ix, EState *estate,
								TupleTableSlot *slot, ItemPointer tid);

/* The spools' entries inserted now, in key order; no more spools. */
extern void dp_sorted_insert_spools(DPIndexes *ix);

/* The spools at the end; returns how many indexes were rewritten. */
extern int	dp_sorted_finish_spools(DPIndexes *ix);

/* ---------- rebuild.c: DP_INDEX_BUILD and DP_INDEX_REBUILD ---------- */

/* One sorted build per btree (NULL for a BRIN index summarized). */
extern DPBtreeBuild **dp_rebuild_begin_builds(DPIndexes *ix);

/* dp_indexes_spool's work (see index.h). */
extern void dp_rebuild_spool(DPIndexes *ix, EState *estate,
							 TupleTableSlot *slot, ItemPointer tid);

/* The builds dropped (the rows go row by row after all). */
extern void dp_rebuild_discard_builds(DPIndexes *ix);

/* At the end: every index built, or rebuilt by core; returns how many. */
extern int	dp_rebuild_finish_builds(DPIndexes *ix);
extern int	dp_rebuild_reindex(DPIndexes *ix);

/*
 * Run fn(arg), work on the index 'index_name' of 'heap'; a unique
 * violation it raises (a sort's "could not create unique index") is
 * reported as a plain INSERT reports it.
 */
extern void dp_as_insert(void (*fn) (void *arg), void *arg,
						 const char *index_name, Relation heap);

/* ---------- brin.c: BRIN ranges summarized at the end ---------- */

/*
 * Is index i of the leaf a BRIN index whose per-row calls may be skipped,
 * summarized at the end (if its entries may wait: DPIndexes.may_wait)?
 */
extern bool dp_brin_can_defer(ResultRelInfo *rri, int i);

/* Summarize every range from the one holding 'first_new' (see brin.c). */
extern void dp_brin_summarize_new(Relation heap, Relation idx,
								  BlockNumber first_new);

/* ---------- btree.c: the btree page builder ---------- */

/*
 * Begin collecting 'index's entries, sorted in 'workmem' kB; with
 * 'check_unique', the sort raises a unique index's duplicates.
 */
extern DPBtreeBuild *dp_btree_begin(Relation heap, Relation index,
									int workmem, bool check_unique);

/* One entry (copied into the sort). */
extern void dp_btree_add(DPBtreeBuild *b, ItemPointer tid, Datum *values,
						 bool *isnull);

/*
 * The entries in btree order: dp_btree_peek reads the next one ahead (NULL
 * when there is none) and dp_btree_next returns it, then the rest.  An
 * entry either returns lives in the sort and is valid until a later call
 * reads past it (copy it to keep it).
 */
extern IndexTuple dp_btree_peek(DPBtreeBuild *b);
extern IndexTuple dp_btree_next(DPBtreeBuild *b);

/* How many entries were added; how many dp_btree_next returned. */
extern double dp_btree_count(DPBtreeBuild *b);
extern double dp_btree_taken(DPBtreeBuild *b);

/*
 * Build the index (storage new in this transaction, empty or only its
 * metapage so far) from the entries: the tree, then the metapage;
 * releases the build.  dp_btree_build takes the sorted stream from 'next'
 * (NULL at its end) instead.
 */
extern void dp_btree_finish(DPBtreeBuild *b);
typedef IndexTuple (*DPBtStream) (void *arg);
extern void dp_btree_build(DPBtreeBuild *b, DPBtStream next, void *arg);

/* Release a build (finished or not); an unfinished index stays as it was. */
extern void dp_btree_discard(DPBtreeBuild *b);

/*
 * The leaf level alone, for the right-edge append (btappend.c): the sink
 * gives each page started its memory and block, and takes each finished
 * page (high key, right link set) in order.
 */
typedef struct DPBtSink
{
	Page		(*new_page) (void *arg, BlockNumber *blkno);
	void		(*page_done) (void *arg, Page page, BlockNumber blkno);
	void	   *arg;
} DPBtSink;

/* 'hikey_room': bytes every leaf keeps free for a high key set later. */
extern void dp_btree_leaves_begin(DPBtreeBuild *b, const DPBtSink *sink,
								  Size hikey_room);

/* An existing leaf item, as it is (posting lists included). */
extern void dp_btree_put_item(DPBtreeBuild *b, IndexTuple itup);

/* A new entry, merged with equal keys where the index deduplicates. */
extern void dp_btree_put_entry(DPBtreeBuild *b, IndexTuple itup);

/*
 * No more items: the last pending posting list goes onto the page still
 * filling, which stays unfinished (the sink's owner knows it).
 */
extern void dp_btree_leaves_end(DPBtreeBuild *b);

/* A filling page made rightmost, in place: no high key slot. */
extern void dp_btree_rightmost_image(Page page);

/* A filling page given 'hikey' as its high key, in place. */
extern void dp_btree_high_key_image(Page page, IndexTuple hikey);

/*
 * Compare leaf tuples as the btree orders them: key columns (opclass order,
 * collation, DESC, NULLS FIRST), then heap TID unless 'keys_only'.  'b' may
 * be a pivot: its truncated columns and missing heap TID are minus
 * infinity, as for _bt_compare.
 */
extern int	dp_btree_compare(Relation index, IndexTuple a, IndexTuple b,
							 bool keys_only);

/* The index b builds or appends to. */
extern Relation dp_btree_index(DPBtreeBuild *b);
extern Relation dp_btree_heap(DPBtreeBuild *b);

/*
 * Are b's entries checked for uniqueness where they are written (runs,
 * leaf merges, appends)?  Those of a unique index are, unless
 * dp_btree_skip_unique said that no entry can meet a live duplicate.
 */
extern bool dp_btree_checks_unique(DPBtreeBuild *b);
extern void dp_btree_skip_unique(DPBtreeBuild *b);

/* ---------- keysort.c: the sort of the page builder's entries ---------- */

typedef struct DPKeySort DPKeySort;

/*
 * A sort of 'index's entries within 'workmem' kB; with 'check_unique', a
 * unique index's duplicates raise core's error.
 */
extern DPKeySort *dp_keysort_begin(Relation heap, Relation index,
								   int workmem, bool check_unique);

/* One entry (copied). */
extern void dp_keysort_add(DPKeySort *s, ItemPointer tid, Datum *values,
						   bool *isnull);

/*
 * The entries in btree order (sorted at the first call); NULL after the
 * last.  Each stays valid until the next call, at least (until the call
 * after the next 1024 on sort words).
 */
extern IndexTuple dp_keysort_next(DPKeySort *s);

extern void dp_keysort_end(DPKeySort *s);

/* ---------- btappend.c: sorted entries at an existing btree's right edge ---------- */

/*
 * Called back with the heap TID of the entry about to be reported as a
 * duplicate (so COPY's context can name its line).
 */
typedef void (*DPNameRow) (void *arg, ItemPointer tid);

/*
 * Append b's entries (sorted, their rows' pages on disk) at the right edge
 * of the existing btree b->index, when the first sorts after every entry
 * of the index; returns false, with nothing written and the entries still
 * to be read (dp_btree_next), when it does not.  A unique index's
 * duplicate among the entries raises INSERT's error.
 */
extern bool dp_btree_append(DPBtreeBuild *b, DPNameRow name, void *arg);

/* Insert one entry the core way (index_insert), for dp_btree_insert_runs. */
typedef void (*DPBtInsert) (void *arg, IndexTuple itup);

/*
 * Write b's entries (sorted, their rows' pages on disk) into the existing
 * btree b->index run by run: a run of entries after the last item of one
 * leaf and below its high key becomes new leaf pages there, or entries
 * among a leaf's items are merged with them into the leaf and new pages
 * after it (a leaf merge, counted in '*merges'; the heap pages it reads
 * go through 'ring'); entries that start
 * neither go to 'insert'.  A unique index's duplicate within a run raises
 * INSERT's error.  Returns how many runs (leaf merges included) were
 * written.
 */
extern int	dp_btree_insert_runs(DPBtreeBuild *b, DPNameRow name, void *arg,
								 DPBtInsert insert, void *iarg,
								 BufferAccessStrategy ring, int *merges);

/* ---------- btappend.c, btrun.c, btchunk.c: a run's state ---------- */

/* Pages in one WAL record at the right edge: as many as a record takes. */
#define DP_BT_CHUNK XLR_MAX_BLOCK_ID

/*
 * Blocks a right-edge run adds to the index at once (btchunk.c), and the
 * new pages it takes from core's allocator before it does.
 */
#define DP_BT_SPARES		64
#define DP_BT_SPARES_AFTER	16

/* A page of the chunk: its buffer (pinned) and its image. */
typedef struct DPBtChunkPage
{
	Buffer		buf;
	Page		image;
} DPBtChunkPage;

/* One run into an existing btree (btappend.c), from its leaf to its pages. */
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
	int			pages_new;		/* new blocks the run took */
	double		taken0;			/* the build's entries taken before it */
	bool		extended;		/* core's allocator extended the index last */
	Buffer		spares[DP_BT_SPARES];	/* blocks added ahead (pinned) */
	int			nspares;
	int			spare_next;		/* the next one to take */
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

/* What the heap says of an existing entry whose key a new entry repeats. */
typedef enum DPBtRepeat
{
	DP_BT_ABORTED,				/* its row's inserter aborted: dropped */
	DP_BT_INVISIBLE,			/* no conflict (e.g. deleted): kept */
	DP_BT_CONFLICT				/* live or in progress: core decides */
} DPBtRepeat;

/*
 * btrun.c: an existing entry whose key a new entry repeats, judged by its
 * rows (a->heap, read through a->ring): the worst of its heap TIDs.
 */
extern DPBtRepeat dp_bt_judge_entry(DPBtAppend *a, IndexTuple itup);

/* btappend.c: INSERT's error for 'itup', a unique index's duplicate. */
extern void dp_bt_report_duplicate(DPBtAppend *a, IndexTuple itup);

/* btrun.c: a unique index's keys equal for uniqueness (NULLs aside)? */
extern bool dp_bt_duplicates(Relation index, IndexTuple x, IndexTuple y);

/* btrun.c: is 'itup' below the run's bound (unique index: by key alone)? */
extern bool dp_bt_below_high_key(DPBtAppend *a, IndexTuple itup);

/*
 * btrun.c, step 1: the leaf where 'first' goes, judged; the leaf's copy
 * with a set for the run, or NULL.
 */
extern Page dp_bt_target_leaf(DPBtAppend *a, IndexTuple first,
							  bool right_edge_only);

/*
 * btrun.c: make 'a' a leaf merge into the leaf (a copy), bounded by its high
 * key, keeping the entries read ahead; false if the leaf cannot take one.
 */
extern bool dp_bt_widen_to_merge(DPBtAppend *a, Page page);

/* btrun.c: is the leaf merge into the leaf (a copy) worth it and possible? */
extern bool dp_bt_merge_ready(DPBtAppend *a, Page page);

/* btchunk.c: the page builder's sink (DPBtSink) for the run's pages. */
extern Page dp_bt_chunk_new_page(void *arg, BlockNumber *blkno);
extern void dp_bt_chunk_page_done(void *arg, Page page, BlockNumber blkno);

/* btchunk.c, steps 3-4: the pages so far written ('last': for good). */
extern void dp_bt_flush_chunk(DPBtAppend *a, bool last);

/* btchunk.c: the leaf (a copy) split at a->gap, the run to go between. */
extern void dp_bt_split_at_gap(DPBtAppend *a, Page page);

/* ---------- btmerge.c: an existing btree rewritten with new entries ---------- */

/*
 * Rewrite b->index into new storage, its entries merged with b's, under
 * AccessExclusiveLock; releases the build.  A unique index's new entry
 * whose key an old entry of a live row, or another new entry, holds raises
 * INSERT's error.
 */
extern void dp_btree_merge(DPBtreeBuild *b);

#endif							/* DP_INDEX_PRIVATE_H */
