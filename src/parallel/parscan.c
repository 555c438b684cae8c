/*-------------------------------------------------------------------------
 *
 * parscan.c
 *	  A parallel INSERT ... SELECT whose SELECT is scans: a sequential scan
 *	  of one table, or an Append of them (a partitioned table's partitions),
 *	  each table's blocks shared among the workers and the leader.
 *	  parplan.c chooses this input (dp_parallel_scans) and has the other,
 *	  a SELECT that is a plan; parallel.c runs the load.
 *
 * Which SELECTs (dp_parallel_scans_refusal, at plan time): the INSERT's
 * subplan is a sequential scan of a plain table, or an Append of them not
 * pruned at run time, without TABLESAMPLE, parameters or subqueries in its
 * quals and projections, not of a temporary table (a worker cannot see
 * the leader's local buffers), its output columns the target's row.  That
 * every function is parallel safe, dp_parallel_plan_refusal checks for
 * the whole statement (parplan.c).
 *
 * Algorithm (dp_parallel_scans_insert).
 * 1. The leader begins the parallel load (dp_parallel_begin: the target's
 *	  rules), makes the payload of the scans' tables, quals and target
 *	  lists, and launches the workers with a parallel scan of each table
 *	  (dp_parallel_launch).
 * 2. Each worker (dp_parallel_main) goes through the tables in order,
 *	  taking blocks of the current one from its parallel scan until none
 *	  is left; each row that passes the quals is projected into the
 *	  target's row and placed with the worker's placer (placer.c).
 * 3. The leader does the same with a share of its own, one page at a time
 *	  (scan_step), whenever no message from a worker moved
 *	  (dp_parallel_receive).
 * 4. The load ends as every parallel INSERT ... SELECT does
 *	  (dp_parallel_end_insert).
 *
 * In order.  Into a plain target from heap tables, the rows keep the
 * scans' order, as a serial load keeps it (parorder.c): the blocks of the
 * tables, in turn, are cut into ranges of range_blocks (numbered over the
 * tables, from the sizes their parallel scans recorded at launch), and
 * in step 2 each process claims the next range from a counter in the
 * shared memory and scans just its blocks (heap_setscanlimits), under the
 * parallel scan's snapshot.  A worker says which range it claimed
 * (DP_MSG_CLAIM) and when it has sent the range's last page, its page
 * going on across adjacent ranges; in step 3 the leader scans a whole
 * range in one step.  Another table access method keeps core's parallel
 * scan, in no particular order.
 *
 * RETURNING needs that order (returning_setup): the leader projects each
 * row's RETURNING row as it takes the row's page, so the rows come back
 * in the order they reach it; a row that needs TOAST then goes on after
 * its worker's unfinished page (placer.c).
 *
 * Invariants.
 * - Each block of each table is read by one process (its parallel scan,
 *	 or the claims' counter, hands each block out once), so the rows
 *	 placed are the SELECT's rows, each once; no block past a table's
 *	 size at launch is read (a table inserted into itself).
 * - The leader's tables are locked by its executor; a worker takes its
 *	 own AccessShare lock on each table as it comes to it.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "load/load.h"

#include "common/fault.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

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

bool
dp_parallel_target_row(List *tlist, int natts)
{
	return list_length(tlist) == natts;
}

/* Why the SELECT's scan 'plan' cannot be run by workers, or NULL. */
static const char *
scan_refusal(Plan *plan, PlannedStmt *stmt, int natts)
{
	RangeTblEntry *rte;

	if (!IsA(plan, SeqScan) || plan->initPlan != NIL || plan->lefttree != NULL)
		return "its SELECT is not a scan of one table or of a partitioned table's partitions";
	rte = rt_fetch(((Scan *) plan)->scanrelid, stmt->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION ||
		rte->tablesample != NULL)
		return "its SELECT is not a scan of one table or of a partitioned table's partitions";
	/* a worker cannot see the leader's local buffers */
	if (get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
		return "its SELECT reads a temporary table";
	if (has_params((Node *) plan->qual, NULL) ||
		has_params((Node *) plan->targetlist, NULL))
		return "its SELECT uses parameters or subqueries";
	if (!dp_parallel_target_row(plan->targetlist, natts))
		return "its SELECT's columns are not the table's row";
	return NULL;
}

/*
 * The scans of the INSERT's subplan: a sequential scan of one table, or an
 * Append of them (a partitioned table's partitions left after plan-time
 * pruning; none pruned at run time).
 */
static List *
subplan_scans(Plan *sub)
{
	if (sub != NULL && IsA(sub, Append) && sub->qual == NIL &&
		sub->initPlan == NIL && !DP_APPEND_PRUNES((Append *) sub))
		return ((Append *) sub)->appendplans;
	return list_make1(sub);
}

/* Is the subplan scans (shared here), rather than a plan (parplan.c)? */
static bool
is_scans(Plan *sub)
{
	ListCell   *lc;

	foreach(lc, subplan_scans(sub))
		if (!IsA(lfirst(lc), SeqScan))
			return false;
	return true;
}

bool
dp_parallel_scans(Plan *sub)
{
	return sub == NULL ||
		(IsA(sub, Append) && DP_APPEND_PRUNES((Append *) sub)) || is_scans(sub);
}

const char *
dp_parallel_scans_refusal(PlannedStmt *stmt, Plan *sub, int natts)
{
	ListCell   *lc;

	if (sub != NULL && IsA(sub, Append) && DP_APPEND_PRUNES((Append *) sub))
		return "its SELECT's partitions are pruned at run time";
	if (sub == NULL || subplan_scans(sub) == NIL)
		return "its SELECT is not a scan of one table or of a partitioned table's partitions";
	foreach(lc, subplan_scans(sub))
	{
		const char *why = scan_refusal(lfirst(lc), stmt, natts);

		if (why != NULL)
			return why;
	}
	return NULL;
}

/* ---- INSERT ... SELECT: producing rows from a share of the scans ---- */

/*
 * What a process scans: each source table (one, or a partitioned source's
 * partitions) with its quals and its projection into the target's row,
 * and the parallel scan every process shares for it.  Every process goes
 * through the sources in the same order, each taking blocks of the
 * current one until it has none left.
 */
typedef struct DPScanSources
{
	int			n;
	Oid		   *relids;
	List	   *quals;			/* per source: its qual list */
	List	   *tlists;			/* per source: its target list */
	ParallelTableScanDesc *pscans;
} DPScanSources;

/*
 * One process's share of the scans: its rows filtered, projected into the
 * target's row and handed to a placer.  Workers run one to the end; the
 * leader runs one until a page is handed on, between messages.
 */
typedef struct DPScanShare
{
	const DPScanSources *src;
	int			current;		/* the source being scanned */
	Relation	source;			/* ... opened, or NULL */
	ExprContext *econtext;
	TupleTableSlot *scanslot;	/* a source row */
	TupleTableSlot *row;		/* the target's row made of it */
	ExprState  *qual;
	ProjectionInfo *proj;
	TableScanDesc scan;
	DPPlacer	placer;
	/* in order (DPParallelShared.in_order): block ranges, claimed */
	DPParallelShared *sh;		/* the claims' counter; NULL: not in order */
	uint64	   *first_range;	/* per source, its first range; [n]: all */
	Snapshot	snapshot;		/* the current source's, restored */
} DPScanShare;

static void
scan_share_begin(DPScanShare *p, const DPScanSources *src, Relation target,
				 DPParallelShared *sh)
{
	p->src = src;
	p->current = -1;
	p->source = NULL;
	p->econtext = GetPerTupleExprContext(p->placer.estate);
	p->row = MakeSingleTupleTableSlot(RelationGetDescr(target), &TTSOpsVirtual);
	p->sh = sh->in_order ? sh : NULL;
	p->snapshot = NULL;
	if (p->sh == NULL)
		return;
	/* every process numbers the ranges alike, from the scans' sizes */
	p->first_range = palloc(sizeof(uint64) * (src->n + 1));
	p->first_range[0] = 0;
	for (int i = 0; i < src->n; i++)
	{
		BlockNumber nblocks = ((ParallelBlockTableScanDesc) src->pscans[i])->phs_nblocks;

		p->first_range[i + 1] = p->first_range[i] +
			(nblocks + sh->range_blocks - 1) / sh->range_blocks;
	}
}

/* End the current source's scan, if any. */
static void
close_source(DPScanShare *p)
{
	if (p->source == NULL)
		return;
	table_endscan(p->scan);
	if (p->snapshot != NULL)
		UnregisterSnapshot(p->snapshot);
	p->snapshot = NULL;
	ExecDropSingleTupleTableSlot(p->scanslot);
	table_close(p->source, AccessShareLock);
	p->source = NULL;
}

/*
 * Begin source i's scan: its share of core's parallel scan, or, in order,
 * a scan of the blocks of one range at a time, under the parallel scan's
 * snapshot (claim_range sets the blocks).
 */
static void
open_source(DPScanShare *p, int i)
{
	ParallelTableScanDesc pscan = p->src->pscans[i];

	close_source(p);
	p->current = i;
	/* the leader holds the executor's lock; a worker takes its own */
	p->source = table_open(p->src->relids[i], AccessShareLock);
	p->scanslot = table_slot_create(p->source, NULL);
	p->qual = ExecInitQual((List *) list_nth(p->src->quals, i), NULL);
	p->proj = ExecBuildProjectionInfo((List *) list_nth(p->src->tlists, i),
									  p->econtext, p->row, NULL,
									  RelationGetDescr(p->source));
	if (p->sh == NULL)
	{
		p->scan = table_beginscan_parallel(p->source, pscan);
		return;
	}
	Assert(!pscan->phs_snapshot_any);
	p->snapshot = RegisterSnapshot(RestoreSnapshot((char *) pscan +
												   pscan->phs_snapshot_off));
	/* no synchronized start: a range's limits decide the blocks */
	p->scan = table_beginscan_strat(p->source, p->snapshot, 0, NULL,
									true, false);
}

/* End the current source's scan; begin the next one's; false if none. */
static bool
next_source(DPScanShare *p)
{
	if (p->current + 1 >= p->src->n)
	{
		close_source(p);
		p->current = p->src->n;
		return false;
	}
	open_source(p, p->current + 1);
	return true;
}

/*
 * In order: claim the next block range of the sources (the claims' counter
 * hands each out once, in the sources' order and each source's block
 * order) and set the scan to its blocks; false when none is left.
 */
static bool
claim_range(DPScanShare *p, uint64 *seq)
{
	uint64		r = pg_atomic_fetch_add_u64(&p->sh->next_range, 1);
	int			i = Max(p->current, 0);
	BlockNumber start;
	BlockNumber nblocks;

	if (r >= p->first_range[p->src->n])
		return false;
	/* a process's claims only grow, so its source is this one or later */
	while (r >= p->first_range[i + 1])
		i++;
	if (i != p->current || p->source == NULL)
		open_source(p, i);
	start = (BlockNumber) (r - p->first_range[i]) * p->sh->range_blocks;
	nblocks = ((ParallelBlockTableScanDesc) p->src->pscans[i])->phs_nblocks;
	table_rescan(p->scan, NULL);
	heap_setscanlimits(p->scan, start,
					   Min(p->sh->range_blocks, nblocks - start));
	*seq = r;
	return true;
}

/* The next row of the current scan into the placer; false at its end. */
static bool
place_next(DPScanShare *p, bool *page_out)
{
	for (;;)
	{
		if (!table_scan_getnextslot(p->scan, ForwardScanDirection, p->scanslot))
			return false;
		CHECK_FOR_INTERRUPTS();
		ResetExprContext(p->econtext);
		p->econtext->ecxt_scantuple = p->scanslot;
		if (p->qual != NULL && !ExecQual(p->qual, p->econtext))
			continue;
		ExecProject(p->proj);
		*page_out = dp_placer_add(&p->placer, p->row);
		return true;
	}
}

/*
 * Place rows of the share until a page was handed on (when 'one_page') or
 * the share is done; returns false once it is.
 */
static bool
scan_share_run(DPScanShare *p, bool one_page)
{
	for (;;)
	{
		bool		page_out = false;

		if (p->source == NULL || !place_next(p, &page_out))
		{
			if (!next_source(p))
				return false;
			continue;
		}
		if (page_out && one_page)
			return true;
	}
}

/* In order: every row of the claimed range into the placer. */
static void
scan_range(DPScanShare *p)
{
	bool		page_out;

	while (place_next(p, &page_out))
		;
}

static void
scan_share_end(DPScanShare *p)
{
	close_source(p);
	ExecDropSingleTupleTableSlot(p->row);
	dp_placer_end(&p->placer);
}

/*
 * The sources of a payload (their OIDs, quals and target lists), with
 * their parallel scans in the shared memory.
 */
static DPScanSources *
scan_sources(List *payload, shm_toc *toc)
{
	DPScanSources *src = palloc0(sizeof(DPScanSources));
	List	   *relids = linitial(payload);

	src->n = list_length(relids);
	src->relids = palloc(sizeof(Oid) * src->n);
	src->pscans = palloc(sizeof(ParallelTableScanDesc) * src->n);
	for (int i = 0; i < src->n; i++)
	{
		src->relids[i] = list_nth_oid(relids, i);
		src->pscans[i] = dp_parallel_scan(toc, i);
	}
	src->quals = lsecond(payload);
	src->tlists = lthird(payload);
	return src;
}

/* ---- INSERT ... SELECT: a worker ---- */

/* A worker of an INSERT ... SELECT: its share of the scans. */
void
dp_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	DPWorker	w;
	DPScanShare p;

	dp_worker_begin(&w, seg, toc);
	dp_placer_begin_worker(&p.placer, &w);
	scan_share_begin(&p, scan_sources((List *) stringToNode(w.payload), toc),
					 w.target, w.sh);
	if (p.sh == NULL)
		(void) scan_share_run(&p, false);
	else
	{
		bool		claimed = false;	/* a range, 'last', was scanned */
		uint64		last = 0;
		uint64		seq;

		while (claim_range(&p, &seq))
		{
			/* a page goes on across adjacent ranges only (parorder.c) */
			if (claimed && seq != last + 1)
				dp_placer_flush(&p.placer);
			if (claimed)
				dp_worker_chunk_done(&w, last);
			dp_fault("worker_chunk");
			dp_worker_chunk_claimed(&w, seq);
			scan_range(&p);
			last = seq;
			claimed = true;
		}
		if (claimed)
		{
			dp_placer_flush(&p.placer);
			dp_worker_chunk_done(&w, last);
		}
	}
	scan_share_end(&p);
	dp_worker_end(&w);
}

/* ---- INSERT ... SELECT: the leader ---- */

/* The leader's share: what its step needs. */
typedef struct DPLeaderScan
{
	DPScanShare share;
	DPParallel *par;
} DPLeaderScan;

/*
 * The leader's share of the scan: one page at a time; in order, one whole
 * range (its pages are the head's or kept, and the head must never wait
 * for the leader's next step).
 */
static bool
scan_step(void *arg)
{
	DPLeaderScan *ls = (DPLeaderScan *) arg;
	uint64		seq;

	if (ls->share.sh == NULL)
		return scan_share_run(&ls->share, true);
	if (!claim_range(&ls->share, &seq))
		return false;
	dp_order_own(ls->par->order, seq);
	scan_range(&ls->share);
	dp_placer_flush(&ls->share.placer);
	dp_parallel_own_chunk_done(ls->par, seq);
	return true;
}

/*
 * Blocks of an in-order scan's range: about sixteen ranges for each
 * process, so that the shares even out, and at most DP_SCAN_RANGE_BLOCKS,
 * what the leader scans in one step; four times that under ON CONFLICT,
 * whose probes of a range's keys are the denser the more keys they take.
 */
#define DP_SCAN_RANGE_BLOCKS 128

static uint32
range_blocks(List *sources, int nworkers, bool on_conflict)
{
	double		total = 0;
	ListCell   *lc;

	foreach(lc, sources)
		total += RelationGetNumberOfBlocks((Relation) lfirst(lc));
	return (uint32) Max(1, Min(DP_SCAN_RANGE_BLOCKS * (on_conflict ? 4 : 1),
							   total / ((nworkers + 1) * 16)));
}

/* May the scans go in order: a plain target, heap sources? */
static bool
scans_in_order(DPParallel *par, List *sources)
{
	ListCell   *lc;

	if (par->sh.nleaves > 0)
		return false;
	foreach(lc, sources)
		if (((Relation) lfirst(lc))->rd_tableam != GetHeapamTableAmRoutine())
			return false;
	return true;
}

/*
 * RETURNING in parallel: the leader projects each row's RETURNING row as
 * it takes the row's page (load/queue.c, as for a serial load once the
 * page is written), so the rows come back in the order they reach it,
 * which must be the input's: pages in order (parorder.c), and a row that
 * needs TOAST after the rows before it (toast_in_order).  Why not, or
 * NULL; after dp_parallel_conflicts_setup.
 */
static const char *
returning_setup(DPParallel *par)
{
	if (par->rri->ri_projectReturning == NULL)
		return NULL;
	if (!par->sh.in_order)
		return "its RETURNING needs the rows in the input's order, which a partitioned target or a source other than a heap table does not keep";
	/* the leader inserts such a row after the page it was skipped from */
	if (par->sh.narbiters > 1)
		return "its RETURNING needs the rows in the input's order, which ON CONFLICT with more than one arbiter index does not keep";
	par->sh.toast_in_order = true;
	return NULL;
}

bool
dp_parallel_scans_insert(DPLoad *load, EState *estate, Plan *sub,
						 ModifyTableState *mt, int nworkers)
{
	const char *why;
	DPParallel *par;
	List	   *relids = NIL;
	List	   *quals = NIL;
	List	   *tlists = NIL;
	List	   *sources = NIL;
	List	   *payload;
	ListCell   *lc;
	int			launched;

	par = dp_parallel_begin(load, mt, true, &why);
	if (par == NULL)
		return false;

	/* step 1: the scans' tables (locked by the executor), quals, projections */
	foreach(lc, subplan_scans(sub))
	{
		Plan	   *scan = lfirst(lc);
		Oid			relid = exec_rt_fetch(((Scan *) scan)->scanrelid, estate)->relid;

		relids = lappend_oid(relids, relid);
		quals = lappend(quals, scan->qual);
		tlists = lappend(tlists, scan->targetlist);
		sources = lappend(sources, table_open(relid, NoLock));
	}
	payload = list_make3(relids, quals, tlists);
	/* a plain target's rows keep the scans' order (parorder.c) */
	par->sh.in_order = scans_in_order(par, sources);
	why = dp_parallel_conflicts_setup(par);
	if (why == NULL)
		why = returning_setup(par);
	if (why != NULL)
	{
		dp_load_note_parallel(load, 0, why);
		foreach(lc, sources)
			table_close(lfirst(lc), NoLock);
		return false;
	}
	if (par->sh.in_order)
		par->sh.range_blocks = range_blocks(sources, nworkers,
											par->sh.on_conflict);
	launched = dp_parallel_launch(par, "dp_parallel_main", nodeToString(payload),
								  sources, 0, nworkers);

	/* steps 2 and 3: the leader takes a share of the scans too */
	if (launched > 0)
	{
		DPLeaderScan own;
		DPLeaderShare share = {NULL, scan_step, &own};

		if (par->sh.in_order)
			par->order = dp_order_begin(launched);
		own.par = par;
		dp_placer_begin_leader(&own.share.placer, par);
		/* the claims' counter is the shared memory's, not par->sh's */
		scan_share_begin(&own.share, scan_sources(payload, par->pcxt->toc),
						 par->rri->ri_RelationDesc,
						 shm_toc_lookup(par->pcxt->toc, DP_KEY_SHARED, false));
		dp_parallel_receive(par, &share);
		scan_share_end(&own.share);
		if (par->order)
		{
			dp_order_end(par->order);
			par->order = NULL;
		}
	}

	/* step 4 */
	return dp_parallel_end_insert(par, sources);
}
