/*-------------------------------------------------------------------------
 *
 * plan.c
 *	  Parse-analysis and planner hooks: an INSERT that takes the direct path
 *	  gets its lock early and a DirectPath node on top of its plan; so does
 *	  a hinted UPDATE or DELETE made in bulk (with its own lock).
 *
 * Parse analysis asks admission.c to take the strong lock at once (see
 * there why it must be early).  After the standard planner, an INSERT that
 * is wanted (hint, or mode = always) and whose plan is a ModifyTable is
 * judged by admission.c:
 *
 *	admitted			the ModifyTable is wrapped in a CustomScan
 *						"DirectPath" (exec.c) whose only child it is;
 *	refused, hinted		wrapped as well, so that EXPLAIN shows the reason the
 *						user's hint was not followed; at execution the node
 *						passes the ModifyTable's rows through and reports;
 *	refused, not hinted	(mode = always) core's plan is left untouched, so
 *						EXPLAIN, plan-shape tests and tools that read plans
 *						see exactly what they would without directpath; the
 *						reason is noted for last_statement() (report.c).
 *
 * custom_private holds: [0] hinted (Integer), [1] the refusal reason or ""
 * (String), [2] freezing allowed by the statement (Integer), [3] refused
 * only for its size (Integer: the reason goes to DEBUG1, report.c), [4] the
 * parallel workers asked for, 0 if none or refused at plan time (Integer),
 * [5] why a parallel load was refused at plan time, or "" (String), [6]
 * when it was refused for its SELECT's shape, the SELECT planned again for
 * core's parallel query (a PlannedStmt, pargather.c), or NULL, [7] the load
 * runs beside other writers of the table (Integer: admission.c).  The wrapper's
 * output is the ModifyTable's RETURNING list: the plan's targetlist refers
 * to custom_scan_tlist (a copy of the ModifyTable's targetlist) through
 * INDEX_VAR Vars, so no projection happens and EXPLAIN VERBOSE prints the
 * same output columns.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "admission/admission.h"
#include "parallel/parallel.h"

#include "common/report.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;
static planner_hook_type prev_planner = NULL;

static void
dp_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	dp_admit_parse(pstate->p_sourcetext, query);
}

/* The wrapper's targetlist: INDEX_VAR references to the ModifyTable's. */
static List *
passthrough_tlist(List *mt_tlist)
{
	List	   *tlist = NIL;
	ListCell   *lc;
	AttrNumber	attno = 0;

	foreach(lc, mt_tlist)
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
	return tlist;
}

/* Wrap the finished plan's ModifyTable in a DirectPath CustomScan. */
static void
wrap_plan(PlannedStmt *stmt, const DPAdmission *a, int parallel,
		  const char *no_parallel, PlannedStmt *gather)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.plan.startup_cost = mt->plan.startup_cost;
	cscan->scan.plan.total_cost = mt->plan.total_cost;
	cscan->scan.plan.plan_rows = mt->plan.plan_rows;
	cscan->scan.plan.plan_width = mt->plan.plan_width;
	cscan->scan.plan.parallel_safe = false;
	cscan->scan.plan.extParam = bms_copy(mt->plan.extParam);
	cscan->scan.plan.allParam = bms_copy(mt->plan.allParam);
	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = passthrough_tlist(mt->plan.targetlist);
	cscan->custom_scan_tlist = copyObject(mt->plan.targetlist);
	cscan->custom_plans = list_make1(mt);
	cscan->custom_private = list_make4(makeInteger(a->hinted ? 1 : 0),
									   makeString(pstrdup(a->reason ? a->reason : "")),
									   makeInteger(a->freeze_allowed ? 1 : 0),
									   makeInteger(a->small ? 1 : 0));
	cscan->custom_private = lappend(cscan->custom_private, makeInteger(parallel));
	cscan->custom_private = lappend(cscan->custom_private,
									makeString(pstrdup(no_parallel ? no_parallel : "")));
	cscan->custom_private = lappend(cscan->custom_private, gather);
	cscan->custom_private = lappend(cscan->custom_private,
									makeInteger(a->beside ? 1 : 0));
	cscan->methods = dp_exec_plan_methods();
	stmt->planTree = (Plan *) cscan;
}

static PlannedStmt *
dp_planner(Query *parse, const char *query_string, int cursorOptions,
		   ParamListInfo boundParams)
{
	PlannedStmt *stmt;
	bool		hinted = false;
	bool		consider;
	int			parallel;
	const char *no_parallel = NULL;
	Query	   *untouched = NULL;
	PlannedStmt *gather = NULL;
	DPAdmission a;

	consider = dp_admit_insert_wanted(parse, query_string, &hinted, &parallel);
	/* the planner changes the query; a SELECT in parallel plans it again */
	if (consider && parallel > 0)
		untouched = copyObject(parse);
	if (prev_planner)
		stmt = prev_planner(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);
	dp_born_judge_plan(parse, stmt);
	if (!consider || !IsA(stmt->planTree, ModifyTable))
		return stmt;

	dp_admit_insert(parse, stmt, hinted, &a);
	if (a.beside && parallel > 0)
	{
		no_parallel = "it loads beside other writers of the table";
		parallel = 0;
	}
	if (a.direct && parallel > 0 &&
		(no_parallel = dp_parallel_plan_refusal(stmt, parse)) != NULL)
	{
		if (((ModifyTable *) stmt->planTree)->operation == CMD_INSERT)
			gather = dp_gather_plan(untouched, cursorOptions, boundParams,
									parallel);
		if (gather == NULL)
			parallel = 0;
	}
	if (a.direct || hinted)
		wrap_plan(stmt, &a, parallel, no_parallel, gather);
	else
		dp_report_note_plan(query_string, parse->stmt_location,
							parse->stmt_len, a.reason);
	return stmt;
}

void
dp_plan_init(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = dp_post_parse_analyze;
	prev_planner = planner_hook;
	planner_hook = dp_planner;
}
