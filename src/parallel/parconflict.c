/*-------------------------------------------------------------------------
 *
 * parconflict.c
 *	  INSERT ... ON CONFLICT and COPY's ON_CONFLICT in parallel: every
 *	  process decides the rows it places, and the leader takes off a page
 *	  the rows whose key another process accepted earlier in the input
 *	  (DO NOTHING), or fails the statement for them (DO UPDATE).
 *
 * The rule to keep is core's (load/conflict.c): a row is inserted iff no
 * row of the table, and no earlier row of the input, has its key in an
 * arbiter index.  The load's ShareRowExclusiveLock keeps other writers
 * out, so the table's own rows do not change during the load; what the
 * processes must agree on is the input's earlier rows.  The input goes in
 * order (parorder.c: a COPY's chunks, a scan's block ranges; a plain
 * target), so "earlier" is "of an earlier chunk, or earlier in the same
 * chunk", and the leader takes the pages in that order.  One arbiter
 * index only (dp_parallel_conflicts_setup): with two, a row taken off for
 * its key in one would free its key in the other for a later row that
 * its process has already skipped.
 *
 * A placer (a worker's or the leader's own) with ON CONFLICT:
 *
 *	pend	each checked row is copied and its key joins the batch, as in a
 *			serial load (conflict.c's DPConflicts, one per process);
 *	decide	when its run of adjacent chunks ends, and every
 *			DP_PARALLEL_CONFLICT_BATCH rows (the leader: at the end of each
 *			chunk of its own, which are larger under ON CONFLICT: parcopy.c,
 *			parscan.c), the process reads the leader's index generation G,
 *			then probes the batch's keys and decides its rows in input
 *			order.  It keeps the keys it accepted (its own earlier rows
 *			may not be in the index yet), DP_PARALLEL_KEYS_KEPT at most:
 *			past that the set is emptied, and a row whose twin it
 *			accepted before and its probe cannot see yet is accepted
 *			again, for the leader's check to take off.  A row the probe
 *			finds that this statement inserted (xmin and cmin ours) was
 *			taken by the leader, so it came earlier in the input: the row
 *			is skipped, as one that meets a row of the table;
 *	place	an accepted row is formed on the page, its key image queued
 *			with G.  Before each page (and each row that needs TOAST) is
 *			handed on, a keys message goes first: the process's number,
 *			the oldest G of the rows it has queued since its queue was
 *			last empty, and the rows' images, in the page's order.
 *
 * The leader (dp_take_conflicts_*) keeps the image of every key it took,
 * each with the generation it was taken in.  When a keys message comes,
 * in order, each row's key is looked up there: a key found was taken from
 * an earlier row, accepted, which the process's probe could not see (it
 * would have skipped the row); the row is taken off its page before the
 * page goes to the load (the page rebuilt without it; a page left empty
 * is not written), counted as skipped.  Else the key joins the set at
 * once (a later row of the same page meets it), with the generation
 * current once its page is in the load.
 *
 * Generations bound the leader's set.  G goes up each time a flush has
 * left every row taken so far in the indexes (load.c calls back), and is
 * published in the shared memory.  A probe that read G finds every row
 * taken in a generation below G itself.  A process's messages come in its
 * order with their G never going down and never above their rows', so a
 * key taken in a generation below every process's last G
 * can never be met again from the set: such keys are dropped (prune)
 * whenever the set has doubled.
 *
 * DO UPDATE (and COPY's 'update') changes three things.  A row whose key
 * the probe finds in the table is not skipped but sent to the leader with
 * the entry's TID (the placer's keep sink); it goes through the order, so
 * the leader keeps such rows in input order (dp_load_keep), as a serial
 * load keeps them, and updates them in bulk after the load (versions.c:
 * of two rows meeting one row of the table, the first that passes the
 * WHERE clause updates it and a later one is core's cardinality error,
 * which input order decides).  A key accepted twice is core's "cannot
 * affect row a second time", raised where it is met: in a process's
 * decisions (its batch, its set, or a row of this statement its probe
 * finds) or in the leader's check (a key another process took first), in
 * place of taking the row off.  The kept rows never join a set: their key
 * is the table's, so no process accepts it.
 *
 * Memory: each process's accepted keys (a few tens of bytes each,
 * DP_PARALLEL_KEYS_KEPT at most), and the leader's set, pruned as above.
 *
 * Invariants: the keys message of a page or row is the message taken just
 * before it from the same process (the order releases a chunk's messages
 * together, and the leader's own are made and offered together); G never
 * goes down; a key's generation in the leader's set is one current once
 * its row was in the load.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "admission/admission.h"
#include "load/load.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "common/hashfn.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* ---------- a placer's side ---------- */

/*
 * Rows a process decides together, at most: many keys make the probes
 * dense (one visit per leaf), but the leader waits for the head chunk's.
 */
#define DP_PARALLEL_CONFLICT_BATCH 32768

/*
 * Accepted keys a process keeps, at most: past it the set is emptied, and
 * a row whose twin it accepted earlier and the probe cannot see yet is
 * accepted again, then taken off by the leader's check.
 */
#define DP_PARALLEL_KEYS_KEPT 262144

struct DPPlaceConflicts
{
	DPPlacer   *pl;
	DPFormRow	form;			/* the placer's: a decided row formed */
	DPConflicts *c;				/* the process's decisions and accepted keys */
	DPParallelShared *live;		/* the shared memory's generation, counts */
	MemoryContext rows_cxt;		/* the batch's rows */
	HeapTuple  *rows;			/* a batch's, in input order */
	int			nrows;
	Size		bytes;
	TupleTableSlot *slot;		/* a decided row, to place */
	/* the placed rows not yet handed on, in their pages' order: */
	StringInfoData images;		/* their key images */
	int		   *starts;			/* row i's, at images.data + starts[i] */
	int			queued;
	int			cap;
	uint64		oldest;			/* a generation no queued row's probe read
								 * less than (their messages carry it) */
	StringInfoData msg;			/* a keys message being made */
	int32		process;		/* the worker's number, -1 for the leader */
	uint64		kept;			/* keys in c's set of accepted ones */
};

DPPlaceConflicts *
dp_place_conflicts_begin(DPPlacer *pl, DPParallelShared *live,
						 DPFormRow form)
{
	DPPlaceConflicts *pc = palloc0(sizeof(DPPlaceConflicts));
	ResultRelInfo *rri = pl->rri;
	List	   *arbiters = NIL;
	MemoryContext old;

	pc->pl = pl;
	pc->form = form;
	pc->live = live;
	pc->process = IsParallelWorker() ? ParallelWorkerNumber : -1;
	for (int i = 0; i < live->narbiters; i++)
		arbiters = lappend_oid(arbiters, live->arbiters[i]);
	/* as the leader's leaf, in the placer's executor state */
	old = MemoryContextSwitchTo(pl->estate->es_query_cxt);
	/* REPEATABLE READ: a row found must be visible to the statement's */
	if (pl->estate->es_snapshot == InvalidSnapshot)
		pl->estate->es_snapshot = GetActiveSnapshot();
	if (rri->ri_RelationDesc->rd_rel->relhasindex &&
		rri->ri_IndexRelationDescs == NULL)
		ExecOpenIndices(rri, false);
	pc->c = dp_conflicts_begin(rri, pl->estate, arbiters, live->do_update);
	MemoryContextSwitchTo(old);
	pc->rows_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath parallel conflict rows",
										 ALLOCSET_DEFAULT_SIZES);
	pc->rows = palloc(sizeof(HeapTuple) * DP_PARALLEL_CONFLICT_BATCH);
	pc->slot = MakeSingleTupleTableSlot(RelationGetDescr(rri->ri_RelationDesc),
										&TTSOpsHeapTuple);
	initStringInfo(&pc->images);
	initStringInfo(&pc->msg);
	pc->cap = 512;
	pc->starts = palloc(sizeof(int) * pc->cap);
	return pc;
}

bool
dp_place_conflicts_add(DPPlaceConflicts *pc, TupleTableSlot *row)
{
	MemoryContext old = MemoryContextSwitchTo(pc->rows_cxt);
	HeapTuple	tuple = ExecCopySlotHeapTuple(row);

	MemoryContextSwitchTo(old);
	pc->rows[pc->nrows++] = tuple;
	pc->bytes += tuple->t_len;
	dp_conflicts_add(pc->c, row);
	if (pc->nrows == DP_PARALLEL_CONFLICT_BATCH ||
		pc->bytes >= (Size) DP_CONFLICT_BATCH_PAGES * dp_batch_pages * BLCKSZ)
		return dp_place_conflicts_decide(pc);
	return false;
}

/* Queue the images of the row just decided, its probe's generation 'gen'. */
static void
queue_row(DPPlaceConflicts *pc, uint64 gen)
{
	if (pc->queued == pc->cap)
	{
		pc->cap *= 2;
		pc->starts = repalloc(pc->starts, sizeof(int) * pc->cap);
	}
	if (pc->queued == 0)
		pc->oldest = gen;
	pc->starts[pc->queued++] = pc->images.len;
	dp_conflicts_row_images(pc->c, &pc->images);
}

bool
dp_place_conflicts_decide(DPPlaceConflicts *pc)
{
	uint64		gen;
	uint64		skipped = 0;
	uint64		accepted = 0;
	bool		handed = false;

	if (pc->nrows == 0)
		return false;
	/* the generation first: the probe then sees every row taken before it */
	gen = pg_atomic_read_u64(&pc->live->indexed_gen);
	pg_memory_barrier();
	dp_conflicts_probe(pc->c);
	for (int i = 0; i < pc->nrows; i++)
	{
		ItemPointerData found;
		DPDecision	d = dp_conflicts_decide(pc->c, &found);

		if (d == DP_ROW_SKIP)
		{
			skipped++;
			continue;
		}
		ExecStoreHeapTuple(pc->rows[i], pc->slot, false);
		if (d == DP_ROW_UPDATE)
			pc->pl->sinks.keep(pc->pl->sinks.arg, &found, pc->slot);
		else
		{
			accepted++;
			queue_row(pc, gen);
			if (pc->form(pc->pl, pc->slot))
				handed = true;
		}
		ExecClearTuple(pc->slot);
	}
	dp_conflicts_batch_done(pc->c);
	if (skipped > 0)
		pg_atomic_fetch_add_u64(&pc->live->rows_skipped, skipped);
	/* bounded: a row accepted again meets its twin in the leader's check */
	pc->kept += accepted;
	if (pc->kept >= DP_PARALLEL_KEYS_KEPT)
	{
		elog(DEBUG1, "directpath: parallel process %d empties its " UINT64_FORMAT " accepted keys",
			 pc->process, pc->kept);
		dp_conflicts_indexed(pc->c);
		pc->kept = 0;
	}
	MemoryContextReset(pc->rows_cxt);
	pc->nrows = 0;
	pc->bytes = 0;
	return handed;
}

/*
 * A keys message of 'count' rows' images ('len' bytes at 'images'), sent.
 * Its generation is the queue's oldest, which a process's later messages
 * never go below (prune's floor): the rows left keep it until the queue
 * empties.
 */
static void
send_keys(DPPlaceConflicts *pc, const char *images, int len, int32 count)
{
	resetStringInfo(&pc->msg);
	appendBinaryStringInfo(&pc->msg, (char *) &pc->oldest, sizeof(uint64));
	appendBinaryStringInfo(&pc->msg, (char *) &pc->process, sizeof(int32));
	appendBinaryStringInfo(&pc->msg, (char *) &count, sizeof(count));
	appendBinaryStringInfo(&pc->msg, images, len);
	pc->pl->sinks.keys(pc->pl->sinks.arg, pc->msg.data, pc->msg.len);
}

void
dp_place_conflicts_page(DPPlaceConflicts *pc, Page page)
{
	int			n = PageGetMaxOffsetNumber(page);
	int			end = n < pc->queued ? pc->starts[n] : pc->images.len;

	Assert(n > 0 && n <= pc->queued);
	send_keys(pc, pc->images.data, end, n);
	/* what stays: the rows of the page still filling */
	memmove(pc->images.data, pc->images.data + end, pc->images.len - end);
	pc->images.len -= end;
	for (int i = n; i < pc->queued; i++)
		pc->starts[i - n] = pc->starts[i] - end;
	pc->queued -= n;
}

void
dp_place_conflicts_unplaced(DPPlaceConflicts *pc)
{
	int			last = --pc->queued;

	/* the row just queued goes on its own, the others stay */
	send_keys(pc, pc->images.data + pc->starts[last],
			  pc->images.len - pc->starts[last], 1);
	pc->images.len = pc->starts[last];
}

void
dp_place_conflicts_end(DPPlaceConflicts *pc)
{
	Assert(pc->nrows == 0 && pc->queued == 0);
	dp_conflicts_end(pc->c);
	ExecCloseIndices(pc->pl->rri);
	ExecDropSingleTupleTableSlot(pc->slot);
	MemoryContextDelete(pc->rows_cxt);
}

/* ---------- the leader's side ---------- */

/* A key the leader took, and the generation it took it in. */
typedef struct DPTakenKey
{
	DPKeyImage key;
	uint64		gen;
	char		status;			/* simplehash's */
} DPTakenKey;

#define SH_PREFIX		dptaken
#define SH_ELEMENT_TYPE DPTakenKey
#define SH_KEY_TYPE		DPKeyImage
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	((k).hash)
#define SH_EQUAL(tb, a, b)	DP_KEY_EQUAL(a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a)	((a)->key.hash)
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

struct DPTakeConflicts
{
	DPLoad	   *load;
	DPParallelShared *live;		/* where the generation is published */
	uint64		gen;			/* the current generation */
	dptaken_hash *taken;		/* the keys taken (one arbiter) */
	MemoryContext keys_cxt;
	uint64		kept_after_prune;	/* keys the last pruning kept */
	uint64	   *last_gen;		/* per process (the leader last): the
								 * generation of its last keys message */
	int			nprocs;
	uint64		skipped;		/* rows taken off pages */
	bool		do_update;		/* a key taken twice is an error */
	/* the last keys message, waiting for its page or row: */
	bool		waiting;
	uint64		msg_gen;
	int			nrows;
	bool	   *dup;			/* per row: taken off */
	int			ndup;
	DPKeyImage *images;		/* per row (len -1: no key), in 'copy' */
	StringInfoData copy;
	int			cap;
};

/* The load's callback: every row taken so far is in the indexes. */
static void
indexed(void *arg)
{
	DPTakeConflicts *tc = arg;

	if (tc->live == NULL)
		return;					/* the workers are gone: no probe is left */
	tc->gen++;
	pg_memory_barrier();
	pg_atomic_write_u64(&tc->live->indexed_gen, tc->gen);
}

DPTakeConflicts *
dp_take_conflicts_begin(DPLoad *load, DPParallelShared *live, int nworkers)
{
	DPTakeConflicts *tc = palloc0(sizeof(DPTakeConflicts));

	tc->nprocs = nworkers + 1;
	tc->last_gen = palloc0(sizeof(uint64) * tc->nprocs);

	tc->load = load;
	tc->live = live;
	tc->gen = pg_atomic_read_u64(&live->indexed_gen);
	tc->do_update = live->do_update;
	tc->keys_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath parallel conflict keys",
										 ALLOCSET_DEFAULT_SIZES);
	tc->taken = dptaken_create(tc->keys_cxt, 8192, NULL);
	initStringInfo(&tc->copy);
	tc->cap = 512;
	tc->dup = palloc(sizeof(bool) * tc->cap);
	tc->images = palloc(sizeof(DPKeyImage) * tc->cap);
	dp_load_conflicts_decided(load, indexed, tc);
	return tc;
}

/* Read 'n' bytes at '*p' of a message ending at 'end'. */
static const char *
read_bytes(const char **p, const char *end, Size n)
{
	const char *at = *p;

	if (end - at < (ptrdiff_t) n)
		elog(ERROR, "directpath: a short keys message from a parallel process");
	*p += n;
	return at;
}

void
dp_take_conflicts_keys(DPTakeConflicts *tc, const char *data, Size len)
{
	const char *end;
	const char *p;
	int32		process;
	int32		count;

	if (tc->waiting)
		elog(ERROR, "directpath: two keys messages in a row");
	/* the message may sit in a queue's buffer: keep a copy */
	resetStringInfo(&tc->copy);
	appendBinaryStringInfo(&tc->copy, data, len);
	p = tc->copy.data;
	end = p + len;
	memcpy(&tc->msg_gen, read_bytes(&p, end, sizeof(uint64)), sizeof(uint64));
	memcpy(&process, read_bytes(&p, end, sizeof(int32)), sizeof(int32));
	memcpy(&count, read_bytes(&p, end, sizeof(int32)), sizeof(int32));
	if (process < -1 || process >= tc->nprocs - 1)
		elog(ERROR, "directpath: keys from an unknown parallel process %d", process);
	/* a process's messages come in its order, their generations rising */
	tc->last_gen[process < 0 ? tc->nprocs - 1 : process] = tc->msg_gen;
	if (count > tc->cap)
	{
		tc->cap = count;
		tc->dup = repalloc(tc->dup, sizeof(bool) * count);
		tc->images = repalloc(tc->images, sizeof(DPKeyImage) * count);
	}
	tc->nrows = count;
	tc->ndup = 0;
	for (int r = 0; r < count; r++)
	{
		DPKeyImage *k = &tc->images[r];
		int32		klen;
		DPTakenKey *e;
		bool		found;

		memcpy(&klen, read_bytes(&p, end, sizeof(int32)), sizeof(int32));
		tc->dup[r] = false;
		k->len = klen;
		if (klen < 0)
			continue;			/* no key that could conflict */
		k->bytes = read_bytes(&p, end, klen);
		k->hash = hash_bytes((const unsigned char *) k->bytes, klen);
		/*
		 * Taken: from an earlier row, accepted, which the process's probe
		 * could not see (else this row would not have been accepted).
		 */
		e = dptaken_lookup(tc->taken, *k);
		if (e != NULL && tc->do_update)
			ereport(ERROR,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
			/* translator: %s is a SQL command name */
					 errmsg("%s command cannot affect row a second time",
							"ON CONFLICT DO UPDATE"),
					 errhint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")));
		if (e != NULL)
		{
			tc->dup[r] = true;
			tc->ndup++;
			continue;
		}
		/* taken now for the rows after it (_taken gives its generation) */
		e = dptaken_insert(tc->taken, *k, &found);
		e->key.bytes = memcpy(MemoryContextAlloc(tc->keys_cxt, klen),
							  k->bytes, klen);
		e->gen = tc->gen;
	}
	tc->waiting = true;
}

/* The verdict a page or row of 'rows' rows comes to take. */
static void
verdict_for(DPTakeConflicts *tc, int rows)
{
	if (!tc->waiting || tc->nrows != rows)
		elog(ERROR, "directpath: a parallel page without its keys (%d rows, %d keys)",
			 rows, tc->waiting ? tc->nrows : -1);
}

const char *
dp_take_conflicts_page(DPTakeConflicts *tc, const char *image, char *buf)
{
	PGAlignedBlock src;
	Page		page = (Page) buf;
	OffsetNumber maxoff;

	memcpy(src.data, image, BLCKSZ);
	maxoff = PageGetMaxOffsetNumber((Page) src.data);
	verdict_for(tc, maxoff);
	if (tc->ndup == 0)
		return image;
	tc->skipped += tc->ndup;
	if (tc->ndup == tc->nrows)
		return NULL;
	/* the page again, without the rows taken off, its flags kept */
	PageInit(page, BLCKSZ, 0);
	((PageHeader) page)->pd_flags = ((PageHeader) src.data)->pd_flags;
	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		lp = PageGetItemId((Page) src.data, off);

		if (tc->dup[off - 1])
			continue;
		if (PageAddItem(page, PageGetItem((Page) src.data, lp),
						ItemIdGetLength(lp), InvalidOffsetNumber,
						false, true) == InvalidOffsetNumber)
			elog(ERROR, "directpath: a row did not fit its page again");
	}
	return buf;
}

/*
 * Drop the keys no process can meet again: taken in a generation below
 * every process's last keys message's, hence in the indexes before any
 * probe still to be read from, which finds their rows itself.
 */
static void
prune(DPTakeConflicts *tc)
{
	uint64		floor = PG_UINT64_MAX;
	MemoryContext cxt;
	dptaken_hash *kept;
	dptaken_iterator it;
	DPTakenKey *e;

	for (int p = 0; p < tc->nprocs; p++)
		floor = Min(floor, tc->last_gen[p]);
	cxt = AllocSetContextCreate(GetMemoryChunkContext(tc),
								"directpath parallel conflict keys",
								ALLOCSET_DEFAULT_SIZES);
	kept = dptaken_create(cxt, Max(tc->taken->members / 2, 8192), NULL);
	dptaken_start_iterate(tc->taken, &it);
	while ((e = dptaken_iterate(tc->taken, &it)) != NULL)
	{
		DPKeyImage k = e->key;
		bool		found;

		if (e->gen < floor)
			continue;
		k.bytes = memcpy(MemoryContextAlloc(cxt, k.len), k.bytes, k.len);
		dptaken_insert(kept, k, &found)->gen = e->gen;
	}
	MemoryContextDelete(tc->keys_cxt);
	tc->keys_cxt = cxt;
	tc->taken = kept;
	tc->kept_after_prune = kept->members;
}

bool
dp_take_conflicts_row(DPTakeConflicts *tc)
{
	verdict_for(tc, 1);
	if (tc->dup[0])
		tc->skipped++;
	return !tc->dup[0];
}

void
dp_take_conflicts_taken(DPTakeConflicts *tc)
{
	Assert(tc->waiting);
	/* the generation they were taken in: a flush the page set off came first */
	for (int r = 0; r < tc->nrows; r++)
		if (!tc->dup[r] && (int32) tc->images[r].len >= 0)
			dptaken_lookup(tc->taken, tc->images[r])->gen = tc->gen;
	tc->waiting = false;
	if (tc->taken->members >= Max(2 * tc->kept_after_prune, 65536))
		prune(tc);
}

uint64
dp_take_conflicts_end(DPTakeConflicts *tc)
{
	if (tc->waiting)
		elog(ERROR, "directpath: a parallel keys message without its page");
	MemoryContextDelete(tc->keys_cxt);
	/* skipped by every process's decisions, and taken off here */
	tc->skipped += pg_atomic_read_u64(&tc->live->rows_skipped);
	tc->live = NULL;
	return tc->skipped;
}

/* ---------- before launch ---------- */

const char *
dp_parallel_conflicts_setup(DPParallel *par)
{
	Relation	rel = par->rri->ri_RelationDesc;
	List	   *arbiters;
	List	   *indexes;
	ListCell   *lc;
	bool		do_update;
	int			n = 0;

	if (!dp_load_conflict_target(par->load, &arbiters, &do_update))
		return NULL;
	if (!par->sh.in_order)
		return "its ON CONFLICT needs the rows in the input's order, which a partitioned target or a source other than a heap table does not keep";
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		if (index->rd_index->indisunique && index->rd_index->indisready &&
			dp_index_is_arbiter(index, arbiters))
			{
			if (n == 0)
				par->sh.arbiters[0] = RelationGetRelid(index);
			n++;
		}
		index_close(index, AccessShareLock);
	}
	list_free(indexes);
	if (n > 1)
		return "its ON CONFLICT has more than one arbiter index (a row taken off for one key would change the decisions on another)";
	/* no arbiter: nothing conflicts, the rows are placed as any */
	par->sh.on_conflict = n == 1;
	par->sh.narbiters = n;
	par->sh.do_update = do_update && n == 1;
	return NULL;
}
