/*-------------------------------------------------------------------------
 *
 * plan.c
 *	  Parse-analysis and planner hooks: recognise a direct-path INSERT, take
 *	  its lock early, and put a DirectPath node on top of its plan.
 *
 * Parse analysis.  The parser has already locked the target RowExclusive.
 * The direct path needs ShareRowExclusiveLock (it conflicts with every
 * other writer and with itself, but not with readers).  Upgrading late
 * would let two loaders deadlock: each holds RowExclusive and waits for
 * the other's.  So as soon as the statement is analysed we take the strong
 * lock and record it as the RTE's rellockmode, so that a cached plan later
 * takes the strong lock directly.  If the strong lock is not free at once
 * we give back the RowExclusive lock this statement took before waiting,
 * so that two loaders queue instead of deadlocking; afterwards we verify
 * that the table's row type did not change while we waited, since the
 * statement was analysed against it.  If the transaction already held a
 * lock on the table (it wrote it before), ours cannot be given back, and
 * the statement takes the strong lock at plan time only if it is free at
 * once, else uses the normal path.  Users without INSERT privilege take no
 * strong lock at all: they get the permission error of the plain path.
 *
 * Planning.  After the standard planner, an INSERT whose plan is a
 * ModifyTable and which carries the hint (or runs under mode = always) is
 * wrapped in a CustomScan "DirectPath" whose only child is the ModifyTable.
 * The wrapper is added even when the statement is not eligible, so that
 * EXPLAIN shows the reason; at execution such a wrapper just passes rows
 * through.  custom_private holds: [0] hinted (Integer), [1] the fallback
 * reason or "" (String), [2] freezing allowed by the statement (Integer).
 *
 * The wrapper's output is the ModifyTable's RETURNING list: the plan's
 * targetlist refers to custom_scan_tlist (a copy of the ModifyTable's
 * targetlist) through INDEX_VAR Vars, so no projection happens and EXPLAIN
 * VERBOSE prints the same output columns.
 *
 * Utility hook.  COPY FROM is offered to copy.c first.
 *
 * Executor hooks.  COPY FREEZE's test "no snapshot registered before this
 * statement, no open cursor" must run before standard_ExecutorStart, which
 * registers the statement's own snapshot; ExecutorStart_hook records the
 * answer for the node.  ExecutorFinish_hook runs an unfinished DirectPath
 * node to completion before AFTER triggers fire, as core does for
 * secondary ModifyTable nodes.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/relation.h"
#include "miscadmin.h"
#include "access/table.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"

bool		dp_prior_snapshots_clear = false;

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;
static planner_hook_type prev_planner = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;
static ExecutorFinish_hook_type prev_executor_finish = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

static CustomScanMethods dp_plan_methods = {
	.CustomName = "DirectPath",
	.CreateCustomScanState = dp_create_scan_state,
};

/* Should this INSERT be considered for the direct path at all? */
static bool
wanted(DPHint hint, Query *query)
{
	if (dp_mode == DP_MODE_OFF || hint == DP_HINT_NOAPPEND)
		return false;
	if (hint == DP_HINT_APPEND)
		return true;
	return dp_mode == DP_MODE_ALWAYS && !dp_query_is_single_row(query);
}

/* May the current user insert into the table at all (any column)? */
bool
dp_may_insert(Oid relid)
{
	Oid			user = GetUserId();

	return pg_class_aclcheck(relid, user, ACL_INSERT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, user, ACL_INSERT, ACLMASK_ANY) == ACLCHECK_OK;
}

/*
 * Take ShareRowExclusiveLock on the target (see the file header).  If it
 * is not free, give back this statement's RowExclusive lock and wait, so
 * that two loaders queue.  If the transaction held a lock on the table
 * before this statement, giving back ours is not possible and waiting
 * could deadlock: then take nothing and return false; the statement uses
 * the normal path (plan time says why).
 */
static bool
lock_target(Oid relid)
{
	Relation	rel;
	TupleDesc	before;

	if (ConditionalLockRelationOid(relid, ShareRowExclusiveLock))
		return true;

	UnlockRelationOid(relid, RowExclusiveLock);
	if (CheckRelationOidLockedByMe(relid, RowExclusiveLock, true))
	{
		/* held since an earlier statement of this transaction */
		LockRelationOid(relid, RowExclusiveLock);
		return false;
	}

	rel = relation_open(relid, NoLock);
	before = CreateTupleDescCopy(RelationGetDescr(rel));
	relation_close(rel, NoLock);

	LockRelationOid(relid, ShareRowExclusiveLock);
	LockRelationOid(relid, RowExclusiveLock);

	rel = try_relation_open(relid, NoLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u was dropped while the direct path waited for its lock",
						relid)));
	if (!equalTupleDescs(before, RelationGetDescr(rel)))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("table \"%s\" was altered while the direct path waited for its lock",
						RelationGetRelationName(rel)),
				 errhint("Retry the statement.")));
	relation_close(rel, NoLock);
	FreeTupleDesc(before);
	return true;
}

static void
dp_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);

	if (dp_mode != DP_MODE_OFF &&
		query->commandType == CMD_INSERT &&
		query->resultRelation > 0 &&
		query->onConflict == NULL)
	{
		DPHint		hint = dp_find_hint(pstate->p_sourcetext,
										query->stmt_location,
										query->stmt_len);
		RangeTblEntry *rte = rt_fetch(query->resultRelation, query->rtable);

		if (wanted(hint, query) && rte->rellockmode == RowExclusiveLock)
		{
			Relation	rel = relation_open(rte->relid, NoLock);
			bool		ok = dp_relation_ineligible(rel, false) == NULL;

			relation_close(rel, NoLock);
			/* no strong lock for a user who cannot insert at all */
			if (ok && dp_may_insert(rte->relid) && lock_target(rte->relid))
				rte->rellockmode = ShareRowExclusiveLock;
		}
	}
}

/*
 * The target must be held in ShareRowExclusiveLock before execution.
 * Normally parse analysis took it.  When it did not (an updatable view's
 * base table is only known after rewriting; the transaction had already
 * locked the table), take it now only if that needs no wait: waiting for
 * it while holding RowExclusive could deadlock.  The plan records the mode,
 * so a cached plan takes the strong lock directly.
 */
static const char *
lock_for_plan(PlannedStmt *stmt, Index rti)
{
	RangeTblEntry *rte = rt_fetch(rti, stmt->rtable);

	if (rte->rellockmode == ShareRowExclusiveLock)
		return NULL;
	if (!dp_may_insert(rte->relid))
		return "no INSERT privilege on the table";
	if (!ConditionalLockRelationOid(rte->relid, ShareRowExclusiveLock))
		return "another session holds a conflicting lock on the table, and waiting for it here could deadlock";
	rte->rellockmode = ShareRowExclusiveLock;
	return NULL;
}

/* Wrap the finished plan's ModifyTable in a DirectPath CustomScan. */
static void
wrap_plan(PlannedStmt *stmt, bool hinted, const char *why, bool freeze)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	CustomScan *cscan = makeNode(CustomScan);
	List	   *tlist = NIL;
	ListCell   *lc;
	AttrNumber	attno = 0;

	cscan->scan.plan.startup_cost = mt->plan.startup_cost;
	cscan->scan.plan.total_cost = mt->plan.total_cost;
	cscan->scan.plan.plan_rows = mt->plan.plan_rows;
	cscan->scan.plan.plan_width = mt->plan.plan_width;
	cscan->scan.plan.parallel_safe = false;
	cscan->scan.plan.extParam = bms_copy(mt->plan.extParam);
	cscan->scan.plan.allParam = bms_copy(mt->plan.allParam);
	cscan->scan.scanrelid = 0;

	foreach(lc, mt->plan.targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *var;

		attno++;
		var = makeVar(INDEX_VAR, attno,
					  exprType((Node *) tle->expr),
					  exprTypmod((Node *) tle->expr),
					  exprCollation((Node *) tle->expr), 0);
		tlist = lappend(tlist, makeTargetEntry((Expr *) var, attno,
											   tle->resname, tle->resjunk));
	}
	cscan->scan.plan.targetlist = tlist;
	cscan->custom_scan_tlist = copyObject(mt->plan.targetlist);
	cscan->custom_plans = list_make1(mt);
	cscan->custom_private = list_make3(makeInteger(hinted ? 1 : 0),
									   makeString(pstrdup(why ? why : "")),
									   makeInteger(freeze ? 1 : 0));
	cscan->methods = &dp_plan_methods;
	stmt->planTree = (Plan *) cscan;
}

static PlannedStmt *
dp_planner(Query *parse, const char *query_string, int cursorOptions,
		   ParamListInfo boundParams)
{
	PlannedStmt *stmt;
	DPHint		hint = DP_HINT_NONE;
	bool		consider = false;
	const char *why = NULL;
	bool		freeze = false;

	if (dp_mode != DP_MODE_OFF && parse->commandType == CMD_INSERT &&
		parse->resultRelation > 0)
	{
		hint = dp_find_hint(query_string, parse->stmt_location, parse->stmt_len);
		consider = wanted(hint, parse);
	}

	if (prev_planner)
		stmt = prev_planner(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	if (!consider || !IsA(stmt->planTree, ModifyTable))
		return stmt;

	why = dp_statement_ineligible(parse, stmt, hint == DP_HINT_APPEND);
	if (why == NULL)
	{
		ModifyTable *mt = (ModifyTable *) stmt->planTree;
		Oid			relid = rt_fetch(linitial_int(mt->resultRelations),
									 stmt->rtable)->relid;
		Relation	rel = table_open(relid, NoLock);

		why = dp_relation_ineligible(rel, true);
		table_close(rel, NoLock);
		if (why == NULL)
			why = lock_for_plan(stmt, linitial_int(mt->resultRelations));
		if (why == NULL)
			freeze = dp_statement_freeze_safe(parse, stmt, relid);
	}
	wrap_plan(stmt, hint == DP_HINT_APPEND, why, freeze);
	return stmt;
}

static void
dp_executor_start(QueryDesc *queryDesc, int eflags)
{
	Plan	   *top = queryDesc->plannedstmt->planTree;

	if (top && IsA(top, CustomScan) &&
		((CustomScan *) top)->methods == &dp_plan_methods)
	{
		/* COPY FREEZE's "prior transaction activity" test, done first */
		dp_prior_snapshots_clear = dp_no_prior_activity();
	}
	else
		dp_prior_snapshots_clear = false;

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
dp_executor_finish(QueryDesc *queryDesc)
{
	PlanState  *top = queryDesc->planstate;

	/* Run a DirectPath node the caller stopped fetching from to its end. */
	if (top && dp_is_directpath_state(top) &&
		!(queryDesc->estate->es_top_eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		MemoryContext old = MemoryContextSwitchTo(queryDesc->estate->es_query_cxt);

		for (;;)
		{
			TupleTableSlot *slot = ExecProcNode(top);

			if (TupIsNull(slot))
				break;
		}
		MemoryContextSwitchTo(old);
	}

	if (prev_executor_finish)
		prev_executor_finish(queryDesc);
	else
		standard_ExecutorFinish(queryDesc);
}

/* COPY FROM goes to copy.c first. */
static void
dp_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	uint64		copy_fallback = 0;

	if (IsA(pstmt->utilityStmt, CopyStmt) &&
		dp_copy_utility(&copy_fallback, pstmt, queryString, queryEnv, qc))
		return;

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/* a COPY we left to core: its row count, for last_statement() */
	if (copy_fallback != 0 && qc != NULL)
		dp_set_last_rows(copy_fallback, qc->nprocessed);
}

void
dp_plan_init(void)
{
	RegisterCustomScanMethods(&dp_plan_methods);

	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = dp_post_parse_analyze;
	prev_planner = planner_hook;
	planner_hook = dp_planner;
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = dp_executor_start;
	prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = dp_executor_finish;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = dp_process_utility;
}
