/*-------------------------------------------------------------------------
 *
 * born.c
 *	  Tables born ready: CREATE TABLE AS, SELECT INTO, CREATE MATERIALIZED
 *	  VIEW and REFRESH MATERIALIZED VIEW write their rows on the direct path.
 *
 * These statements never go through an INSERT: core creates the table (or,
 * for REFRESH, a new heap to swap in) from a DestReceiver's rStartup, then
 * the query's executor hands each row to the receiver, which calls
 * table_tuple_insert (createas.c, matview.c).  So directpath takes them at
 * the receiver:
 *
 *	ProcessUtility	a CREATE TABLE AS (SELECT INTO and CREATE MATERIALIZED
 *					VIEW are parsed into one; its EXECUTE form too) or a
 *					REFRESH MATERIALIZED VIEW without CONCURRENTLY is judged
 *					by its text: the hint, directpath.mode (admission.c).
 *					The answer holds while the statement runs.  REFRESH
 *					... CONCURRENTLY fills a temporary table, which stays
 *					core's; its hint goes to the DELETE and INSERT that
 *					core then runs on the view (admission.c).
 *	ExecutorRun		when such a statement's query runs into core's
 *					receiver (DestIntoRel, DestTransientRel), the receiver is
 *					wrapped for the run:
 *	  rStartup		core's first, which creates and opens the relation; then
 *					the relation is judged (heap, not temporary: REFRESH
 *					CONCURRENTLY's diff table is one) and a load begun on it
 *					with an executor state of its own (a one-relation range
 *					table, a result relation), as COPY's is built;
 *	  receiveSlot	each row to the load (load.c): held until min_bytes,
 *					then placed on pages;
 *	  rShutdown		the load ended (its report published), then core's.
 *
 * In parallel.  A statement whose hint (or directpath.parallel_workers)
 * asks for workers has its query judged when the planner hook sees it
 * planned (dp_born_judge_plan: the last SELECT planned while the statement
 * runs is its own; parplan.c says whether it can be split).  The run then
 * starts the receiver itself and hands the plan to the parallel load
 * (born_run, born_parallel), which builds the pages with workers and the
 * leader; if it cannot (the plan was not the one judged, or the load
 * refuses), core's run of the plan feeds the started receiver instead.
 *
 * The load gathers the new relation's statistics as it writes
 * (stats/stats.c); where the rows fill a new heap of a materialized view
 * (REFRESH, and CREATE MATERIALIZED VIEW from 17, which creates the view
 * empty and refreshes it) they are stored as the view's, whose heap the
 * new one becomes (core swaps the sizes in with the files).
 *
 * The relation is new in the transaction and empty, nobody else can see it
 * (AccessExclusiveLock), and it has no index, trigger, constraint or policy
 * yet: its pages go out frozen and all-visible, with the visibility map set,
 * whenever COPY FREEZE's conditions hold (no snapshot registered before the
 * statement, no open cursor), and WAL-logged as any direct load's, not at
 * all where core skips it (wal_level = minimal).  The query itself cannot
 * read the relation it fills, so nothing else is judged.  A refused
 * statement runs through core's receiver untouched, with its reason.
 *
 * Invariant: core's receiver is the one ExecCreateTableAs and
 * refresh_matview_datafill see before and after the run (the executor's
 * destination is put back, also on error).
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "admission/admission.h"
#include "load/load.h"
#include "parallel/parallel.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "common/progress.h"
#include "common/report.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* The born-ready statement being run (ProcessUtility), or none. */
typedef struct DPBornStmt
{
	bool		wanted;
	bool		hinted;
	const char *kind;			/* for messages and last_statement() */
	RangeVar   *matview;		/* a materialized view, whose statistics the
								 * rows of a new heap of it give */
	List	   *matview_nsps;	/* where its name is looked up: its schema,
								 * or the search path before the statement
								 * (a refresh restricts it) */
	int			parallel;		/* workers asked for, or 0 */
	PlannedStmt *judged;		/* the query's plan judged for them, */
	const char *no_parallel;	/* and why it cannot have them, or NULL */
} DPBornStmt;

/* A core receiver, wrapped for one run of its query. */
typedef struct DPBornDest
{
	DestReceiver pub;			/* first: the executor calls through it */
	DestReceiver *core;
	const DPBornStmt *stmt;
	EState	   *estate;			/* the load's, or NULL when refused */
	ModifyTableState *mtstate;
	DPLoad	   *load;
	uint64		report_id;		/* refused: our last_statement() entry */
	Relation	matview;		/* REFRESH: the view (core holds its lock) */
	uint64		rows;
	double		plan_rows;		/* the query's estimate, for the progress */
} DPBornDest;

static ProcessUtility_hook_type prev_process_utility = NULL;
static ExecutorRun_hook_type prev_executor_run = NULL;
static DPBornStmt *current = NULL;

/* Why rows cannot be appended to the new relation, or NULL. */
static const char *
born_ineligible(Relation rel)
{
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		return dp_report_reason("\"%s\" is a temporary table",
								RelationGetRelationName(rel));
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		return dp_report_reason("\"%s\" does not use the heap access method",
								RelationGetRelationName(rel));
	return NULL;
}

/* The executor state of the load: 'rel' as range table entry 1. */
static void
begin_executor(DPBornDest *d, Relation rel)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = AccessExclusiveLock;
	d->estate = CreateExecutorState();
	DP_INIT_RANGE_TABLE(d->estate, list_make1(rte), NIL);
	ExecInitResultRelation(d->estate, rri, 1);
	d->mtstate = dp_insert_state(d->estate, rri);
}

static void
born_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	DPBornDest *d = (DPBornDest *) self;
	Relation	rel;
	const char *why;
	bool		freeze;

	d->core->rStartup(d->core, operation, typeinfo);
	rel = dp_dest_relation(d->core);
	why = born_ineligible(rel);
	if (why != NULL)
	{
		DPReport	r;

		dp_report_init(&r);
		dp_report_normal(&r, d->stmt->hinted, d->stmt->kind, why);
		d->report_id = dp_report_publish(&r);
		return;
	}
	freeze = dp_admit_no_prior_activity();
	begin_executor(d, rel);
	d->load = dp_load_begin(d->stmt->kind, d->estate, d->mtstate,
							d->stmt->hinted, freeze, NULL, NULL, NULL);
	dp_load_new_relation(d->load);
	dp_progress_expect_rows(d->load, d->plan_rows);
	if (d->stmt->matview && d->core->mydest == DestTransientRel)
	{
		ListCell   *lc;
		Oid			relid = InvalidOid;

		foreach(lc, d->stmt->matview_nsps)
		{
			relid = get_relname_relid(d->stmt->matview->relname, lfirst_oid(lc));
			if (OidIsValid(relid))
				break;
		}
		/* core locked and checked it before making the new heap */
		if (OidIsValid(relid))
		{
			d->matview = relation_open(relid, NoLock);
			dp_load_statistics_of(d->load, d->matview);
		}
	}
}

/*
 * The query's rows loaded with parallel workers, if it was judged able to
 * (dp_born_judge_plan) and the load agrees: true when every row is in.
 * Otherwise the load notes why not, and nothing is loaded yet.
 */
static bool
born_parallel(DPBornDest *d, QueryDesc *queryDesc)
{
	const DPBornStmt *stmt = d->stmt;
	const char *why = stmt->no_parallel;

	if (d->load == NULL || stmt->parallel <= 0)
		return false;
	if (stmt->judged != queryDesc->plannedstmt)
		why = "its query was planned before the statement (a prepared statement)";
	if (why != NULL)
	{
		dp_load_note_parallel(d->load, 0, why);
		return false;
	}
	return dp_parallel_select(d->load, queryDesc->estate,
							  queryDesc->plannedstmt->planTree,
							  queryDesc->planstate, d->mtstate, stmt->parallel);
}

/* No-ops for core's run of the rest, once the receiver has started. */
static void
born_started(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
born_not_yet(DestReceiver *self)
{
}

static bool born_receive(TupleTableSlot *slot, DestReceiver *self);
static void born_shutdown(DestReceiver *self);

/*
 * Run the query of a statement that asked for parallel workers: the
 * receiver started (the relation made, its load begun), then the rows
 * loaded by the workers and the leader, or, when they cannot be, by
 * core's run of the plan into the receiver; then the receiver shut down.
 * The command's row count is the load's.
 */
static void
born_run(DPBornDest *d, DP_EXECUTOR_RUN_PARAMS)
{
	EState	   *estate = queryDesc->estate;
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);

	estate->es_processed = 0;
	born_startup(&d->pub, queryDesc->operation, queryDesc->tupDesc);
	if (born_parallel(d, queryDesc))
		estate->es_processed = dp_load_report(d->load)->rows;
	else
	{
		d->pub.rStartup = born_started;
		d->pub.rShutdown = born_not_yet;
		MemoryContextSwitchTo(old);
		if (prev_executor_run)
			prev_executor_run(DP_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(DP_EXECUTOR_RUN_ARGS);
		old = MemoryContextSwitchTo(estate->es_query_cxt);
	}
	born_shutdown(&d->pub);
	MemoryContextSwitchTo(old);
}

static bool
born_receive(TupleTableSlot *slot, DestReceiver *self)
{
	DPBornDest *d = (DPBornDest *) self;

	d->rows++;
	if (d->load == NULL)
		return d->core->receiveSlot(slot, d->core);
	ResetPerTupleExprContext(d->estate);
	dp_load_row(d->load, slot);
	return true;
}

static void
born_shutdown(DestReceiver *self)
{
	DPBornDest *d = (DPBornDest *) self;

	if (d->load != NULL)
	{
		dp_load_end_rows(d->load);
		dp_load_finish(d->load);
		ExecCloseResultRelations(d->estate);
		ExecCloseRangeTableRelations(d->estate);
		FreeExecutorState(d->estate);
		d->load = NULL;
		d->estate = NULL;
		if (d->matview)
			relation_close(d->matview, NoLock);
		d->matview = NULL;
	}
	else if (d->report_id != 0)
		dp_report_rows(d->report_id, d->rows);
	d->core->rShutdown(d->core);
}

static void
born_destroy(DestReceiver *self)
{
	/* the wrapper is the hook's to free; core destroys its own receiver */
}

/* Run the query; into a wrapped receiver if it fills a born relation. */
static void
born_executor_run(DP_EXECUTOR_RUN_PARAMS)
{
	DestReceiver *core = queryDesc->dest;
	DPBornDest *d;

	if (current == NULL || !current->wanted ||
		(core->mydest != DestIntoRel && core->mydest != DestTransientRel))
	{
		if (prev_executor_run)
			prev_executor_run(DP_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(DP_EXECUTOR_RUN_ARGS);
		return;
	}

	d = palloc0(sizeof(DPBornDest));
	d->plan_rows = queryDesc->plannedstmt->planTree->plan_rows;
	d->pub.receiveSlot = born_receive;
	d->pub.rStartup = born_startup;
	d->pub.rShutdown = born_shutdown;
	d->pub.rDestroy = born_destroy;
	d->pub.mydest = core->mydest;
	d->core = core;
	d->stmt = current;
	queryDesc->dest = &d->pub;
	PG_TRY();
	{
		if (current->parallel > 0)
			born_run(d, DP_EXECUTOR_RUN_ARGS);
		else if (prev_executor_run)
			prev_executor_run(DP_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(DP_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		queryDesc->dest = core;
	}
	PG_END_TRY();
	pfree(d);
}

/* Which statements create the relation their rows fill. */
static const char *
born_kind(Node *stmt)
{
	if (IsA(stmt, CreateTableAsStmt))
		return ((CreateTableAsStmt *) stmt)->objtype == OBJECT_MATVIEW ?
			"CREATE MATERIALIZED VIEW" : "CREATE TABLE AS";
	if (IsA(stmt, RefreshMatViewStmt) && !((RefreshMatViewStmt *) stmt)->concurrent)
		return "REFRESH MATERIALIZED VIEW";
	return NULL;
}

/*
 * The materialized view a statement fills through a new heap, if it does:
 * REFRESH's, and CREATE MATERIALIZED VIEW's (which 17 runs as a creation
 * WITH NO DATA, then a refresh).
 */
static RangeVar *
born_matview(Node *stmt)
{
	if (IsA(stmt, RefreshMatViewStmt))
		return ((RefreshMatViewStmt *) stmt)->relation;
	if (IsA(stmt, CreateTableAsStmt) &&
		((CreateTableAsStmt *) stmt)->objtype == OBJECT_MATVIEW)
		return ((CreateTableAsStmt *) stmt)->into->rel;
	return NULL;
}

static void
born_process_utility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	DPBornStmt	stmt;
	DPBornStmt *saved = current;
	const char *kind = born_kind(pstmt->utilityStmt);
	bool		concurrently = IsA(pstmt->utilityStmt, RefreshMatViewStmt) &&
		((RefreshMatViewStmt *) pstmt->utilityStmt)->concurrent;
	int			saved_refresh = 0;

	if (kind != NULL)
	{
		stmt.kind = kind;
		stmt.matview = born_matview(pstmt->utilityStmt);
		stmt.matview_nsps = NIL;
		if (stmt.matview && stmt.matview->schemaname)
			stmt.matview_nsps = list_make1_oid(get_namespace_oid(stmt.matview->schemaname,
																 true));
		else if (stmt.matview)
			stmt.matview_nsps = fetch_search_path(false);
		stmt.wanted = dp_admit_born_wanted(queryString, pstmt->stmt_location,
										   pstmt->stmt_len, &stmt.hinted,
										   &stmt.parallel);
		stmt.judged = NULL;
		stmt.no_parallel = NULL;
		current = &stmt;
	}
	/* CONCURRENTLY: core's DELETE and INSERT on the view take its hint */
	if (concurrently)
		saved_refresh = dp_admit_refresh_concurrently(queryString,
													  pstmt->stmt_location,
													  pstmt->stmt_len);
	PG_TRY();
	{
		dp_next_process_utility(prev_process_utility, pstmt, queryString,
								readOnlyTree, context, params, queryEnv,
								dest, qc);
	}
	PG_FINALLY();
	{
		current = saved;
		if (concurrently)
			dp_admit_refresh_done(saved_refresh);
	}
	PG_END_TRY();
}

void
dp_born_judge_plan(Query *parse, PlannedStmt *stmt)
{
	if (current == NULL || !current->wanted || current->parallel <= 0 ||
		parse->commandType != CMD_SELECT || parse->utilityStmt != NULL)
		return;
	/* the outermost planning comes last: its plan is the one run */
	current->judged = stmt;
	current->no_parallel = dp_parallel_born_refusal(stmt, parse);
}

void
dp_born_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = born_process_utility;
	prev_executor_run = ExecutorRun_hook;
	ExecutorRun_hook = born_executor_run;
}
