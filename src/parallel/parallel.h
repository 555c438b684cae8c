/*-------------------------------------------------------------------------
 *
 * parallel/parallel.h
 *	  The parallel stage: a load whose pages parallel workers build
 *	  (parallel.c), COPY's input cut into chunks for them (parcopy.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_PARALLEL_H
#define DP_PARALLEL_H

#include "input/input.h"
#include "load/load.h"

/* ---------- parallel.c: a parallel load's workers and leader ---------- */

/* What every worker needs to know, set by the leader before launch. */
typedef struct DPParallelShared
{
	Oid			source;			/* INSERT: the table scanned */
	Oid			target;
	TransactionId xid;			/* the leader's, on every tuple */
	CommandId	cid;
	bool		frozen;			/* pages go out frozen */
	Size		in_queue_size;	/* COPY: bytes of each worker's input queue */
} DPParallelShared;

/* Where a placer's finished pages and its rows that need TOAST go. */
typedef void (*DPPageSink) (void *arg, Page page);
typedef void (*DPRowSink) (void *arg, TupleTableSlot *row);

/*
 * A placer: rows in the target's format checked (NOT NULL, CHECK) and
 * formed in place on a detached builder's pages; each finished page goes
 * to 'page' (a worker's queue, or the leader's load), a row that needs
 * TOAST to 'toast_row'.
 */
typedef struct DPPlacer
{
	EState	   *estate;
	ResultRelInfo *rri;			/* the target, for its constraints */
	DPHeapBuilder *builder;
	DPPageSink	page;
	DPRowSink	toast_row;
	void	   *arg;
} DPPlacer;

extern void dp_placer_begin(DPPlacer *pl, const DPParallelShared *sh,
							Relation target, DPPageSink page,
							DPRowSink toast_row, void *arg);
/* The leader's own placer: its pages and rows go straight to 'load'. */
extern void dp_placer_begin_leader(DPPlacer *pl, const DPParallelShared *sh,
								   DPLoad *load, ResultRelInfo *rri);
/* Place a row; true if a page was handed on. */
extern bool dp_placer_add(DPPlacer *pl, TupleTableSlot *row);
/* Hand on the last, partial page; free the placer. */
extern void dp_placer_end(DPPlacer *pl);

/* Would core run 'expr' in a parallel worker (is_parallel_safe)? */
extern bool dp_expr_parallel_safe(Node *expr);

/*
 * Why the load's target cannot take a parallel load (NULL if it can):
 * the rules every parallel input shares.
 */
extern const char *dp_parallel_target_refusal(ModifyTableState *mtstate);

/*
 * Plan time: can the ModifyTable's subplan (an INSERT's SELECT) be split
 * among workers?  NULL if so, else why not.
 */
extern const char *dp_parallel_plan_refusal(PlannedStmt *stmt, Query *parse);

/*
 * Run time: load the rows of the INSERT's subplan with up to 'nworkers'
 * workers building pages; returns false, with the reason noted in the
 * load's report, when the statement must run serially instead (nothing
 * loaded yet).
 */
extern bool dp_parallel_insert(DPLoad *load, EState *estate,
							   ModifyTableState *mtstate, int nworkers);

/*
 * The machinery an input uses (parcopy.c): launch the workers (each runs
 * the function named 'entry') with the shared state and a text payload
 * (and a parallel scan of 'source', if not NULL), enter parallel mode;
 * receive their pages into the load until
 * every worker has detached, 'share' feeding them input (if 'feed' is not
 * NULL: true when it moved anything) and doing one step of the leader's
 * own share whenever nothing moved ('step': false once it is done); then
 * wait for them and leave parallel mode.  A worker's input queue ends when
 * the leader says dp_parallel_input_done.
 */
typedef struct DPParallel DPParallel;
typedef struct DPLeaderShare
{
	bool		(*feed) (void *arg, DPParallel *par);
	bool		(*step) (void *arg);
	void	   *arg;
} DPLeaderShare;

extern DPParallel *dp_parallel_launch(const DPParallelShared *sh,
									  const char *entry, const char *payload,
									  Relation source, int nworkers);
extern int	dp_parallel_workers_launched(DPParallel *par);
extern shm_mq_handle *dp_parallel_input(DPParallel *par, int worker);
extern void dp_parallel_input_done(DPParallel *par, int worker);
extern void dp_parallel_receive(DPParallel *par, DPLoad *load,
								ResultRelInfo *rri, const DPLeaderShare *share);
extern void dp_parallel_finish(DPParallel *par);

/*
 * A worker's side: dp_worker_begin attaches its queues (towards the leader
 * and, for COPY, from it) and opens the target under the leader's lock; a
 * worker's placer sends its pages and TOAST rows to the leader.
 */
typedef struct DPWorker
{
	shm_toc    *toc;
	DPParallelShared *sh;
	char	   *payload;
	Relation	target;
	shm_mq_handle *out;			/* pages and rows to the leader */
	shm_mq_handle *in;			/* COPY: chunks from the leader, or NULL */
} DPWorker;

extern void dp_worker_begin(DPWorker *w, dsm_segment *seg, shm_toc *toc);
extern void dp_placer_begin_worker(DPPlacer *pl, DPWorker *w);
extern void dp_worker_end(DPWorker *w);

/* Workers' entry points (by name, from core's parallel machinery). */
extern PGDLLEXPORT void dp_parallel_main(dsm_segment *seg, shm_toc *toc);
extern PGDLLEXPORT void dp_parcopy_main(dsm_segment *seg, shm_toc *toc);

/* ---------- parcopy.c: COPY FROM split among parallel workers ---------- */

/*
 * Load the rest of COPY's input (a file or a program, read through
 * 'cstate') with up to 'nworkers' workers parsing chunks of whole lines;
 * 'where' is the transformed WHERE clause, 'attlist' and 'options' the
 * statement's (core's options only).  Returns false, with the reason noted
 * in the load's report, when the COPY must run serially instead (nothing
 * read yet); else *processed gets the rows loaded.
 */
extern bool dp_parallel_copy(DPLoad *load, CopyFromState cstate,
							 ModifyTableState *mtstate, Node *where,
							 List *attlist, List *options, int nworkers,
							 uint64 *processed);

#endif							/* DP_PARALLEL_H */
