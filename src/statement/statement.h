/*-------------------------------------------------------------------------
 *
 * statement/statement.h
 *	  The statement stage: the hooks through which directpath takes over an
 *	  INSERT or a MERGE (plan.c, exec.c), a COPY FROM (copy.c, its own
 *	  options in copyopts.c), or a statement that creates the table it
 *	  fills (born.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_STATEMENT_H
#define DP_STATEMENT_H

#include "common/compat.h"

#include "nodes/extensible.h"
#include "tcop/utility.h"

/* Each module's hooks, installed by _PG_init. */
extern void dp_plan_init(void);
extern void dp_exec_init(void);
extern void dp_copy_init(void);
extern void dp_born_init(void);	/* born.c: CREATE TABLE AS, REFRESH */

/*
 * From the planner hook (plan.c): a query planned while a born statement
 * that asked for parallel workers runs; the last one planned is its own,
 * judged for them here.
 */
extern void dp_born_judge_plan(Query *parse, PlannedStmt *stmt);

/* The next ProcessUtility: the hook we replaced, else core's. */
static inline void
dp_next_process_utility(ProcessUtility_hook_type prev, PlannedStmt *pstmt,
						const char *queryString, bool readOnlyTree,
						ProcessUtilityContext context, ParamListInfo params,
						QueryEnvironment *queryEnv, DestReceiver *dest,
						QueryCompletion *qc)
{
	if (prev)
		prev(pstmt, queryString, readOnlyTree, context, params, queryEnv,
			 dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/* ---------- exec.c ---------- */

/* The CustomScan methods of the DirectPath node, for plan.c to wrap with. */
extern const CustomScanMethods *dp_exec_plan_methods(void);

/* ---------- copyopts.c: directpath's own COPY options ---------- */

typedef struct DPCopyOptions
{
	char	   *rejects_table;	/* REJECTS_TABLE 'name' */
	int64		max_rejects;	/* MAX_REJECTS n; -1: no limit */
	bool		on_conflict;	/* ON_CONFLICT 'nothing' or 'update' */
	bool		conflict_update;	/* ... 'update': the new row's values */
	char	   *conflict_constraint;	/* ON_CONFLICT_CONSTRAINT 'name' */
	List	   *arbiters;		/* its index, once the table is open */
	char	   *update_sql;		/* 'update': the rows' INSERT ... ON
								 * CONFLICT DO UPDATE (upsert.c) */
	List	   *core_options;	/* everything else */
} DPCopyOptions;

/* Take our options out of 'options'; core's are left in core_options. */
extern void dp_copy_split_options(List *options, DPCopyOptions *opts);

/* The name of one of our options the COPY has, or NULL. */
extern const char *dp_copy_own_option(DPCopyOptions *opts);

/*
 * ON_CONFLICT's arbiters in the opened target, checked (raises); for
 * 'update', the statement that updates the rows whose key is taken
 * ('attnums': the COPY's columns).
 */
extern void dp_copy_resolve_arbiters(DPCopyOptions *opts, Relation rel,
									 List *attnums);

/*
 * The COPY goes to core after all ('why', or NULL when core refuses it):
 * false, or an error when it has one of our options.
 */
extern bool dp_copy_leave_to_core(DPCopyOptions *opts, const char *why);

#endif							/* DP_STATEMENT_H */
