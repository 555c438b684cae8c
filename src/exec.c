/*-------------------------------------------------------------------------
 *
 * exec.c
 *	  The DirectPath executor node: runs an INSERT's rows through a
 *	  direct-path load (load.c).
 *
 * The node sits on top of the INSERT's ModifyTable (plan.c) and initialises
 * it as usual, so result relations, partition routing, WITH CHECK options,
 * RETURNING projections, transition capture and cleanup are all core's.
 * Instead of calling ExecModifyTable, the node pulls rows from the
 * ModifyTable's subplan itself and feeds them to the load, firing the
 * statement-level triggers as ExecModifyTable would.  RETURNING rows come
 * back from the load in batches, through a tuplestore, and are returned
 * one per call.
 *
 * A statement found ineligible at plan time keeps the node only so that
 * EXPLAIN can say why; it then passes the ModifyTable's output through.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "utils/tuplestore.h"

typedef struct DPScanState
{
	CustomScanState css;
	ModifyTableState *mtstate;
	bool		hinted;
	const char *reason;			/* plan-time reason for the normal path */
	bool		freeze_allowed;
	bool		passthrough;
	uint64		last_id;		/* passthrough: our last_statement() entry */
	bool		done;
	DPLoad	   *load;			/* NULL until the first call */
	Tuplestorestate *retstore;
	TupleTableSlot *retslot;
} DPScanState;

static void dp_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *dp_exec(CustomScanState *node);
static void dp_end(CustomScanState *node);
static void dp_rescan(CustomScanState *node);
static void dp_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static CustomExecMethods dp_exec_methods = {
	.CustomName = "DirectPath",
	.BeginCustomScan = dp_begin,
	.ExecCustomScan = dp_exec,
	.EndCustomScan = dp_end,
	.ReScanCustomScan = dp_rescan,
	.ExplainCustomScan = dp_explain,
};

Node *
dp_create_scan_state(CustomScan *cscan)
{
	DPScanState *s = palloc0(sizeof(DPScanState));

	NodeSetTag(s, T_CustomScanState);
	s->css.methods = &dp_exec_methods;
	s->hinted = intVal(linitial(cscan->custom_private)) != 0;
	s->reason = strVal(lsecond(cscan->custom_private));
	if (s->reason[0] == '\0')
		s->reason = NULL;
	s->freeze_allowed = intVal(lthird(cscan->custom_private)) != 0;
	return (Node *) s;
}

bool
dp_is_directpath_state(PlanState *ps)
{
	return IsA(ps, CustomScanState) &&
		((CustomScanState *) ps)->methods == &dp_exec_methods;
}

static void
dp_begin(CustomScanState *node, EState *estate, int eflags)
{
	DPScanState *s = (DPScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Plan	   *mtplan = linitial(cscan->custom_plans);

	s->mtstate = (ModifyTableState *) ExecInitNode(mtplan, estate, eflags);
	node->custom_ps = list_make1(s->mtstate);
	s->passthrough = s->reason != NULL;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	if (s->passthrough)
	{
		dp_report_fallback(s->hinted, "INSERT", s->reason);
		s->last_id = dp_set_last(false, s->reason, 0, 0, false, 0, 0);
		return;
	}

	/* freezing also needs COPY FREEZE's test, made before executor start */
	s->freeze_allowed = s->freeze_allowed && dp_prior_snapshots_clear;
	if (s->mtstate->resultRelInfo->ri_projectReturning)
	{
		/* RETURNING rows come back from a tuplestore, as minimal tuples */
		s->retstore = tuplestore_begin_heap(false, false, work_mem);
		s->retslot = ExecInitExtraTupleSlot(estate,
											node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
											&TTSOpsMinimalTuple);
	}
}

/* Pull input rows until RETURNING output is ready or the input ends. */
static void
run(DPScanState *s)
{
	EState	   *estate = s->css.ss.ps.state;
	ModifyTableState *mt = s->mtstate;
	PlanState  *subplan = outerPlanState(mt);

	if (s->load == NULL)
	{
		/* BEFORE STATEMENT triggers, as ExecModifyTable's first call */
		if (mt->fireBSTriggers)
		{
			ExecBSInsertTriggers(estate, mt->rootResultRelInfo);
			mt->fireBSTriggers = false;
		}
		s->load = dp_load_begin("INSERT", estate, mt, s->hinted,
								s->freeze_allowed, s->retstore, NULL, NULL);
	}

	for (;;)
	{
		TupleTableSlot *planSlot;

		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);

		planSlot = ExecProcNode(subplan);
		if (TupIsNull(planSlot))
			break;
		dp_load_row(s->load, planSlot);

		if (s->retstore && tuplestore_tuple_count(s->retstore) > 0)
			return;
	}

	dp_load_finish(s->load);
	/* AFTER STATEMENT triggers, as fireASTriggers does for INSERT */
	ExecASInsertTriggers(estate, mt->rootResultRelInfo, mt->mt_transition_capture);
	mt->mt_done = true;
	s->done = true;
}

static TupleTableSlot *
dp_exec(CustomScanState *node)
{
	DPScanState *s = (DPScanState *) node;

	if (s->passthrough)
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
	if (s->last_id != 0)
		dp_set_last_rows(s->last_id, node->ss.ps.state->es_processed);
	ExecEndNode(&s->mtstate->ps);
}

static void
dp_rescan(CustomScanState *node)
{
	elog(ERROR, "directpath: an INSERT cannot be rescanned");
}

static void
dp_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	DPScanState *s = (DPScanState *) node;

	if (s->reason)
	{
		ExplainPropertyText("Direct Path", "off", es);
		ExplainPropertyText("Reason", s->reason, es);
		return;
	}
	if (!es->analyze || s->load == NULL)
	{
		ExplainPropertyText("Direct Path", "on", es);
		return;
	}
	ExplainPropertyText("Direct Path",
						dp_load_went_direct(s->load) ? "on" : "off (small statement)", es);
	ExplainPropertyInteger("Pages Written", NULL, (int64) dp_load_pages(s->load), es);
	ExplainPropertyBool("Frozen", dp_load_frozen(s->load), es);
	if (dp_load_indexes_rebuilt(s->load) > 0)
		ExplainPropertyInteger("Indexes Rebuilt", NULL, dp_load_indexes_rebuilt(s->load), es);
}
