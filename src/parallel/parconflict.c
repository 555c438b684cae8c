/*-------------------------------------------------------------------------
 *
 * parconflict.c
 *	  INSERT ... ON CONFLICT and COPY's ON_CONFLICT in parallel, a
 *	  process's side: every process decides the rows it places, and tells
 *	  the leader their keys (parkeys.c has the leader's check).
 *
 * The rule to keep is core's (load/conflict.c): a row is inserted iff no
 * row of the table, and no earlier row of the input, has its key in an
 * arbiter index.  The load's ShareRowExclusiveLock keeps other writers
 * out, so the table's own rows do not change during the load; what the
 * processes must agree on is the input's earlier rows.  The input goes in
 * order (parorder.c: a COPY's chunks, a scan's block ranges; a plain
 * target), so "earlier" is "of an earlier chunk, or earlier in the same
 * chunk", and the leader takes the pages in that order.
 *
 * A placer (a worker's or the leader's own) with ON CONFLICT:
 *
 *	pend	each checked row is copied and its keys join the batch, as in a
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
 *	place	an accepted row is formed on the page, its entry (its key
 *			images) queued with G.  Before each page (and each row that
 *			needs TOAST) is handed on, a keys message goes first: the
 *			process's number, the oldest G of the entries it has queued
 *			since its queue was last empty, and the entries up to the
 *			page's last row, in input order.
 *
 * Two or more arbiters.  The leader may take off a row this process
 * accepted (another process took one of its keys first), which frees the
 * row's other keys: a later row the process skipped for one of those would
 * be inserted by core.  So a skip that rests only on keys of rows the
 * process accepted itself (dp_conflicts_provisional: none of its keys is
 * in the table or in a row the leader took) is provisional: the row is
 * queued whole, as an entry among the placed rows' in input order, its
 * keys counted as accepted (a later row sharing one is provisional too),
 * and the leader decides it again (parkeys.c).  With one arbiter such a
 * skip always stands: the row that took its key is taken off only for that
 * same key, which an earlier row then has.  The set is not emptied while a
 * provisional row waits in the queue: a row accepted again could share its
 * key and, needing TOAST, be handed on ahead of it.
 *
 * DO UPDATE (and COPY's 'update'), with one arbiter, changes three
 * things.  A row whose key the probe finds in the table is not skipped but
 * sent to the leader with the entry's TID (the placer's keep sink); it
 * goes through the order, so the leader keeps such rows in input order
 * (dp_load_keep), as a serial load keeps them, and updates them in bulk
 * after the load (versions.c: of two rows meeting one row of the table,
 * the first that passes the WHERE clause updates it and a later one is
 * core's cardinality error, which input order decides).  A key accepted
 * twice is core's "cannot affect row a second time", raised where it is
 * met: in a process's decisions (its batch, its set, or a row of this
 * statement its probe finds) or in the leader's check (a key another
 * process took first), in place of taking the row off.  The kept rows
 * never join a set: their key is the table's, so no process accepts it.
 *
 * Memory: each process's accepted keys (a few tens of bytes each,
 * DP_PARALLEL_KEYS_KEPT at most, past it while a provisional row waits).
 *
 * Invariants: the keys message of a page or row is the message taken just
 * before it from the same process (the order releases a chunk's messages
 * together, and the leader's own are made and offered together), and one
 * without a placed row (provisional rows only) has none after it; a
 * process's entries reach the leader in its input order; G never goes
 * down.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "admission/admission.h"
#include "load/load.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
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

/*
 * A keys message's entry, in input order: a row placed on the page (or the
 * row) the message comes before, or (two or more arbiters) a row skipped
 * provisionally, carried whole, for the leader to decide again.
 */
#define DP_ENTRY_PLACED 'P'
#define DP_ENTRY_PROVISIONAL 'V'

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
	/* the rows placed, or skipped provisionally, not yet handed on: */
	StringInfoData images;		/* their entries (send_keys) */
	int		   *starts;			/* entry i's, at images.data + starts[i] */
	int			queued;
	int			queued_rows;	/* entries of rows placed (DP_ENTRY_PLACED) */
	bool		several;		/* two or more arbiters: provisional skips */
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
	pc->several = live->narbiters > 1;
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

/*
 * Queue the entry of the row just decided, its probe's generation 'gen':
 * its kind, its key images, and a provisional row's tuple.
 */
static void
queue_row(DPPlaceConflicts *pc, uint64 gen, HeapTuple provisional)
{
	char		kind = provisional ? DP_ENTRY_PROVISIONAL : DP_ENTRY_PLACED;

	if (pc->queued == pc->cap)
	{
		pc->cap *= 2;
		pc->starts = repalloc(pc->starts, sizeof(int) * pc->cap);
	}
	if (pc->queued == 0)
		pc->oldest = gen;
	pc->starts[pc->queued++] = pc->images.len;
	appendStringInfoChar(&pc->images, kind);
	dp_conflicts_row_images(pc->c, &pc->images);
	if (provisional)
	{
		MinimalTuple mt;
		int32		len;

		ExecStoreHeapTuple(provisional, pc->slot, false);
		mt = ExecCopySlotMinimalTuple(pc->slot);
		ExecClearTuple(pc->slot);
		len = mt->t_len;
		appendBinaryStringInfo(&pc->images, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&pc->images, (char *) mt, len);
		pfree(mt);
	}
	else
		pc->queued_rows++;
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
			/* several arbiters: the leader decides it again, in order */
			if (pc->several && dp_conflicts_provisional(pc->c))
			{
				queue_row(pc, gen, pc->rows[i]);
				accepted++;
			}
			else
				skipped++;
			continue;
		}
		ExecStoreHeapTuple(pc->rows[i], pc->slot, false);
		if (d == DP_ROW_UPDATE)
			pc->pl->sinks.keep(pc->pl->sinks.arg, &found, pc->slot);
		else
		{
			accepted++;
			queue_row(pc, gen, NULL);
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
	/*
	 * Not while a provisional row waits in the queue: a row accepted again
	 * could share its key and go ahead of it (a row that needs TOAST).
	 */
	if (pc->kept >= DP_PARALLEL_KEYS_KEPT && pc->queued == pc->queued_rows)
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

/* The first 'n' queued entries sent, and dropped from the queue. */
static void
send_entries(DPPlaceConflicts *pc, int n)
{
	int			end = n < pc->queued ? pc->starts[n] : pc->images.len;

	send_keys(pc, pc->images.data, end, n);
	for (int i = 0; i < n; i++)
		if (pc->images.data[pc->starts[i]] == DP_ENTRY_PLACED)
			pc->queued_rows--;
	memmove(pc->images.data, pc->images.data + end, pc->images.len - end);
	pc->images.len -= end;
	for (int i = n; i < pc->queued; i++)
		pc->starts[i - n] = pc->starts[i] - end;
	pc->queued -= n;
}

void
dp_place_conflicts_page(DPPlaceConflicts *pc, Page page)
{
	int			rows = PageGetMaxOffsetNumber(page);
	int			n = 0;

	Assert(rows > 0 && rows <= pc->queued_rows);
	/* the entries up to the page's last row (provisional ones among them) */
	while (rows > 0)
		if (pc->images.data[pc->starts[n++]] == DP_ENTRY_PLACED)
			rows--;
	send_entries(pc, n);
}

void
dp_place_conflicts_unplaced(DPPlaceConflicts *pc)
{
	int			last = --pc->queued;

	/*
	 * The row just queued goes on its own, the others stay: none of them
	 * has a key of its (it was accepted while they were in the set, which
	 * is not emptied while a provisional row waits), so going first does
	 * not change a decision.
	 */
	pc->queued_rows--;
	send_keys(pc, pc->images.data + pc->starts[last],
			  pc->images.len - pc->starts[last], 1);
	pc->images.len = pc->starts[last];
}

void
dp_place_conflicts_rest(DPPlaceConflicts *pc)
{
	/* after the last page: provisional rows only, no page follows */
	Assert(pc->queued_rows == 0);
	if (pc->queued > 0)
		send_entries(pc, pc->queued);
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
			if (n < DP_PARALLEL_MAX_ARBITERS)
				par->sh.arbiters[n] = RelationGetRelid(index);
			n++;
		}
		index_close(index, AccessShareLock);
	}
	list_free(indexes);
	if (n > DP_PARALLEL_MAX_ARBITERS)
		return psprintf("its ON CONFLICT has more than %d arbiter indexes",
						DP_PARALLEL_MAX_ARBITERS);
	if (do_update && n > 1)
		return "its ON CONFLICT DO UPDATE has more than one arbiter index";
	/* no arbiter: nothing conflicts, the rows are placed as any */
	par->sh.on_conflict = n > 0;
	par->sh.narbiters = n;
	par->sh.do_update = do_update && n == 1;
	return NULL;
}
