/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  A parallel direct-path load: pages built by parallel workers (and by
 *	  the leader between writes) and written by the leader alone, all in
 *	  the leader's transaction.  This file has the machinery every parallel
 *	  load shares and its first input, INSERT ... SELECT from one table;
 *	  parcopy.c has the other, COPY FROM a file or a program.
 *
 * Asked for with /\*+ APPEND PARALLEL(n) *\/ or directpath.parallel_workers.
 * The INSERT's subplan must be a sequential scan of one table (quals and a
 * projection allowed, no parameters, every function parallel safe): plan
 * time, dp_parallel_plan_refusal.  The target must be a plain heap without
 * triggers (foreign keys included), RETURNING, row security, stored
 * generated columns or CHECK constraints that are not parallel safe,
 * outside serializable isolation: run time, dp_parallel_target_refusal.
 * Otherwise the statement runs serially, and last_statement().parallel
 * says why.
 *
 * Algorithm.
 * 1. The leader makes the load direct (its one leaf's page builder, the
 *	  freezing decision, its transaction ID and command ID taken already),
 *	  then creates a parallel context of its own, as parallel CREATE INDEX
 *	  does, not core's Gather: the planner never plans an INSERT in
 *	  parallel, and a Gather would pass every row through a tuple queue to
 *	  the leader, which would still form every page.  The dynamic shared
 *	  memory holds the shared state (DPParallelShared), the input's own part
 *	  (the source's parallel scan descriptor; for COPY nothing), a text
 *	  payload (the subplan's quals and target list; COPY's options), one
 *	  message queue per worker towards the leader and, for COPY, one from
 *	  the leader (dp_parallel_launch).
 * 2. Each worker produces rows in the target's format from its share of
 *	  the input, and places them with a placer (DPPlacer): NOT NULL and
 *	  CHECK constraints checked as ExecInsert does, the row formed in place
 *	  on a page of the worker's detached builder (pages.c), its header
 *	  carrying the leader's transaction and command, frozen when the
 *	  leader's pages are.  A finished page goes to the leader whole.  A row
 *	  that needs TOAST goes to the leader as a row instead: a worker cannot
 *	  insert (heap_insert refuses in a parallel worker).
 * 3. The leader receives pages from all queues as they come and hands each
 *	  to the load as the leaf's next block (dp_load_page, which sets the
 *	  tuples' t_ctid and gives each row what a placed row gets: its index
 *	  entries spooled for the build at the end of new storage, or the row
 *	  queued for the per-batch index work), rows to dp_load_row; the load's
 *	  flush rule writes them in batches through the append layer, as a
 *	  serial load does.  Between messages it feeds the workers their input
 *	  (COPY) and, whenever nothing else is to be done, produces a share of
 *	  its own with a placer whose pages go straight to the load
 *	  (dp_parallel_receive).
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
 * Long: over 700 lines.  The machinery every parallel load shares (the
 * context, the placers, the pages' way to the leader) and its first input
 * (a scan) are kept together because the scan's producer is the placers'
 * reference user; parcopy.c (with the input stage's chunker.c and rowform.c) is the COPY input.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/pg_proc.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "storage/proc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

/* Keys of the shared memory table of contents. */
#define DP_KEY_SHARED	UINT64CONST(0xD1E4C7A000000001)
#define DP_KEY_SCAN		UINT64CONST(0xD1E4C7A000000002)
#define DP_KEY_PAYLOAD	UINT64CONST(0xD1E4C7A000000003)
#define DP_KEY_OUT		UINT64CONST(0xD1E4C7A000000004)
#define DP_KEY_IN		UINT64CONST(0xD1E4C7A000000005)
#define DP_KEY_COUNTS	UINT64CONST(0xD1E4C7A000000006)

/* Bytes of each worker's queue towards the leader: about 32 pages. */
#define DP_OUT_QUEUE_SIZE	(32 * (BLCKSZ + 64))

/* A message's first byte, worker to leader. */
#define DP_MSG_PAGE		'P'		/* BLCKSZ bytes of a finished page */
#define DP_MSG_ROW		'R'		/* a minimal tuple that needs TOAST */

/* The leader's side of a running parallel load. */
struct DPParallel
{
	ParallelContext *pcxt;
	int			launched;		/* workers started */
	shm_mq_handle **out;		/* per worker: its pages; NULL once detached */
	shm_mq_handle **in;			/* per worker: its input (COPY), or NULL */
};

/* ---- what a worker evaluates must be parallel safe ---- */

bool
dp_expr_parallel_safe(Node *expr)
{
	PlannerInfo *root = makeNode(PlannerInfo);

	/* is_parallel_safe searches only when the query was not all safe */
	root->glob = makeNode(PlannerGlobal);
	root->glob->maxParallelHazard = PROPARALLEL_RESTRICTED;
	return is_parallel_safe(root, expr);
}

/* Are the target's CHECK constraints parallel safe? */
static bool
checks_parallel_safe(Relation rel)
{
	TupleConstr *constr = rel->rd_att->constr;

	for (int i = 0; constr != NULL && i < constr->num_check; i++)
		if (!dp_expr_parallel_safe(stringToNode(constr->check[i].ccbin)))
			return false;
	return true;
}

const char *
dp_parallel_target_refusal(ModifyTableState *mt)
{
	ResultRelInfo *rri = mt->resultRelInfo;
	Relation	rel = rri->ri_RelationDesc;

	if (mt->mt_nrels != 1 || rel->rd_rel->relkind != RELKIND_RELATION ||
		mt->mt_partition_tuple_routing != NULL)
		return "the target is not a plain table";
	if (rri->ri_TrigDesc != NULL)
		return "the target has triggers or foreign keys";
	if (rri->ri_WithCheckOptions != NIL)
		return "the target has row security or check options";
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		return "the target has stored generated columns";
	if (!checks_parallel_safe(rel))
		return "a CHECK constraint of the target is not parallel safe";
	if (IsolationIsSerializable())
		return "the transaction is serializable";
	if (max_parallel_workers == 0)
		return "max_parallel_workers is 0";
	return NULL;
}

/* ---- placing rows: the same in a worker and in the leader ---- */

void
dp_placer_begin(DPPlacer *pl, const DPParallelShared *sh, Relation target,
				DPPageSink page, DPRowSink toast_row, void *arg)
{
	pl->estate = CreateExecutorState();
	pl->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(pl->rri, target, 0, NULL, 0);
	pl->builder = dp_heap_begin_detached(target, sh->frozen, sh->xid, sh->cid);
	pl->page = page;
	pl->toast_row = toast_row;
	pl->arg = arg;
}

/* Hand on every full page (with 'partial', the last one too). */
static bool
hand_on_pages(DPPlacer *pl, bool partial)
{
	Page		page;
	bool		handed = false;

	while ((page = dp_heap_take_page(pl->builder, partial)) != NULL)
	{
		pl->page(pl->arg, page);
		pfree(page);
		handed = true;
	}
	return handed;
}

bool
dp_placer_add(DPPlacer *pl, TupleTableSlot *row)
{
	if (pl->rri->ri_RelationDesc->rd_att->constr)
		ExecConstraints(pl->rri, row, pl->estate);
	if (!dp_heap_add_slot_in_place(pl->builder, row))
		pl->toast_row(pl->arg, row);
	return hand_on_pages(pl, false);
}

void
dp_placer_end(DPPlacer *pl)
{
	hand_on_pages(pl, true);
	FreeExecutorState(pl->estate);
}

/* A worker's pages and TOAST rows go to the leader through its queue. */
static void
send_message(shm_mq_handle *mqh, char kind, const void *data, Size len)
{
	shm_mq_iovec iov[2];

	iov[0].data = &kind;
	iov[0].len = 1;
	iov[1].data = data;
	iov[1].len = len;
	if (shm_mq_sendv(mqh, iov, 2, false, false) != SHM_MQ_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("directpath: the leader stopped receiving pages")));
}

static void
send_page(void *arg, Page page)
{
	send_message((shm_mq_handle *) arg, DP_MSG_PAGE, page, BLCKSZ);
}

static void
send_row(void *arg, TupleTableSlot *row)
{
	MinimalTuple mt = ExecCopySlotMinimalTuple(row);

	send_message((shm_mq_handle *) arg, DP_MSG_ROW, mt, mt->t_len);
	pfree(mt);
}

/* The leader's own pages and TOAST rows go straight to its load. */
typedef struct DPLeaderSink
{
	DPLoad	   *load;
	ResultRelInfo *rri;
} DPLeaderSink;

static void
load_page(void *arg, Page page)
{
	DPLeaderSink *s = arg;

	dp_load_page(s->load, s->rri, page);
}

static void
load_row(void *arg, TupleTableSlot *row)
{
	DPLeaderSink *s = arg;

	dp_load_row(s->load, row);
}

void
dp_placer_begin_leader(DPPlacer *pl, const DPParallelShared *sh, DPLoad *load,
					   ResultRelInfo *rri)
{
	DPLeaderSink *s = palloc(sizeof(DPLeaderSink));

	s->load = load;
	s->rri = rri;
	dp_placer_begin(pl, sh, rri->ri_RelationDesc, load_page, load_row, s);
}

/* ---- INSERT ... SELECT: plan time ---- */

static bool
has_params(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) || IsA(node, SubPlan))
		return true;
	return expression_tree_walker(node, has_params, context);
}

/* One output column per attribute of the target (locked), in order? */
static bool
is_target_row(List *tlist, Oid target)
{
	Relation	rel = relation_open(target, NoLock);
	bool		ok = list_length(tlist) == RelationGetNumberOfAttributes(rel);

	relation_close(rel, NoLock);
	return ok;
}

const char *
dp_parallel_plan_refusal(PlannedStmt *stmt, Query *parse)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	Plan	   *sub = outerPlan(mt);
	RangeTblEntry *rte;

	if (mt->operation == CMD_MERGE)
		return "the statement is a MERGE (the leader decides each row's action)";
	if (mt->returningLists != NIL)
		return "the statement has RETURNING";
	if (mt->onConflictAction != ONCONFLICT_NONE)
		return "the statement has ON CONFLICT (the leader checks each row's key)";
	if (sub == NULL || !IsA(sub, SeqScan) || sub->initPlan != NIL ||
		sub->lefttree != NULL)
		return "its SELECT is not a scan of one table";
	rte = rt_fetch(((Scan *) sub)->scanrelid, stmt->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION ||
		rte->tablesample != NULL)
		return "its SELECT is not a scan of one table";
	/* a worker cannot see the leader's local buffers */
	if (get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
		return "its SELECT reads a temporary table";
	if (has_params((Node *) sub->qual, NULL) ||
		has_params((Node *) sub->targetlist, NULL))
		return "its SELECT uses parameters or subqueries";
	if (!is_target_row(sub->targetlist,
					   rt_fetch(parse->resultRelation, parse->rtable)->relid))
		return "its SELECT's columns are not the table's row";
	if (max_parallel_hazard(parse) != PROPARALLEL_SAFE)
		return "the statement calls a function that is not parallel safe";
	if (sub->plan_rows * sub->plan_width < dp_min_bytes)
		return "its SELECT is estimated to produce less than directpath.min_bytes";
	return NULL;
}

/* ---- INSERT ... SELECT: producing rows from a share of the scan ---- */

/*
 * One process's share of the scan: its rows filtered, projected into the
 * target's row and handed to a placer.  Workers run one to the end; the
 * leader runs one until a page is handed on, between messages.
 */
typedef struct DPScanShare
{
	ExprContext *econtext;
	TupleTableSlot *scanslot;	/* a source row */
	TupleTableSlot *row;		/* the target's row made of it */
	ExprState  *qual;
	ProjectionInfo *proj;
	TableScanDesc scan;
	DPPlacer	placer;
	bool		done;
} DPScanShare;

static void
scan_share_begin(DPScanShare *p, Relation source, Relation target,
				 ParallelTableScanDesc pscan, List *exprs)
{
	p->econtext = GetPerTupleExprContext(p->placer.estate);
	p->scanslot = table_slot_create(source, NULL);
	p->row = MakeSingleTupleTableSlot(RelationGetDescr(target), &TTSOpsVirtual);
	p->qual = ExecInitQual((List *) linitial(exprs), NULL);
	p->proj = ExecBuildProjectionInfo((List *) lsecond(exprs), p->econtext,
									  p->row, NULL, RelationGetDescr(source));
	p->scan = table_beginscan_parallel(source, pscan);
	p->done = false;
}

/*
 * Place rows of the share until a page was handed on (when 'one_page') or
 * the share is done; returns false once it is.
 */
static bool
scan_share_run(DPScanShare *p, bool one_page)
{
	while (!p->done)
	{
		if (!table_scan_getnextslot(p->scan, ForwardScanDirection, p->scanslot))
		{
			p->done = true;
			break;
		}
		CHECK_FOR_INTERRUPTS();
		ResetExprContext(p->econtext);
		p->econtext->ecxt_scantuple = p->scanslot;
		if (p->qual != NULL && !ExecQual(p->qual, p->econtext))
			continue;
		ExecProject(p->proj);
		if (dp_placer_add(&p->placer, p->row) && one_page)
			return true;
	}
	return false;
}

static void
scan_share_end(DPScanShare *p)
{
	table_endscan(p->scan);
	ExecDropSingleTupleTableSlot(p->scanslot);
	ExecDropSingleTupleTableSlot(p->row);
	dp_placer_end(&p->placer);
}

/* ---- a worker ---- */

void
dp_worker_begin(DPWorker *w, dsm_segment *seg, shm_toc *toc)
{
	char	   *outq = shm_toc_lookup(toc, DP_KEY_OUT, false);
	shm_mq	   *mq = (shm_mq *) (outq + ParallelWorkerNumber * DP_OUT_QUEUE_SIZE);

	w->toc = toc;
	w->sh = shm_toc_lookup(toc, DP_KEY_SHARED, false);
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
}

void
dp_placer_begin_worker(DPPlacer *pl, DPWorker *w)
{
	dp_placer_begin(pl, w->sh, w->target, send_page, send_row, w->out);
}

void
dp_worker_end(DPWorker *w)
{
	DPInputCounts *counts = shm_toc_lookup(w->toc, DP_KEY_COUNTS, false);

	/* the fast input's counts, for the leader's last_copy_input() */
	dp_input_get_counts(&counts[ParallelWorkerNumber]);
	table_close(w->target, ShareRowExclusiveLock);
	if (w->in != NULL)
		shm_mq_detach(w->in);
	shm_mq_detach(w->out);
}

/* A worker of an INSERT ... SELECT: its share of the scan. */
void
dp_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	DPWorker	w;
	Relation	source;
	DPScanShare p;

	dp_worker_begin(&w, seg, toc);
	source = table_open(w.sh->source, AccessShareLock);
	dp_placer_begin_worker(&p.placer, &w);
	scan_share_begin(&p, source, w.target,
					 shm_toc_lookup(toc, DP_KEY_SCAN, false),
					 (List *) stringToNode(w.payload));
	(void) scan_share_run(&p, false);
	scan_share_end(&p);
	table_close(source, AccessShareLock);
	dp_worker_end(&w);
}

/* ---- the leader ---- */

/* Put the shared state, the scan, the payload and the queues in place. */
static void
fill_dsm(ParallelContext *pcxt, const DPParallelShared *sh, Relation source,
		 const char *payload, Snapshot snapshot)
{
	DPParallelShared *shared = shm_toc_allocate(pcxt->toc, sizeof(DPParallelShared));
	char	   *text = shm_toc_allocate(pcxt->toc, strlen(payload) + 1);
	char	   *outq = shm_toc_allocate(pcxt->toc,
										(Size) DP_OUT_QUEUE_SIZE * pcxt->nworkers);
	DPInputCounts *counts = shm_toc_allocate(pcxt->toc,
											  sizeof(DPInputCounts) * pcxt->nworkers);

	*shared = *sh;
	memset(counts, 0, sizeof(DPInputCounts) * pcxt->nworkers);
	strcpy(text, payload);
	for (int i = 0; i < pcxt->nworkers; i++)
		shm_mq_set_receiver(shm_mq_create(outq + i * DP_OUT_QUEUE_SIZE,
										  DP_OUT_QUEUE_SIZE), MyProc);
	shm_toc_insert(pcxt->toc, DP_KEY_SHARED, shared);
	shm_toc_insert(pcxt->toc, DP_KEY_PAYLOAD, text);
	shm_toc_insert(pcxt->toc, DP_KEY_OUT, outq);
	shm_toc_insert(pcxt->toc, DP_KEY_COUNTS, counts);
	if (source != NULL)
	{
		ParallelTableScanDesc pscan =
			shm_toc_allocate(pcxt->toc, table_parallelscan_estimate(source, snapshot));

		table_parallelscan_initialize(source, pscan, snapshot);
		shm_toc_insert(pcxt->toc, DP_KEY_SCAN, pscan);
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
			 Relation source, const char *payload)
{
	int			keys = 4;

	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(DPParallelShared));
	shm_toc_estimate_chunk(&pcxt->estimator,
						   sizeof(DPInputCounts) * pcxt->nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(payload) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator,
						   (Size) DP_OUT_QUEUE_SIZE * pcxt->nworkers);
	if (source != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator,
							   table_parallelscan_estimate(source, GetActiveSnapshot()));
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

DPParallel *
dp_parallel_launch(const DPParallelShared *sh, const char *entry,
				   const char *payload, Relation source, int nworkers)
{
	DPParallel *par = palloc0(sizeof(DPParallel));
	ParallelContext *pcxt;
	char	   *outq;

	EnterParallelMode();
	pcxt = CreateParallelContext("directpath", entry,
								 Min(nworkers, max_parallel_workers));
	estimate_dsm(pcxt, sh, source, payload);
	InitializeParallelDSM(pcxt);
	fill_dsm(pcxt, sh, source, payload, GetActiveSnapshot());
	LaunchParallelWorkers(pcxt);

	par->pcxt = pcxt;
	par->launched = pcxt->nworkers_launched;
	par->out = palloc0(sizeof(shm_mq_handle *) * Max(par->launched, 1));
	par->in = palloc0(sizeof(shm_mq_handle *) * Max(par->launched, 1));
	outq = shm_toc_lookup(pcxt->toc, DP_KEY_OUT, false);
	for (int i = 0; i < par->launched; i++)
		par->out[i] = shm_mq_attach((shm_mq *) (outq + i * DP_OUT_QUEUE_SIZE),
									pcxt->seg, pcxt->worker[i].bgwhandle);
	if (sh->in_queue_size > 0)
	{
		char	   *inq = shm_toc_lookup(pcxt->toc, DP_KEY_IN, false);

		for (int i = 0; i < par->launched; i++)
			par->in[i] = shm_mq_attach((shm_mq *) (inq + i * sh->in_queue_size),
									   pcxt->seg, pcxt->worker[i].bgwhandle);
	}
	return par;
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

void
dp_parallel_input_done(DPParallel *par, int worker)
{
	if (par->in[worker] != NULL)
		shm_mq_detach(par->in[worker]);
	par->in[worker] = NULL;
}

/* A message from a worker, to the load. */
static void
take_message(DPLoad *load, ResultRelInfo *rri, TupleTableSlot *slot,
			 const char *data, Size len)
{
	if (data[0] == DP_MSG_PAGE && len == BLCKSZ + 1)
		dp_load_page(load, rri, data + 1);
	else if (data[0] == DP_MSG_ROW)
	{
		MinimalTuple mt = palloc(len - 1);

		memcpy(mt, data + 1, len - 1);
		ExecStoreMinimalTuple(mt, slot, true);
		dp_load_row(load, slot);
		ExecClearTuple(slot);
	}
	else
		elog(ERROR, "directpath: unexpected message from a parallel worker");
}

/* Every message waiting in the workers' queues; false if none. */
static bool
take_messages(DPParallel *par, DPLoad *load, ResultRelInfo *rri,
			  TupleTableSlot *slot, int *open)
{
	bool		got = false;

	for (int i = 0; i < par->launched; i++)
	{
		Size		len;
		void	   *data;
		shm_mq_result r;

		if (par->out[i] == NULL)
			continue;
		r = shm_mq_receive(par->out[i], &len, &data, true);
		if (r == SHM_MQ_SUCCESS)
		{
			take_message(load, rri, slot, data, len);
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

void
dp_parallel_receive(DPParallel *par, DPLoad *load, ResultRelInfo *rri,
					const DPLeaderShare *share)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rri->ri_RelationDesc),
													&TTSOpsMinimalTuple);
	int			open = par->launched;
	bool		own = true;

	while (open > 0 || own)
	{
		bool		moved;

		CHECK_FOR_INTERRUPTS();
		moved = take_messages(par, load, rri, slot, &open);
		if (share->feed != NULL && share->feed(share->arg, par))
			moved = true;
		if (moved)
			continue;
		if (own)
			own = share->step(share->arg);
		else if (open > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 DP_WAIT_EVENT_MQ_RECEIVE);
			ResetLatch(MyLatch);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
}

void
dp_parallel_finish(DPParallel *par)
{
	DPInputCounts *counts;

	WaitForParallelWorkersToFinish(par->pcxt);
	counts = shm_toc_lookup(par->pcxt->toc, DP_KEY_COUNTS, false);
	for (int i = 0; i < par->pcxt->nworkers; i++)
		dp_input_add_counts(&counts[i]);
	DestroyParallelContext(par->pcxt);
	ExitParallelMode();
}

/* ---- INSERT ... SELECT: the leader ---- */

/* The leader's share of the scan: one page at a time. */
static bool
scan_step(void *arg)
{
	return scan_share_run((DPScanShare *) arg, true);
}

bool
dp_parallel_insert(DPLoad *load, EState *estate, ModifyTableState *mt,
				   int nworkers)
{
	Plan	   *sub = outerPlan((ModifyTable *) mt->ps.plan);
	ResultRelInfo *rri = mt->resultRelInfo;
	const char *why = dp_parallel_target_refusal(mt);
	DPParallelShared sh = {0};
	DPParallel *par;
	Relation	source;
	int			launched;

	if (why != NULL)
	{
		dp_load_note_parallel(load, 0, why);
		return false;
	}

	/* step 1 */
	sh.source = exec_rt_fetch(((Scan *) sub)->scanrelid, estate)->relid;
	sh.target = RelationGetRelid(rri->ri_RelationDesc);
	sh.xid = GetCurrentTransactionId();
	sh.cid = GetCurrentCommandId(true);
	sh.frozen = dp_load_pages_begin(load, rri);
	source = table_open(sh.source, NoLock);
	par = dp_parallel_launch(&sh, "dp_parallel_main",
							 nodeToString(list_make2(sub->qual, sub->targetlist)),
							 source, nworkers);
	launched = par->launched;

	/* steps 2 and 3: the leader takes a share of the scan too */
	if (launched > 0)
	{
		DPScanShare own;
		DPLeaderShare share = {NULL, scan_step, &own};

		dp_placer_begin_leader(&own.placer, &sh, load, rri);
		scan_share_begin(&own, source, rri->ri_RelationDesc,
						 shm_toc_lookup(par->pcxt->toc, DP_KEY_SCAN, false),
						 list_make2(sub->qual, sub->targetlist));
		dp_parallel_receive(par, load, rri, &share);
		scan_share_end(&own);
	}

	/* step 4 */
	dp_parallel_finish(par);
	table_close(source, NoLock);
	if (launched == 0)
	{
		dp_load_note_parallel(load, 0, "no parallel worker could be started");
		return false;
	}
	dp_load_note_parallel(load, launched, NULL);
	return true;
}
