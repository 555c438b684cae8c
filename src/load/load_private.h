/*-------------------------------------------------------------------------
 *
 * load/load_private.h
 *	  What the parts of the load share among themselves: the relations a
 *	  load writes (leaf.c) and its rows (queue.c), the interfaces of its
 *	  parts (foreign.c, rejects.c, conflict.c, upsert.c, versions.c,
 *	  fkeys.c: its room's own in fkeys_private.h), a load's state (struct
 *	  DPLoad) and the steps the row loop (load.c) takes through place.c,
 *	  decide.c and finish.c.  Files outside src/load/ use load/load.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_LOAD_PRIVATE_H
#define DP_LOAD_PRIVATE_H

#include "load/load.h"

#include "heap/heap.h"			/* DPToastWait, dp_heap_full_pages */
#include "common/progress.h"
#include "common/report.h"

struct DPIndexes;				/* index/index.h */
struct DPSampleGroup;			/* stats/stats.h */
struct SPITupleTable;			/* executor/spi.h */

typedef struct DPQueue DPQueue;
typedef struct DPForeign DPForeign;
typedef struct DPForeignKeys DPForeignKeys;

/* A row's first violated foreign key (an index into the leaf's), or -1. */
typedef struct DPFkeyViolation
{
	int			key;
	bool		mixed;			/* by MATCH FULL's mixed NULLs */
} DPFkeyViolation;

/* One relation the load writes (leaf.c). */
typedef struct DPLeaf
{
	ResultRelInfo *rri;			/* its result relation, indexes open */
	DPForeignKeys *fkeys;		/* its foreign keys checked per batch, or
								 * NULL */
	DPHeapBuilder *writer;		/* its page builder once direct, else NULL */
	DPForeign  *foreign;		/* a foreign partition's batch, else NULL */
	struct DPIndexes *indexes;	/* its index strategy */
	DPConflicts *conflicts;		/* ON CONFLICT DO NOTHING's arbiters, or
								 * NULL */
	TupleTableSlot *slot;		/* heap-tuple slot for deferred work */
	bool		needs_post;		/* anything to do after the heap insert? */
	bool		post_is_fkeys;	/* ... only the batched foreign keys' check */
	bool		fkeys_at_place; /* ... which takes the keys as rows are
								 * placed (dp_fkeys_at_place), queueing none */
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
	bool		beside;			/* other sessions write the target too: it
								 * is held RowExclusive (dp_load_beside) */
	List	   *arbiters;		/* COPY's: the target's arbiter indexes,
								 * NIL for every unique index */
	bool		decided;		/* ON CONFLICT's rows come decided (a
								 * parallel load's): no leaf decides */
	bool		freeze_allowed; /* by the statement (admission.c) */
	TransactionId xid;			/* of the rows written */
	CommandId	cid;
	DPToastWait toast_wait;		/* shared by the leaves' writers */
	StringInfoData fk_batched;	/* foreign keys checked per batch */
	StringInfoData fk_rowwise;	/* those left per row, with why */
	StringInfoData fk_sets;		/* those checked as a set at the end */
	StringInfoData foreign_paths;	/* each foreign partition: by COPY, or
									 * batched and why */
	int			streams;		/* foreign leaves whose rows are streamed */
	DPLeaf	   *list;			/* every leaf, newest first */
	DPLeaf	   *last;			/* the leaf of the previous row */
	struct dpleaves_hash *by_rri;	/* the leaves by ResultRelInfo (leaf.c) */
	int			count;
} DPLeafSet;

/*
 * The arbiter indexes of 'rri' (the target or a leaf), as OIDs (NIL:
 * every unique index): an INSERT's are core's, mapped to a leaf by
 * routing; a COPY's, its option's.
 */
static inline List *
dp_leaf_arbiters(DPLeafSet *set, ResultRelInfo *rri)
{
	return set->mtstate->ps.plan ? rri->ri_onConflictArbiterIndexes :
		set->arbiters;
}

/* A row held, or waiting for its page to be written (queue.c). */
typedef struct DPRow
{
	DPLeaf	   *leaf;
	HeapTuple	tuple;			/* t_self set once placed */
	uint64		lineno;			/* input line (COPY), for error context */
	char	   *raw;			/* input line text, kept only for rejects */
	DPFkeyViolation fk;			/* its foreign-key violation found per
								 * batch, key -1 if none */
	uint64		ordinal;		/* its place in the load's input order */
} DPRow;

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
								uint64 *error_line, DPRejects *rejects);
extern MemoryContext dp_queue_memory(DPQueue *q);
extern int	dp_queue_length(DPQueue *q);
extern uint64 dp_queue_deleted(DPQueue *q);

/* The current line's text if a row of 'leaf' must keep it, else NULL. */
extern const char *dp_queue_line_text(DPQueue *q, DPLeaf *leaf);

/*
 * Queue a row ('raw' is copied); its work runs at dp_queue_process.  Each
 * row queued takes the next ordinal (its place in the load's input order);
 * a row placed without being queued takes its own by dp_queue_next_ordinal.
 */
extern void dp_queue_add(DPQueue *q, DPLeaf *leaf, HeapTuple tup,
						 uint64 lineno, const char *raw);
extern uint64 dp_queue_next_ordinal(DPQueue *q);

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

/* ---------- rejects.c: what the load's parts use ---------- */

/* Keep rejects in memory while *hold > 0 (TOAST barrier, append.c). */
extern void dp_rejects_hold_while(DPRejects *r, int *hold);

/* Write the rejects kept in memory. */
extern void dp_rejects_write_queued(DPRejects *r);

/* Rejects kept in memory; the load drains at DP_REJECTS_QUEUE_MAX. */
extern int	dp_rejects_queued(DPRejects *r);

#define DP_REJECTS_QUEUE_MAX 1000

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

/* ---------- keyimage.c: the bytes conflict decisions compare ---------- */

/*
 * The image of an index key's values ('values'/'isnull', one per key
 * column of 'index'), formed in 'buf' (the image points there) and hashed.
 */
extern DPKeyImage dp_key_image(StringInfo buf, Relation index, Datum *values,
							   bool *isnull);

/* ---------- upsert.c: rows core's executor takes after the load ---------- */

typedef struct DPUpsert DPUpsert;

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

/*
 * Why the kept rows cannot be changed in bulk (versions.c), or NULL; the
 * pages the bulk changes wrote.
 */
extern const char *dp_upsert_refusal(DPUpsert *u);
extern uint64 dp_upsert_pages(DPUpsert *u);

/* ---------- versions.c: updates and deletes in bulk ---------- */

/* A TID as one int8, in TID order, and back. */
static inline int64
dp_pack_tid(ItemPointer tid)
{
	return ((int64) ItemPointerGetBlockNumber(tid) << 16) |
		ItemPointerGetOffsetNumber(tid);
}

static inline void
dp_unpack_tid(int64 packed, ItemPointer tid)
{
	ItemPointerSet(tid, (BlockNumber) (packed >> 16),
				   (OffsetNumber) (packed & 0xFFFF));
}

typedef struct DPVersions DPVersions;

/*
 * bulkrules.c: why the changes of 'mt' (INSERT ... ON CONFLICT DO UPDATE,
 * MERGE, UPDATE or DELETE, of a plain table or of every leaf of a
 * partitioned table or an inheritance tree) cannot be made in bulk, or
 * NULL.  Where dp_versions_leaves_late (an upsert of a partitioned table,
 * a MERGE of several leaves), the statement is judged here and each leaf,
 * at its first kept row, by dp_versions_leaf_refusal.
 * dp_versions_may_stream: may 'subplan' give the rows of the result
 * relation 'target' in TID order?
 */
extern const char *dp_versions_refusal(ModifyTableState *mt);
extern bool dp_versions_leaves_late(ModifyTableState *mt);
extern const char *dp_versions_leaf_refusal(ModifyTableState *mt,
											ResultRelInfo *rri);
extern bool dp_versions_may_stream(PlanState *subplan, Relation target);

/*
 * dp_versions_begin: the changes of the result relation 'rri' of 'mt' (the
 * target, or one leaf of an UPDATE's or a DELETE's partitioned table or
 * inheritance tree).
 * dp_versions_keep: a row whose key met the row whose index entry is
 * 'found' (DO UPDATE: the target's format), or, 'found' NULL, a subplan
 * row with the target's ctid (MERGE, UPDATE, DELETE).  dp_versions_run,
 * once the load's pages are written and its index work done: every kept
 * row updated, locked or deleted in bulk, or put into 'rest' for core's
 * executor (returns how many).  An UPDATE's or DELETE's rows arriving in
 * TID order are changed as they come, before dp_versions_run.  An
 * UPDATE's or DELETE's RETURNING rows go to 'retstore' as rows are changed
 * (TID order; core's rows after them, upsert.c).  dp_versions_counts adds
 * the rows changed (updated or deleted), locked and given to core, and
 * gives the first reason for core's, if none is given yet.
 */
extern DPVersions *dp_versions_begin(EState *estate, ModifyTableState *mt,
									 ResultRelInfo *rri,
									 Tuplestorestate *rest,
									 Tuplestorestate *retstore);
extern void dp_versions_keep(DPVersions *v, TupleTableSlot *slot,
							 ItemPointer found);
extern uint64 dp_versions_run(DPVersions *v);
extern void dp_versions_counts(DPVersions *v, uint64 *changed,
							   uint64 *locked, uint64 *to_core,
							   const char **core_why);
extern uint64 dp_versions_pages(DPVersions *v);
extern void dp_versions_end(DPVersions *v);

/* ---------- newvalues.c: a changed row's new version, by core's expressions ---------- */

/*
 * dp_update_projection: an UPDATE's new-tuple projection, as core builds it
 * (and marked valid for core's executor).  dp_new_values: the new version
 * of the old version 'old' (on the pinned 'buf') for the kept 'row', stored
 * in 'existing' first; NULL when the statement changes nothing (DO
 * UPDATE's WHERE false sets *lock: the row stays locked).
 * (dp_affected_twice, core's error for a row this command already
 * updated, is in load.h.)
 */
extern void dp_update_projection(ModifyTableState *mt, ResultRelInfo *rri);
extern TupleTableSlot *dp_new_values(ModifyTableState *mt, ResultRelInfo *rri,
									 TupleTableSlot *row,
									 TupleTableSlot *existing, HeapTuple old,
									 Buffer buf, bool *lock);

/* A new version's generated columns, WITH CHECK policies and constraints. */
extern void dp_check_new_version(ModifyTableState *mt, ResultRelInfo *rri,
								 TupleTableSlot *newslot);

/*
 * An UPDATE's or DELETE's row changed in bulk (its old version at 'oldtid'
 * in 'oldslot', the new one in 'newslot' or NULL, the plan's row): its
 * AFTER ROW trigger events queued, its RETURNING row into 'retstore' (if
 * not NULL).
 */
extern void dp_changed_row(ModifyTableState *mt, ResultRelInfo *rri,
						   ItemPointer oldtid,
						   TupleTableSlot *oldslot, TupleTableSlot *newslot,
						   TupleTableSlot *planslot,
						   Tuplestorestate *retstore);

/* ---------- oldpages.c: old versions changed page by page ---------- */

typedef enum DPChangeKind
{
	DP_CHANGE_UPDATE,			/* a new version replaces it */
	DP_CHANGE_LOCK,				/* locked FOR NO KEY UPDATE */
	DP_CHANGE_DELETE,			/* deleted */
} DPChangeKind;

/* A change to one old version's header. */
typedef struct DPChange
{
	BlockNumber blkno;
	OffsetNumber off;
	DPChangeKind kind;
	ItemPointerData newtid;		/* the new version (update) */
} DPChange;

typedef struct DPOldPages DPOldPages;

/*
 * Changes are added in block order (a page's consecutively);
 * dp_oldpages_find looks among the current page's.  dp_oldpages_toasted:
 * a deleted row's TOAST values go when its page is changed.
 * dp_oldpages_store_deleted: a row, as its deletion leaves it, into a
 * slot (for RETURNING).  dp_oldpages_apply: the recorded changes made (VM
 * bits, headers, one image per page, TOAST deletes), once the new versions
 * they point at are written; the changes are then forgotten (their counts
 * kept).
 */
extern DPOldPages *dp_oldpages_begin(Relation rel, TransactionId xid,
									 CommandId cid);
extern DPChange *dp_oldpages_find(DPOldPages *op, BlockNumber blkno,
								  OffsetNumber off);
extern DPChange *dp_oldpages_add(DPOldPages *op, BlockNumber blkno,
								 OffsetNumber off, DPChangeKind kind);
extern void dp_oldpages_toasted(DPOldPages *op, HeapTuple old);
extern void dp_oldpages_store_deleted(DPOldPages *op, HeapTuple old,
									  TupleTableSlot *slot);
extern int	dp_oldpages_count(DPOldPages *op);
extern void dp_oldpages_apply(DPOldPages *op);
extern void dp_oldpages_counts(DPOldPages *op, uint64 *updated,
							   uint64 *locked, uint64 *deleted);
extern void dp_oldpages_end(DPOldPages *op);

/*
 * ---------- fkeys.c: foreign keys checked per batch or as sets ----------
 *
 * What the foreign key room's own files share is in fkeys_private.h.
 */

/*
 * The leaf's foreign keys that can be checked per batch, or NULL; their
 * names go to 'batched', the others' with the reason to 'rowwise'.
 */
extern DPForeignKeys *dp_fkeys_begin(ResultRelInfo *rri, StringInfo batched,
									 StringInfo rowwise);

/*
 * Check the keys of 'ntuples' directly written rows (in input order, their
 * pages written; ordinals[r]: row r's place in the load's input order):
 * v[r] gets the first constraint (in trigger order) row r violates; with
 * 'all' false only the first violating row is sure to be marked.  Returns
 * the first violating row, or -1.  A constraint past
 * directpath.fkey_set_rows rows keeps its keys for dp_fkeys_check_sets
 * instead (without 'all').
 */
extern int	dp_fkeys_check(DPForeignKeys *f, HeapTuple *tuples,
						   const uint64 *ordinals, int ntuples, bool all,
						   DPFkeyViolation *v);

/*
 * Do the leaf's foreign keys go to their sets as its rows are placed
 * (dp_fkeys_add_row), each row queueing nothing for them?  Once every
 * constraint is checked as a set (begun here in a parallel leader, past
 * directpath.fkey_set_rows rows otherwise) and no other AFTER ROW trigger
 * acts; stays true once true.
 */
extern bool dp_fkeys_at_place(DPForeignKeys *f);

/* Does any of the leaf's constraints (f may be NULL) keep a set? */
extern bool dp_fkeys_has_sets(DPForeignKeys *f);

/* A placed row's keys added to the sets, at 'ordinal' of the input. */
extern void dp_fkeys_add_row(DPForeignKeys *f, TupleTableSlot *slot,
							 uint64 ordinal);

/* A violation found by a set check: the first in input order. */
typedef struct DPFkeyFound
{
	bool		found;
	uint64		ordinal;		/* its row's place in the input */
	int			key;			/* the constraint (index into the leaf's) */
	DPForeignKeys *f;			/* the leaf's */
	Datum		values[INDEX_MAX_KEYS]; /* the key */
	bool		isnull[INDEX_MAX_KEYS];
} DPFkeyFound;

/* Core's error for a violation a set check found. */
extern void dp_fkeys_report_found(DPFkeyFound *found);

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

/* ---------- fkahead.c: the sets checked at the end of the load ---------- */

/*
 * The end of the load: the keys kept for the set check checked, the first
 * missing one in input order (if before *best) made *best; the names of
 * the constraints checked so, with their keys' count, noted in 'names'.
 */
extern void dp_fkeys_check_sets(DPForeignKeys *f, DPFkeyFound *best,
								StringInfo names);

/*
 * The sets' first chunks read back and, where a scan in C finds them,
 * found by a parallel worker of the leader's own while it makes the
 * indexes; the leader stays in parallel mode until dp_fkahead_end, which
 * waits for the worker and gives each chunk its rows.  NULL when no set
 * has a chunk to read ahead.  dp_fkahead_free frees the chunks once the
 * sets are checked.
 */
typedef struct DPFkeyAhead DPFkeyAhead;
extern DPFkeyAhead *dp_fkahead_begin(DPLoad *s);
extern void dp_fkahead_end(DPFkeyAhead *a);
extern void dp_fkahead_free(DPFkeyAhead *a);

/* ---------- a load's state (load.c and its parts) ---------- */

typedef enum DPState
{
	DPS_HOLD,					/* holding rows until min_bytes */
	DPS_DIRECT,					/* placing rows on pages */
	DPS_WRITTEN,				/* direct, every row written, indexes next */
	DPS_DONE,
} DPState;

/* What the flush rule asks for. */
typedef enum DPFlush
{
	DPF_NONE,
	DPF_BATCH,					/* full pages (and, with queued rows, all) */
	DPF_DRAIN,					/* everything, pages still filling too */
} DPFlush;

struct DPLoad
{
	const char *kind;			/* "INSERT" or "COPY", for messages */
	bool		hinted;			/* fallback messages at the user's level */
	DPState		state;
	DPLeafSet	leaves;			/* the relations written, their writers */
	DPLeaf	   *plain;			/* the one leaf, while its rows take the
								 * plain way (plain_leaf), or NULL */
	DPQueue    *queue;			/* rows held, or waiting for their work */
	Size		held_bytes;		/* HOLD: size of the rows held */
	int			pending_full;	/* full pages waiting, all builders */
	bool		flushed_once;	/* for the first_batch fault point */
	DPRejects  *rejects;		/* COPY's rejects table, or NULL */
	DPInputLine *input;			/* COPY's input position, or NULL */
	uint64		error_line;		/* dp_load_error_context: set by the queue's
								 * and the index work's rows, 0 between */
	uint64		foreign_rows;	/* rows sent to foreign partitions */
	/* ON CONFLICT: checked rows waiting for their decision */
	DPRow	   *pending;		/* DP_CONFLICT_BATCH at most */
	int			npending;
	Size		pending_bytes;
	MemoryContext pending_cxt;
	uint64		skipped;		/* rows skipped for a conflict */
	uint64		kept;			/* rows kept for the updates after it */
	void		(*indexed) (void *);	/* decided rows: every row taken is
										 * indexed (dp_load_conflicts_decided) */
	void	   *indexed_arg;
	DPUpsert   *upsert;			/* rows for core after the load, or NULL */
	const char *update_sql;		/* COPY's ON_CONFLICT 'update', or NULL */
	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	/* statistics gathered as rows are written (stats/stats.c) */
	const char *stats_why;		/* why a leaf gathers none, or NULL */
	Relation	stats_of;		/* whose statistics they are, if not the
								 * target's (dp_load_statistics_of) */
	struct DPSampleGroup *samples;	/* the leaves' samples, sharing the
									 * sampling */
	DPReport	report;			/* what the statement did */
	uint64		rows_in;		/* rows given to the load, for its progress */
};

/* Rows given to the load; its progress published every DP_PROGRESS_ROWS. */
static inline void
dp_load_count_in(DPLoad *s, uint64 n)
{
	uint64		before = s->rows_in;

	s->rows_in += n;
	if (before / DP_PROGRESS_ROWS != s->rows_in / DP_PROGRESS_ROWS)
		dp_progress_rows(s, s->rows_in);
}

/* Count a builder's full pages, 'full' after a placement. */
static inline void
dp_load_count_full(DPLoad *s, DPLeaf *leaf, int full)
{
	s->pending_full += full - leaf->full_pages;
	leaf->full_pages = full;
}

static inline void
dp_load_count_pages(DPLoad *s, DPLeaf *leaf)
{
	dp_load_count_full(s, leaf, dp_heap_full_pages(leaf->writer));
}

/* ---------- place.c: rows held, placed or sent; the flush rule ---------- */

/* Start a leaf's page builder; count it as frozen if it is. */
extern void dp_load_start_writer(DPLoad *s, DPLeaf *leaf);

/*
 * dp_load_flush_rule: what the one flush rule asks for before a row of
 * 'leaf'; dp_load_flush writes the builders' pages (all of them with
 * 'drain', or while rows are queued), then does the queued rows' work;
 * dp_load_flush_before_row does so before the row in 'slot' (HOLD goes
 * direct first), keeping the row and COPY's position.
 */
extern DPFlush dp_load_flush_rule(DPLoad *s, DPLeaf *leaf);
extern void dp_load_flush(DPLoad *s, bool drain);
extern void dp_load_flush_before_row(DPLoad *s, TupleTableSlot *slot,
									 DPFlush f);

/* Enough rows: commit to the direct path and place the held rows. */
extern void dp_load_go_direct(DPLoad *s);

/* A row decided on: counted, then held, placed or sent. */
extern void dp_load_insert_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
							   uint64 lineno);

/* Rows the wrapper did not insert ("do nothing") are not counted. */
extern void dp_load_uncount(DPLoad *s, uint64 skipped);

/* A page placed whole: its rows' index entries spooled or rows queued. */
extern void dp_load_page_rows(DPLoad *s, DPLeaf *leaf, Page page,
							  BlockNumber blkno);

/* ---------- decide.c: ON CONFLICT's pending rows; rows left to core ---------- */

/*
 * dp_load_add_pending: a checked row waits for its batch's conflict
 * decisions (the batch is decided when full); dp_load_decide_pending:
 * the pending rows decided and the others inserted, in input order.
 */
extern void dp_load_add_pending(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
								uint64 lineno);
extern void dp_load_decide_pending(DPLoad *s);

/* ---------- finish.c: the end of a load ---------- */

/*
 * dp_load_end_rows' steps: the last flush with every page builder
 * finished (direct), or the held rows inserted normally (the input ended
 * before min_bytes).  dp_load_finish's: the indexes built or their waiting
 * entries added, then the statistics stored.
 */
extern void dp_load_finish_heaps(DPLoad *s);
extern void dp_load_finish_normal(DPLoad *s);
extern void dp_load_finish_indexes(DPLoad *s);
extern struct DPFkeyAhead *dp_load_finish_ahead(DPLoad *s);
extern void dp_load_finish_fkeys(DPLoad *s, struct DPFkeyAhead *ahead);
extern void dp_load_finish_statistics(DPLoad *s);

#endif							/* DP_LOAD_PRIVATE_H */
