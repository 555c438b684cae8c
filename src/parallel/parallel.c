/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  A parallel direct-path load: pages built by parallel workers (and by
 *	  the leader between writes) and written by the leader alone, all in
 *	  the leader's transaction.  This file is the leader's course of such a
 *	  load, which every input follows: dp_parallel_begin, _launch,
 *	  _receive, _finish, _load_held, and for INSERT ... SELECT
 *	  dp_parallel_end_insert.  The rest of the stage:
 *
 *	parcheck.c	which targets a parallel load takes, and a partitioned
 *				target's leaf table;
 *	placer.c	rows routed to their leaf, checked and formed on pages;
 *	parmsg.c	the messages from the workers to the leader: a worker's
 *				queues and its placer's sinks, the leader's taking them
 *				into its load;
 *	parscan.c	INSERT ... SELECT from scans of one table or of a
 *				partitioned table's partitions, shared among workers;
 *	parplan.c	INSERT ... SELECT from a plan every process runs, and which
 *				of the two an INSERT takes;
 *	parcopy.c	COPY FROM a file, a program or STDIN, cut into chunks of
 *				whole lines for the workers;
 *	pargather.c	a SELECT that needs core's parallel query, loaded
 *				serially.
 *
 * Asked for with /\*+ APPEND PARALLEL(n) *\/ or directpath.parallel_workers.
 * When the input or the target does not allow it (parplan.c, parcopy.c;
 * parcheck.c) the statement runs serially, and last_statement().parallel
 * says why.  The leaves of a partitioned target whose rows need what a
 * worker cannot do (their own triggers, foreign keys, or generated columns
 * or CHECK constraints that are not parallel safe) are held: workers route their rows to the leader,
 * which keeps them in a tuplestore and loads them as a serial load would
 * once it has left parallel mode (dp_parallel_load_held: their triggers
 * and foreign key checks may write, which parallel mode forbids).
 *
 * Algorithm.
 * 1. The leader lists and checks a partitioned target's leaves
 *	  (dp_parallel_begin, parcheck.c), makes the load direct, decides
 *	  each leaf's freezing, takes its transaction ID and command ID, then
 *	  creates a parallel context of its own, as parallel CREATE INDEX does,
 *	  not core's Gather: the planner never plans an INSERT in parallel, and
 *	  a Gather would pass every row through a tuple queue to the leader,
 *	  which would still form every page.  The dynamic shared memory holds
 *	  the shared state (DPParallelShared), the leaf table, the input's own
 *	  part (a parallel scan descriptor per source table; for COPY nothing),
 *	  a text payload (the scans' tables, quals and target lists; COPY's
 *	  options), one message queue per worker towards the leader and, for
 *	  COPY, one from the leader (dp_parallel_launch).
 * 2. Each worker produces rows in the target's format from its share of
 *	  the input, and places them with a placer (placer.c): routed to their
 *	  leaf, NOT NULL and CHECK constraints checked as ExecInsert does, the
 *	  row formed in place on a page of the leaf's detached builder, frozen
 *	  when the leader decided so.  A finished page goes to the leader whole,
 *	  with its leaf's index in the leaf table; before a leaf's first page,
 *	  one row routed there.  A row that needs TOAST goes to the leader as a
 *	  row instead: a worker cannot insert (heap_insert refuses in a
 *	  parallel worker).
 * 3. The leader receives messages from all queues as they come: a leaf's
 *	  first row is routed by the load (dp_load_route: the leaf set up as a
 *	  serial load sets it up), a page is handed to the load as that leaf's
 *	  next block (dp_load_page, which sets the tuples' t_ctid and gives each
 *	  row what a placed row gets: its index entries spooled for the build
 *	  at the end of new storage, or the row queued for the per-batch index
 *	  work), a row to dp_load_row; the load's flush rule writes them in
 *	  batches through the append layer, as a serial load does.  Between
 *	  messages it feeds the workers their input (COPY) and, whenever
 *	  nothing else is to be done, produces a share of its own with a placer
 *	  whose pages go straight to the load (dp_parallel_receive; the
 *	  messages and the sinks are parmsg.c's).
 * 4. When every worker has detached, the leader waits for them to finish,
 *	  leaves parallel mode, and the load ends as a serial one does
 *	  (dp_parallel_finish).
 *
 * Invariants.
 * - Only the leader writes the relation and its WAL: blocks keep the
 *	 append layer's order (ascending, no gaps) because a block number is
 *	 given to a page only when the leader takes it.
 * - Every tuple carries the leader's (sub)transaction ID and command ID,
 *	 which workers see as their own (StartParallelWorkerTransaction), and
 *	 one freezing decision.
 * - Whatever a worker evaluates (quals, projections, defaults, CHECK
 *	 constraints) is parallel safe by core's own test (is_parallel_safe).
 * - An error in a worker reaches the leader through core's error queue
 *	 (HandleParallelMessages, from CHECK_FOR_INTERRUPTS) and fails the
 *	 statement; a worker that dies makes its queue detach, and
 *	 WaitForParallelWorkersToFinish fails the statement.  Either way the
 *	 transaction aborts and nothing of the load is visible.
 * - While the workers run the leader is in parallel mode: it writes pages
 *	 and, for the rows sent to it, TOAST (heap_insert refuses only in a
 *	 worker), and does nothing that needs a new command ID.
 * - The leader never blocks on a queue: it sends and receives without
 *	 waiting and sleeps on its latch only when nothing moved, so a worker
 *	 blocked on a full queue towards it cannot deadlock with it.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "input/input.h"
#include "load/load.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "common/progress.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "storage/proc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

/*
 * Bytes of each worker's queue towards the leader: 1024 pages shared among
 * the workers, at least 256 each.  While the leader writes a batch (512
 * pages by default, ten to twenty milliseconds) the workers go on forming
 * pages into these; with one or two workers 256 pages would fill first.
 */
#define DP_OUT_QUEUE_SIZE(nworkers) \
	((Size) Max(256, 1024 / Max((nworkers), 1)) * (BLCKSZ + 64))

DPParallel *
dp_parallel_begin(DPLoad *load, ModifyTableState *mt, bool may_hold,
				  const char **why)
{
	DPParallel *par = palloc0(sizeof(DPParallel));

	par->load = load;
	par->rri = mt->resultRelInfo;
	par->sh.target = RelationGetRelid(par->rri->ri_RelationDesc);
	*why = dp_parallel_target_refusal(par, mt, may_hold);
	if (*why != NULL)
	{
		dp_load_note_parallel(load, 0, *why);
		return NULL;
	}
	return par;
}

/* ---- the leader ---- */

/* Put the shared state, the scan, the payload and the queues in place. */
static void
fill_dsm(ParallelContext *pcxt, const DPParallelShared *sh,
		 const DPParallelLeaf *leaves, List *sources, const char *payload,
		 Snapshot snapshot)
{
	DPParallelShared *shared = shm_toc_allocate(pcxt->toc, sizeof(DPParallelShared));
	char	   *text = shm_toc_allocate(pcxt->toc, strlen(payload) + 1);
	char	   *outq = shm_toc_allocate(pcxt->toc,
										sh->out_queue_size * pcxt->nworkers);
	DPInputCounts *counts = shm_toc_allocate(pcxt->toc,
											  sizeof(DPInputCounts) * pcxt->nworkers);

	*shared = *sh;
	pg_atomic_init_u64(&shared->rows_excluded, 0);
	pg_atomic_init_u64(&shared->next_range, 0);
	pg_atomic_init_u64(&shared->indexed_gen, 0);
	pg_atomic_init_u64(&shared->rows_skipped, 0);
	memset(counts, 0, sizeof(DPInputCounts) * pcxt->nworkers);
	strcpy(text, payload);
	for (int i = 0; i < pcxt->nworkers; i++)
		shm_mq_set_receiver(shm_mq_create(outq + i * sh->out_queue_size,
										  sh->out_queue_size), MyProc);
	shm_toc_insert(pcxt->toc, DP_KEY_SHARED, shared);
	shm_toc_insert(pcxt->toc, DP_KEY_PAYLOAD, text);
	shm_toc_insert(pcxt->toc, DP_KEY_OUT, outq);
	shm_toc_insert(pcxt->toc, DP_KEY_COUNTS, counts);
	if (sh->nleaves > 0)
	{
		Size		size = sizeof(DPParallelLeaf) * sh->nleaves;
		DPParallelLeaf *copy = shm_toc_allocate(pcxt->toc, size);

		memcpy(copy, leaves, size);
		shm_toc_insert(pcxt->toc, DP_KEY_LEAVES, copy);
	}
	for (int i = 0; i < list_length(sources); i++)
	{
		Relation	source = list_nth(sources, i);
		ParallelTableScanDesc pscan =
			shm_toc_allocate(pcxt->toc, table_parallelscan_estimate(source, snapshot));

		table_parallelscan_initialize(source, pscan, snapshot);
		shm_toc_insert(pcxt->toc, DP_KEY_SCAN + i, pscan);
	}
	if (sh->in_queue_size > 0)
	{
		char	   *inq = shm_toc_allocate(pcxt->toc,
										   sh->in_queue_size * pcxt->nworkers);

		for (int i = 0; i < pcxt->nworkers; i++)
			shm_mq_set_sender(shm_mq_create(inq + i * sh->in_queue_size,
											sh->in_queue_size), MyProc);
		shm_toc_insert(pcxt->toc, DP_KEY_IN, inq);
	}
}

/* The shared memory's size: what fill_dsm puts there. */
static void
estimate_dsm(ParallelContext *pcxt, const DPParallelShared *sh,
			 List *sources, const char *payload)
{
	int			keys = 4;

	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(DPParallelShared));
	shm_toc_estimate_chunk(&pcxt->estimator,
						   sizeof(DPInputCounts) * pcxt->nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(payload) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator,
						   sh->out_queue_size * pcxt->nworkers);
	if (sh->nleaves > 0)
	{
		shm_toc_estimate_chunk(&pcxt->estimator,
							   sizeof(DPParallelLeaf) * sh->nleaves);
		keys++;
	}
	for (int i = 0; i < list_length(sources); i++)
	{
		shm_toc_estimate_chunk(&pcxt->estimator,
							   table_parallelscan_estimate(list_nth(sources, i),
														   GetActiveSnapshot()));
		keys++;
	}
	if (sh->in_queue_size > 0)
	{
		shm_toc_estimate_chunk(&pcxt->estimator,
							   sh->in_queue_size * pcxt->nworkers);
		keys++;
	}
	shm_toc_estimate_keys(&pcxt->estimator, keys);
}

/* The load made direct; the pages' transaction, command and freezing. */
static void
go_direct(DPParallel *par)
{
	DPParallelShared *sh = &par->sh;

	dp_load_pages_begin(par->load);
	sh->xid = GetCurrentTransactionId();
	sh->cid = GetCurrentCommandId(true);
	if (sh->nleaves == 0)
		sh->frozen = dp_load_freezes(par->load, par->rri->ri_RelationDesc);
	for (int i = 0; i < sh->nleaves; i++)
	{
		Relation	rel;

		if (par->leaves[i].held)
			continue;			/* the leader's load decides when it starts */
		rel = relation_open(par->leaves[i].relid, NoLock);
		par->leaves[i].frozen = dp_load_freezes(par->load, rel);
		relation_close(rel, NoLock);
	}
}

int
dp_parallel_launch(DPParallel *par, const char *entry, const char *payload,
				   List *sources, Size in_queue_size, int nworkers)
{
	DPParallelShared *sh = &par->sh;
	ParallelContext *pcxt;
	char	   *outq;

	go_direct(par);
	sh->in_queue_size = in_queue_size;
	sh->out_queue_size = DP_OUT_QUEUE_SIZE(nworkers);
	EnterParallelMode();
	pcxt = CreateParallelContext("directpath", entry,
								 Min(nworkers, max_parallel_workers));
	estimate_dsm(pcxt, sh, sources, payload);
	InitializeParallelDSM(pcxt);
	fill_dsm(pcxt, sh, par->leaves, sources, payload, GetActiveSnapshot());
	LaunchParallelWorkers(pcxt);

	par->pcxt = pcxt;
	par->launched = pcxt->nworkers_launched;
	/* ON CONFLICT: the leader's check of what the processes decided */
	if (par->launched > 0 && sh->on_conflict)
		par->conflicts = dp_take_conflicts_begin(par->load,
												 shm_toc_lookup(pcxt->toc, DP_KEY_SHARED, false),
												 par->launched,
												 RelationGetDescr(par->rri->ri_RelationDesc));
	/* the leader's progress row gets its own and a total (progress.c) */
	dp_progress_parallel(par->load, par->launched);
	par->out = palloc0(sizeof(shm_mq_handle *) * Max(par->launched, 1));
	par->in = palloc0(sizeof(shm_mq_handle *) * Max(par->launched, 1));
	outq = shm_toc_lookup(pcxt->toc, DP_KEY_OUT, false);
	for (int i = 0; i < par->launched; i++)
		par->out[i] = shm_mq_attach((shm_mq *) (outq + i * sh->out_queue_size),
									pcxt->seg, pcxt->worker[i].bgwhandle);
	if (sh->in_queue_size > 0)
	{
		char	   *inq = shm_toc_lookup(pcxt->toc, DP_KEY_IN, false);

		for (int i = 0; i < par->launched; i++)
			par->in[i] = shm_mq_attach((shm_mq *) (inq + i * sh->in_queue_size),
									   pcxt->seg, pcxt->worker[i].bgwhandle);
	}
	return par->launched;
}

int
dp_parallel_workers_launched(DPParallel *par)
{
	return par->launched;
}

shm_mq_handle *
dp_parallel_input(DPParallel *par, int worker)
{
	return par->in[worker];
}

shm_toc *
dp_parallel_toc(DPParallel *par)
{
	return par->pcxt->toc;
}

ParallelTableScanDesc
dp_parallel_scan(shm_toc *toc, int i)
{
	return shm_toc_lookup(toc, DP_KEY_SCAN + i, false);
}

void
dp_parallel_input_done(DPParallel *par, int worker)
{
	if (par->in[worker] != NULL)
		shm_mq_detach(par->in[worker]);
	par->in[worker] = NULL;
}

void
dp_parallel_receive(DPParallel *par, const DPLeaderShare *share)
{
	int			open = par->launched;
	bool		own = true;

	par->row = MakeSingleTupleTableSlot(RelationGetDescr(par->rri->ri_RelationDesc),
										&TTSOpsMinimalTuple);
	par->outer_context = error_context_stack;
	par->share = share;
	while (open > 0 || own)
	{
		bool		moved;

		CHECK_FOR_INTERRUPTS();
		moved = dp_parallel_take_messages(par, &open);
		if (share->feed != NULL && share->feed(share->arg, par))
			moved = true;
		if (moved)
			continue;
		if (own && !(par->order && dp_order_full(par->order)))
			own = share->step(share->arg);
		else if (open > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 DP_WAIT_EVENT_MQ_RECEIVE);
			ResetLatch(MyLatch);
		}
		else if (own)
			elog(ERROR, "directpath: the parallel workers ended before the pages kept for them were loaded");
	}
	ExecDropSingleTupleTableSlot(par->row);
	par->share = NULL;
}

/*
 * The rows of held leaves, loaded by the leader as a serial load loads
 * them (triggers, foreign keys, generated columns, constraints), out of
 * parallel mode.
 */
void
dp_parallel_load_held(DPParallel *par, DPHeldLine line, void *arg)
{
	TupleTableSlot *slot;
	TupleTableSlot *lines;

	if (par->held == NULL)
		return;
	slot = MakeSingleTupleTableSlot(RelationGetDescr(par->rri->ri_RelationDesc),
									&TTSOpsMinimalTuple);
	lines = MakeSingleTupleTableSlot(par->line_desc, &TTSOpsMinimalTuple);
	while (tuplestore_gettupleslot(par->held, true, false, slot))
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		if (!tuplestore_gettupleslot(par->held_lines, true, false, lines))
			elog(ERROR, "directpath: a held row without its line");
		if (line != NULL)
			line(arg, (uint64) DatumGetInt64(slot_getattr(lines, 1, &isnull)));
		dp_load_row(par->load, slot);
	}
	ExecDropSingleTupleTableSlot(slot);
	ExecDropSingleTupleTableSlot(lines);
	tuplestore_end(par->held);
	tuplestore_end(par->held_lines);
	par->held = NULL;
}

void
dp_parallel_finish(DPParallel *par)
{
	DPInputCounts *counts;

	WaitForParallelWorkersToFinish(par->pcxt);
	counts = shm_toc_lookup(par->pcxt->toc, DP_KEY_COUNTS, false);
	for (int i = 0; i < par->pcxt->nworkers; i++)
		dp_input_add_counts(&counts[i]);
	if (par->conflicts)
	{
		dp_load_count_skipped(par->load, dp_take_conflicts_end(par->conflicts));
		par->conflicts = NULL;
	}
	DestroyParallelContext(par->pcxt);
	ExitParallelMode();
}

const char *
dp_parallel_note(DPParallel *par)
{
	return par->held_note;
}

bool
dp_parallel_end_insert(DPParallel *par, List *sources)
{
	ListCell   *lc;

	dp_parallel_finish(par);
	dp_parallel_load_held(par, NULL, NULL);
	foreach(lc, sources)
		table_close(lfirst(lc), NoLock);
	if (par->launched == 0)
	{
		dp_load_note_parallel(par->load, 0, "no parallel worker could be started");
		return false;
	}
	dp_load_note_parallel(par->load, par->launched, dp_parallel_note(par));
	return true;
}
