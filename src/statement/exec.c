/*-------------------------------------------------------------------------
 *
 * exec.c
 *	  The DirectPath executor node, which runs an INSERT's (or a MERGE's
 *	  WHEN NOT MATCHED inserts') rows through a direct-path load (load.c),
 *	  or a hinted UPDATE's or DELETE's rows through the bulk changes
 *	  (rewrite.c), and the executor hooks around it.
 *
 * The node sits on top of the INSERT's ModifyTable (plan.c) and initialises
 * it as usual, so result relations, partition routing, WITH CHECK options,
 * RETURNING projections, transition capture and cleanup are all core's.
 * Instead of calling ExecModifyTable, the node pulls rows from the
 * ModifyTable's subplan itself and feeds them to the load, firing the
 * statement-level triggers as ExecModifyTable would.  RETURNING rows come
 * back from the load in batches, through a tuplestore, and are returned
 * one per call.  An UPDATE's or DELETE's plan rows are all handed over,
 * then changed at once, their RETURNING rows returned after.  A MERGE's
 * rows are sorted as ExecModifyTable sorts them:
 * a row not matched with a target row gets its WHEN NOT MATCHED action
 * here (an insert goes to the load), a matched one is left, with every
 * action on it, to the ModifyTable node after the load (upsert.c).  A
 * hinted statement refused at plan time keeps the node
 * only so that EXPLAIN can say why; the node then passes the ModifyTable's
 * output through.
 *
 * Executor hooks.  COPY FREEZE's test "no snapshot registered before this
 * statement, no open cursor" (admission.c) must run before
 * standard_ExecutorStart registers the statement's own snapshot; the
 * ExecutorStart hook makes it and hands the answer to the node it has just
 * created.  Under mode = always, an INSERT planned without our node has its
 * plan-time reason published there (report.c), and its row count at
 * ExecutorFinish.  ExecutorFinish also runs an unfinished DirectPath node
 * to completion before AFTER triggers fire, as core does for secondary
 * ModifyTable nodes.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "admission/admission.h"
#include "heap/heap.h"
#include "load/load.h"
#include "parallel/parallel.h"

#include "access/relation.h"
#include "commands/trigger.h"
#include "common/progress.h"
#include "common/report.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "parser/parsetree.h"
#include "utils/tuplestore.h"

typedef struct DPScanState
{
	CustomScanState css;
	ModifyTableState *mtstate;
	bool		hinted;
	bool		small;			/* refused only for its size: no NOTICE */
	bool		freeze_allowed; /* by the statement and, once the executor
								 * started, by prior transaction activity */
	DPReport	refused;		/* plan-time refusal: reason set; else unused */
	uint64		report_id;		/* refused: our last_statement() entry */
	int			parallel;		/* workers asked for (parallel.c), or 0 */
	const char *no_parallel;	/* why not, decided at plan time, or "" */
	PlannedStmt *gather;		/* the SELECT for core's parallel query
								 * (pargather.c), or NULL */
	bool		beside;			/* loads beside other writers (admission.c) */
	Tuplestorestate *rows;		/* ... its rows, once it ran */
	TupleTableSlot *rowslot;
	bool		done;
	DPLoad	   *load;			/* NULL until the first call */
	DPRewrite  *rewrite;		/* an UPDATE's or DELETE's, instead */
	Tuplestorestate *retstore;	/* RETURNING rows of the last batch */
	TupleTableSlot *retslot;
} DPScanState;

static ExecutorStart_hook_type prev_executor_start = NULL;
static ExecutorFinish_hook_type prev_executor_finish = NULL;

/* An INSERT planned without our node whose reason was published. */
static QueryDesc *noted_query = NULL;
static uint64 noted_id = 0;

static Node *dp_create_scan_state(CustomScan *cscan);
static void dp_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *dp_exec(CustomScanState *node);
static void dp_end(CustomScanState *node);
static void dp_rescan(CustomScanState *node);
static void dp_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomScanMethods dp_plan_methods = {
	.CustomName = "DirectPath",
	.CreateCustomScanState = dp_create_scan_state,
};

static const CustomExecMethods dp_exec_methods = {
	.CustomName = "DirectPath",
	.BeginCustomScan = dp_begin,
	.ExecCustomScan = dp_exec,
	.EndCustomScan = dp_end,
	.ReScanCustomScan = dp_rescan,
	.ExplainCustomScan = dp_explain,
};

const CustomScanMethods *
dp_exec_plan_methods(void)
{
	return &dp_plan_methods;
}

static Node *
dp_create_scan_state(CustomScan *cscan)
{
	DPScanState *s = palloc0(sizeof(DPScanState));
	const char *reason = strVal(lsecond(cscan->custom_private));

	NodeSetTag(s, T_CustomScanState);
	s->css.methods = &dp_exec_methods;
	s->hinted = intVal(linitial(cscan->custom_private)) != 0;
	dp_report_init(&s->refused);
	strlcpy(s->refused.reason, reason, sizeof(s->refused.reason));
	s->freeze_allowed = intVal(lthird(cscan->custom_private)) != 0;
	s->small = intVal(lfourth(cscan->custom_private)) != 0;
	s->parallel = intVal(list_nth(cscan->custom_private, 4));
	s->no_parallel = strVal(list_nth(cscan->custom_private, 5));
	s->gather = list_nth(cscan->custom_private, 6);
	s->beside = intVal(list_nth(cscan->custom_private, 7)) != 0;
	return (Node *) s;
}

/* The statement's kind, as reports name it. */
static const char *
kind_of(ModifyTableState *mt)
{
	switch (mt->operation)
	{
		case CMD_MERGE:
			return "MERGE";
		case CMD_UPDATE:
			return "UPDATE";
		case CMD_DELETE:
			return "DELETE";
		default:
			return "INSERT";
	}
}

static bool
is_directpath_state(PlanState *ps)
{
	return ps != NULL && IsA(ps, CustomScanState) &&
		((CustomScanState *) ps)->methods == &dp_exec_methods;
}

static void
dp_begin(CustomScanState *node, EState *estate, int eflags)
{
	DPScanState *s = (DPScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;

	s->mtstate = (ModifyTableState *) ExecInitNode(linitial(cscan->custom_plans),
												   estate, eflags);
	node->custom_ps = list_make1(s->mtstate);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (s->refused.reason[0] != '\0')
	{
		dp_report_normal(&s->refused, s->hinted && !s->small,
						 kind_of(s->mtstate), s->refused.reason);
		s->report_id = dp_report_publish(&s->refused);
		return;
	}
	if (s->mtstate->resultRelInfo->ri_projectReturning)
	{
		/* RETURNING rows come back from a tuplestore, as minimal tuples */
		s->retstore = tuplestore_begin_heap(false, false, work_mem);
		s->retslot = ExecInitExtraTupleSlot(estate,
											node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
											&TTSOpsMinimalTuple);
	}
}

static inline bool
do_update(ModifyTableState *mt)
{
	return ((ModifyTable *) mt->ps.plan)->onConflictAction == ONCONFLICT_UPDATE;
}

/* BEFORE STATEMENT triggers, as ExecModifyTable's first call fires them. */
static void
fire_before_statement(EState *estate, ModifyTableState *mt)
{
	ResultRelInfo *root = mt->rootResultRelInfo;
	int			merge = mt->mt_merge_subcommands;

	if (mt->operation == CMD_MERGE)
	{
		if (merge & MERGE_INSERT)
			ExecBSInsertTriggers(estate, root);
		if (merge & MERGE_UPDATE)
			ExecBSUpdateTriggers(estate, root);
		if (merge & MERGE_DELETE)
			ExecBSDeleteTriggers(estate, root);
	}
	else if (mt->operation == CMD_UPDATE)
		ExecBSUpdateTriggers(estate, root);
	else if (mt->operation == CMD_DELETE)
		ExecBSDeleteTriggers(estate, root);
	else
	{
		ExecBSInsertTriggers(estate, root);
		if (do_update(mt))
			ExecBSUpdateTriggers(estate, root);
	}
	mt->fireBSTriggers = false;
}

/* AFTER STATEMENT triggers, queued as fireASTriggers queues them. */
static void
fire_after_statement(EState *estate, ModifyTableState *mt)
{
	ResultRelInfo *root = mt->rootResultRelInfo;
	int			merge = mt->mt_merge_subcommands;

	if (mt->operation == CMD_MERGE)
	{
		if (merge & MERGE_DELETE)
			ExecASDeleteTriggers(estate, root, mt->mt_transition_capture);
		if (merge & MERGE_UPDATE)
			ExecASUpdateTriggers(estate, root, mt->mt_transition_capture);
		if (merge & MERGE_INSERT)
			ExecASInsertTriggers(estate, root, mt->mt_transition_capture);
		return;
	}
	if (mt->operation == CMD_UPDATE)
	{
		ExecASUpdateTriggers(estate, root, mt->mt_transition_capture);
		return;
	}
	if (mt->operation == CMD_DELETE)
	{
		ExecASDeleteTriggers(estate, root, mt->mt_transition_capture);
		return;
	}
	if (do_update(mt))
		ExecASUpdateTriggers(estate, root, mt->mt_oc_transition_capture);
	ExecASInsertTriggers(estate, root, mt->mt_transition_capture);
}

/* Is a MERGE subplan row matched with a target row?  (ExecModifyTable's test) */
static bool
merge_matched(ModifyTableState *mt, TupleTableSlot *planSlot)
{
	AttrNumber	attno = AttributeNumberIsValid(mt->mt_resultOidAttno) ?
		mt->mt_resultOidAttno : mt->resultRelInfo->ri_RowIdAttNo;
	bool		isnull;

	/* neither: a partitioned target without partitions has no rows */
	if (!AttributeNumberIsValid(attno))
		return false;
	(void) ExecGetJunkAttribute(planSlot, attno, &isnull);
	return !isnull;
}

/*
 * One MERGE row.  Not matched: the first WHEN NOT MATCHED action whose
 * condition holds, as ExecMergeNotMatched picks it, inserts its projection
 * on the direct path, or does nothing.  Matched: core's ModifyTable node
 * takes the row after the load (upsert.c).
 */
static void
merge_row(DPScanState *s, TupleTableSlot *planSlot)
{
	ModifyTableState *mt = s->mtstate;
	ExprContext *econtext = mt->ps.ps_ExprContext;
	ListCell   *lc;

	if (merge_matched(mt, planSlot))
	{
		dp_load_defer(s->load, planSlot);
		return;
	}
	ResetExprContext(econtext);
	econtext->ecxt_scantuple = NULL;
	econtext->ecxt_innertuple = planSlot;
	econtext->ecxt_outertuple = NULL;
	foreach(lc, DP_MERGE_NOT_MATCHED_ACTIONS(mt->resultRelInfo))
	{
		MergeActionState *action = lfirst(lc);

		if (!ExecQual(action->mas_whenqual, econtext))
			continue;
		if (action->mas_action->commandType == CMD_INSERT)
		{
			dp_load_row(s->load, ExecProject(action->mas_proj));
			mt->mt_merge_inserted += 1;
		}
		break;
	}
}

/*
 * The SELECT in core's parallel query, to its end, before the load writes
 * anything; the load then takes its rows (pargather.c).
 */
static void
run_gather(DPScanState *s)
{
	EState	   *estate = s->css.ss.ps.state;
	TupleDesc	desc;
	int			launched;

	s->rows = dp_gather_rows(estate, s->gather, &desc, &launched);
	s->rowslot = ExecAllocTableSlot(&estate->es_tupleTable, desc,
									&TTSOpsMinimalTuple);
	dp_load_note_parallel(s->load, launched,
						  psprintf("its SELECT ran in core's parallel query, its rows loaded by the leader (%s)",
								   s->no_parallel));
}

/*
 * A hinted UPDATE or DELETE: every row of the plan kept, then the rows
 * changed in bulk (rewrite.c); RETURNING rows, the bulk path's and core's,
 * kept in the tuplestore until the end.
 */
static void
run_rewrite(DPScanState *s)
{
	EState	   *estate = s->css.ss.ps.state;
	ModifyTableState *mt = s->mtstate;
	PlanState  *subplan = outerPlanState(mt);

	s->rewrite = dp_rewrite_begin(estate, mt, s->hinted, s->retstore);
	if (!dp_rewrite_report(s->rewrite)->direct)
	{
		/* refused at execution: core's executor, as the plain statement */
		dp_upsert_run_node(mt, s->retstore);
		dp_rewrite_finish(s->rewrite);
		s->done = true;
		return;
	}
	if (mt->fireBSTriggers)
		fire_before_statement(estate, mt);
	for (;;)
	{
		TupleTableSlot *planSlot;

		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);
		planSlot = ExecProcNode(subplan);
		if (TupIsNull(planSlot))
			break;
		dp_rewrite_row(s->rewrite, planSlot);
	}
	dp_rewrite_finish(s->rewrite);
	fire_after_statement(estate, mt);
	mt->mt_done = true;
	s->done = true;
}

/* Pull input rows until RETURNING output is ready or the input ends. */
static void
run(DPScanState *s)
{
	EState	   *estate = s->css.ss.ps.state;
	ModifyTableState *mt = s->mtstate;
	PlanState  *subplan = s->rows ? NULL : outerPlanState(mt);

	if (mt->operation == CMD_UPDATE || mt->operation == CMD_DELETE)
	{
		run_rewrite(s);
		return;
	}
	if (s->load == NULL)
	{
		if (mt->fireBSTriggers)
			fire_before_statement(estate, mt);
		s->load = dp_load_begin(mt->operation == CMD_MERGE ? "MERGE" : "INSERT",
								estate, mt, s->hinted,
								s->freeze_allowed, s->retstore, NULL, NULL);
		if (s->beside)
			dp_load_beside(s->load);
		if (outerPlan(mt->ps.plan) != NULL)
			dp_progress_expect_rows(s->load, outerPlan(mt->ps.plan)->plan_rows);
		if (s->gather != NULL)
		{
			run_gather(s);
			subplan = NULL;		/* its rows are in s->rows */
		}
		else if (s->no_parallel[0] != '\0')
			dp_load_note_parallel(s->load, 0, s->no_parallel);
		else if (s->parallel > 0 &&
				 dp_parallel_insert(s->load, estate, mt, s->parallel))
			subplan = NULL;		/* the workers read it */
	}

	while (subplan != NULL || s->rows != NULL)
	{
		TupleTableSlot *planSlot;

		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);

		if (subplan != NULL)
			planSlot = ExecProcNode(subplan);
		else if (tuplestore_gettupleslot(s->rows, true, false, s->rowslot))
			planSlot = s->rowslot;
		else
			planSlot = NULL;
		if (TupIsNull(planSlot))
			break;
		if (mt->operation == CMD_MERGE)
			merge_row(s, planSlot);
		else
			dp_load_row(s->load, planSlot);

		if (s->retstore && tuplestore_tuple_count(s->retstore) > 0)
			return;
	}

	dp_load_end_rows(s->load);
	dp_load_finish(s->load);
	fire_after_statement(estate, mt);
	mt->mt_done = true;
	s->done = true;
}

static TupleTableSlot *
dp_exec(CustomScanState *node)
{
	DPScanState *s = (DPScanState *) node;

	if (s->report_id != 0)
		return ExecProcNode(&s->mtstate->ps);

	for (;;)
	{
		if (s->retstore &&
			tuplestore_gettupleslot(s->retstore, true, false, s->retslot))
			return s->retslot;
		if (s->done)
			return NULL;
		if (s->retstore)
			tuplestore_clear(s->retstore);
		run(s);
	}
}

static void
dp_end(CustomScanState *node)
{
	DPScanState *s = (DPScanState *) node;

	if (s->retstore)
		tuplestore_end(s->retstore);
	if (s->rows)
		tuplestore_end(s->rows);
	if (s->report_id != 0)
		dp_report_rows(s->report_id, node->ss.ps.state->es_processed);
	ExecEndNode(&s->mtstate->ps);
}

static void
dp_rescan(CustomScanState *node)
{
	elog(ERROR, "directpath: a DirectPath node cannot be rescanned");
}

static void
dp_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	DPScanState *s = (DPScanState *) node;

	if (s->refused.reason[0] != '\0')
		dp_report_explain(&s->refused, false, es);
	else if (s->load != NULL && es->analyze)
		dp_report_explain(dp_load_report(s->load), true, es);
	else if (s->rewrite != NULL && es->analyze)
		dp_report_explain(dp_rewrite_report(s->rewrite), true, es);
	else
		dp_report_explain(&s->refused, false, es);
}

/*
 * Could freezing happen at all?  Only then is the prior-activity test,
 * which costs a subtransaction, worth making: the statement allows it and
 * the target's storage is new in this subtransaction, or it is partitioned
 * (its partitions are judged one by one).
 */
static bool
freeze_possible(PlannedStmt *stmt, CustomScan *cscan)
{
	ModifyTable *mt = linitial(cscan->custom_plans);
	Relation	rel;
	bool		possible;

	if (intVal(lthird(cscan->custom_private)) == 0)
		return false;
	rel = relation_open(rt_fetch(linitial_int(mt->resultRelations),
								 stmt->rtable)->relid, NoLock);
	possible = rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE ||
		dp_storage_new_in_subxact(rel);
	relation_close(rel, NoLock);
	return possible;
}

static void
dp_executor_start(QueryDesc *queryDesc, int eflags)
{
	Plan	   *top = queryDesc->plannedstmt->planTree;
	bool		ours = top && IsA(top, CustomScan) &&
		((CustomScan *) top)->methods == &dp_plan_methods;
	bool		clear = false;

	/* COPY FREEZE's "prior transaction activity" test, done first */
	if (ours && freeze_possible(queryDesc->plannedstmt, (CustomScan *) top))
		clear = dp_admit_no_prior_activity();

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	if (ours && is_directpath_state(queryDesc->planstate))
	{
		DPScanState *s = (DPScanState *) queryDesc->planstate;

		s->freeze_allowed = s->freeze_allowed && clear;
	}
	else if (dp_mode == DP_MODE_ALWAYS && top && IsA(top, ModifyTable) &&
			 (((ModifyTable *) top)->operation == CMD_INSERT ||
			  ((ModifyTable *) top)->operation == CMD_MERGE) &&
			 !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		/* planned for the normal path: publish the plan-time reason */
		noted_id = dp_report_plan_start(queryDesc->sourceText,
										queryDesc->plannedstmt->stmt_location,
										queryDesc->plannedstmt->stmt_len);
		noted_query = noted_id != 0 ? queryDesc : NULL;
	}
}

static void
dp_executor_finish(QueryDesc *queryDesc)
{
	PlanState  *top = queryDesc->planstate;

	/* Run a DirectPath node the caller stopped fetching from to its end. */
	if (is_directpath_state(top) &&
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

	if (noted_query == queryDesc)
	{
		dp_report_rows(noted_id, queryDesc->estate->es_processed);
		noted_query = NULL;
	}
}

void
dp_exec_init(void)
{
	RegisterCustomScanMethods(&dp_plan_methods);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = dp_executor_start;
	prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = dp_executor_finish;
}
