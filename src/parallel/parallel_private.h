/*-------------------------------------------------------------------------
 *
 * parallel/parallel_private.h
 *	  The parallel stage's parts shared among its own files: the shared
 *	  state and leaf table every process of a parallel load sees, the
 *	  placer, the target's checks, the leader's course of the load and the
 *	  messages from its workers, the scans' input, the workers' entry
 *	  points.  What files outside src/parallel/ use is in parallel.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_PARALLEL_PRIVATE_H
#define DP_PARALLEL_PRIVATE_H

#include "parallel/parallel.h"

#include "access/parallel.h"
#include "utils/tuplestore.h"

/* ---------- what every process of a parallel load shares ---------- */

/*
 * A leaf of a partitioned target that a parallel load's rows may be routed
 * to: a plain heap whose rows a worker places on pages, frozen or not (the
 * leader's decision, dp_load_freezes); or, 'held', one whose rows need
 * what a worker cannot do (its triggers, foreign keys, stored generated
 * columns, a CHECK constraint that is not parallel safe): a worker only
 * routes them, and the leader loads them as a serial load would once the
 * workers are done.
 */
typedef struct DPParallelLeaf
{
	Oid			relid;
	bool		frozen;
	bool		held;
} DPParallelLeaf;

/* The leaf table's order (by relid), for qsort and bsearch. */
extern int	dp_parallel_leaf_cmp(const void *a, const void *b);

/* Arbiter indexes a parallel ON CONFLICT takes, at most. */
#define DP_PARALLEL_MAX_ARBITERS 8

/* What every worker needs to know, set by the leader before launch. */
typedef struct DPParallelShared
{
	Oid			target;
	TransactionId xid;			/* the leader's, on every tuple */
	CommandId	cid;
	bool		frozen;			/* a plain target's pages go out frozen */
	int			nleaves;		/* a partitioned target's leaves, sorted by
								 * relid (in their own chunk), else 0 */
	Size		in_queue_size;	/* COPY: bytes of each worker's input queue */
	Size		out_queue_size; /* bytes of each worker's queue to the leader */
	bool		in_order;		/* pages go to the load in the input's order
								 * (parorder.c): a COPY's chunks, a scan's
								 * block ranges */
	bool		toast_in_order; /* RETURNING: a row that needs TOAST goes on
								 * after the unfinished page before it, so
								 * that rows, not only pages, keep the
								 * input's order (placer.c) */
	uint32		range_blocks;	/* in-order scans: blocks of a range */
	pg_atomic_uint64 next_range;	/* in-order scans: the next range to
									 * claim, over every source in turn */
	pg_atomic_uint64 rows_excluded; /* COPY: rows its WHERE clause excluded,
									 * in every process */
	/* ON CONFLICT DO NOTHING or DO UPDATE (parconflict.c), with in_order: */
	bool		on_conflict;
	bool		do_update;		/* rows that meet the table's go to the
								 * leader, a key met twice is an error */
	int			narbiters;		/* the arbiters' OIDs (none: no unique index) */
	Oid			arbiters[DP_PARALLEL_MAX_ARBITERS];
	pg_atomic_uint64 indexed_gen;	/* the leader's index generation */
	pg_atomic_uint64 rows_skipped;	/* rows skipped as conflicts by every
									 * process's decisions */
} DPParallelShared;

/*
 * Keys of the shared memory table of contents: the leader puts them there
 * (parallel.c), a worker finds them (parmsg.c), dp_parallel_scan for the
 * inputs.
 */
#define DP_KEY_SHARED	UINT64CONST(0xD1E4C7A000000001)
#define DP_KEY_PAYLOAD	UINT64CONST(0xD1E4C7A000000003)
#define DP_KEY_OUT		UINT64CONST(0xD1E4C7A000000004)
#define DP_KEY_IN		UINT64CONST(0xD1E4C7A000000005)
#define DP_KEY_COUNTS	UINT64CONST(0xD1E4C7A000000006)
#define DP_KEY_LEAVES	UINT64CONST(0xD1E4C7A000000007)
/* ... and one per source table scanned: DP_KEY_SCAN + its index */
#define DP_KEY_SCAN		UINT64CONST(0xD1E4C7A000010000)

/* ---------- placer.c: rows placed on pages by leaf ---------- */

/*
 * Where a placer's output goes: a finished page of leaf 'leaf' (an index
 * into the leaf table; -1 for a plain target; true when the sink keeps the
 * palloc'd page, and frees it, rather than copy it); a row, in the target's
 * format, that needs TOAST; a row routed to a held leaf, in the target's
 * format; and, once per leaf before its first page, a row routed to it
 * (the leader routes it too, to know the leaf's result relation).
 */
typedef bool (*DPPageSink) (void *arg, int leaf, Page page);
typedef void (*DPRowSink) (void *arg, TupleTableSlot *row);
typedef void (*DPHeldSink) (void *arg, TupleTableSlot *row, uint64 lineno);
typedef void (*DPLeafSink) (void *arg, int leaf, TupleTableSlot *row);
typedef void (*DPKeysSink) (void *arg, const char *data, Size len);
typedef void (*DPKeepSink) (void *arg, ItemPointer found, TupleTableSlot *row);

typedef struct DPPlacerSinks
{
	DPPageSink	page;
	DPRowSink	toast_row;
	DPHeldSink	held_row;		/* with its COPY input line, or 0 */
	DPLeafSink	new_leaf;
	DPKeysSink	keys;			/* ON CONFLICT: the keys of the next page or
								 * row (parconflict.c) */
	DPKeepSink	keep;			/* DO UPDATE: a row that meets the table's
								 * row at 'found', for the leader's updates */
	void	   *arg;
} DPPlacerSinks;

/* At most this many leaves hold an unfinished page in one placer. */
#define DP_PLACER_OPEN_PAGES 128

typedef struct DPPlacedLeaf DPPlacedLeaf;
typedef struct DPPlaceConflicts DPPlaceConflicts;

/*
 * A placer (placer.c): rows in the target's format routed to their leaf
 * (a partitioned target, with core's tuple routing), checked (NOT NULL,
 * CHECK) and formed in place on that leaf's detached builder; each
 * finished page, and each row that needs TOAST, goes to the sinks.
 */
typedef struct DPPlacer
{
	EState	   *estate;
	ResultRelInfo *rri;			/* the target */
	ModifyTableState *mt;		/* a partitioned target's routing, or NULL */
	const DPParallelShared *sh;
	const DPParallelLeaf *leaves;	/* sh->nleaves of them */
	DPPlacedLeaf **placed;		/* per leaf (a plain target: one), or NULL */
	DPPlacedLeaf *last;			/* the previous row's */
	ResultRelInfo *foreign;		/* held foreign leaves' result relations
								 * (after the target's, in one array) */
	int			nforeign;
	const uint64 *lineno;		/* COPY: the input line of the row being
								 * placed (set by its parser), or NULL */
	int			open;			/* leaves holding an unfinished page */
	uint64		clock;			/* rows placed, to find the least recent */
	DPPlacerSinks sinks;
	DPPlaceConflicts *conflicts;	/* ON CONFLICT DO NOTHING, or NULL */
} DPPlacer;

/* 'leaves': the target's leaf table (sh->nleaves entries), or NULL. */
extern void dp_placer_begin(DPPlacer *pl, const DPParallelShared *sh,
							const DPParallelLeaf *leaves, Relation target,
							const DPPlacerSinks *sinks);
/* Place a row; true if a page was handed on. */
extern bool dp_placer_add(DPPlacer *pl, TupleTableSlot *row);
/*
 * ON CONFLICT DO NOTHING (parconflict.c): the placer decides its rows
 * ('live': the shared memory's state), those waiting when it hands on its
 * unfinished pages first.
 */
extern void dp_placer_conflicts(DPPlacer *pl, DPParallelShared *live);
/* Hand on a plain target's unfinished page (its rows decided first). */
extern void dp_placer_flush(DPPlacer *pl);
/* Hand on every unfinished page; free the placer. */
extern void dp_placer_end(DPPlacer *pl);

/* ---------- parconflict.c: ON CONFLICT in parallel, a process's side ---------- */

/*
 * A placer's side (its rows decided as they are placed; 'live' the shared
 * memory's state; 'form' places a decided row): dp_place_conflicts_add
 * takes a checked row (true if a page was handed on); _decide decides the
 * rows waiting; _page and _unplaced send the keys of the page, or of the
 * row needing TOAST, about to be handed on; _rest, after the last page
 * was handed on, sends the provisional rows left.
 */
typedef bool (*DPFormRow) (DPPlacer *pl, TupleTableSlot *row);
extern DPPlaceConflicts *dp_place_conflicts_begin(DPPlacer *pl,
												  DPParallelShared *live,
												  DPFormRow form);
extern bool dp_place_conflicts_add(DPPlaceConflicts *pc, TupleTableSlot *row);
extern bool dp_place_conflicts_decide(DPPlaceConflicts *pc);
extern void dp_place_conflicts_page(DPPlaceConflicts *pc, Page page);
extern void dp_place_conflicts_unplaced(DPPlaceConflicts *pc);
extern void dp_place_conflicts_rest(DPPlaceConflicts *pc);
extern void dp_place_conflicts_end(DPPlaceConflicts *pc);

/*
 * parkeys.c, the leader's side ('desc' the target's row type): _keys takes
 * a keys message (in order), true if a page or row follows; then _page
 * gives the page to load instead of 'image' ('buf', BLCKSZ bytes aligned,
 * when rows were taken off; NULL when none is left), or _row whether the
 * row goes to the load; after the load took it (at once when none
 * follows), _taken inserts the message's provisional rows still free and
 * dates its keys.  _end, before the shared memory goes, returns the rows
 * skipped: by the processes' decisions and by the leader.
 */
typedef struct DPTakeConflicts DPTakeConflicts;

extern DPTakeConflicts *dp_take_conflicts_begin(struct DPLoad *load,
												DPParallelShared *live,
												int nworkers, TupleDesc desc);
extern bool dp_take_conflicts_keys(DPTakeConflicts *tc, const char *data,
								   Size len);
extern const char *dp_take_conflicts_page(DPTakeConflicts *tc,
										  const char *image, char *buf);
extern bool dp_take_conflicts_row(DPTakeConflicts *tc);
extern void dp_take_conflicts_taken(DPTakeConflicts *tc);
extern uint64 dp_take_conflicts_end(DPTakeConflicts *tc);

/* ---------- parorder.c: a COPY's pages in the input's order ---------- */

/* A message kept until its chunk's turn: what the worker sent. */
typedef struct DPOrderMsg
{
	struct DPOrderMsg *next;
	char		kind;			/* parmsg.c's DP_MSG_PAGE or DP_MSG_ROW */
	int			leaf;
	Page		page;			/* the leader's own page, kept as it is, or
								 * NULL: the message is in 'data' */
	Size		len;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} DPOrderMsg;

typedef struct DPOrder DPOrder;

/*
 * The leader's order of a parallel COPY's or scan's pages.  dp_order_assign:
 * chunk 'seq' is worker 'worker''s (cut for it, or a block range it
 * claimed); dp_order_own: the leader parses chunk
 * 'seq'.  dp_order_admit: may a message of 'worker' (-1: the leader) go to
 * the load now?  If not, it was copied and kept.  dp_order_done: the last
 * message of chunk 'seq' came.  dp_order_release: the next kept message
 * that may go to the load now (palloc'd; the caller frees it), else NULL.
 * dp_order_full: too much is kept: receive only from the head chunk's
 * worker (dp_order_head_worker; -1 when no worker is known to have it,
 * then from every worker), parse nothing.
 */
extern DPOrder *dp_order_begin(int nworkers);
extern void dp_order_assign(DPOrder *o, int worker, uint64 seq);
extern void dp_order_own(DPOrder *o, uint64 seq);
extern bool dp_order_admit(DPOrder *o, int worker, char kind, int leaf,
						   const char *data, Size len);
/* The same for a page of the leader's, kept (not copied) when not now. */
extern bool dp_order_admit_own_page(DPOrder *o, char kind, int leaf,
									 Page page);
extern void dp_order_done(DPOrder *o, int worker, uint64 seq);
extern DPOrderMsg *dp_order_release(DPOrder *o);
extern bool dp_order_full(DPOrder *o);
extern int	dp_order_head_worker(DPOrder *o);
extern void dp_order_end(DPOrder *o);

/* ---------- parallel.c: the leader's course of a parallel load ---------- */

/*
 * The machinery every input uses (parscan.c, parplan.c, parcopy.c).
 *
 * dp_parallel_begin: can the load's target take a parallel load (the rules
 * every input shares)?  If not, NULL and the reason in *why, nothing done;
 * else the leader's state, with a partitioned target's leaves listed and
 * checked (locked AccessShare, as the planner locks a read).  With
 * 'may_hold', a leaf whose rows need what a worker cannot do is held (its
 * rows loaded by the leader after the workers) rather than refused, as
 * long as one leaf is not.
 *
 * dp_parallel_launch: make the load direct, decide each leaf's freezing,
 * launch the workers (each runs the function named 'entry') with the
 * shared state, a text payload, a parallel scan of each relation of
 * 'sources' and input queues of 'in_queue_size' bytes (if not 0); enter parallel
 * mode.  Returns the workers launched.
 *
 * dp_parallel_receive: receive their pages into the load until every
 * worker has detached, 'share' feeding them input (if 'feed' is not NULL:
 * true when it moved anything) and doing one step of the leader's own
 * share whenever nothing moved ('step': false once it is done).  A
 * worker's input queue ends when the leader says dp_parallel_input_done.
 * dp_parallel_finish waits for them and leaves parallel mode; then
 * dp_parallel_load_held loads the rows of held leaves into the load, as a
 * serial load does, each after 'line' (if not NULL) was told its COPY
 * input line; dp_parallel_note says what was held, or NULL.
 */
typedef struct DPParallel DPParallel;

/* The leader's side of a running parallel load. */
struct DPParallel
{
	struct DPLoad *load;
	ResultRelInfo *rri;			/* the target */
	DPParallelShared sh;
	DPParallelLeaf *leaves;		/* a partitioned target's (sh.nleaves) */
	ResultRelInfo **leaf_rri;	/* per leaf: the load's result relation,
								 * once announced */
	TupleTableSlot *row;		/* a row from a worker, the target's format */
	Tuplestorestate *held;		/* rows of held leaves, or NULL if none */
	Tuplestorestate *held_lines;	/* their COPY input lines, in order */
	TupleDesc	line_desc;		/* (an int8) */
	char	   *held_note;		/* which leaves are held and why */
	ParallelContext *pcxt;
	int			launched;		/* workers started */
	shm_mq_handle **out;		/* per worker: its pages; NULL once detached */
	shm_mq_handle **in;			/* per worker: its input (COPY), or NULL */
	ErrorContextCallback *outer_context;	/* the receive loop's (load_page) */
	DPOrder    *order;			/* with sh.in_order, else NULL */
	DPTakeConflicts *conflicts; /* ON CONFLICT DO NOTHING, else NULL */
	const struct DPLeaderShare *share;	/* the receive loop's, or NULL */
};

/*
 * The input's part in the leader's receive loop: feed the workers (COPY's
 * chunks; NULL for none), take a share of the input itself (false once it
 * has none left), and, when not NULL, be told after each page that went
 * into the load (COPY's progress row counts its rows).
 */
typedef struct DPLeaderShare
{
	bool		(*feed) (void *arg, DPParallel *par);
	bool		(*step) (void *arg);
	void	   *arg;
	void		(*loaded) (void *arg);
} DPLeaderShare;

extern DPParallel *dp_parallel_begin(struct DPLoad *load,
									 ModifyTableState *mt, bool may_hold,
									 const char **why);
extern int	dp_parallel_launch(DPParallel *par, const char *entry,
							   const char *payload, List *sources,
							   Size in_queue_size, int nworkers);
extern int	dp_parallel_workers_launched(DPParallel *par);
extern shm_mq_handle *dp_parallel_input(DPParallel *par, int worker);
extern void dp_parallel_input_done(DPParallel *par, int worker);
/* The shared memory's contents, and the parallel scan of sources[i]. */
extern shm_toc *dp_parallel_toc(DPParallel *par);
extern ParallelTableScanDesc dp_parallel_scan(shm_toc *toc, int i);
extern void dp_parallel_receive(DPParallel *par, const DPLeaderShare *share);
extern void dp_parallel_finish(DPParallel *par);
typedef void (*DPHeldLine) (void *arg, uint64 lineno);
extern void dp_parallel_load_held(DPParallel *par, DPHeldLine line, void *arg);
extern const char *dp_parallel_note(DPParallel *par);

/*
 * The end of a parallel INSERT ... SELECT (either input): the workers
 * waited for, the held rows loaded, 'sources' closed, the report noted;
 * false when no worker could be started (nothing was loaded: the
 * statement goes on serially).
 */
extern bool dp_parallel_end_insert(DPParallel *par, List *sources);

/* ---------- parcheck.c: which targets a parallel load takes ---------- */

/*
 * parconflict.c, before launch: a load with ON CONFLICT DO NOTHING set up
 * in the shared state; why its statement cannot go in parallel, or NULL
 * (also for a load without ON CONFLICT).
 */
extern const char *dp_parallel_conflicts_setup(DPParallel *par);

/*
 * Why the target of 'mt' cannot take a parallel load, or NULL; a
 * partitioned target's leaf table listed into 'par' (dp_parallel_begin).
 */
extern const char *dp_parallel_target_refusal(DPParallel *par,
											  ModifyTableState *mt,
											  bool may_hold);

/* ---------- parmsg.c: the messages from the workers to the leader ---------- */

/*
 * A worker's side: dp_worker_begin attaches its queues (towards the leader
 * and, for COPY, from it) and opens the target under the leader's lock; a
 * worker's placer sends its pages and TOAST rows to the leader.
 */
typedef struct DPWorker
{
	shm_toc    *toc;
	DPParallelShared *sh;
	DPParallelLeaf *leaves;		/* a partitioned target's, or NULL */
	char	   *payload;
	Relation	target;
	shm_mq_handle *out;			/* pages and rows to the leader */
	shm_mq_handle *in;			/* COPY: chunks from the leader, or NULL */
} DPWorker;

extern void dp_worker_begin(DPWorker *w, dsm_segment *seg, shm_toc *toc);
extern void dp_placer_begin_worker(DPPlacer *pl, DPWorker *w);
/*
 * In order: the worker takes chunk 'seq' (a scan's block range it claimed;
 * a COPY's chunks are assigned by the leader as it cuts them); every page
 * of chunk 'seq' was sent.
 */
extern void dp_worker_chunk_claimed(DPWorker *w, uint64 seq);
extern void dp_worker_chunk_done(DPWorker *w, uint64 seq);
extern void dp_worker_end(DPWorker *w);

/* The leader's own placer: its pages and rows go straight to the load. */
extern void dp_placer_begin_leader(DPPlacer *pl, DPParallel *par);

/*
 * In order: the leader has parsed (scanned) its own chunk 'seq' and handed
 * on its pages; what may now go to the load goes.
 */
extern void dp_parallel_own_chunk_done(DPParallel *par, uint64 seq);

/*
 * Take every message waiting in the workers' queues into the load; false
 * if there was none.  A queue whose worker has detached is dropped and
 * counted off '*open'.
 */
extern bool dp_parallel_take_messages(DPParallel *par, int *open);

/* ---------- parscan.c: INSERT ... SELECT from shared scans ---------- */

/*
 * INSERT ... SELECT (or a born table's query) whose SELECT is scans of one
 * table or of a partitioned table's partitions (or nothing the plan path
 * takes: NULL, an Append pruned at run time): is 'sub' such a plan?  Plan
 * time: why its scans cannot be shared among workers, or NULL ('natts':
 * the target's columns).  Run time: dp_parallel_select for such a plan.
 */
extern bool dp_parallel_scans(Plan *sub);
extern const char *dp_parallel_scans_refusal(PlannedStmt *stmt, Plan *sub,
											 int natts);
extern bool dp_parallel_scans_insert(struct DPLoad *load, EState *estate,
									 Plan *sub, ModifyTableState *mtstate,
									 int nworkers);

/* One output column per attribute of a target of 'natts' columns? */
extern bool dp_parallel_target_row(List *tlist, int natts);

/* ---------- the inputs' workers ---------- */

/*
 * Workers' entry points (by name, from core's parallel machinery): the
 * scans' (parscan.c), a plan's (parplan.c), COPY's (parcopy.c).
 */
extern PGDLLEXPORT void dp_parallel_main(dsm_segment *seg, shm_toc *toc);
extern PGDLLEXPORT void dp_parplan_main(dsm_segment *seg, shm_toc *toc);
extern PGDLLEXPORT void dp_parcopy_main(dsm_segment *seg, shm_toc *toc);

#endif							/* DP_PARALLEL_PRIVATE_H */
