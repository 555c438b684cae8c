/*-------------------------------------------------------------------------
 *
 * directpath.h
 *	  Declarations shared by the files of the directpath extension.
 *
 * A statement flows one way through these modules (no module calls one
 * above it in this list, except through the hooks that directpath.c
 * installs):
 *
 *	directpath.c	settings; installs each module's hooks
 *	plan.c			parse-analysis and planner hooks: an admitted INSERT
 *					gets a DirectPath node on top of its plan
 *	exec.c			the DirectPath node and the executor hooks: drives an
 *					INSERT's rows into a load
 *	copy.c			the utility hook: COPY FROM into a load
 *	parallel.c		a parallel load: workers build pages, the leader
 *					writes them; INSERT ... SELECT from one table
 *	  parcopy.c		  COPY's input cut into chunks of whole lines
 *	admission.c		direct or not, and why; the early lock; the
 *					statement's freezing rule (for INSERT and COPY alike)
 *	  hint.c		  the /\*+ APPEND *\/ hint in the statement text
 *	  eligibility.c	  the rules: what keeps a statement or relation off
 *	load.c			the row loop: row checks, hold-then-go-direct, the one
 *					flush rule
 *	  leaf.c		  per relation written: checks, lock, strategy, writer
 *	  queue.c		  the after-insert queue: index entries, AFTER ROW
 *					  triggers, view checks, RETURNING, rejected duplicates
 *	  foreign.c		  rows for foreign partitions, batched
 *	  fkeys.c		  foreign keys checked per batch
 *	  rejects.c		  COPY's rejects table
 *	  indexes.c		  every index strategy and its choice
 *	  brin.c		  BRIN ranges summarized at the end of the load
 *	pages.c			the heap page builder: rows onto private pages
 *	btree.c			the btree page builder: sorted entries into a tree
 *	  btappend.c	  sorted entries at an existing btree's right edge
 *	  btmerge.c		  an existing btree rewritten with new entries merged in
 *	append.c		the append layer: crash-safe writes of built pages
 *	  wal.c			  WAL records for appended pages
 *	  visibility.c	  tuple headers, freezing, visibility-map bits
 *	report.c		last_statement(), EXPLAIN lines, fallback messages
 *	fault.c			named fault points for the crash tests
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECTPATH_H
#define DIRECTPATH_H

#include "compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

/* ---------- settings (directpath.c) ---------- */

/* directpath.mode */
typedef enum DPMode
{
	DP_MODE_OFF,
	DP_MODE_HINT,
	DP_MODE_ALWAYS,
} DPMode;

/* directpath.wal_format */
typedef enum DPWalFormat
{
	DP_WAL_IMAGE,
	DP_WAL_RECORDS,
} DPWalFormat;

extern int	dp_mode;
extern int	dp_fallback_level;
extern int	dp_min_bytes;
extern int	dp_batch_pages;
extern bool dp_index_rebuild;
extern bool dp_index_sort;
extern bool dp_index_append;
extern bool dp_index_runs;
extern bool dp_index_leaf_merge;
extern int	dp_parallel_workers;
extern bool dp_index_merge;
extern bool dp_brin_summarize;
extern bool dp_fkey_batches;
extern bool dp_index_spool;
extern int	dp_wal_format;

/* Each module's hooks, installed by _PG_init. */
extern void dp_plan_init(void);
extern void dp_exec_init(void);
extern void dp_copy_init(void);

/* ---------- fault.c ---------- */

/* Define the fault-injection settings. */
extern void dp_fault_init(void);

/* A statement begins: count fault-point hits from zero. */
extern void dp_fault_reset(void);

/* Pass the named point; may raise, sleep or notify (see fault.c). */
extern void dp_fault(const char *point);

/* ---------- report.c ---------- */

#define DP_REASON_LEN 256

/* What one INSERT or COPY did, as last_statement() and EXPLAIN say it. */
typedef struct DPReport
{
	bool		direct;			/* rows went to the direct path */
	char		reason[DP_REASON_LEN];	/* why not, or "" */
	uint64		rows;			/* rows inserted (the command tag's count) */
	uint64		pages;			/* heap pages written directly */
	bool		frozen;			/* some pages went out frozen */
	int			relations;		/* leaf relations written */
	int			indexes_rebuilt;	/* indexes built or rebuilt at the end */
	uint32		index_strategies;	/* bit (1 << DPIndexStrategy) per one used */
	char		foreign_keys[DP_REASON_LEN];	/* how they were checked, or
												 * "" */
	int			parallel_workers;	/* workers that built pages (parallel.c) */
	char		parallel[DP_REASON_LEN];	/* asked for parallel: why not,
											 * or "" */
} DPReport;

/* Empty report: normal path, no reason, nothing written. */
extern void dp_report_init(DPReport *r);

/*
 * The statement uses the normal path because of 'why': copy the reason into
 * the report and tell the user, at directpath.fallback_message_level with
 * 'notify' (a hinted statement refused for a reason other than its size),
 * else at DEBUG1.  'kind' is "INSERT" or "COPY".
 */
extern void dp_report_normal(DPReport *r, bool notify, const char *kind,
							 const char *why);

/*
 * The foreign keys of a direct load: 'batched' (names) checked per batch,
 * 'rowwise' (names and reasons) per row; either may be "".
 */
extern void dp_report_foreign_keys(DPReport *r, const char *batched,
								   const char *rowwise);

/* Make the report last_statement()'s (copied); returns its id. */
extern uint64 dp_report_publish(const DPReport *r);

/* Fill in the row count of the report published as 'id', if still last. */
extern void dp_report_rows(uint64 id, uint64 rows);

/* EXPLAIN's lines for the report; 'ran' when the load ran (ANALYZE). */
extern void dp_report_explain(const DPReport *r, bool ran, ExplainState *es);

/*
 * Planner: the statement at [location, location + len) of 'source' keeps
 * core's plan because of 'why'.  Executor start: publish that reason if
 * the statement's text was noted; returns the report id or 0.
 */
extern void dp_report_note_plan(const char *source, int location, int len,
								const char *why);
extern uint64 dp_report_plan_start(const char *source, int location, int len);

/* ---------- hint.c ---------- */

typedef enum DPHint
{
	DP_HINT_NONE,
	DP_HINT_APPEND,
	DP_HINT_NOAPPEND,
} DPHint;

/*
 * The hint of the statement at [location, location + len) of 'source';
 * '*parallel' (unless NULL) gets the workers asked for: PARALLEL(n), else
 * directpath.parallel_workers.
 */
extern DPHint dp_find_hint(const char *source, int location, int len,
						   int *parallel);

/* ---------- eligibility.c: the rules (reasons are static strings) ---------- */

/* Why rows cannot be appended to 'rel' (with its partitions: 'recurse'). */
extern const char *dp_relation_ineligible(Relation rel, bool recurse);

/* The same checks for a partition that tuple routing reached. */
extern const char *dp_partition_ineligible(Relation rel);

/* Why a planned INSERT cannot take the direct path, or NULL. */
extern const char *dp_statement_ineligible(Query *parse, PlannedStmt *stmt,
										   bool hinted);

/* May the statement's rows be frozen (nothing in it reads the target)? */
extern bool dp_statement_freeze_safe(Query *parse, PlannedStmt *stmt,
									 Oid target);

/* Upper bound of a VALUES INSERT's row bytes into 'rel', or -1 if unknown. */
extern int64 dp_values_max_bytes(Query *parse, Relation rel);

/* Is the INSERT a single row of VALUES? */
extern bool dp_query_is_single_row(Query *parse);

/* Why per-row expressions (COPY defaults, WHERE) keep a COPY off, or NULL. */
extern const char *dp_expr_ineligible(Node *expr);

/* Does the expression call a function that is not built in? */
extern bool dp_expr_has_user_function(Node *expr);

/* ---------- admission.c ---------- */

/* The decision for one statement. */
typedef struct DPAdmission
{
	bool		hinted;			/* the statement asked for the direct path */
	bool		direct;			/* admitted: ShareRowExclusiveLock on the
								 * target is held */
	const char *reason;			/* why not admitted, or NULL */
	bool		small;			/* not admitted only for its size */
	bool		freeze_allowed; /* the statement's freezing rule allows it */
	int			parallel;		/* COPY: parallel workers asked for, or 0 */
} DPAdmission;

/* How a COPY FROM goes. */
typedef enum DPAdmitCopy
{
	DP_COPY_NOT_WANTED,			/* no hint (or refused by it, or mode off) */
	DP_COPY_CORE,				/* core must run it (and raise its errors) */
	DP_COPY_NORMAL,				/* considered, refused: reason set */
	DP_COPY_DIRECT,				/* target locked and opened: *relp */
} DPAdmitCopy;

/* Post-parse analysis: take the early strong lock for a wanted INSERT. */
extern void dp_admit_parse(const char *source, Query *query);

/*
 * Before planning: is the INSERT wanted on the direct path?  *hinted set,
 * and *parallel to the parallel workers asked for (0: none).
 */
extern bool dp_admit_insert_wanted(Query *parse, const char *source,
								   bool *hinted, int *parallel);

/* After planning (plan top is a ModifyTable): the decision for the INSERT. */
extern void dp_admit_insert(Query *parse, PlannedStmt *stmt, bool hinted,
							DPAdmission *a);

/*
 * A COPY FROM: the hint, the privileges core checks first, the rules and
 * the lock.  DP_COPY_DIRECT returns the target opened (NoLock, the caller
 * closes it) in *relp; the caller then applies DoCopy's checks and asks
 * dp_admit_copy_exprs.
 */
extern DPAdmitCopy dp_admit_copy(CopyStmt *stmt, const char *source,
								 int location, int len, bool rejects,
								 DPAdmission *a, Relation *relp);

/* COPY's per-row expressions; true admits and sets the freezing rule. */
extern bool dp_admit_copy_exprs(Node *exprs, DPAdmission *a);

/*
 * COPY FREEZE's "no prior transaction activity" test; must run before the
 * executor registers the statement's snapshot.
 */
extern bool dp_admit_no_prior_activity(void);

/* ---------- exec.c ---------- */

/* The CustomScan methods of the DirectPath node, for plan.c to wrap with. */
extern const CustomScanMethods *dp_exec_plan_methods(void);

/* ---------- load.c and its parts ---------- */

/* COPY's input position, owned by copy.c; NULL for INSERT. */
typedef struct DPInputLine
{
	uint64	   *lineno;			/* current line number */
	bool	   *line_valid;		/* is raw_line the current line's text? */
	StringInfo	raw_line;		/* the current line's text */
} DPInputLine;

/*
 * Rows of logically logged relations whose TOAST chunks are in WAL while
 * the rows are not yet (append.c): shared by a statement's writers.
 */
typedef struct DPToastWait
{
	int			writers;		/* writers holding such rows */
	uint64		bytes;			/* their size before toasting, roughly */
} DPToastWait;

/* drain every writer's pages once this much waits (decoder memory) */
#define DP_TOAST_WAIT_MAX_BYTES (16 * 1024 * 1024)

typedef struct DPLoad DPLoad;
typedef struct DPQueue DPQueue;
typedef struct DPIndexes DPIndexes;
typedef struct DPForeign DPForeign;
typedef struct DPRejects DPRejects;
typedef struct DPHeapBuilder DPHeapBuilder;
typedef struct DPAppend DPAppend;
typedef struct DPBtreeBuild DPBtreeBuild;

/* One relation the load writes (leaf.c). */
typedef struct DPForeignKeys DPForeignKeys;

/* A row's first violated foreign key (an index into the leaf's), or -1. */
typedef struct DPFkeyViolation
{
	int			key;
	bool		mixed;			/* by MATCH FULL's mixed NULLs */
} DPFkeyViolation;


typedef struct DPLeaf
{
	ResultRelInfo *rri;			/* its result relation, indexes open */
	DPForeignKeys *fkeys;		/* its foreign keys checked per batch, or
								 * NULL */
	DPHeapBuilder *writer;		/* its page builder once direct, else NULL */
	DPForeign  *foreign;		/* a foreign partition's batch, else NULL */
	DPIndexes  *indexes;		/* its index strategy */
	TupleTableSlot *slot;		/* heap-tuple slot for deferred work */
	bool		needs_post;		/* anything to do after the heap insert? */
	int			full_pages;		/* writer's full pages last counted */
	struct DPLeaf *next;
} DPLeaf;

/* The leaves of a load and what they share (leaf.c). */
typedef struct DPLeafSet
{
	EState	   *estate;
	ModifyTableState *mtstate;
	bool		reject_duplicates;	/* COPY's rejects table takes them */
	bool		freeze_allowed; /* by the statement (admission.c) */
	TransactionId xid;			/* of the rows written */
	CommandId	cid;
	DPToastWait toast_wait;		/* shared by the leaves' writers */
	StringInfoData fk_batched;	/* foreign keys checked per batch */
	StringInfoData fk_rowwise;	/* those left per row, with why */
	DPLeaf	   *list;			/* every leaf, newest first */
	DPLeaf	   *last;			/* the leaf of the previous row */
	int			count;
} DPLeafSet;

/* A row held, or waiting for its page to be written (queue.c). */
typedef struct DPRow
{
	DPLeaf	   *leaf;
	HeapTuple	tuple;			/* t_self set once placed */
	uint64		lineno;			/* input line (COPY), for error context */
	char	   *raw;			/* input line text, kept only for rejects */
	DPFkeyViolation fk;			/* its foreign-key violation found per
								 * batch, key -1 if none */
} DPRow;

/*
 * load.c.  dp_load_begin: the caller owns estate and mtstate and fires
 * statement triggers; RETURNING rows go to 'retstore' (or NULL); 'input'
 * and 'rejects' are COPY's (or NULL).  dp_load_row: one row in the target's
 * format; false if it was rejected.  dp_load_end_rows: writes every row and
 * does their work (errors still name their row).  dp_load_finish: builds
 * the indexes of new storage, publishes the report.
 */
extern DPLoad *dp_load_begin(const char *kind, EState *estate,
							 ModifyTableState *mtstate, bool hinted,
							 bool freeze_allowed, Tuplestorestate *retstore,
							 DPInputLine *input, DPRejects *rejects);
extern bool dp_load_row(DPLoad *load, TupleTableSlot *slot);
extern void dp_load_end_rows(DPLoad *load);
extern void dp_load_finish(DPLoad *load);

/* The load's report (valid after dp_load_finish for EXPLAIN ANALYZE). */
extern const DPReport *dp_load_report(DPLoad *load);

/* Rows accepted by dp_load_row and later rejected as duplicates. */
extern uint64 dp_load_deleted(DPLoad *load);

/*
 * A parallel load's leader (parallel.c): dp_load_pages_begin makes the load
 * direct with 'rri' its leaf and returns whether its pages go out frozen;
 * dp_load_page takes a worker's finished page as the leaf's next block
 * (its rows counted, their index entries spooled or queued as a placed
 * row's are); dp_load_note_parallel records the workers used, or why none
 * were.
 */
extern bool dp_load_pages_begin(DPLoad *load, ResultRelInfo *rri);
extern void dp_load_page(DPLoad *load, ResultRelInfo *rri, const char *image);
extern void dp_load_note_parallel(DPLoad *load, int workers, const char *why);

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

/* leaf.c: the leaf of 'rri', set up (checked, locked) on first use. */
extern DPLeaf *dp_leaf_get(DPLeafSet *set, ResultRelInfo *rri);

/* Start the leaf's page builder; returns whether it freezes. */
extern bool dp_leaf_start_writer(DPLeafSet *set, DPLeaf *leaf);

/* Release every leaf's slot and foreign batch. */
extern void dp_leaf_end_all(DPLeafSet *set);

/*
 * queue.c.  The queue owns the rows added (their tuples must be allocated
 * in dp_queue_memory()) until they are processed or taken.
 */
extern DPQueue *dp_queue_create(EState *estate, ModifyTableState *mtstate,
								Tuplestorestate *retstore, DPInputLine *input,
								DPRejects *rejects);
extern MemoryContext dp_queue_memory(DPQueue *q);
extern int	dp_queue_length(DPQueue *q);
extern uint64 dp_queue_deleted(DPQueue *q);

/* The current line's text if a row of 'leaf' must keep it, else NULL. */
extern const char *dp_queue_line_text(DPQueue *q, DPLeaf *leaf);

/* Queue a row ('raw' is copied); its work runs at dp_queue_process. */
extern void dp_queue_add(DPQueue *q, DPLeaf *leaf, HeapTuple tup,
						 uint64 lineno, const char *raw);

/* The queued rows' after-insert work, in input order; empties the queue. */
extern void dp_queue_process(DPQueue *q, DPLeaf *leaves);

/* ExecInsert's work after the insert, for one row in 'slot', now. */
extern void dp_queue_post_row(DPQueue *q, DPLeaf *leaf, TupleTableSlot *slot);

/* Hand the held rows back (with their memory, the caller's to delete). */
extern DPRow *dp_queue_take(DPQueue *q, int *nrows, MemoryContext *cxt);

/* Insert the held rows on the normal path, then do their work. */
extern void dp_queue_insert_normal(DPQueue *q, CommandId cid);

/* ---------- foreign.c ---------- */

/* Begin batching rows for a foreign partition (routing began the insert). */
extern DPForeign *dp_foreign_begin(ResultRelInfo *rri, EState *estate);

/* Send or batch a row; returns how many rows the wrapper did not insert. */
extern uint64 dp_foreign_insert(DPLeaf *leaf, EState *estate,
								TupleTableSlot *slot, DPQueue *q);

/* Must the rows before a row of this leaf be done before it is sent? */
extern bool dp_foreign_needs_order(DPLeaf *leaf);

/* Send every foreign leaf's waiting rows; returns the rows not inserted. */
extern uint64 dp_foreign_flush_all(DPLeafSet *set, DPQueue *q);

/* Release the batch's slots (empty by now). */
extern void dp_foreign_end(DPForeign *f);

/* ---------- rejects.c ---------- */

/* Open the rejects table 'name' (checked) for a load into 'target'. */
extern DPRejects *dp_rejects_open(const char *name, int64 limit, Relation target);

/*
 * Record a rejected row ('raw' its line text or NULL; strings copied);
 * raises when more than the limit were rejected.
 */
extern void dp_rejects_add(DPRejects *r, uint64 lineno, const char *raw,
						   int sqlerrcode, const char *message,
						   const char *detail);

/* Rows rejected so far. */
extern uint64 dp_rejects_count(DPRejects *r);

/* Keep rejects in memory while *hold > 0 (TOAST barrier, append.c). */
extern void dp_rejects_hold_while(DPRejects *r, int *hold);

/* Write the rejects kept in memory. */
extern void dp_rejects_write_queued(DPRejects *r);

/* Rejects kept in memory; the load drains at DP_REJECTS_QUEUE_MAX. */
extern int	dp_rejects_queued(DPRejects *r);

#define DP_REJECTS_QUEUE_MAX 1000

/* May a row be rejected for an error of this SQLSTATE while reading? */
extern bool dp_rejects_error_ok(int sqlerrcode);

/*
 * NOT NULL, CHECK and partition constraints without raising: false and
 * core's SQLSTATE, message and detail (palloc'd) when one fails.
 */
extern bool dp_soft_constraints(ResultRelInfo *rri, TupleTableSlot *slot,
								EState *estate, int *sqlerrcode,
								char **message, char **detail);

/* INSERT's message and detail for a duplicate found by a partial check. */
extern void dp_describe_duplicate(ResultRelInfo *rri, List *conflicts,
								  TupleTableSlot *slot, EState *estate,
								  char **message, char **detail);

/* ---------- brin.c: BRIN ranges summarized at the end ---------- */

/* May index i of the leaf skip its per-row calls, summarized at the end? */
extern bool dp_brin_can_defer(ResultRelInfo *rri, int i);

/* Summarize every range from the one holding 'first_new' (see brin.c). */
extern void dp_brin_summarize_new(Relation heap, Relation idx,
								  BlockNumber first_new);

/* ---------- indexes.c ---------- */

typedef enum DPIndexStrategy
{
	DP_INDEX_NONE,				/* no index */
	DP_INDEX_ROW,				/* per batch, row by row */
	DP_INDEX_SORTED,			/* per batch, sorted by key per index */
	DP_INDEX_BUILD,				/* built at the end from sorted entries */
	DP_INDEX_REBUILD,			/* rebuilt once at the end (REINDEX) */
	DP_INDEX_APPEND,			/* reported only: a DP_INDEX_SORTED batch
								 * appended at an index's right edge */
	DP_INDEX_MERGE,				/* reported only: a DP_INDEX_SORTED index
								 * rewritten with its entries merged in */
	DP_INDEX_SUMMARIZE,			/* reported only: BRIN ranges summarized
								 * at the end (brin.c) */
	DP_INDEX_RUNS,				/* reported only: a DP_INDEX_SORTED batch
								 * written run by run into leaves */
	DP_INDEX_LEAF_MERGE,		/* reported only: a DP_INDEX_SORTED batch
								 * merged into a leaf's items */
} DPIndexStrategy;

/* Choose the leaf's strategy (its indexes are open). */
extern DPIndexes *dp_indexes_begin(ResultRelInfo *rri, bool reject_duplicates);
extern DPIndexStrategy dp_indexes_strategy(DPIndexes *ix);

/* The strategies used so far: bit (1 << DPIndexStrategy) per one. */
extern uint32 dp_indexes_used(DPIndexes *ix);
extern bool dp_indexes_has_unique(DPIndexes *ix);

/* From now on, entries row by row (rows go the normal path). */
extern void dp_indexes_row_by_row(DPIndexes *ix);

/*
 * DP_INDEX_ROW: one written row's entries; returns the recheck list.  With
 * 'conflict', a unique violation sets it instead of raising.
 */
extern List *dp_indexes_row(DPIndexes *ix, TupleTableSlot *slot,
							EState *estate, bool *conflict);

/*
 * DP_INDEX_SORTED: the entries of 'ntuples' written rows (t_self set, in
 * ascending TID order; 'linenos' their input lines or NULL), each index in
 * key order.  'slot' is a heap-tuple slot of the leaf's row type.
 */
extern void dp_indexes_batch(DPIndexes *ix, EState *estate,
							 TupleTableSlot *slot, HeapTuple *tuples,
							 uint64 *linenos, int ntuples, DPInputLine *input);

/*
 * DP_INDEX_BUILD: a placed row (values in 'slot', at 'tid') gives each
 * index its entry, sorted at the end.
 */
extern void dp_indexes_spool(DPIndexes *ix, EState *estate,
							 TupleTableSlot *slot, ItemPointer tid);

/* DP_INDEX_BUILD, _REBUILD: build every index; returns how many (else 0). */
extern int	dp_indexes_finish(DPIndexes *ix);

/* ---------- fkeys.c: foreign keys checked per batch ---------- */

/*
 * The leaf's foreign keys that can be checked per batch, or NULL; their
 * names go to 'batched', the others' with the reason to 'rowwise'.
 */
extern DPForeignKeys *dp_fkeys_begin(ResultRelInfo *rri, StringInfo batched,
									 StringInfo rowwise);

/*
 * Check the keys of 'ntuples' directly written rows (in input order, their
 * pages written): v[r] gets the first constraint (in trigger order) row r
 * violates; with 'all' false only the first violating row is sure to be
 * marked.  Returns the first violating row, or -1.
 */
extern int	dp_fkeys_check(DPForeignKeys *f, HeapTuple *tuples, int ntuples,
						   bool all, DPFkeyViolation *v);

/* Core's error for that violation of 'row', raised or as text. */
extern void dp_fkeys_report(DPForeignKeys *f, DPFkeyViolation v,
							HeapTuple row);
extern void dp_fkeys_describe(DPForeignKeys *f, DPFkeyViolation v,
							  HeapTuple row, char **message, char **detail);

/*
 * Give the leaf the trigger descriptor without the batched checks
 * ('rowwise'), or its own back.
 */
extern void dp_fkeys_swap(DPForeignKeys *f, bool rowwise);

/* ---------- btree.c: the btree page builder ---------- */

/*
 * Begin collecting 'index's entries, sorted in 'workmem' kB; with
 * 'check_unique', the sort raises a unique index's duplicates.
 */
extern DPBtreeBuild *dp_btree_begin(Relation heap, Relation index,
									int workmem, bool check_unique);

/* One entry (copied into the sort). */
extern void dp_btree_add(DPBtreeBuild *b, ItemPointer tid, Datum *values,
						 bool *isnull);

/*
 * The entries in btree order: dp_btree_peek reads the next one ahead (NULL
 * when there is none) and dp_btree_next returns it, then the rest.  An
 * entry either returns lives in the sort and is valid until a later call
 * reads past it (copy it to keep it).
 */
extern IndexTuple dp_btree_peek(DPBtreeBuild *b);
extern IndexTuple dp_btree_next(DPBtreeBuild *b);

/* How many entries were added. */
extern double dp_btree_count(DPBtreeBuild *b);

/*
 * Build the index (storage new in this transaction, empty or only its
 * metapage so far) from the entries: the tree, then the metapage;
 * releases the build.  dp_btree_build takes the sorted stream from 'next'
 * (NULL at its end) instead.
 */
extern void dp_btree_finish(DPBtreeBuild *b);
typedef IndexTuple (*DPBtStream) (void *arg);
extern void dp_btree_build(DPBtreeBuild *b, DPBtStream next, void *arg);

/* Release a build (finished or not); an unfinished index stays as it was. */
extern void dp_btree_discard(DPBtreeBuild *b);

/*
 * The leaf level alone, for the right-edge append (btappend.c): the sink
 * gives each page started its memory and block, and takes each finished
 * page (high key, right link set) in order.
 */
typedef struct DPBtSink
{
	Page		(*new_page) (void *arg, BlockNumber *blkno);
	void		(*page_done) (void *arg, Page page, BlockNumber blkno);
	void	   *arg;
} DPBtSink;

/* 'hikey_room': bytes every leaf keeps free for a high key set later. */
extern void dp_btree_leaves_begin(DPBtreeBuild *b, const DPBtSink *sink,
								  Size hikey_room);

/* An existing leaf item, as it is (posting lists included). */
extern void dp_btree_put_item(DPBtreeBuild *b, IndexTuple itup);

/* A new entry, merged with equal keys where the index deduplicates. */
extern void dp_btree_put_entry(DPBtreeBuild *b, IndexTuple itup);

/*
 * No more items: the last pending posting list goes onto the page still
 * filling, which stays unfinished (the sink's owner knows it).
 */
extern void dp_btree_leaves_end(DPBtreeBuild *b);

/* A filling page made rightmost, in place: no high key slot. */
extern void dp_btree_rightmost_image(Page page);

/* A filling page given 'hikey' as its high key, in place. */
extern void dp_btree_high_key_image(Page page, IndexTuple hikey);

/*
 * Compare leaf tuples as the btree orders them: key columns (opclass order,
 * collation, DESC, NULLS FIRST), then heap TID unless 'keys_only'.  'b' may
 * be a pivot: its truncated columns and missing heap TID are minus
 * infinity, as for _bt_compare.
 */
extern int	dp_btree_compare(Relation index, IndexTuple a, IndexTuple b,
							 bool keys_only);

/* ---------- btappend.c: sorted entries at an existing btree's right edge ---------- */

/*
 * Called back with the heap TID of the entry about to be reported as a
 * duplicate (so COPY's context can name its line).
 */
typedef void (*DPNameRow) (void *arg, ItemPointer tid);

/*
 * Append b's entries (sorted, their rows' pages on disk) at the right edge
 * of the existing btree b->index, when the first sorts after every entry
 * of the index; returns false, with nothing written and the entries still
 * to be read (dp_btree_next), when it does not.  A unique index's
 * duplicate among the entries raises INSERT's error.
 */
extern bool dp_btree_append(DPBtreeBuild *b, DPNameRow name, void *arg);

/* Insert one entry the core way (index_insert), for dp_btree_insert_runs. */
typedef void (*DPBtInsert) (void *arg, IndexTuple itup);

/*
 * Write b's entries (sorted, their rows' pages on disk) into the existing
 * btree b->index run by run: a run of entries after the last item of one
 * leaf and below its high key becomes new leaf pages there, or entries
 * among a leaf's items are merged with them into the leaf and new pages
 * after it (a leaf merge, counted in '*merges'; the heap pages it reads
 * go through 'ring'); entries that start
 * neither go to 'insert'.  A unique index's duplicate within a run raises
 * INSERT's error.  Returns how many runs (leaf merges included) were
 * written.
 */
extern int	dp_btree_insert_runs(DPBtreeBuild *b, DPNameRow name, void *arg,
								 DPBtInsert insert, void *iarg,
								 BufferAccessStrategy ring, int *merges);

/* ---------- btmerge.c: an existing btree rewritten with new entries ---------- */

/*
 * Rewrite b->index (non-unique) into new storage, its entries merged with
 * b's, under AccessExclusiveLock; releases the build.
 */
extern void dp_btree_merge(DPBtreeBuild *b);

/* The index b builds or appends to. */
extern Relation dp_btree_index(DPBtreeBuild *b);
extern Relation dp_btree_heap(DPBtreeBuild *b);

/* ---------- pages.c: the heap page builder ---------- */

/*
 * Begin building pages for 'rel' (caller holds ShareRowExclusiveLock);
 * tuple headers get xid/cid, frozen with 'freeze'.
 */
extern DPHeapBuilder *dp_heap_begin(Relation rel, bool freeze,
									TransactionId xid, CommandId cid,
									DPToastWait *toast_wait);

/* Place the slot's row; *tid gets its place; 'copy' a palloc'd copy. */
extern void dp_heap_add_slot(DPHeapBuilder *b, TupleTableSlot *slot,
							 ItemPointer tid, HeapTuple *copy);

/* Place a formed tuple (t_self and *tid set); toasts it as needed. */
extern void dp_heap_add(DPHeapBuilder *b, HeapTuple tup, ItemPointer tid);

/*
 * A parallel worker's builder: no append layer, its pages taken whole by
 * dp_heap_take_page (the first full one, or with 'include_partial' the
 * last too; NULL when none; the caller owns it), block numbers unknown.
 * It takes only rows formed in place (dp_heap_add_slot_in_place: false
 * when the row needs TOAST or has external values, which a worker cannot
 * store).
 */
extern DPHeapBuilder *dp_heap_begin_detached(Relation rel, bool freeze,
											 TransactionId xid, CommandId cid);
extern bool dp_heap_add_slot_in_place(DPHeapBuilder *b, TupleTableSlot *slot);
extern Page dp_heap_take_page(DPHeapBuilder *b, bool include_partial);

/*
 * A page built by a worker's builder (same freezing, same transaction):
 * placed as the next block, each tuple's t_ctid set to its place.
 * Returns its tuples; *placed and *blkno get the builder's copy (valid
 * until the next flush) and its block number.
 */
extern int	dp_heap_add_page(DPHeapBuilder *b, const char *image, Page *placed,
							 BlockNumber *blkno);

/* Full pages built and not yet written (the last may still fill). */
extern int	dp_heap_full_pages(DPHeapBuilder *b);

/* Write the full pages, or all with 'include_partial' (then readable). */
extern void dp_heap_flush(DPHeapBuilder *b, bool include_partial);

/* Write everything, set VM and FSM, count; returns the pages written. */
extern uint64 dp_heap_finish(DPHeapBuilder *b);

/* ---------- append.c: crash-safe appends of built pages ---------- */

/*
 * Begin appending to 'rel''s main fork at its current size.  'heap_records'
 * allows heap multi-insert records as WAL (else images); 'toast_wait' is
 * the statement's TOAST barrier (heap only, else NULL).
 */
extern DPAppend *dp_append_begin(Relation rel, bool heap_records,
								 DPToastWait *toast_wait);
extern BlockNumber dp_append_first_block(DPAppend *a);

/* A page buffer to build into; hand it back through dp_append_write. */
extern Page dp_append_page(DPAppend *a);

/*
 * Append n pages as the next blocks; the pages become the append layer's.
 * With 'drain' everything is written when this returns; without, the
 * batch may wait in the pipeline until the next call.
 */
extern void dp_append_write(DPAppend *a, Page *pages, int n, bool drain);

/* A row on block 'blkno' has TOAST chunks in WAL already. */
extern void dp_append_toast_row(DPAppend *a, BlockNumber blkno, Size bytes);

/* Drain and release. */
extern void dp_append_finish(DPAppend *a);

/* ---------- wal.c ---------- */

/*
 * Log pages for blocks [first, first + npages); sets each page's LSN and
 * returns the end of the WAL.  'images' forces full-page images.
 */
extern XLogRecPtr dp_wal_log_pages(Relation rel, BlockNumber first,
								   int npages, Page *pages, bool images,
								   bool toast_pending);

/* ---------- visibility.c ---------- */

/* Storage created or truncated in the current subtransaction / the xact? */
extern bool dp_storage_new_in_subxact(Relation rel);
extern bool dp_storage_new_in_xact(Relation rel);

/* An empty heap page; PD_ALL_VISIBLE when 'frozen'. */
extern void dp_page_init(Page page, bool frozen);

/* Set a new row's header as heap_insert would (frozen: xmin frozen). */
extern void dp_tuple_prepare(HeapTuple tup, Oid relid, TransactionId xid,
							 CommandId cid, bool frozen);

/* Mark heap blocks [start, end) all-visible and all-frozen in the VM. */
extern void dp_vm_set_frozen(Relation rel, BlockNumber start, BlockNumber end);

#endif							/* DIRECTPATH_H */
