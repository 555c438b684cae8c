/*-------------------------------------------------------------------------
 *
 * load/load.h
 *	  The load stage: the row loop (load.c) and its parts - the relations
 *	  written (leaf.c), the after-insert queue (queue.c), foreign partitions
 *	  (foreign.c), foreign keys per batch (fkeys.c), COPY's rejects
 *	  (rejects.c), ON CONFLICT's decisions (conflict.c) and the rows left
 *	  to core's executor after the load (upsert.c: DO UPDATE's, MERGE's).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_LOAD_H
#define DP_LOAD_H

#include "admission/admission.h"
#include "index/index.h"

/* ---------- load.c and its parts ---------- */

/*
 * A ModifyTableState without a plan for an INSERT into 'rri' (range table
 * entry 1 of 'estate'), as core's CopyFrom builds one: what a load needs
 * of the node (result relations, canSetTag) when no INSERT plan exists.
 */
static inline ModifyTableState *
dp_insert_state(EState *estate, ResultRelInfo *rri)
{
	ModifyTableState *mt = makeNode(ModifyTableState);

	mt->ps.plan = NULL;
	mt->ps.state = estate;
	mt->operation = CMD_INSERT;
	mt->canSetTag = true;
	mt->mt_nrels = 1;
	mt->resultRelInfo = rri;
	mt->rootResultRelInfo = rri;
	return mt;
}


typedef struct DPLoad DPLoad;
typedef struct DPQueue DPQueue;
typedef struct DPForeign DPForeign;
typedef struct DPRejects DPRejects;
typedef struct DPConflicts DPConflicts;

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
	DPConflicts *conflicts;		/* ON CONFLICT DO NOTHING's arbiters, or
								 * NULL */
	TupleTableSlot *slot;		/* heap-tuple slot for deferred work */
	bool		needs_post;		/* anything to do after the heap insert? */
	int			full_pages;		/* writer's full pages last counted */
	struct DPSample *sample;	/* its rows sampled for statistics, or NULL */
	bool		appends;		/* its writer began on a non-empty relation */
	uint64		pages_written;	/* by its writer, once finished */
	bool		frozen;			/* its writer writes frozen pages */
	struct DPLeaf *next;
} DPLeaf;

/* The leaves of a load and what they share (leaf.c). */
typedef struct DPLeafSet
{
	EState	   *estate;
	ModifyTableState *mtstate;
	bool		reject_duplicates;	/* COPY's rejects table takes them */
	bool		on_conflict;	/* ON CONFLICT (conflict.c) */
	bool		do_update;		/* ... DO UPDATE (upsert.c) */
	bool		born;			/* the target is new in the statement */
	List	   *arbiters;		/* COPY's: the target's arbiter indexes,
								 * NIL for every unique index */
	bool		freeze_allowed; /* by the statement (admission.c) */
	TransactionId xid;			/* of the rows written */
	CommandId	cid;
	DPToastWait toast_wait;		/* shared by the leaves' writers */
	StringInfoData fk_batched;	/* foreign keys checked per batch */
	StringInfoData fk_rowwise;	/* those left per row, with why */
	StringInfoData foreign_paths;	/* each foreign partition: by COPY, or
									 * batched and why */
	int			streams;		/* foreign leaves whose rows are streamed */
	DPLeaf	   *list;			/* every leaf, newest first */
	DPLeaf	   *last;			/* the leaf of the previous row */
	struct dpleaves_hash *by_rri;	/* the leaves by ResultRelInfo (leaf.c) */
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
 * the indexes of new storage, runs ON CONFLICT DO UPDATE's updates,
 * publishes the report.
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

/*
 * Rows accepted by dp_load_row and later rejected as duplicates, or
 * skipped for a conflict (ON CONFLICT DO NOTHING, COPY's ON_CONFLICT).
 */
extern uint64 dp_load_deleted(DPLoad *load);

/*
 * COPY ... WITH (ON_CONFLICT 'nothing' | 'update'): rows whose key in one
 * of 'arbiters' (index OIDs of the target; NIL: every unique index) is
 * taken are skipped, as INSERT ... ON CONFLICT DO NOTHING skips them; or,
 * with 'update_sql' (one arbiter), kept and run after the load through
 * that statement, which reads them as the relation DP_UPSERT_ROWS
 * (upsert.c).  Before the first row.
 */
extern void dp_load_on_conflict(DPLoad *load, List *arbiters,
								const char *update_sql);

/*
 * The target was created by the statement itself (born.c: CREATE TABLE
 * AS, a materialized view): born.c judged it, a leaf's checks are skipped.
 * Before the first row.
 */
extern void dp_load_new_relation(DPLoad *load);

/*
 * The statistics gathered as the rows are written are another relation's,
 * of the same columns (REFRESH MATERIALIZED VIEW: the view's, whose new
 * heap the load fills).  Before the first row; 'rel' open until the end.
 */
extern void dp_load_statistics_of(DPLoad *load, Relation rel);

/*
 * A row of the ModifyTable's subplan that core's ModifyTable node
 * processes itself, after the load (MERGE's matched rows: exec.c).
 */
extern void dp_load_defer(DPLoad *load, TupleTableSlot *planSlot);

/*
 * A parallel load's leader (parallel.c): dp_load_pages_begin makes the load
 * direct; dp_load_freezes says whether a leaf's pages go out frozen (the
 * decision its writer makes when it starts); dp_load_route gives the leaf
 * (set up, its writer started) that routing sends a row of the target's
 * format to, without loading the row; dp_load_page takes a worker's
 * finished page as the leaf's next block (its rows counted, their index
 * entries spooled or queued as a placed row's are); dp_load_note_parallel
 * records the workers used, or why none were.
 */
extern void dp_load_pages_begin(DPLoad *load);
extern bool dp_load_freezes(DPLoad *load, Relation rel);
extern ResultRelInfo *dp_load_route(DPLoad *load, TupleTableSlot *slot);
extern void dp_load_page(DPLoad *load, ResultRelInfo *rri, const char *image);
extern void dp_load_note_parallel(DPLoad *load, int workers, const char *why);

/* ---------- leaf.c, queue.c ---------- */

/* The leaf of 'rri', set up (checked, locked) on first use. */
extern DPLeaf *dp_leaf_get(DPLeafSet *set, ResultRelInfo *rri);

/*
 * May the rows of 'rel' be frozen (the statement allows it, its storage is
 * new in this subtransaction)?  Its writer freezes if so and no row may be
 * taken back.
 */
extern bool dp_leaf_may_freeze(DPLeafSet *set, Relation rel);

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

/*
 * Begin a foreign partition's rows (routing began the wrapper's insert): a
 * COPY stream to a postgres_fdw server (remote/shard.c) where the statement
 * allows, else the wrapper's batches.  Says which in set->foreign_paths.
 */
extern DPForeign *dp_foreign_begin(DPLeaf *leaf, DPLeafSet *set);

/*
 * Send, stream or batch a row ('lineno': its input line, or 0); returns how
 * many rows the wrapper did not insert.
 */
extern uint64 dp_foreign_insert(DPLeaf *leaf, EState *estate,
								TupleTableSlot *slot, DPQueue *q,
								uint64 lineno);

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

/* ---------- conflict.c: ON CONFLICT DO NOTHING ---------- */

/*
 * Rows whose conflicts are decided together, at most; and at most
 * DP_CONFLICT_BATCH_PAGES batches' worth of their bytes (load.c).  Many
 * keys per decision make the probes dense (btprobe.c).
 */
#define DP_CONFLICT_BATCH 131072
#define DP_CONFLICT_BATCH_PAGES 4

/*
 * The leaf's arbiter indexes ('arbiters' their OIDs; NIL: every unique
 * index), checked with its indexes open.
 */
extern DPConflicts *dp_conflicts_begin(ResultRelInfo *rri, EState *estate,
									   List *arbiters, bool do_update);

/*
 * A checked row (in 'slot', the leaf's format) joins the batch, of at
 * most DP_CONFLICT_BATCH rows; then
 * dp_conflicts_probe looks the batch's keys up in the indexes;
 * dp_conflicts_decide, once per row in the order added (interleaved with
 * other leaves' in input order), says whether the row is inserted, skipped
 * or (DO UPDATE) kept for upsert.c; dp_conflicts_batch_done, after the inserted rows were given
 * to the load, ends the batch.
 */
extern void dp_conflicts_add(DPConflicts *c, TupleTableSlot *slot);
extern int	dp_conflicts_batch_rows(DPConflicts *c);
extern void dp_conflicts_probe(DPConflicts *c);
typedef enum DPDecision
{
	DP_ROW_INSERT,
	DP_ROW_SKIP,
	DP_ROW_UPDATE,				/* DO UPDATE: its key is in the table */
} DPDecision;

extern DPDecision dp_conflicts_decide(DPConflicts *c, ItemPointer found);
extern void dp_conflicts_batch_done(DPConflicts *c);

/* A heap-tuple slot of the leaf's row type, for a decided row. */
extern TupleTableSlot *dp_conflicts_slot(DPConflicts *c);

/* Every inserted row's entries are now in the leaf's indexes. */
extern void dp_conflicts_indexed(DPConflicts *c);

extern void dp_conflicts_end(DPConflicts *c);

/* ---------- upsert.c: rows core's executor takes after the load ---------- */

typedef struct DPUpsert DPUpsert;

/* The name under which a COPY's update statement reads its kept rows. */
#define DP_UPSERT_ROWS "directpath_copy_rows"

/*
 * dp_upsert_keep: a row (in 'slot', leaf 'rri''s format; or, 'rri' NULL,
 * a row of the ModifyTable's subplan) for core, kept in input order.
 * dp_upsert_run, once the load's page builders are finished and its index
 * work is done: the kept rows through the statement's ModifyTable node, as
 * a plain INSERT ... ON CONFLICT DO UPDATE runs them, RETURNING rows to
 * 'retstore'; or, for a COPY (no plan), through 'update_sql', which reads
 * them (in the target's format) as DP_UPSERT_ROWS.
 */
extern DPUpsert *dp_upsert_begin(EState *estate, ModifyTableState *mtstate,
								 Tuplestorestate *retstore,
								 const char *update_sql);
extern void dp_upsert_keep(DPUpsert *u, ResultRelInfo *rri,
						   TupleTableSlot *slot, ItemPointer found);
extern void dp_upsert_run(DPUpsert *u);
extern void dp_upsert_end(DPUpsert *u);

/* What the updates did ("" when there were none), for the report. */
extern void dp_upsert_describe(DPUpsert *u, char *buf, size_t len);

/* ---------- versions.c: DO UPDATE's updates in bulk ---------- */

typedef struct DPVersions DPVersions;

/*
 * Why the DO UPDATE of 'mt' (a plain table's INSERT ... ON CONFLICT DO
 * UPDATE) cannot have its updates made in bulk, or NULL.
 */
extern const char *dp_versions_refusal(ModifyTableState *mt);

/*
 * dp_versions_keep: a row (target's format) whose key met the row whose
 * index entry is 'found'.  dp_versions_run, once the load's pages are
 * written and its index work done: every kept row updated or locked in
 * bulk, or put into 'rest' for core's executor (returns how many).
 */
extern DPVersions *dp_versions_begin(EState *estate, ModifyTableState *mt);
extern void dp_versions_keep(DPVersions *v, TupleTableSlot *slot,
							 ItemPointer found);
extern uint64 dp_versions_run(DPVersions *v, Tuplestorestate *rest);
extern void dp_versions_describe(DPVersions *v, char *buf, size_t len);
extern void dp_versions_end(DPVersions *v);

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

#endif							/* DP_LOAD_H */
