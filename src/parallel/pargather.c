/*-------------------------------------------------------------------------
 *
 * pargather.c
 *	  A parallel INSERT ... SELECT whose SELECT needs its rows in one place
 *	  (aggregates, grouping, window functions, DISTINCT, set operations,
 *	  LIMIT, a right or full join): the SELECT runs in core's parallel
 *	  query, and the leader loads its rows serially.
 *
 * Why.  parscan.c and parplan.c have workers build pages from their own
 * share of the input, which needs a SELECT whose rows each process can
 * produce alone.  A GROUP BY cannot: a group's rows are spread over every
 * process's share.  Core's parallel query can (partial aggregates in the
 * workers, finalized above a Gather), but the planner never plans an
 * INSERT's SELECT in parallel.  Such an INSERT's output is usually small
 * beside its input (groups of rows), so what pays is the SELECT in
 * parallel, and the rows can then be loaded by the leader alone.
 *
 * Algorithm.
 * 1. Plan time (dp_gather_plan, from the planner hook, on an untouched
 *	  copy of the INSERT's query): the query turned into a SELECT of the
 *	  target's row (its target list as the INSERT has it after rewriting,
 *	  columns it leaves out as NULLs, dropped columns as NULL integers, as
 *	  the planner's preprocess_targetlist fills them), planned by the
 *	  standard planner with parallel query allowed and
 *	  max_parallel_workers_per_gather set to the hint's worker count.
 *	  Kept only if the plan has a Gather or Gather Merge: the statement's
 *	  plan carries it beside the INSERT's own.
 * 2. Run time (dp_gather_rows): the SELECT runs with the INSERT's snapshot
 *	  and parameters into a tuplestore (spilling past work_mem), before the
 *	  load writes anything; core's executor enters and leaves parallel mode
 *	  around the run, so nothing the load does (batches, index work,
 *	  foreign keys, triggers) happens in parallel mode.
 * 3. The load takes the rows from the tuplestore as a serial load takes
 *	  the INSERT's subplan's rows (exec.c): every rule of a serial load
 *	  holds, the target's triggers and foreign keys included.
 *
 * Invariants.
 * - The SELECT's rows are the INSERT subplan's rows: the same query,
 *	 snapshot and parameters, the same target row (missing columns filled
 *	 as the planner fills them; a missing domain column keeps the statement
 *	 serial, as the domain's NULL check would need core's coercion).
 * - Nothing is loaded while core's workers run.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "access/table.h"
#include "executor/executor.h"
#include "executor/tstoreReceiver.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* ---- plan time ---- */

/*
 * The INSERT query 'q' (a copy, changed in place) as a SELECT of the
 * target's row; NULL if a column the INSERT leaves out is of a domain.
 */
static Query *
select_of_insert(Query *q)
{
	Relation	rel = table_open(rt_fetch(q->resultRelation, q->rtable)->relid,
								 NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	ListCell   *lc = list_head(q->targetList);
	List	   *tlist = NIL;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		TargetEntry *tle = lc ? lfirst_node(TargetEntry, lc) : NULL;
		Expr	   *expr;

		if (tle != NULL && tle->resno == i + 1)
		{
			expr = tle->expr;
			lc = lnext(q->targetList, lc);
		}
		else if (att->attisdropped)
			expr = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
		else if (get_typtype(att->atttypid) == TYPTYPE_DOMAIN)
		{
			table_close(rel, NoLock);
			return NULL;
		}
		else
			expr = (Expr *) makeNullConst(att->atttypid, att->atttypmod,
										  att->attcollation);
		tlist = lappend(tlist, makeTargetEntry(expr, i + 1,
											   pstrdup(NameStr(att->attname)),
											   false));
	}
	table_close(rel, NoLock);
	if (lc != NULL)
		return NULL;
	q->targetList = tlist;
	q->commandType = CMD_SELECT;
	q->resultRelation = 0;
	q->returningList = NIL;
	q->onConflict = NULL;
	q->withCheckOptions = NIL;
	q->canSetTag = true;
	return q;
}

/* Does the plan have a Gather or Gather Merge? */
static bool
has_gather(Plan *plan)
{
	ListCell   *lc;
	List	   *children = NIL;

	if (plan == NULL)
		return false;
	if (IsA(plan, Gather) || IsA(plan, GatherMerge))
		return true;
	if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, SubqueryScan))
		children = list_make1(((SubqueryScan *) plan)->subplan);
	foreach(lc, children)
		if (has_gather(lfirst(lc)))
			return true;
	return has_gather(plan->lefttree) || has_gather(plan->righttree);
}

PlannedStmt *
dp_gather_plan(Query *insert, int cursorOptions, ParamListInfo boundParams,
			   int nworkers)
{
	Query	   *select;
	PlannedStmt *stmt;
	int			nest;

	if (insert->onConflict != NULL || insert->returningList != NIL ||
		(select = select_of_insert(insert)) == NULL)
		return NULL;
	nest = NewGUCNestLevel();
	(void) set_config_option("max_parallel_workers_per_gather",
							 psprintf("%d", nworkers), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	stmt = standard_planner(select, NULL,
							cursorOptions | CURSOR_OPT_PARALLEL_OK,
							boundParams);
	AtEOXact_GUC(true, nest);
	return has_gather(stmt->planTree) ? stmt : NULL;
}

/* ---- run time ---- */

/* The workers core's Gather nodes launched. */
static bool
count_workers(PlanState *ps, void *context)
{
	int		   *n = context;

	if (IsA(ps, GatherState))
		*n += ((GatherState *) ps)->nworkers_launched;
	else if (IsA(ps, GatherMergeState))
		*n += ((GatherMergeState *) ps)->nworkers_launched;
	return planstate_tree_walker(ps, count_workers, context);
}

Tuplestorestate *
dp_gather_rows(EState *estate, PlannedStmt *select, TupleDesc *desc,
			   int *launched)
{
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	Tuplestorestate *rows = tuplestore_begin_heap(false, false, work_mem);
	DestReceiver *dest = CreateDestReceiver(DestTuplestore);
	QueryDesc  *qd;

	SetTuplestoreDestReceiverParams(dest, rows, estate->es_query_cxt, false,
									NULL, NULL);
	qd = CreateQueryDesc(select, estate->es_sourceText, estate->es_snapshot,
						 InvalidSnapshot, dest, estate->es_param_list_info,
						 estate->es_queryEnv, 0);
	ExecutorStart(qd, 0);
	DP_EXECUTOR_RUN_ALL(qd);
	*launched = 0;
	(void) count_workers(qd->planstate, launched);
	*desc = CreateTupleDescCopy(qd->tupDesc);
	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
	dest->rDestroy(dest);
	MemoryContextSwitchTo(old);
	return rows;
}
