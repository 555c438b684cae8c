/*-------------------------------------------------------------------------
 *
 * load.c
 *	  The row loop of a direct-path load, shared by INSERT (exec.c) and
 *	  COPY FROM (copy.c).
 *
 * The caller owns an EState and a ModifyTableState for the target (for
 * INSERT, the ones the executor built for the plan; for COPY, ones built
 * as core's CopyFrom does), fires the statement-level triggers and feeds
 * rows in the target's format to dp_load_row().  Per row, in ExecInsert's
 * order:
 *
 *	route it to a leaf partition (ExecFindPartition) and convert it;
 *	find or set up its leaf (leaf.c);
 *	apply the flush rule (place.c);
 *	stored generated columns, RLS WITH CHECK, NOT NULL and CHECK
 *	  constraints (not asked for a row without NULLs when the table has no
 *	  CHECK: dp_constraints_may_fail), the partition constraint when inserting
 *	  into a partition directly (with a rejects table, checked without
 *	  raising: rejects.c);
 *	under ON CONFLICT, hold it until a batch of rows is decided together
 *	  (decide.c): skipped if its key is taken (DO NOTHING), kept for core's
 *	  update at the end (DO UPDATE, upsert.c), else on (conflict.c);
 *	then hold the row, place it on a page (place.c, pages.c; its index
 *	  entries sorted for a build at the end, indexes.c, or the row queued
 *	  for its after-insert work, queue.c), or send it to a foreign
 *	  partition (foreign.c).
 *
 * Rows are held in memory until they add up to directpath.min_bytes, then
 * placed on pages (place.c).  The end comes in two steps (finish.c):
 * dp_load_end_rows() writes every row and does their after-insert work,
 * so that the errors of a row still name it (COPY's line);
 * dp_load_finish() then builds the indexes of new storage, stores the
 * statistics of the leaves the load filled from empty, runs the rows left
 * to core's executor (upsert.c) and publishes the report.  A parallel
 * load's leader routes rows and places its workers' pages through the
 * same load (dp_load_route, dp_load_page).
 *
 * The load's row in directpath.progress (common/progress.c) begins with
 * it and ends at dp_load_finish: the rows given to it, published every
 * DP_PROGRESS_ROWS rows and at each phase (place.c, finish.c).
 *
 * Invariants: the row count and pg_stat counters are the plain path's;
 * the report (report.c) is published once, at dp_load_finish.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"

#include "access/xact.h"
#include "common/fault.h"
#include "common/progress.h"
#include "common/report.h"
#include "common/settings.h"
#include "executor/execPartition.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* The statement's kind as the progress view names it. */
static const char *
progress_kind(DPLoad *s)
{
	if (s->leaves.do_update)
		return "INSERT ON CONFLICT DO UPDATE";
	if (s->leaves.on_conflict)
		return "INSERT ON CONFLICT DO NOTHING";
	return s->kind;
}

DPLoad *
dp_load_begin(const char *kind, EState *estate, ModifyTableState *mtstate,
			  bool hinted, bool freeze_allowed, Tuplestorestate *retstore,
			  DPInputLine *input, DPRejects *rejects)
{
	DPLoad	   *s = palloc0(sizeof(DPLoad));

	s->kind = kind;
	s->hinted = hinted;
	s->input = input;
	dp_fault_reset();
	s->state = dp_min_bytes > 0 ? DPS_HOLD : DPS_DIRECT;
	s->leaves.estate = estate;
	s->leaves.mtstate = mtstate;
	s->leaves.freeze_allowed = freeze_allowed;
	if (mtstate->ps.plan != NULL)
	{
		OnConflictAction action = ((ModifyTable *) mtstate->ps.plan)->onConflictAction;

		s->leaves.on_conflict = action != ONCONFLICT_NONE;
		s->leaves.do_update = action == ONCONFLICT_UPDATE;
		/*
		 * this command's rows stay invisible to its own snapshot, which
		 * DO UPDATE's SET and WHERE and MERGE's join read
		 */
		if (s->leaves.do_update || mtstate->operation == CMD_MERGE)
			s->leaves.freeze_allowed = false;
	}
	s->retstore = retstore;
	s->leaves.xid = GetCurrentTransactionId();
	s->leaves.cid = GetCurrentCommandId(true);
	initStringInfo(&s->leaves.fk_batched);
	initStringInfo(&s->leaves.fk_sets);
	initStringInfo(&s->leaves.fk_rowwise);
	initStringInfo(&s->leaves.foreign_paths);
	s->queue = dp_queue_create(estate, mtstate, retstore, input,
							   &s->error_line, rejects);
	s->rejects = rejects;
	if (rejects)
	{
		/* rejected rows wait while toasted rows do (rejects.c) */
		s->leaves.reject_duplicates = true;
		dp_rejects_hold_while(rejects, &s->leaves.toast_wait.writers);
	}
	dp_report_init(&s->report);
	s->report.direct = s->state == DPS_DIRECT;
	dp_progress_begin(s, RelationGetRelid(mtstate->rootResultRelInfo->ri_RelationDesc),
					  progress_kind(s));
	return s;
}

/*
 * ExecInsert's checks, in ExecInsert's order.  With a rejects table a
 * failing row is recorded and false returned.  A foreign partition's
 * constraints are the remote side's, as in core.
 */
static bool
check_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot)
{
	EState	   *estate = s->leaves.estate;
	ResultRelInfo *rri = leaf->rri;
	Relation	rel = rri->ri_RelationDesc;

	slot->tts_tableOid = RelationGetRelid(rel);
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, slot, CMD_INSERT);
	if (rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_RLS_INSERT_CHECK, rri, slot, estate);
	if (leaf->foreign)
		return true;
	if (s->rejects)
	{
		int			code;
		char	   *message;
		char	   *detail;

		if (dp_soft_constraints(rri, slot, estate, &code, &message, &detail))
			return true;
		dp_rejects_add(s->rejects, *s->input->lineno,
					   *s->input->line_valid ? s->input->raw_line->data : NULL,
					   code, message, detail);
		return false;
	}
	if (dp_constraints_may_fail(rel, slot))
		ExecConstraints(rri, slot, estate);
	if (rel->rd_rel->relispartition && rri->ri_RootResultRelInfo == NULL)
		ExecPartitionCheck(rri, slot, estate, true);
	return true;
}

/* Route a row to its leaf, converting it to the leaf's format. */
static DPLeaf *
route(DPLoad *s, TupleTableSlot **slot)
{
	ModifyTableState *mt = s->leaves.mtstate;
	ResultRelInfo *rri = mt->rootResultRelInfo;

	if (mt->mt_partition_tuple_routing)
	{
		TupleConversionMap *map;

		rri = ExecFindPartition(mt, rri, mt->mt_partition_tuple_routing,
								*slot, s->leaves.estate);
		map = DP_ROOT_TO_CHILD_MAP(rri, s->leaves.estate);
		if (map != NULL)
			*slot = execute_attr_map_slot(map->attrMap, *slot,
										  rri->ri_PartitionTupleSlot);
	}
	return dp_leaf_get(&s->leaves, rri);
}

/* The leaf of a row; a local leaf first seen after going direct starts. */
static DPLeaf *
leaf_of(DPLoad *s, TupleTableSlot **slot)
{
	DPLeaf	   *leaf = route(s, slot);

	if (s->state == DPS_DIRECT && leaf->foreign == NULL && leaf->writer == NULL)
		dp_load_start_writer(s, leaf);
	return leaf;
}

/*
 * The leaf, if every row of the load takes the plain way to it: a target
 * that is not partitioned, written directly, whose rows need none of
 * check_row's steps but NOT NULL and CHECK constraints, no ON CONFLICT
 * decision, no rejects table, no deferred work and no spooled index
 * entries.  Then dp_load_row does for each row only what check_row and
 * dp_load_insert_row would do for it, while the flush rule has nothing to
 * say.
 */
static DPLeaf *
plain_leaf(DPLoad *s, DPLeaf *leaf)
{
	ResultRelInfo *rri = leaf->rri;
	Relation	rel = rri->ri_RelationDesc;

	if (s->state != DPS_DIRECT || s->rejects != NULL ||
		s->leaves.mtstate->mt_partition_tuple_routing != NULL ||
		leaf->writer == NULL || leaf->foreign != NULL ||
		leaf->conflicts != NULL || leaf->needs_post ||
		dp_indexes_at_place(leaf->indexes) ||
		(rel->rd_att->constr && rel->rd_att->constr->has_generated_stored) ||
		rri->ri_WithCheckOptions != NIL ||
		(rel->rd_rel->relispartition && rri->ri_RootResultRelInfo == NULL))
		return NULL;
	return leaf;
}

bool
dp_load_error_context(DPLoad *load, const char *relname, uint64 line)
{
	if (load->error_line > 0)
		line = load->error_line;
	if (line == 0)
		return false;
	/* as CopyFromErrorCallback names a line whose text is gone */
	errcontext("COPY %s, line %llu", relname, (unsigned long long) line);
	return true;
}

bool
dp_load_row(DPLoad *s, TupleTableSlot *slot)
{
	DPLeaf	   *leaf = s->plain;
	uint64		lineno;
	DPFlush		f;

	dp_load_count_in(s, 1);
	if (leaf != NULL && s->pending_full < dp_batch_pages &&
		s->leaves.toast_wait.bytes < DP_TOAST_WAIT_MAX_BYTES)
	{
		Relation	rel = leaf->rri->ri_RelationDesc;

		slot->tts_tableOid = RelationGetRelid(rel);
		if (dp_constraints_may_fail(rel, slot))
			ExecConstraints(leaf->rri, slot, s->leaves.estate);
		if (s->leaves.mtstate->canSetTag)
			s->leaves.estate->es_processed++;
		s->report.rows++;
		dp_load_count_full(s, leaf,
				   dp_heap_add_slot(leaf->writer, slot, &slot->tts_tid, NULL));
		return true;
	}

	leaf = leaf_of(s, &slot);
	lineno = s->input ? *s->input->lineno : 0;
	/* a row that waits for its decision asks the flush rule then */
	if (leaf->conflicts == NULL && (f = dp_load_flush_rule(s, leaf)) != DPF_NONE)
		dp_load_flush_before_row(s, slot, f);
	if (!check_row(s, leaf, slot))
		return false;
	if (leaf->conflicts)
		dp_load_add_pending(s, leaf, slot, lineno);
	else
		dp_load_insert_row(s, leaf, slot, lineno);
	s->plain = plain_leaf(s, leaf);
	return true;
}

void
dp_load_end_rows(DPLoad *s)
{
	if (s->npending > 0)
		dp_load_decide_pending(s);
	dp_load_uncount(s, dp_foreign_flush_all(&s->leaves, s->queue));
	if (s->state == DPS_DIRECT)
		dp_load_finish_heaps(s);
	else
		dp_load_finish_normal(s);
	/* no more probes: the index scans end before indexes are rebuilt */
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->conflicts)
		{
			dp_conflicts_end(leaf->conflicts);
			leaf->conflicts = NULL;
		}
	Assert(s->leaves.toast_wait.writers == 0);
	if (s->rejects)
		dp_rejects_write_queued(s->rejects);
	if (s->state == DPS_WRITTEN)
		dp_fault("finish");
}

void
dp_load_finish(DPLoad *s)
{
	if (s->state == DPS_WRITTEN)
	{
		/* the foreign key sets found by a worker beside the indexes */
		DPFkeyAhead *ahead = dp_load_finish_ahead(s);

		dp_load_finish_indexes(s);
		dp_load_finish_fkeys(s, ahead);
		dp_load_finish_statistics(s);
	}
	/*
	 * The rows left to core (DO UPDATE's, MERGE's matched ones), now that
	 * no page builder owns the heap's end and no entry waits to be appended
	 * or merged behind their versions'
	 */
	if (s->upsert)
	{
		dp_progress_phase(s, DP_PHASE_UPDATES, s->rows_in);
		dp_upsert_run(s->upsert);
		dp_upsert_describe(s->upsert, s->report.updates,
						   sizeof(s->report.updates));
	}
	dp_progress_phase(s, DP_PHASE_FINISHING, s->rows_in);
	s->state = DPS_DONE;
	dp_leaf_end_all(&s->leaves);
	if (s->upsert)
		dp_upsert_end(s->upsert);

	s->report.rows -= dp_queue_deleted(s->queue);
	s->report.relations = s->leaves.count;
	if (s->report.direct)
		dp_report_foreign_keys(&s->report, s->leaves.fk_batched.data,
							   s->leaves.fk_sets.data,
							   s->leaves.fk_rowwise.data);
	strlcpy(s->report.foreign_partitions, s->leaves.foreign_paths.data,
			sizeof(s->report.foreign_partitions));
	dp_progress_describe_phases(s, s->report.phases, sizeof(s->report.phases));
	dp_report_publish(&s->report);
	dp_progress_end(s);
}

void
dp_load_pages_begin(DPLoad *s)
{
	if (s->state == DPS_HOLD)
		dp_load_go_direct(s);
}

bool
dp_load_freezes(DPLoad *s, Relation rel)
{
	/* a parallel load has no rejects table: nothing is taken back */
	Assert(!s->leaves.reject_duplicates);
	return dp_leaf_may_freeze(&s->leaves, rel);
}

ResultRelInfo *
dp_load_route(DPLoad *s, TupleTableSlot *slot)
{
	return leaf_of(s, &slot)->rri;
}

void
dp_load_page(DPLoad *s, ResultRelInfo *rri, const char *image)
{
	DPLeaf	   *leaf = dp_leaf_get(&s->leaves, rri);
	DPFlush		f;
	Page		page;
	BlockNumber blkno;
	int			n;

	Assert(s->state == DPS_DIRECT);
	if (leaf->writer == NULL)
		dp_load_start_writer(s, leaf);
	f = dp_load_flush_rule(s, leaf);
	if (f != DPF_NONE)
		dp_load_flush(s, f == DPF_DRAIN);
	n = dp_heap_add_page(leaf->writer, image, &page, &blkno);
	dp_load_page_rows(s, leaf, page, blkno);
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed += n;
	s->report.rows += n;
	dp_load_count_pages(s, leaf);
	dp_load_count_in(s, n);
}

void
dp_load_note_parallel(DPLoad *s, int workers, const char *why)
{
	s->report.parallel_workers = workers;
	strlcpy(s->report.parallel, why ? why : "", sizeof(s->report.parallel));
}

const DPReport *
dp_load_report(DPLoad *s)
{
	return &s->report;
}

uint64
dp_load_deleted(DPLoad *s)
{
	return dp_queue_deleted(s->queue) + s->skipped;
}

void
dp_load_new_relation(DPLoad *s)
{
	Assert(s->leaves.list == NULL);
	s->leaves.born = true;
}

void
dp_load_statistics_of(DPLoad *s, Relation rel)
{
	Assert(s->leaves.list == NULL);
	s->stats_of = rel;
	dp_progress_relation(s, RelationGetRelid(rel));
}

void
dp_load_defer(DPLoad *s, TupleTableSlot *planSlot)
{
	dp_load_count_in(s, 1);
	dp_load_keep(s, NULL, planSlot, NULL);
}

void
dp_load_beside(DPLoad *s)
{
	Assert(s->leaves.list == NULL);
	s->leaves.beside = true;
	s->leaves.freeze_allowed = false;
}

bool
dp_load_conflict_target(DPLoad *s, List **arbiters, bool *do_update)
{
	ModifyTableState *mt = s->leaves.mtstate;

	*do_update = s->leaves.do_update || mt->operation == CMD_MERGE;
	*arbiters = dp_leaf_arbiters(&s->leaves, mt->resultRelInfo);
	return s->leaves.on_conflict || mt->operation == CMD_MERGE;
}

void
dp_load_conflicts_decided(DPLoad *s, void (*indexed) (void *), void *arg)
{
	if (s->leaves.list != NULL)
		elog(ERROR, "directpath: a load's rows decided elsewhere after its first row");
	s->leaves.decided = true;
	s->indexed = indexed;
	s->indexed_arg = arg;
}

void
dp_load_count_skipped(DPLoad *s, uint64 n)
{
	ModifyTableState *mt = s->leaves.mtstate;
	PlanState  *sub = mt->ps.plan ? outerPlanState(mt) : NULL;

	/* EXPLAIN ANALYZE's "Conflicting Tuples", as ExecInsert counts them */
	InstrCountTuples2(&mt->ps, n);
	s->skipped += n;
	/* ... and its rows proposed: the SELECT ran in the workers */
	if (sub != NULL && sub->instrument != NULL)
		sub->instrument->ntuples += s->report.rows + s->kept + n;
}

void
dp_load_on_conflict(DPLoad *s, List *arbiters, const char *update_sql)
{
	Assert(s->leaves.list == NULL);
	s->leaves.on_conflict = true;
	s->leaves.arbiters = arbiters;
	if (update_sql != NULL)
	{
		/* as DO UPDATE: the updates after the load must meet live rows */
		s->leaves.do_update = true;
		s->leaves.freeze_allowed = false;
		s->update_sql = update_sql;
	}
}
