/*-------------------------------------------------------------------------
 *
 * parplan.c
 *	  A parallel INSERT ... SELECT: which input its SELECT makes (the entry
 *	  points, dp_parallel_plan_refusal and dp_parallel_insert; for the query
 *	  of a table born in the statement, dp_parallel_born_refusal and
 *	  dp_parallel_select, statement/born.c), and the
 *	  input of a SELECT that is a plan rather than scans (joins, a
 *	  projection, a sort): every process runs the whole plan, and the one
 *	  scan that drives it is shared among them.  A SELECT of scans (of one
 *	  table, or of a partitioned table's partitions) is parscan.c's input.
 *
 * Why.  The planner never plans an INSERT's SELECT in parallel, so the
 * INSERT's subplan is a serial plan; parscan.c shares a scan (or a
 * partitioned table's scans) among workers, and anything else would run
 * serially.  Most joins that load data are a large table joined to smaller
 * ones: the rows out of such a join are the large table's rows, each
 * extended (or dropped) by what it matches.  Such a plan can be run by
 * every process at once, each reading its own blocks of the large table
 * and all of the small ones: the union of their outputs is the plan's
 * output.
 *
 * Which plans (plan_refusal, at plan time).  The driving path starts at
 * the subplan and follows outer children through projections (Result,
 * ProjectSet), SubqueryScan, Sort, IncrementalSort, Material, and joins
 * (nested loop, merge, hash) whose type is inner, left, semi or anti, to
 * a sequential scan of a plain table, or an Append of them (a partitioned
 * table's partitions left after plan-time pruning, none pruned at run
 * time): those scans are shared, each with its own parallel scan.  Those joins
 * decide each outer row by itself, from all of the inner side, so they
 * stay exact when each process has a part of the outer rows and all of
 * the inner ones (right and full joins, which emit the inner rows nothing
 * matched, would emit them once per process, and are refused).  A join's
 * inner side is any plan each process can run whole: no foreign or custom
 * scan, no sample scan (each process would draw its own sample), no CTE
 * scan.  Anything else on the driving path (aggregates, grouping, window
 * functions, DISTINCT, set operations, LIMIT, an Append of anything but
 * table scans) needs every
 * process's rows in one place and keeps the statement serial, with the
 * reason.  As for every parallel load: every function parallel safe, no
 * temporary table, no external parameters, and no subquery kept as a
 * SubPlan or InitPlan (nested loop parameters are the plan's own).
 *
 * Algorithm (dp_parplan_insert).
 * 1. The leader begins the parallel load (dp_parallel_begin: the target's
 *	  rules), serializes a SELECT statement made of the subplan (the
 *	  INSERT's range table, its subplan as the plan tree) with the driving
 *	  scans' plan node IDs, and launches the workers with a parallel scan
 *	  of each driving table (dp_parallel_launch).
 * 2. Each worker starts an executor on that statement, points each driving
 *	  scan at its shared parallel scan before its first row (a sequential
 *	  scan begins its own scan lazily, on its first row), and places every
 *	  row of the plan with its placer (placer.c) until the plan ends.
 * 3. The leader does the same with its own, already started, subplan,
 *	  one page at a time between the workers' messages
 *	  (dp_parallel_receive); when its plan ends it ends its part of the
 *	  scan, and the load finishes as parscan.c's scans do.
 *
 * Invariants.
 * - The processes read each block of a driving table once in all (its
 *	 parallel scan hands each block to one process), and every row of every
 *	 other table in full: the rows placed are the plan's rows.
 * - A driving scan is never rescanned: it lies on the outer path of every
 *	 join above it, which no join rescans.
 * - Workers see the leader's snapshot, transaction and command ID
 *	 (core's parallel machinery), so every process's plan reads the same
 *	 rows the serial plan would.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "load/load.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_proc.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/readfuncs.h"
#include "optimizer/clauses.h"
#include "parser/parsetree.h"
#include "tcop/dest.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

/* ---- plan time ---- */

/* Does the query use external parameters (PREPARE, PL/pgSQL variables)? */
static bool
has_extern_params(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind == PARAM_EXTERN;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, has_extern_params, context, 0);
	return expression_tree_walker(node, has_extern_params, context);
}

/* Is range table entry 'rti' a plain, permanent table, not sampled? */
static bool
plain_table(PlannedStmt *stmt, Index rti)
{
	RangeTblEntry *rte = rt_fetch(rti, stmt->rtable);

	return rte->rtekind == RTE_RELATION &&
		rte->relkind == RELKIND_RELATION && rte->tablesample == NULL &&
		get_rel_persistence(rte->relid) != RELPERSISTENCE_TEMP;
}

/* Why a join's inner side cannot be run whole by every process, or NULL. */
static const char *
whole_refusal(Plan *plan, PlannedStmt *stmt)
{
	ListCell   *lc;
	List	   *children = NIL;
	const char *why = NULL;

	if (plan == NULL)
		return NULL;
	if (plan->initPlan != NIL)
		return "its SELECT has a subquery the planner kept apart (an InitPlan)";
	switch (nodeTag(plan))
	{
		case T_ForeignScan:
		case T_CustomScan:
			return "its SELECT joins a foreign table or a custom scan";
		case T_SampleScan:
			return "its SELECT samples a table (TABLESAMPLE)";
		case T_CteScan:
		case T_WorkTableScan:
		case T_RecursiveUnion:
			return "its SELECT reads a WITH query";
		case T_Gather:
		case T_GatherMerge:
		case T_ModifyTable:
		case T_LockRows:
			return "its SELECT locks or modifies rows";
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_SubqueryScan:
			children = list_make1(((SubqueryScan *) plan)->subplan);
			break;
		default:
			break;
	}
	foreach(lc, children)
		if ((why = whole_refusal(lfirst(lc), stmt)) != NULL)
			return why;
	if ((why = whole_refusal(plan->lefttree, stmt)) != NULL)
		return why;
	return whole_refusal(plan->righttree, stmt);
}

/* A driving Append (a partitioned table's partitions): each scan shared. */
static const char *
append_scans(Append *append, PlannedStmt *stmt, List **driving)
{
	ListCell   *lc;

	if (DP_APPEND_PRUNES(append))
		return "its SELECT's partitions are pruned at run time";
	foreach(lc, append->appendplans)
	{
		Plan	   *child = lfirst(lc);

		if (!IsA(child, SeqScan) || child->initPlan != NIL)
			return "its SELECT appends inputs that are not scans of tables";
		if (!plain_table(stmt, ((Scan *) child)->scanrelid))
			return "its SELECT's first table is not a plain permanent table";
		*driving = lappend(*driving, child);
	}
	return NULL;
}

/* Why a join on the driving path cannot be run by every process, or NULL. */
static const char *
join_refusal(Join *join, PlannedStmt *stmt)
{
	switch (join->jointype)
	{
		case JOIN_INNER:
		case JOIN_LEFT:
		case JOIN_SEMI:
		case JOIN_ANTI:
			return whole_refusal(join->plan.righttree, stmt);
		default:
			return "its SELECT's join keeps the rows its first table does not match (a RIGHT or FULL join)";
	}
}

/*
 * Follow the driving path from 'plan' to its shared scans; returns why
 * they cannot be shared (NULL if they can, with the scans in *driving).
 */
static const char *
driving_path(Plan *plan, PlannedStmt *stmt, List **driving)
{
	const char *why;

	for (;;)
	{
		if (plan->initPlan != NIL)
			return "its SELECT has a subquery the planner kept apart (an InitPlan)";
		switch (nodeTag(plan))
		{
			case T_SeqScan:
				if (!plain_table(stmt, ((Scan *) plan)->scanrelid))
					return "its SELECT's first table is not a plain permanent table";
				*driving = lappend(*driving, plan);
				return NULL;
			case T_Result:
			case T_ProjectSet:
			case T_Sort:
			case T_IncrementalSort:
			case T_Material:
				if (plan->lefttree == NULL)
					return "its SELECT reads no table";
				plan = plan->lefttree;
				break;
			case T_SubqueryScan:
				plan = ((SubqueryScan *) plan)->subplan;
				break;
			case T_NestLoop:
			case T_MergeJoin:
			case T_HashJoin:
				if ((why = join_refusal((Join *) plan, stmt)) != NULL)
					return why;
				plan = plan->lefttree;
				break;
			case T_Agg:
			case T_Group:
			case T_WindowAgg:
				return "its SELECT aggregates or groups rows";
			case T_Unique:
			case T_SetOp:
				return "its SELECT removes duplicate rows (DISTINCT or a set operation)";
			case T_Limit:
				return "its SELECT has LIMIT or OFFSET";
			case T_Append:
				return append_scans((Append *) plan, stmt, driving);
			case T_MergeAppend:
				return "its SELECT merges sorted inputs (a MergeAppend)";
			default:
				return "its SELECT is not a join or scan of tables";
		}
	}
}

/* Why the SELECT 'sub', not scans, cannot be run by every process, or NULL. */
static const char *
plan_refusal(PlannedStmt *stmt, Plan *sub, Query *parse)
{
	List	   *driving = NIL;
	ListCell   *lc;

	if (stmt->subplans != NIL)
		return "its SELECT has a subquery the planner kept apart (a SubPlan)";
	if (stmt->rowMarks != NIL)
		return "its SELECT locks rows";
	if (has_extern_params((Node *) parse, NULL))
		return "its SELECT uses parameters";
	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION &&
			get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
			return "its SELECT reads a temporary table";
	}
	return driving_path(sub, stmt, &driving);
}

/*
 * Why the SELECT 'sub' of 'stmt' cannot be split among workers, or NULL:
 * its rows must be rows of a target of 'natts' columns.
 */
static const char *
select_refusal(PlannedStmt *stmt, Plan *sub, Query *parse, int natts)
{
	const char *why;

	if (dp_parallel_scans(sub))
		why = dp_parallel_scans_refusal(stmt, sub, natts);
	else if ((why = plan_refusal(stmt, sub, parse)) == NULL &&
			 !dp_parallel_target_row(sub->targetlist, natts))
		why = "its SELECT's columns are not the table's row";
	if (why != NULL)
		return why;
	if (max_parallel_hazard(parse) != PROPARALLEL_SAFE)
		return "the statement calls a function that is not parallel safe";
	if (sub->plan_rows * sub->plan_width < dp_min_bytes)
		return "its SELECT is estimated to produce less than directpath.min_bytes";
	return NULL;
}

const char *
dp_parallel_plan_refusal(PlannedStmt *stmt, Query *parse)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	Relation	target;
	int			natts;

	if (mt->operation == CMD_MERGE)
		return "the statement is a MERGE (the leader decides each row's action)";
	if (mt->returningLists != NIL && !dp_parallel_scans(outerPlan(mt)))
		return "the statement has RETURNING and its SELECT is not a scan of tables (the rows must come in the scan's order)";
	if (mt->onConflictAction != ONCONFLICT_NONE &&
		!dp_parallel_scans(outerPlan(mt)))
		return psprintf("the statement has ON CONFLICT %s and its SELECT is not a scan of tables (the rows must come in the scan's order)",
						mt->onConflictAction == ONCONFLICT_UPDATE ?
						"DO UPDATE" : "DO NOTHING");
	/* the target is locked by now (admission) */
	target = table_open(rt_fetch(parse->resultRelation, parse->rtable)->relid,
						NoLock);
	natts = RelationGetNumberOfAttributes(target);
	table_close(target, NoLock);
	return select_refusal(stmt, outerPlan(mt), parse, natts);
}

const char *
dp_parallel_born_refusal(PlannedStmt *stmt, Query *parse)
{
	ListCell   *lc;
	int			natts = 0;

	/* the relation is made of the query's columns: none may be junk */
	foreach(lc, stmt->planTree->targetlist)
	{
		if (((TargetEntry *) lfirst(lc))->resjunk)
			return "its SELECT has columns that are not the table's (sort or grouping keys)";
		natts++;
	}
	if (parse->sortClause != NIL)
		return "its SELECT has ORDER BY (the order the rows go to disk in)";
	return select_refusal(stmt, stmt->planTree, parse, natts);
}

/* ---- running the plan: a process's share ---- */

/*
 * One process's share: its plan's rows, each copied into the target's row
 * and placed.  The plan's driving scans read only their blocks.
 */
typedef struct DPPlanShare
{
	PlanState  *plan;			/* the subplan's state */
	List	   *driving;		/* its driving scans' (ScanState) */
	TupleTableSlot *row;		/* the target's row */
	DPPlacer	placer;
} DPPlanShare;

/* A search for the state of one plan node. */
typedef struct DPFindNode
{
	int			plan_node_id;
	PlanState  *found;
} DPFindNode;

static bool
find_node(PlanState *ps, void *context)
{
	DPFindNode *f = context;

	if (ps->plan->plan_node_id == f->plan_node_id)
	{
		f->found = ps;
		return true;
	}
	return planstate_tree_walker(ps, find_node, context);
}

/*
 * Point each driving scan (plan node IDs 'ids') at its parallel scan in
 * 'toc', before its first row.
 */
static void
plan_share_begin(DPPlanShare *p, PlanState *plan, List *ids, shm_toc *toc,
				 Relation target)
{
	p->plan = plan;
	p->driving = NIL;
	for (int i = 0; i < list_length(ids); i++)
	{
		DPFindNode	f = {list_nth_int(ids, i), NULL};
		ScanState  *scan;

		if (!find_node(plan, &f) || !IsA(f.found, SeqScanState))
			elog(ERROR, "directpath: the plan's driving scan %d is missing",
				 f.plan_node_id);
		scan = (ScanState *) f.found;
		Assert(scan->ss_currentScanDesc == NULL);
		scan->ss_currentScanDesc =
			table_beginscan_parallel(scan->ss_currentRelation,
									 dp_parallel_scan(toc, i));
		p->driving = lappend(p->driving, scan);
	}
	p->row = MakeSingleTupleTableSlot(RelationGetDescr(target), &TTSOpsVirtual);
}

/*
 * Place rows of the plan until a page was handed on (when 'one_page') or
 * the plan is done; returns false once it is.
 */
static bool
plan_share_run(DPPlanShare *p, bool one_page)
{
	int			natts = p->row->tts_tupleDescriptor->natts;

	for (;;)
	{
		TupleTableSlot *out;

		CHECK_FOR_INTERRUPTS();
		out = ExecProcNode(p->plan);
		if (TupIsNull(out))
			return false;
		slot_getallattrs(out);
		ExecClearTuple(p->row);
		memcpy(p->row->tts_values, out->tts_values, sizeof(Datum) * natts);
		memcpy(p->row->tts_isnull, out->tts_isnull, sizeof(bool) * natts);
		ExecStoreVirtualTuple(p->row);
		if (dp_placer_add(&p->placer, p->row) && one_page)
			return true;
	}
}

/* End the share's part of the scans (before the shared memory goes). */
static void
plan_share_end(DPPlanShare *p)
{
	ListCell   *lc;

	foreach(lc, p->driving)
	{
		ScanState  *scan = lfirst(lc);

		table_endscan(scan->ss_currentScanDesc);
		scan->ss_currentScanDesc = NULL;
	}
	ExecDropSingleTupleTableSlot(p->row);
	dp_placer_end(&p->placer);
}

/* ---- a worker ---- */

void
dp_parplan_main(dsm_segment *seg, shm_toc *toc)
{
	DPWorker	w;
	DPPlanShare p;
	List	   *payload;
	QueryDesc  *qd;

	dp_worker_begin(&w, seg, toc);
	dp_placer_begin_worker(&p.placer, &w);
	payload = (List *) stringToNode(w.payload);
	qd = CreateQueryDesc(linitial(payload), "directpath parallel SELECT",
						 GetActiveSnapshot(), InvalidSnapshot, None_Receiver,
						 NULL, NULL, 0);
	ExecutorStart(qd, 0);
	plan_share_begin(&p, qd->planstate, lsecond(payload), toc, w.target);
	(void) plan_share_run(&p, false);
	plan_share_end(&p);
	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
	dp_worker_end(&w);
}

/* ---- the leader ---- */

/* The leader's share of the plan: one page at a time. */
static bool
plan_step(void *arg)
{
	return plan_share_run((DPPlanShare *) arg, true);
}

/*
 * The SELECT statement the workers run (the INSERT's subplan), and the
 * plan node IDs of its driving scans.
 */
static char *
select_payload(EState *estate, Plan *sub, List *ids)
{
	PlannedStmt *stmt = makeNode(PlannedStmt);

	*stmt = *estate->es_plannedstmt;
	stmt->commandType = CMD_SELECT;
	stmt->hasReturning = false;
	stmt->canSetTag = false;
	stmt->planTree = sub;
	stmt->resultRelations = NIL;
	stmt->rowMarks = NIL;
	stmt->subplans = NIL;
	return nodeToString(list_make2(stmt, ids));
}

bool
dp_parallel_insert(DPLoad *load, EState *estate, ModifyTableState *mt,
				   int nworkers)
{
	return dp_parallel_select(load, estate, outerPlan((ModifyTable *) mt->ps.plan),
							  outerPlanState(mt), mt, nworkers);
}

bool
dp_parallel_select(DPLoad *load, EState *estate, Plan *sub, PlanState *substate,
				   ModifyTableState *mt, int nworkers)
{
	List	   *driving = NIL;
	List	   *ids = NIL;
	List	   *sources = NIL;
	const char *why;
	DPParallel *par;
	ListCell   *lc;
	int			launched;

	if (dp_parallel_scans(sub))
		return dp_parallel_scans_insert(load, estate, sub, mt, nworkers);
	if (driving_path(sub, estate->es_plannedstmt, &driving) != NULL)
		elog(ERROR, "directpath: the SELECT's plan changed since planning");
	par = dp_parallel_begin(load, mt, true, &why);
	if (par == NULL)
		return false;

	/* step 1: the driving tables are locked by the executor */
	foreach(lc, driving)
	{
		Scan	   *scan = lfirst(lc);

		ids = lappend_int(ids, scan->plan.plan_node_id);
		sources = lappend(sources,
						  table_open(exec_rt_fetch(scan->scanrelid, estate)->relid,
									 NoLock));
	}
	launched = dp_parallel_launch(par, "dp_parplan_main",
								  select_payload(estate, sub, ids),
								  sources, 0, nworkers);

	/* steps 2 and 3: the leader runs its own subplan on its share */
	if (launched > 0)
	{
		DPPlanShare own;
		DPLeaderShare share = {NULL, plan_step, &own};

		dp_placer_begin_leader(&own.placer, par);
		plan_share_begin(&own, substate, ids, dp_parallel_toc(par),
						 mt->resultRelInfo->ri_RelationDesc);
		dp_parallel_receive(par, &share);
		plan_share_end(&own);
	}
	return dp_parallel_end_insert(par, sources);
}
