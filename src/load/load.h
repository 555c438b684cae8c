/*-------------------------------------------------------------------------
 *
 * load/load.h
 *	  The load stage's public face: the row loop that INSERT, COPY and a
 *	  parallel load's leader feed (load.c), and COPY's rejects table
 *	  (rejects.c).  The parts of the load - the relations written (leaf.c),
 *	  the after-insert queue (queue.c), foreign partitions (foreign.c),
 *	  foreign keys per batch (fkeys.c), ON CONFLICT's decisions
 *	  (conflict.c, decide.c), holding and placing rows (place.c), the end
 *	  (finish.c) and the rows left to core's executor after the load
 *	  (upsert.c, versions.c, oldpages.c) - share load/load_private.h; so
 *	  does a hinted UPDATE or DELETE made in bulk (rewrite.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_LOAD_H
#define DP_LOAD_H

#include "common/compat.h"
#include "common/report.h"

#include "lib/stringinfo.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/*
 * Can ExecConstraints reject the row?  Not when the table has no CHECK
 * constraint and no virtual generated column (18) and the row, deformed,
 * has no NULL: its NOT NULLs are all it would check.  So a load of rows
 * without NULLs skips that walk over every column of every row.
 */
static inline bool
dp_constraints_may_fail(Relation rel, TupleTableSlot *slot)
{
	TupleConstr *constr = rel->rd_att->constr;
	int			natts = rel->rd_att->natts;

	if (constr == NULL)
		return false;
	if (constr->num_check > 0 || rel->rd_rel->relchecks > 0 ||
		DP_HAS_VIRTUAL(constr) || slot->tts_nvalid < natts)
		return true;
	return memchr(slot->tts_isnull, true, natts) != NULL;
}

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
typedef struct DPRejects DPRejects;

/*
 * COPY's input position, owned by the COPY that passes it: the load reads
 * the current line's number and text (for the rows it queues and rejects)
 * and never writes them.  NULL for INSERT.
 */
typedef struct DPInputLine
{
	const uint64 *lineno;		/* current line number */
	const bool *line_valid;		/* is raw_line the current line's text? */
	const StringInfoData *raw_line; /* the current line's text */
} DPInputLine;

/* ---------- load.c ---------- */

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

/*
 * A COPY's error context ('relname' its target): "COPY t, line N" for the
 * input line of the row whose deferred work (index entries, triggers,
 * foreign keys) is running, in place of the line being read; else for
 * 'line' (0: none).  False, and nothing said, when there is neither.  Only
 * a load given an 'input' has such rows.
 */
extern bool dp_load_error_context(DPLoad *load, const char *relname,
								  uint64 line);
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
 * The load runs beside other writers of the target, which it holds in
 * RowExclusiveLock only (admission.c: a COPY or INSERT that found the
 * table busy): pages through shared buffers (heap/shared.c), index
 * entries through core's insertion, nothing frozen, no statistics.
 * Before the first row.
 */
extern void dp_load_beside(DPLoad *load);

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

/*
 * A parallel ON CONFLICT (parallel/parconflict.c).
 * dp_load_conflict_target: has the load ON CONFLICT, and which arbiters
 * ('*arbiters' their OIDs, NIL for every unique index) and action?
 * dp_load_conflicts_decided: the rows that reach the load were decided
 * by the processes that placed them; its leaves make their index entries
 * per batch as under ON CONFLICT, and 'indexed' is called whenever every
 * row taken so far is in the indexes.  Before the first row.
 * dp_load_count_skipped, at the end: rows skipped as conflicts, counted
 * as a serial load counts them (EXPLAIN's "Conflicting Tuples",
 * dp_load_deleted), and with the rows loaded and kept as the rows the
 * SELECT proposed (EXPLAIN's "Tuples Inserted" is their difference).
 */
extern bool dp_load_conflict_target(DPLoad *load, List **arbiters,
									bool *do_update);
extern void dp_load_conflicts_decided(DPLoad *load, void (*indexed) (void *),
									  void *arg);
extern void dp_load_count_skipped(DPLoad *load, uint64 n);

/*
 * dp_load_keep: a row (in 'slot', in leaf 'rri''s format; or, 'rri' NULL,
 * in the layout of the ModifyTable's subplan) for the updates after the
 * load (upsert.c); 'found': the entry of the table's row it meets (DO
 * UPDATE), else NULL.  A parallel DO UPDATE's leader keeps the rows its
 * processes decided so, in input order.  dp_load_kept: how many were.
 */
extern void dp_load_keep(DPLoad *load, ResultRelInfo *rri,
						 TupleTableSlot *slot, ItemPointer found);
extern uint64 dp_load_kept(DPLoad *load);

/*
 * Why a parallel load cannot take 'rel' for its foreign keys, as a phrase
 * ("has ..."), or NULL: each must be one the leader checks as a set at
 * the end, out of parallel mode (fkeys.c).  Other triggers are not
 * judged here.
 */
extern const char *dp_fkeys_parallel_refusal(Relation rel);

/*
 * upsert.c: the ModifyTable node 'mt' run to its end, as ExecutePlan runs
 * it, its RETURNING rows copied into 'retstore' (if not NULL).
 */
extern void dp_upsert_run_node(ModifyTableState *mt,
							   Tuplestorestate *retstore);

/* ---------- conflict.c: ON CONFLICT's decisions ---------- */

/*
 * A serial load's leaves decide their rows with these (decide.c); so does
 * each process of a parallel ON CONFLICT DO NOTHING for the rows it
 * places (parallel/parconflict.c).
 */
typedef struct DPConflicts DPConflicts;

/* A key's image (its bytes, as the decisions compare them) and their hash. */
typedef struct DPKeyImage
{
	const char *bytes;
	uint32		len;
	uint32		hash;
} DPKeyImage;

#define DP_KEY_EQUAL(a, b) \
	((a).len == (b).len && memcmp((a).bytes, (b).bytes, (a).len) == 0)


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

/*
 * Core's cardinality error for a row 'op' (CMD_INSERT: ON CONFLICT DO
 * UPDATE; CMD_MERGE) meets a second time (load/newvalues.c).
 */
extern void dp_affected_twice(CmdType op);
extern void dp_conflicts_batch_done(DPConflicts *c);

/* A heap-tuple slot of the leaf's row type, for a decided row. */
extern TupleTableSlot *dp_conflicts_slot(DPConflicts *c);

/*
 * dp_conflicts_provisional, for the row last decided and skipped: true
 * when none of its keys is in the table or in a row the statement
 * inserted, so that the skip rests on rows this process accepted itself
 * (a parallel load's leader may yet take those off, and decides the row
 * again); its keys then count as accepted for the rows after it.
 */
extern bool dp_conflicts_provisional(DPConflicts *c);

/*
 * The key images of the row last decided, appended to 'out': per arbiter,
 * an int32 length (-1: no key there) and the image's bytes, as the
 * decisions compare them.
 */
extern void dp_conflicts_row_images(DPConflicts *c, StringInfo out);

/* Every inserted row's entries are now in the leaf's indexes. */
extern void dp_conflicts_indexed(DPConflicts *c);

extern void dp_conflicts_end(DPConflicts *c);

/* ---------- rewrite.c: a hinted UPDATE or DELETE in bulk ---------- */

typedef struct DPRewrite DPRewrite;

/*
 * dp_rewrite_begin, once the statement's ModifyTable node ('mt', an UPDATE
 * or a DELETE of a plain table) is initialised; dp_rewrite_row for each row
 * of its subplan; dp_rewrite_finish changes the rows (in bulk, or through
 * the node), counts them in es_processed and publishes the report; the
 * RETURNING rows, if any, go to 'retstore'.
 */
extern DPRewrite *dp_rewrite_begin(EState *estate, ModifyTableState *mt,
								   bool hinted, Tuplestorestate *retstore);
extern void dp_rewrite_row(DPRewrite *r, TupleTableSlot *planSlot);
extern void dp_rewrite_finish(DPRewrite *r);
extern const DPReport *dp_rewrite_report(DPRewrite *r);

/* The name under which a COPY's update statement reads its kept rows. */
#define DP_UPSERT_ROWS "directpath_copy_rows"

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

/* May a row be rejected for an error of this SQLSTATE while reading? */
extern bool dp_rejects_error_ok(int sqlerrcode);

#endif							/* DP_LOAD_H */
