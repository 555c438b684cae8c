/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  A parallel direct-path load, first shape: INSERT ... SELECT from one
 *	  table into a plain heap, its pages built by parallel workers and
 *	  written by the leader, all in the leader's transaction.
 *
 * Asked for with /\*+ APPEND PARALLEL(n) *\/ or directpath.parallel_workers.
 * The INSERT's subplan must be a sequential scan of one table (quals and a
 * projection allowed, no parameters, every function parallel safe): plan
 * time, dp_parallel_plan_refusal.  The target must be a plain heap without
 * indexes, triggers (foreign keys included), RETURNING, row security,
 * stored generated columns or logical logging, outside serializable
 * isolation: run time, refusal().  Otherwise the statement runs serially,
 * and last_statement().parallel says why.
 *
 * Algorithm.
 * 1. The leader makes the load direct (its one leaf's page builder, the
 *	  freezing decision, its transaction ID and command ID taken already),
 *	  then creates a parallel context of its own, as parallel CREATE INDEX
 *	  does, not core's Gather: the planner never plans an INSERT in
 *	  parallel, and a Gather would pass every row through a tuple queue to
 *	  the leader, which would still form every page.  The dynamic shared
 *	  memory holds the shared state (DPParallelShared), the source's
 *	  parallel scan descriptor, the subplan's quals and target list as text,
 *	  and one message queue per worker, the leader receiving.
 * 2. Each worker scans its share of the source (table_beginscan_parallel),
 *	  evaluates the quals and the projection into the target's row format,
 *	  checks NOT NULL and CHECK constraints as ExecInsert does, and places
 *	  the row on a page of its own detached builder (pages.c): the tuple
 *	  header carries the leader's transaction and command, frozen when the
 *	  leader's pages are.  A finished page goes to the leader whole.  A row
 *	  that needs TOAST goes to the leader as a row instead: a worker cannot
 *	  insert (heap_insert refuses in a parallel worker).
 * 3. The leader receives pages from all queues as they come and hands each
 *	  to the load as the leaf's next block (dp_load_page, which sets the
 *	  tuples' t_ctid), rows to dp_load_row; the load's flush rule writes
 *	  them in batches through the append layer, as a serial load does.
 *	  Whenever no message waits, the leader builds one page of its own share
 *	  of the scan (the producer a worker runs) and hands it on the same way.
 * 4. When every worker has detached, the leader waits for them to finish,
 *	  leaves parallel mode, and the load ends as a serial one does.
 *
 * Invariants.
 * - Only the leader writes the relation and its WAL: blocks keep the
 *	 append layer's order (ascending, no gaps) because a block number is
 *	 given to a page only when the leader takes it.
 * - Every tuple carries the leader's (sub)transaction ID and command ID,
 *	 which workers see as their own (StartParallelWorkerTransaction), and
 *	 one freezing decision.
 * - An error in a worker reaches the leader through core's error queue
 *	 (HandleParallelMessages, from CHECK_FOR_INTERRUPTS) and fails the
 *	 statement; a worker that dies makes its queue detach, and
 *	 WaitForParallelWorkersToFinish fails the statement.  Either way the
 *	 transaction aborts and nothing of the load is visible.
 * - While the workers run the leader is in parallel mode: it writes pages
 *	 and, for the rows sent to it, TOAST (heap_insert refuses only in a
 *	 worker), and does nothing that needs a new command ID.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

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
#define DP_KEY_EXPRS	UINT64CONST(0xD1E4C7A000000003)
#define DP_KEY_QUEUES	UINT64CONST(0xD1E4C7A000000004)

/* Bytes of each worker's queue: about 32 pages in flight. */
#define DP_QUEUE_SIZE	(32 * (BLCKSZ + 64))

/* A message's first byte. */
#define DP_MSG_PAGE		'P'		/* BLCKSZ bytes of a finished page */
#define DP_MSG_ROW		'R'		/* a minimal tuple that needs TOAST */

/* What every worker needs to know, set by the leader before launch. */
typedef struct DPParallelShared
{
	Oid			source;
	Oid			target;
	TransactionId xid;
	CommandId	cid;
	bool		frozen;
} DPParallelShared;

/* ---- plan time ---- */

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

	if (mt->returningLists != NIL)
		return "the statement has RETURNING";
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

/* ---- a worker ---- */

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

/*
 * A producer of pages: one process's share of the scan, its rows checked
 * and placed on a detached builder.  Workers run one to the end; the
 * leader runs one a page at a time, between the workers' messages.
 */
typedef struct DPProducer
{
	EState	   *estate;
	ExprContext *econtext;
	TupleTableSlot *scanslot;	/* a source row */
	TupleTableSlot *row;		/* the target's row made of it */
	ExprState  *qual;
	ProjectionInfo *proj;
	ResultRelInfo *rri;			/* the target, for its constraints */
	DPHeapBuilder *builder;
	TableScanDesc scan;
	bool		scan_done;
} DPProducer;

/* A row that needs TOAST, for whoever stores it (the leader). */
typedef void (*DPToastRow) (void *arg, TupleTableSlot *row);

static void
producer_begin(DPProducer *p, DPParallelShared *sh, Relation source,
			   Relation target, ParallelTableScanDesc pscan, List *exprs)
{
	p->estate = CreateExecutorState();
	p->econtext = GetPerTupleExprContext(p->estate);
	p->scanslot = table_slot_create(source, NULL);
	p->row = MakeSingleTupleTableSlot(RelationGetDescr(target), &TTSOpsVirtual);
	p->qual = ExecInitQual((List *) linitial(exprs), NULL);
	p->proj = ExecBuildProjectionInfo((List *) lsecond(exprs), p->econtext,
									  p->row, NULL, RelationGetDescr(source));
	p->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(p->rri, target, 0, NULL, 0);
	p->builder = dp_heap_begin_detached(target, sh->frozen, sh->xid, sh->cid);
	p->scan = table_beginscan_parallel(source, pscan);
	p->scan_done = false;
}

/*
 * The producer's next finished page (palloc'd), its partial last page once
 * the scan is done, or NULL at the end.
 */
static Page
producer_next(DPProducer *p, DPToastRow toast_row, void *arg)
{
	Relation	target = p->rri->ri_RelationDesc;
	Page		page;

	while ((page = dp_heap_take_page(p->builder, p->scan_done)) == NULL)
	{
		if (p->scan_done)
			return NULL;
		if (!table_scan_getnextslot(p->scan, ForwardScanDirection, p->scanslot))
		{
			p->scan_done = true;
			continue;
		}
		CHECK_FOR_INTERRUPTS();
		ResetExprContext(p->econtext);
		p->econtext->ecxt_scantuple = p->scanslot;
		if (p->qual != NULL && !ExecQual(p->qual, p->econtext))
			continue;
		ExecProject(p->proj);
		if (target->rd_att->constr)
			ExecConstraints(p->rri, p->row, p->estate);
		if (!dp_heap_add_slot_in_place(p->builder, p->row))
			toast_row(arg, p->row);
	}
	return page;
}

static void
producer_end(DPProducer *p)
{
	table_endscan(p->scan);
	ExecDropSingleTupleTableSlot(p->scanslot);
	ExecDropSingleTupleTableSlot(p->row);
	FreeExecutorState(p->estate);
}

/* A worker's row that needs TOAST goes to the leader. */
static void
send_row(void *arg, TupleTableSlot *row)
{
	MinimalTuple mt = ExecCopySlotMinimalTuple(row);

	send_message((shm_mq_handle *) arg, DP_MSG_ROW, mt, mt->t_len);
	pfree(mt);
}

/* Step 2: scan this worker's share, build pages, send them. */
static void
build_pages(DPParallelShared *sh, Relation source, Relation target,
			ParallelTableScanDesc pscan, List *exprs, shm_mq_handle *mqh)
{
	DPProducer	p;
	Page		page;

	producer_begin(&p, sh, source, target, pscan, exprs);
	while ((page = producer_next(&p, send_row, mqh)) != NULL)
	{
		send_message(mqh, DP_MSG_PAGE, page, BLCKSZ);
		pfree(page);
	}
	producer_end(&p);
}

void
dp_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	DPParallelShared *sh = shm_toc_lookup(toc, DP_KEY_SHARED, false);
	ParallelTableScanDesc pscan = shm_toc_lookup(toc, DP_KEY_SCAN, false);
	char	   *exprs = shm_toc_lookup(toc, DP_KEY_EXPRS, false);
	char	   *queues = shm_toc_lookup(toc, DP_KEY_QUEUES, false);
	shm_mq	   *mq = (shm_mq *) (queues + ParallelWorkerNumber * DP_QUEUE_SIZE);
	shm_mq_handle *mqh;
	Relation	source;
	Relation	target;

	shm_mq_set_sender(mq, MyProc);
	mqh = shm_mq_attach(mq, seg, NULL);
	/* the leader's locks: a lock group's members do not conflict */
	source = table_open(sh->source, AccessShareLock);
	target = table_open(sh->target, ShareRowExclusiveLock);
	build_pages(sh, source, target, pscan, (List *) stringToNode(exprs), mqh);
	table_close(target, ShareRowExclusiveLock);
	table_close(source, AccessShareLock);
	shm_mq_detach(mqh);
}

/* ---- the leader ---- */

/* Why the target cannot take a parallel load, or NULL. */
static const char *
refusal(ModifyTableState *mt)
{
	ResultRelInfo *rri = mt->resultRelInfo;
	Relation	rel = rri->ri_RelationDesc;

	if (mt->mt_nrels != 1 || rel->rd_rel->relkind != RELKIND_RELATION ||
		mt->mt_partition_tuple_routing != NULL)
		return "the target is not a plain table";
	/* the executor may not have opened them yet */
	if (RelationGetIndexList(rel) != NIL)
		return "the target has indexes";
	if (rri->ri_TrigDesc != NULL)
		return "the target has triggers or foreign keys";
	if (rri->ri_WithCheckOptions != NIL)
		return "the target has row security or check options";
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		return "the target has stored generated columns";
	if (RelationIsLogicallyLogged(rel))
		return "the target is logically logged";
	if (IsolationIsSerializable())
		return "the transaction is serializable";
	if (max_parallel_workers == 0)
		return "max_parallel_workers is 0";
	return NULL;
}

/* Put the shared state, the scan, the expressions and the queues in place. */
static void
fill_dsm(ParallelContext *pcxt, DPParallelShared *sh, Relation source,
		 char *exprs, Snapshot snapshot)
{
	DPParallelShared *shared = shm_toc_allocate(pcxt->toc, sizeof(DPParallelShared));
	ParallelTableScanDesc pscan =
		shm_toc_allocate(pcxt->toc, table_parallelscan_estimate(source, snapshot));
	char	   *text = shm_toc_allocate(pcxt->toc, strlen(exprs) + 1);
	char	   *queues = shm_toc_allocate(pcxt->toc,
										  (Size) DP_QUEUE_SIZE * pcxt->nworkers);

	*shared = *sh;
	table_parallelscan_initialize(source, pscan, snapshot);
	strcpy(text, exprs);
	for (int i = 0; i < pcxt->nworkers; i++)
		shm_mq_set_receiver(shm_mq_create(queues + i * DP_QUEUE_SIZE,
										  DP_QUEUE_SIZE), MyProc);
	shm_toc_insert(pcxt->toc, DP_KEY_SHARED, shared);
	shm_toc_insert(pcxt->toc, DP_KEY_SCAN, pscan);
	shm_toc_insert(pcxt->toc, DP_KEY_EXPRS, text);
	shm_toc_insert(pcxt->toc, DP_KEY_QUEUES, queues);
}

/* Enter parallel mode, set up the shared memory and start the workers. */
static ParallelContext *
launch(DPParallelShared *sh, Relation source, char *exprs, int nworkers)
{
	ParallelContext *pcxt;

	EnterParallelMode();
	pcxt = CreateParallelContext("directpath", "dp_parallel_main",
								 Min(nworkers, max_parallel_workers));
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(DPParallelShared));
	shm_toc_estimate_chunk(&pcxt->estimator,
						   table_parallelscan_estimate(source, GetActiveSnapshot()));
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(exprs) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, (Size) DP_QUEUE_SIZE * pcxt->nworkers);
	shm_toc_estimate_keys(&pcxt->estimator, 4);
	InitializeParallelDSM(pcxt);
	fill_dsm(pcxt, sh, source, exprs, GetActiveSnapshot());
	LaunchParallelWorkers(pcxt);
	return pcxt;
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

/* The leader's own row that needs TOAST: the load stores it. */
static void
load_row(void *arg, TupleTableSlot *row)
{
	dp_load_row((DPLoad *) arg, row);
}

/*
 * The leader's share while no message waits: one page of its own, handed
 * to the load like a worker's.  Returns false once its share is done.
 */
static bool
produce_one(DPLoad *load, ResultRelInfo *rri, DPProducer *own)
{
	Page		page = producer_next(own, load_row, load);

	if (page == NULL)
		return false;
	dp_load_page(load, rri, page);
	pfree(page);
	return true;
}

/*
 * Step 3: receive from every queue until all have detached, building
 * pages of the leader's own share whenever none waits ('own', until it is
 * done).
 */
static void
receive_all(DPLoad *load, ResultRelInfo *rri, shm_mq_handle **mqh, int n,
			DPProducer *own)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rri->ri_RelationDesc),
													&TTSOpsMinimalTuple);
	int			open = n;
	bool		producing = true;

	while (open > 0 || producing)
	{
		bool		got = false;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < n; i++)
		{
			Size		len;
			void	   *data;
			shm_mq_result r;

			if (mqh[i] == NULL)
				continue;
			r = shm_mq_receive(mqh[i], &len, &data, true);
			if (r == SHM_MQ_SUCCESS)
			{
				take_message(load, rri, slot, data, len);
				got = true;
			}
			else if (r == SHM_MQ_DETACHED)
			{
				mqh[i] = NULL;
				open--;
			}
		}
		if (got)
			continue;
		if (producing)
			producing = produce_one(load, rri, own);
		else if (open > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 DP_WAIT_EVENT_MQ_RECEIVE);
			ResetLatch(MyLatch);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
}

bool
dp_parallel_insert(DPLoad *load, EState *estate, ModifyTableState *mt,
				   int nworkers)
{
	Plan	   *sub = outerPlan((ModifyTable *) mt->ps.plan);
	const char *why = refusal(mt);
	DPParallelShared sh;
	ParallelContext *pcxt;
	Relation	source;
	char	   *exprs;
	shm_mq_handle **mqh;
	char	   *queues;
	int			launched;

	if (why != NULL)
	{
		dp_load_note_parallel(load, 0, why);
		return false;
	}

	/* step 1 */
	sh.source = exec_rt_fetch(((Scan *) sub)->scanrelid, estate)->relid;
	sh.target = RelationGetRelid(mt->resultRelInfo->ri_RelationDesc);
	sh.xid = GetCurrentTransactionId();
	sh.cid = GetCurrentCommandId(true);
	sh.frozen = dp_load_pages_begin(load, mt->resultRelInfo);
	source = table_open(sh.source, NoLock);
	exprs = nodeToString(list_make2(sub->qual, sub->targetlist));
	pcxt = launch(&sh, source, exprs, nworkers);
	launched = pcxt->nworkers_launched;

	/* steps 2 and 3: the leader takes a share of the scan too */
	queues = shm_toc_lookup(pcxt->toc, DP_KEY_QUEUES, false);
	mqh = palloc0(sizeof(shm_mq_handle *) * Max(launched, 1));
	for (int i = 0; i < launched; i++)
		mqh[i] = shm_mq_attach((shm_mq *) (queues + i * DP_QUEUE_SIZE),
							   pcxt->seg, pcxt->worker[i].bgwhandle);
	if (launched > 0)
	{
		DPProducer	own;

		producer_begin(&own, &sh, source, mt->resultRelInfo->ri_RelationDesc,
					   shm_toc_lookup(pcxt->toc, DP_KEY_SCAN, false),
					   list_make2(sub->qual, sub->targetlist));
		receive_all(load, mt->resultRelInfo, mqh, launched, &own);
		producer_end(&own);
	}

	/* step 4 */
	WaitForParallelWorkersToFinish(pcxt);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	table_close(source, NoLock);
	if (launched == 0)
	{
		dp_load_note_parallel(load, 0, "no parallel worker could be started");
		return false;
	}
	dp_load_note_parallel(load, launched, NULL);
	return true;
}
