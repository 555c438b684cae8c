/*-------------------------------------------------------------------------
 *
 * parallel/parallel.h
 *	  The parallel stage: a load whose pages parallel workers build
 *	  (parallel.c and its parts), for an INSERT ... SELECT (parplan.c,
 *	  parscan.c) or a COPY (parcopy.c), and a SELECT in core's parallel
 *	  query (pargather.c).  This is what the rest of directpath uses; the
 *	  stage's files share parallel_private.h among themselves.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_PARALLEL_H
#define DP_PARALLEL_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "nodes/plannodes.h"
#include "utils/tuplestore.h"

struct DPLoad;					/* load/load.h */

/* ---------- parcheck.c: which targets a parallel load takes ---------- */

/* Would core run 'expr' in a parallel worker (is_parallel_safe)? */
extern bool dp_expr_parallel_safe(Node *expr);

/* ---------- parplan.c: INSERT ... SELECT, and a SELECT plan run by every process ---------- */

/*
 * Plan time: can the ModifyTable's subplan (an INSERT's SELECT) be split
 * among workers (its scans shared, parscan.c; or, a plan, run by every
 * process with its driving scan shared)?  NULL if so, else why not.
 */
extern const char *dp_parallel_plan_refusal(PlannedStmt *stmt, Query *parse);

/*
 * Run time: load the rows of the INSERT's subplan with up to 'nworkers'
 * workers building pages; returns false, with the reason noted in the
 * load's report, when the statement must run serially instead (nothing
 * loaded yet).
 */
extern bool dp_parallel_insert(struct DPLoad *load, EState *estate,
							   ModifyTableState *mtstate, int nworkers);

/*
 * The same for the query of a table born in the statement (CREATE TABLE
 * AS, REFRESH MATERIALIZED VIEW; statement/born.c): plan time, why its
 * SELECT cannot be split among workers (columns that are not the new
 * relation's, ORDER BY, or what dp_parallel_plan_refusal says), or NULL;
 * run time, its plan 'sub' (started as 'substate', in 'estate') loaded
 * into the relation of 'mtstate' (the load's own), as above.
 */
extern const char *dp_parallel_born_refusal(PlannedStmt *stmt, Query *parse);
extern bool dp_parallel_select(struct DPLoad *load, EState *estate, Plan *sub,
							   PlanState *substate, ModifyTableState *mtstate,
							   int nworkers);

/* ---------- pargather.c: a SELECT in core's parallel query ---------- */

/*
 * Plan time: the INSERT's query (an untouched copy, changed here) planned
 * as a SELECT of the target's row with core's parallel query and up to
 * 'nworkers' workers; NULL unless its plan has a Gather.  Run time: run it
 * with the INSERT's snapshot and parameters into a tuplestore (in the
 * executor's query memory), returning its rows' descriptor and how many
 * workers core launched.
 */
extern PlannedStmt *dp_gather_plan(Query *insert, int cursorOptions,
								   ParamListInfo boundParams, int nworkers);
extern Tuplestorestate *dp_gather_rows(EState *estate, PlannedStmt *select,
									   TupleDesc *desc, int *launched);

/* ---------- parcopy.c: COPY FROM split among parallel workers ---------- */

/*
 * Load the rest of COPY's input (a file or a program, read through
 * 'cstate') with up to 'nworkers' workers parsing chunks of whole lines;
 * 'where' is the transformed WHERE clause, 'attlist' and 'options' the
 * statement's (core's options only).  Returns false, with the reason noted
 * in the load's report, when the COPY must run serially instead (nothing
 * read yet); else every row is loaded and its work done (dp_load_end_rows)
 * and *processed gets the rows loaded.
 */
extern bool dp_parallel_copy(struct DPLoad *load, CopyFromState cstate,
							 ModifyTableState *mtstate, Node *where,
							 List *attlist, List *options, int nworkers,
							 uint64 *processed);


#endif							/* DP_PARALLEL_H */
