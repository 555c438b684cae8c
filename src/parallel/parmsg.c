/*-------------------------------------------------------------------------
 *
 * parmsg.c
 *	  The messages of a parallel load, from its workers to its leader: the
 *	  worker's side (its queues attached, its placer's pages and rows sent)
 *	  and the leader's (each message taken into its load, its own placer's
 *	  pages and rows put there the same way).
 *
 * A worker attaches its queue towards the leader and, for COPY, its queue
 * from the leader (dp_worker_begin), and gives its placer sinks that send
 * to the leader (dp_placer_begin_worker): a finished page with its leaf's
 * index in the leaf table; a row that needs TOAST (a worker cannot insert
 * it); a row routed to a held leaf, with its COPY input line; and, before
 * a leaf's first page, one row routed there.  When it is done it leaves
 * the fast input's counts in the shared memory for the leader
 * (dp_worker_end).  Its own row in directpath.progress (common/progress.c)
 * counts the pages and rows it sends.
 *
 * The leader takes every waiting message (dp_parallel_take_messages, from
 * dp_parallel_receive's loop in parallel.c): a leaf's first row is routed
 * by the load (dp_load_route: the leaf set up as a serial load sets it
 * up) and the leaf's result relation kept; a page is handed to the load
 * as that leaf's next block (dp_load_page); a row goes to dp_load_row; a
 * held leaf's row is kept, with its line, for after the workers.  The
 * leader's own placer (dp_placer_begin_leader) hands its pages and rows to
 * the same sinks, without a queue.  A COPY or a scan into a plain table
 * goes in the input's order (parorder.c): its pages and rows are first
 * offered to the order, which keeps those of later chunks until their
 * turn; a worker says which block range it has claimed (DP_MSG_CLAIM, a
 * scan's) and when it has sent a chunk's last page (DP_MSG_DONE).  Under
 * ON CONFLICT the keys of each page or row come just before it
 * (DP_MSG_KEYS) and go through the order with it to the leader's check
 * (parconflict.c), which may take rows off the page; under DO UPDATE a row
 * whose key is in the table comes on its own, with the TID of the entry it
 * met (DP_MSG_KEEP), and goes through the order to the load's kept rows
 * (dp_load_keep), which the leader updates in bulk after the load.
 *
 * Invariants.
 * - A leaf's first row comes before its first page, from every placer: a
 *	 page of a leaf the leader has not routed a row to fails the
 *	 statement, as does a leaf that the worker and the leader route to
 *	 different partitions.
 * - The leader never blocks on a queue: it receives without waiting, and
 *	 a queue whose worker detached is counted off (*open), never read
 *	 again.
 * - What the load does with what the leader's own placer hands on runs
 *	 under the error context the receive loop began with, as for the
 *	 workers' pages, not under a COPY line's being parsed.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "input/input.h"
#include "load/load.h"

#include "access/parallel.h"
#include "access/table.h"
#include "common/progress.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/*
 * A message's first byte, worker to leader: a page of leaf N (an int32
 * index into the leaf table, -1 for a plain target) and BLCKSZ bytes; a
 * minimal tuple in the target's format that needs TOAST; one routed to a
 * held leaf, after its COPY input line (a uint64, 0 for INSERT); the leaf
 * N and a minimal tuple routed to it (before the leaf's first page).
 */
#define DP_MSG_PAGE		'P'
#define DP_MSG_ROW		'R'
#define DP_MSG_HELD		'H'
#define DP_MSG_LEAF		'L'
#define DP_MSG_DONE		'D'		/* in order: leaf -1, then a chunk's seq
								 * (a uint64): its last page was sent */
#define DP_MSG_CLAIM	'C'		/* in-order scan: leaf -1, then the seq of
								 * the block range the worker takes next */
#define DP_MSG_KEYS		'K'		/* ON CONFLICT: leaf -1, then the keys of
								 * the next page or row (parconflict.c) */
#define DP_MSG_KEEP		'U'		/* DO UPDATE: leaf -1, the TID of the entry
								 * the row met, then the row (a minimal
								 * tuple in the target's format) */

/* ---- a worker's side: its queues, its placer's sinks ---- */

/* A worker's pages and rows go to the leader through its queue. */
static void
send_message(shm_mq_handle *mqh, char kind, int32 leaf, const void *prefix,
			 Size prefix_len, const void *data, Size len)
{
	shm_mq_iovec iov[4];
	int			n = 0;

	iov[n].data = &kind;
	iov[n++].len = 1;
	if (kind != DP_MSG_ROW && kind != DP_MSG_HELD)
	{
		iov[n].data = (const char *) &leaf;
		iov[n++].len = sizeof(int32);
	}
	if (prefix_len > 0)
	{
		iov[n].data = prefix;
		iov[n++].len = prefix_len;
	}
	iov[n].data = data;
	iov[n++].len = len;
	if (shm_mq_sendv(mqh, iov, n, false, false) != SHM_MQ_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("directpath: the leader stopped receiving pages")));
}

static bool
send_page(void *arg, int leaf, Page page)
{
	dp_progress_page_sent(PageGetMaxOffsetNumber(page));
	send_message((shm_mq_handle *) arg, DP_MSG_PAGE, leaf, NULL, 0, page,
				 BLCKSZ);
	return false;
}

static void
send_tuple(shm_mq_handle *mqh, char kind, int leaf, const void *prefix,
		   Size prefix_len, TupleTableSlot *row)
{
	MinimalTuple mt = ExecCopySlotMinimalTuple(row);

	send_message(mqh, kind, leaf, prefix, prefix_len, mt, mt->t_len);
	pfree(mt);
}

static void
send_row(void *arg, TupleTableSlot *row)
{
	send_tuple((shm_mq_handle *) arg, DP_MSG_ROW, -1, NULL, 0, row);
}

static void
send_held(void *arg, TupleTableSlot *row, uint64 lineno)
{
	send_tuple((shm_mq_handle *) arg, DP_MSG_HELD, -1, &lineno, sizeof(lineno),
			   row);
}

static void
send_leaf(void *arg, int leaf, TupleTableSlot *row)
{
	send_tuple((shm_mq_handle *) arg, DP_MSG_LEAF, leaf, NULL, 0, row);
}

static void
send_keys(void *arg, const char *data, Size len)
{
	send_message((shm_mq_handle *) arg, DP_MSG_KEYS, -1, NULL, 0, data, len);
}

static void
send_keep(void *arg, ItemPointer found, TupleTableSlot *row)
{
	send_tuple((shm_mq_handle *) arg, DP_MSG_KEEP, -1, found,
			   sizeof(ItemPointerData), row);
}

void
dp_worker_begin(DPWorker *w, dsm_segment *seg, shm_toc *toc)
{
	char	   *outq = shm_toc_lookup(toc, DP_KEY_OUT, false);
	shm_mq	   *mq;

	w->toc = toc;
	w->sh = shm_toc_lookup(toc, DP_KEY_SHARED, false);
	mq = (shm_mq *) (outq + ParallelWorkerNumber * w->sh->out_queue_size);
	w->leaves = w->sh->nleaves > 0 ?
		shm_toc_lookup(toc, DP_KEY_LEAVES, false) : NULL;
	w->payload = shm_toc_lookup(toc, DP_KEY_PAYLOAD, false);
	shm_mq_set_sender(mq, MyProc);
	w->out = shm_mq_attach(mq, seg, NULL);
	w->in = NULL;
	if (w->sh->in_queue_size > 0)
	{
		char	   *inq = shm_toc_lookup(toc, DP_KEY_IN, false);

		mq = (shm_mq *) (inq + ParallelWorkerNumber * w->sh->in_queue_size);
		shm_mq_set_receiver(mq, MyProc);
		w->in = shm_mq_attach(mq, seg, NULL);
	}
	/* the leader's lock: a lock group's members do not conflict */
	w->target = table_open(w->sh->target, ShareRowExclusiveLock);
	dp_progress_begin_worker(w);
}

void
dp_placer_begin_worker(DPPlacer *pl, DPWorker *w)
{
	DPPlacerSinks sinks = {send_page, send_row, send_held, send_leaf,
	send_keys, send_keep, w->out};

	dp_placer_begin(pl, w->sh, w->leaves, w->target, &sinks);
	if (w->sh->on_conflict)
		dp_placer_conflicts(pl, w->sh);
}

void
dp_worker_chunk_claimed(DPWorker *w, uint64 seq)
{
	send_message(w->out, DP_MSG_CLAIM, -1, NULL, 0, &seq, sizeof(seq));
}

void
dp_worker_chunk_done(DPWorker *w, uint64 seq)
{
	send_message(w->out, DP_MSG_DONE, -1, NULL, 0, &seq, sizeof(seq));
}

void
dp_worker_end(DPWorker *w)
{
	DPInputCounts *counts = shm_toc_lookup(w->toc, DP_KEY_COUNTS, false);

	/* the fast input's counts, for the leader's last_copy_input() */
	dp_input_get_counts(&counts[ParallelWorkerNumber]);
	dp_progress_end(w);
	table_close(w->target, ShareRowExclusiveLock);
	if (w->in != NULL)
		shm_mq_detach(w->in);
	shm_mq_detach(w->out);
}

/* ---- the leader's side: pages and rows into its load ---- */

/* The leader's result relation for a page of leaf 'leaf'. */
static ResultRelInfo *
leaf_result_rel(DPParallel *par, int leaf)
{
	if (leaf == -1 && par->sh.nleaves == 0)
		return par->rri;
	if (leaf < 0 || leaf >= par->sh.nleaves || par->leaf_rri[leaf] == NULL)
		elog(ERROR, "directpath: a page of an unknown leaf %d", leaf);
	return par->leaf_rri[leaf];
}

/*
 * A page to the load, as leaf 'leaf''s next block (under ON CONFLICT
 * without the rows its keys message took off); the input is told.
 */
static void
to_load(DPParallel *par, int leaf, const char *image)
{
	PGAlignedBlock buf;

	if (par->conflicts)
		image = dp_take_conflicts_page(par->conflicts, image, buf.data);
	if (image != NULL)
		dp_load_page(par->load, leaf_result_rel(par, leaf), image);
	if (par->conflicts)
		dp_take_conflicts_taken(par->conflicts);
	if (par->share != NULL && par->share->loaded != NULL)
		par->share->loaded(par->share->arg);
}

/*
 * The leader's own pages and rows go straight to its load.  Its placer
 * hands them on from inside its share of the input, where a COPY chunk's
 * error context names the line being parsed; what the load then does (a
 * batch's writes, its index work and foreign keys, for rows of any
 * process) is not about that line, so it runs under the context the
 * receive loop began with, as the workers' pages do.
 */
static bool
load_page(void *arg, int leaf, Page page)
{
	DPParallel *par = arg;
	ErrorContextCallback *parsing = error_context_stack;

	if (par->order &&
		!dp_order_admit_own_page(par->order, DP_MSG_PAGE, leaf, page))
		return true;			/* kept, as it is, for its chunk's turn */
	error_context_stack = par->outer_context;
	to_load(par, leaf, page);
	error_context_stack = parsing;
	return false;
}

static void
into_load_row(DPParallel *par, TupleTableSlot *row)
{
	ErrorContextCallback *parsing = error_context_stack;

	error_context_stack = par->outer_context;
	if (par->conflicts == NULL || dp_take_conflicts_row(par->conflicts))
		dp_load_row(par->load, row);
	if (par->conflicts)
		dp_take_conflicts_taken(par->conflicts);
	error_context_stack = parsing;
}

/*
 * A row of any process that meets the table's row at 'found' (DO UPDATE),
 * its message ('found', then a minimal tuple), in order: kept for the
 * load's updates after its rows, as a serial load keeps it.
 */
static void
keep_to_load(DPParallel *par, const char *data, Size len)
{
	ErrorContextCallback *parsing = error_context_stack;
	ItemPointerData found;
	MinimalTuple mt;

	if (len <= sizeof(ItemPointerData))
		elog(ERROR, "directpath: a short row to update from a parallel process");
	memcpy(&found, data, sizeof(ItemPointerData));
	len -= sizeof(ItemPointerData);
	mt = palloc(len);
	memcpy(mt, data + sizeof(ItemPointerData), len);
	ExecStoreMinimalTuple(mt, par->row, true);
	error_context_stack = par->outer_context;
	dp_load_keep(par->load, par->rri, par->row, &found);
	error_context_stack = parsing;
	ExecClearTuple(par->row);
}

/*
 * A keys message, in order, to the leader's check; its provisional rows
 * go to the load at once when no page or row follows.
 */
static void
keys_to_load(DPParallel *par, const char *data, Size len)
{
	ErrorContextCallback *parsing = error_context_stack;

	if (dp_take_conflicts_keys(par->conflicts, data, len))
		return;
	error_context_stack = par->outer_context;
	dp_take_conflicts_taken(par->conflicts);
	error_context_stack = parsing;
}

/*
 * ON CONFLICT's messages from any process ('worker', -1: the leader), in
 * order: the keys of the next page or row (DP_MSG_KEYS), or a row to
 * update (DP_MSG_KEEP).
 */
static void
conflict_message(DPParallel *par, int worker, char kind, const char *data,
				 Size len)
{
	if (par->conflicts == NULL)
		elog(ERROR, "directpath: ON CONFLICT's message '%c' from a parallel load without it",
			 kind);
	if (par->order != NULL &&
		!dp_order_admit(par->order, worker, kind, -1, data, len))
		return;					/* kept for its chunk's turn */
	if (kind == DP_MSG_KEYS)
		keys_to_load(par, data, len);
	else
		keep_to_load(par, data, len);
}

static void
load_keys(void *arg, const char *data, Size len)
{
	conflict_message((DPParallel *) arg, -1, DP_MSG_KEYS, data, len);
}

/* The leader's own row to update, as a worker's message. */
static void
load_keep(void *arg, ItemPointer found, TupleTableSlot *row)
{
	MinimalTuple mt = ExecCopySlotMinimalTuple(row);
	StringInfoData msg;

	initStringInfo(&msg);
	appendBinaryStringInfo(&msg, (char *) found, sizeof(ItemPointerData));
	appendBinaryStringInfo(&msg, (char *) mt, mt->t_len);
	pfree(mt);
	conflict_message((DPParallel *) arg, -1, DP_MSG_KEEP, msg.data, msg.len);
	pfree(msg.data);
}

static void
load_row(void *arg, TupleTableSlot *row)
{
	DPParallel *par = arg;

	if (par->order)
	{
		MinimalTuple mt = ExecCopySlotMinimalTuple(row);
		bool		now = dp_order_admit(par->order, -1, DP_MSG_ROW, -1,
										 (char *) mt, mt->t_len);

		pfree(mt);
		if (!now)
			return;				/* kept for its chunk's turn */
	}
	into_load_row(par, row);
}

/* A row of a held leaf, from any placer: kept for after the workers. */
static void
hold_row(void *arg, TupleTableSlot *row, uint64 lineno)
{
	DPParallel *par = arg;
	Datum		line = Int64GetDatum((int64) lineno);
	bool		isnull = false;

	tuplestore_puttupleslot(par->held, row);
	tuplestore_putvalues(par->held_lines, par->line_desc, &line, &isnull);
}

/* A leaf's first row, from any placer: route it as the load would. */
static void
load_leaf(void *arg, int leaf, TupleTableSlot *row)
{
	DPParallel *par = arg;
	ResultRelInfo *rri;

	if (leaf < 0 || leaf >= par->sh.nleaves)
		elog(ERROR, "directpath: an unknown leaf %d", leaf);
	if (par->leaf_rri[leaf] != NULL)
		return;
	rri = dp_load_route(par->load, row);
	if (RelationGetRelid(rri->ri_RelationDesc) != par->leaves[leaf].relid)
		elog(ERROR, "directpath: a worker and the leader routed a row to different partitions");
	par->leaf_rri[leaf] = rri;
}

void
dp_placer_begin_leader(DPPlacer *pl, DPParallel *par)
{
	DPPlacerSinks sinks = {load_page, load_row, hold_row, load_leaf, load_keys,
	load_keep, par};

	par->outer_context = error_context_stack;
	dp_placer_begin(pl, &par->sh, par->leaves, par->rri->ri_RelationDesc,
					&sinks);
	if (par->conflicts)
		dp_placer_conflicts(pl, shm_toc_lookup(par->pcxt->toc, DP_KEY_SHARED,
											   false));
}

/*
 * The rows of a worker's page image (its line pointers; the image, in the
 * queue's buffer, need not be aligned): the leader's progress row tells
 * them from its own.
 */
static int
image_rows(const char *image)
{
	LocationIndex lower;

	memcpy(&lower, image + offsetof(PageHeaderData, pd_lower), sizeof(lower));
	return lower > SizeOfPageHeaderData ?
		(lower - SizeOfPageHeaderData) / sizeof(ItemIdData) : 0;
}

/* A row (a minimal tuple's bytes) in the target's format, to the load. */
static void
row_to_load(DPParallel *par, const char *data, Size len)
{
	MinimalTuple mt = palloc(len);

	memcpy(mt, data, len);
	ExecStoreMinimalTuple(mt, par->row, true);
	into_load_row(par, par->row);
	ExecClearTuple(par->row);
}

/* In order: the kept pages and rows whose turn has come, to the load. */
static void
release(DPParallel *par)
{
	DPOrderMsg *m;

	while ((m = dp_order_release(par->order)) != NULL)
	{
		if (m->kind == DP_MSG_PAGE)
			to_load(par, m->leaf, m->page ? m->page : m->data);
		else if (m->kind == DP_MSG_KEYS)
			keys_to_load(par, m->data, m->len);
		else if (m->kind == DP_MSG_KEEP)
			keep_to_load(par, m->data, m->len);
		else
			row_to_load(par, m->data, m->len);
		if (m->page)
			pfree(m->page);
		pfree(m);
	}
}

void
dp_parallel_own_chunk_done(DPParallel *par, uint64 seq)
{
	ErrorContextCallback *parsing = error_context_stack;

	error_context_stack = par->outer_context;
	dp_order_done(par->order, -1, seq);
	release(par);
	error_context_stack = parsing;
}

/* A message from worker 'worker', to the load. */
static void
take_message(DPParallel *par, int worker, const char *data, Size len)
{
	char		kind = data[0];
	int32		leaf = 0;
	MinimalTuple mt;

	bool		leafless = kind == DP_MSG_ROW || kind == DP_MSG_HELD;
	uint64		lineno = 0;

	if (!leafless)
	{
		if (len < 1 + sizeof(int32))
			elog(ERROR, "directpath: a short message from a parallel worker");
		memcpy(&leaf, data + 1, sizeof(int32));
	}
	if (kind == DP_MSG_PAGE && len == 1 + sizeof(int32) + BLCKSZ)
	{
		const char *image = data + 1 + sizeof(int32);

		dp_progress_count_worker_rows(image_rows(image));
		if (par->order == NULL ||
			dp_order_admit(par->order, worker, kind, leaf, image, BLCKSZ))
			to_load(par, leaf, image);
		return;
	}
	if (kind == DP_MSG_KEYS || kind == DP_MSG_KEEP)
	{
		conflict_message(par, worker, kind, data + 1 + sizeof(int32),
						 len - 1 - sizeof(int32));
		return;
	}
	if ((kind == DP_MSG_CLAIM || kind == DP_MSG_DONE) && par->order &&
		len == 1 + sizeof(int32) + sizeof(uint64))
	{
		uint64		seq;

		memcpy(&seq, data + 1 + sizeof(int32), sizeof(uint64));
		if (kind == DP_MSG_CLAIM)
			dp_order_assign(par->order, worker, seq);
		else
		{
			dp_order_done(par->order, worker, seq);
			release(par);
		}
		return;
	}
	if (kind == DP_MSG_ROW && par->order &&
		!dp_order_admit(par->order, worker, kind, -1, data + 1, len - 1))
		return;					/* kept for its chunk's turn */
	if (!leafless && kind != DP_MSG_LEAF)
		elog(ERROR, "directpath: unexpected message from a parallel worker");
	data += leafless ? 1 : 1 + sizeof(int32);
	len -= leafless ? 1 : 1 + sizeof(int32);
	if (kind == DP_MSG_HELD)
	{
		if (par->held == NULL || len < sizeof(uint64))
			elog(ERROR, "directpath: an unexpected row of a held leaf");
		memcpy(&lineno, data, sizeof(uint64));
		data += sizeof(uint64);
		len -= sizeof(uint64);
	}
	if (kind == DP_MSG_ROW)
	{
		row_to_load(par, data, len);
		return;
	}
	mt = palloc(len);
	memcpy(mt, data, len);
	ExecStoreMinimalTuple(mt, par->row, true);
	if (kind == DP_MSG_HELD)
		hold_row(par, par->row, lineno);
	else
		load_leaf(par, leaf, par->row);
	ExecClearTuple(par->row);
}

/* Every message waiting in the workers' queues; false if none. */
bool
dp_parallel_take_messages(DPParallel *par, int *open)
{
	bool		got = false;

	for (int i = 0; i < par->launched; i++)
	{
		Size		len;
		void	   *data;
		shm_mq_result r;
		int			head;

		if (par->out[i] == NULL)
			continue;
		/*
		 * Too much kept: only the head chunk's worker goes on; every
		 * worker while none is known to have it (a scan's range whose
		 * claim is still in a queue).
		 */
		if (par->order && dp_order_full(par->order) &&
			(head = dp_order_head_worker(par->order)) >= 0 && head != i)
			continue;
		r = shm_mq_receive(par->out[i], &len, &data, true);
		if (r == SHM_MQ_SUCCESS)
		{
			take_message(par, i, data, len);
			got = true;
		}
		else if (r == SHM_MQ_DETACHED)
		{
			par->out[i] = NULL;
			(*open)--;
		}
	}
	return got;
}
