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
 *	apply the flush rule (below);
 *	stored generated columns, RLS WITH CHECK, NOT NULL and CHECK
 *	  constraints, the partition constraint when inserting into a partition
 *	  directly (with a rejects table, checked without raising: rejects.c);
 *	under ON CONFLICT, hold it until a batch of rows is decided together:
 *	  skipped if its key is taken (DO NOTHING), kept for core's update
 *	  at the end (DO UPDATE, upsert.c), else on (conflict.c);
 *	then hold the row, place it on a page (pages.c; its index entries
 *	  sorted for a build at the end, indexes.c, or the row queued for its
 *	  after-insert work, queue.c), or send it to a foreign partition
 *	  (foreign.c).
 *
 * Small statements.  Rows are first held in memory (state HOLD).  Once
 * they add up to directpath.min_bytes the load commits to the direct path
 * (go_direct); if the input ends before that, the held rows are inserted
 * on the normal path, through table_tuple_insert and shared buffers, so
 * that a one-row INSERT does not cost a fresh page.
 *
 * The flush rule, asked before each row and nowhere else (flush_rule):
 * write every builder's full pages when directpath.batch_pages of them
 * wait across the leaves; write everything, pages still filling included
 * ("drain"), when toasted rows of a logically logged table wait for more
 * than DP_TOAST_WAIT_MAX_BYTES (a decoder keeps their chunks in memory),
 * when the rejects table holds back DP_REJECTS_QUEUE_MAX rows, or when
 * the row goes unbatched to a foreign partition and needs its after-insert
 * work at once, so the rows before it go first.  A flush writes the pages
 * still filling too whenever rows are queued, so that no row waits
 * indefinitely, then processes the queue.  The end of the input drains.
 *
 * The end comes in two steps: dp_load_end_rows() writes every row and
 * does their after-insert work, so that the errors of a row still name it
 * (COPY's line); dp_load_finish() then builds the indexes of new storage,
 * whose errors (a duplicate found by the build) belong to no one line,
 * and stores the statistics of the leaves the load filled from empty,
 * whose rows were sampled as their pages were written (stats/stats.c;
 * a leaf that had rows gets only its size), unless rows were taken back
 * or go to core's executor after the load.
 *
 * Long: over 700 lines.  The states (hold, direct), the flush rule and
 * the rows waiting for their conflict decisions all act on one DPLoad and
 * call one another; split, each part would need the whole of it.
 *
 * Invariants: no index entry, trigger event or RETURNING row for a row
 * before its page is written (queue.c); the row count and pg_stat
 * counters are the plain path's; the report (report.c) is published once,
 * at dp_load_finish.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load.h"
#include "stats/stats.h"

#include "access/xact.h"
#include "executor/execPartition.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

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
	uint64		foreign_rows;	/* rows sent to foreign partitions */
	/* ON CONFLICT: checked rows waiting for their decision */
	DPRow	   *pending;		/* DP_CONFLICT_BATCH at most */
	int			npending;
	Size		pending_bytes;
	MemoryContext pending_cxt;
	uint64		skipped;		/* rows skipped for a conflict */
	DPUpsert   *upsert;			/* rows for core after the load, or NULL */
	const char *update_sql;		/* COPY's ON_CONFLICT 'update', or NULL */
	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	/* statistics gathered as rows are written (stats/stats.c) */
	const char *stats_why;		/* why a leaf gathers none, or NULL */
	Relation	stats_of;		/* whose statistics they are, if not the
								 * target's (dp_load_statistics_of) */
	DPSampleGroup *samples;		/* the leaves' samples, sharing the
								 * sampling */
	DPReport	report;			/* what the statement did */
};

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
	initStringInfo(&s->leaves.fk_rowwise);
	initStringInfo(&s->leaves.foreign_paths);
	s->queue = dp_queue_create(estate, mtstate, retstore, input, rejects);
	s->rejects = rejects;
	if (rejects)
	{
		/* rejected rows wait while toasted rows do (rejects.c) */
		s->leaves.reject_duplicates = true;
		dp_rejects_hold_while(rejects, &s->leaves.toast_wait.writers);
	}
	dp_report_init(&s->report);
	s->report.direct = s->state == DPS_DIRECT;
	return s;
}

/*
 * A leaf whose writer starts on an empty relation gathers its statistics
 * (stats/stats.c), unless rows go to core's executor after the load.
 */
static void
start_sample(DPLoad *s, DPLeaf *leaf)
{
	const char *why = NULL;

	if (s->leaves.do_update || s->update_sql)
		why = "rows that conflict are updated after the load";
	else if (dp_heap_first_block(leaf->writer) != 0)
	{
		why = "the table was not empty";
		leaf->appends = true;
	}
	else
	{
		/* the samples live as long as the load */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(s));

		if (s->samples == NULL)
			s->samples = dp_sample_group();
		leaf->sample = dp_sample_begin(leaf->rri->ri_RelationDesc,
									   s->stats_of, s->samples, &why);
		MemoryContextSwitchTo(old);
	}
	if (leaf->sample)
		dp_heap_sample(leaf->writer, leaf->sample);
	else if (s->stats_why == NULL)
		s->stats_why = why;
}

/* Start a leaf's page builder; count it as frozen if it is. */
static void
start_writer(DPLoad *s, DPLeaf *leaf)
{
	leaf->frozen = dp_leaf_start_writer(&s->leaves, leaf);
	if (leaf->frozen)
		s->report.frozen = true;
	start_sample(s, leaf);
}

/*
 * After a flush that wrote every page and did the queue's work, rows
 * inserted under ON CONFLICT DO NOTHING are in their indexes (such a
 * leaf's entries are made per batch: leaf.c asks indexes.c for that).
 */
static void
conflicts_indexed(DPLoad *s)
{
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->conflicts)
			dp_conflicts_indexed(leaf->conflicts);
}

/*
 * Write the builders' pages (all of them with 'drain', or while rows are
 * queued), then do the queued rows' after-insert work.
 */
static void
flush(DPLoad *s, bool drain)
{
	bool		partial = drain || dp_queue_length(s->queue) > 0;

	if (!s->flushed_once)
	{
		s->flushed_once = true;
		dp_fault("first_batch");
	}
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		if (leaf->writer)
			dp_heap_flush(leaf->writer, partial);
		leaf->full_pages = 0;
	}
	s->pending_full = 0;
	dp_fault("batch_written");
	if (s->rejects && s->leaves.toast_wait.writers == 0)
		dp_rejects_write_queued(s->rejects);
	dp_queue_process(s->queue, s->leaves.list);
	if (partial)
		conflicts_indexed(s);
	dp_fault("batch_done");
}

/* The one flush rule (see the file header), asked before each row. */
static DPFlush
flush_rule(DPLoad *s, DPLeaf *leaf)
{
	if (s->state != DPS_DIRECT)
		return (leaf->foreign && dp_foreign_needs_order(leaf) &&
				dp_queue_length(s->queue) > 0) ? DPF_DRAIN : DPF_NONE;
	if (s->leaves.toast_wait.bytes >= DP_TOAST_WAIT_MAX_BYTES)
		return DPF_DRAIN;
	if (s->rejects && dp_rejects_queued(s->rejects) >= DP_REJECTS_QUEUE_MAX)
		return DPF_DRAIN;
	if (leaf->foreign && dp_foreign_needs_order(leaf) &&
		dp_queue_length(s->queue) > 0)
		return DPF_DRAIN;
	if (s->pending_full >= dp_batch_pages)
		return DPF_BATCH;
	return DPF_NONE;
}

/* Count a builder's full pages, 'full' after a placement. */
static inline void
count_full(DPLoad *s, DPLeaf *leaf, int full)
{
	s->pending_full += full - leaf->full_pages;
	leaf->full_pages = full;
}

static inline void
count_pages(DPLoad *s, DPLeaf *leaf)
{
	count_full(s, leaf, dp_heap_full_pages(leaf->writer));
}

/* The placed row's index entries, for indexes built at the end. */
static inline void
spool(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, ItemPointer tid)
{
	if (dp_indexes_strategy(leaf->indexes) == DP_INDEX_BUILD)
		dp_indexes_spool(leaf->indexes, s->leaves.estate, slot, tid);
}

/* Put the row in 'slot' on a page; queue it if it has deferred work. */
static void
place(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, uint64 lineno)
{
	int			full;

	if (leaf->needs_post)
	{
		MemoryContext old = MemoryContextSwitchTo(dp_queue_memory(s->queue));
		HeapTuple	copy;

		full = dp_heap_add_slot(leaf->writer, slot, &slot->tts_tid, &copy);
		dp_queue_add(s->queue, leaf, copy, lineno,
					 dp_queue_line_text(s->queue, leaf));
		MemoryContextSwitchTo(old);
	}
	else
		full = dp_heap_add_slot(leaf->writer, slot, &slot->tts_tid, NULL);
	spool(s, leaf, slot, &slot->tts_tid);
	count_full(s, leaf, full);
}

/* Hold a row until the statement is known to be big enough. */
static void
hold(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, uint64 lineno)
{
	MemoryContext old = MemoryContextSwitchTo(dp_queue_memory(s->queue));
	HeapTuple	tup = ExecCopySlotHeapTuple(slot);

	MemoryContextSwitchTo(old);
	dp_queue_add(s->queue, leaf, tup, lineno,
				 dp_queue_line_text(s->queue, leaf));
	s->held_bytes += tup->t_len;
}

/* Enough rows: commit to the direct path and place the held rows. */
static void
go_direct(DPLoad *s)
{
	MemoryContext heldcxt;
	int			nheld;
	DPRow	   *held = dp_queue_take(s->queue, &nheld, &heldcxt);

	s->state = DPS_DIRECT;
	s->report.direct = true;
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->foreign == NULL)
			start_writer(s, leaf);

	for (int i = 0; i < nheld; i++)
	{
		DPLeaf	   *leaf = held[i].leaf;
		ItemPointerData tid;

		dp_heap_add(leaf->writer, held[i].tuple, &tid);
		if (dp_indexes_strategy(leaf->indexes) == DP_INDEX_BUILD)
		{
			ExecStoreHeapTuple(held[i].tuple, leaf->slot, false);
			spool(s, leaf, leaf->slot, &tid);
			ExecClearTuple(leaf->slot);
		}
		if (leaf->needs_post)
		{
			MemoryContext old = MemoryContextSwitchTo(dp_queue_memory(s->queue));

			dp_queue_add(s->queue, leaf, heap_copytuple(held[i].tuple),
						 held[i].lineno, held[i].raw);
			MemoryContextSwitchTo(old);
		}
		count_pages(s, leaf);
	}
	if (held)
		pfree(held);
	MemoryContextDelete(heldcxt);
	s->held_bytes = 0;
}

/* Rows the wrapper did not insert ("do nothing") are not counted. */
static void
uncount(DPLoad *s, uint64 skipped)
{
	if (skipped == 0)
		return;
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed -= skipped;
	s->report.rows -= skipped;
	s->foreign_rows -= skipped;
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
	if (rel->rd_att->constr)
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
		start_writer(s, leaf);
	return leaf;
}

/*
 * Flush before a row.  The row's values may live in per-tuple memory and
 * COPY's position names it: the queued rows' work resets the one and moves
 * the other, so the row is materialized and the position put back.
 */
static void
flush_before_row(DPLoad *s, TupleTableSlot *slot, DPFlush f)
{
	uint64		lineno = s->input ? *s->input->lineno : 0;
	bool		line_valid = s->input ? *s->input->line_valid : false;

	ExecMaterializeSlot(slot);
	if (s->state == DPS_HOLD)
		go_direct(s);
	flush(s, f == DPF_DRAIN);
	if (s->input)
	{
		*s->input->lineno = lineno;
		*s->input->line_valid = line_valid;
	}
}

/* A row decided on: counted, then held, placed or sent. */
static void
insert_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, uint64 lineno)
{
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed++;
	s->report.rows++;

	if (leaf->foreign)
	{
		s->foreign_rows++;
		uncount(s, dp_foreign_insert(leaf, s->leaves.estate, slot, s->queue,
									 lineno));
	}
	else if (s->state == DPS_HOLD)
	{
		hold(s, leaf, slot, lineno);
		if (s->held_bytes >= (Size) dp_min_bytes)
			go_direct(s);
	}
	else
		place(s, leaf, slot, lineno);
}

/*
 * A row for the updates after the load (upsert.c); 'found': the entry of
 * the row it meets (DO UPDATE), else NULL.
 */
static void
defer(DPLoad *s, ResultRelInfo *rri, TupleTableSlot *slot, ItemPointer found)
{
	if (s->upsert == NULL)
	{
		/* the kept rows and their updates' state live with the load */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(s));

		s->upsert = dp_upsert_begin(s->leaves.estate, s->leaves.mtstate,
									s->retstore, s->update_sql);
		MemoryContextSwitchTo(old);
	}
	dp_upsert_keep(s->upsert, rri, slot, found);
}

/*
 * The pending rows decided (conflict.c): keys probed, rows decided in
 * input order, the others inserted in that order, flush rule first.
 */
static void
decide_pending(DPLoad *s)
{
	DPDecision *decision = MemoryContextAlloc(s->pending_cxt,
											  sizeof(DPDecision) * s->npending);
	ItemPointerData *found = MemoryContextAlloc(s->pending_cxt,
												sizeof(ItemPointerData) * s->npending);

	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->conflicts && dp_conflicts_batch_rows(leaf->conflicts) > 0)
			dp_conflicts_probe(leaf->conflicts);
	for (int i = 0; i < s->npending; i++)
		decision[i] = dp_conflicts_decide(s->pending[i].leaf->conflicts,
										  &found[i]);
	for (int i = 0; i < s->npending; i++)
	{
		DPRow	   *row = &s->pending[i];
		TupleTableSlot *slot = dp_conflicts_slot(row->leaf->conflicts);
		DPFlush		f;

		if (decision[i] == DP_ROW_SKIP)
		{
			/* EXPLAIN ANALYZE's "Conflicting Tuples", as ExecInsert counts */
			InstrCountTuples2(&s->leaves.mtstate->ps, 1);
			s->skipped++;
			continue;
		}
		ExecStoreHeapTuple(row->tuple, slot, false);
		slot->tts_tableOid = RelationGetRelid(row->leaf->rri->ri_RelationDesc);
		if (decision[i] == DP_ROW_UPDATE)
		{
			defer(s, row->leaf->rri, slot, &found[i]);
			ExecClearTuple(slot);
			continue;
		}
		if ((f = flush_rule(s, row->leaf)) != DPF_NONE)
			flush_before_row(s, slot, f);
		insert_row(s, row->leaf, slot, row->lineno);
		ExecClearTuple(slot);
	}
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->conflicts && dp_conflicts_batch_rows(leaf->conflicts) > 0)
			dp_conflicts_batch_done(leaf->conflicts);
	s->npending = 0;
	s->pending_bytes = 0;
	MemoryContextReset(s->pending_cxt);
}

/* A checked row waits for its batch's conflict decisions. */
static void
add_pending(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, uint64 lineno)
{
	MemoryContext old;
	DPRow	   *row;

	if (s->pending == NULL)
	{
		s->pending_cxt = AllocSetContextCreate(GetMemoryChunkContext(s),
											   "directpath rows to decide",
											   ALLOCSET_DEFAULT_SIZES);
		s->pending = MemoryContextAllocZero(GetMemoryChunkContext(s),
											sizeof(DPRow) * DP_CONFLICT_BATCH);
	}
	old = MemoryContextSwitchTo(s->pending_cxt);
	row = &s->pending[s->npending++];
	row->leaf = leaf;
	row->tuple = ExecCopySlotHeapTuple(slot);
	row->lineno = lineno;
	MemoryContextSwitchTo(old);
	s->pending_bytes += row->tuple->t_len;
	dp_conflicts_add(leaf->conflicts, slot);
	if (s->npending == DP_CONFLICT_BATCH ||
		s->pending_bytes >= (Size) DP_CONFLICT_BATCH_PAGES * dp_batch_pages * BLCKSZ)
		decide_pending(s);
}

/*
 * The leaf, if every row of the load takes the plain way to it: a target
 * that is not partitioned, written directly, whose rows need none of
 * check_row's steps but NOT NULL and CHECK constraints, no ON CONFLICT
 * decision, no rejects table, no deferred work and no spooled index
 * entries.  Then dp_load_row does for each row only what check_row and
 * insert_row would do for it, while the flush rule has nothing to say.
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
		dp_indexes_strategy(leaf->indexes) == DP_INDEX_BUILD ||
		(rel->rd_att->constr && rel->rd_att->constr->has_generated_stored) ||
		rri->ri_WithCheckOptions != NIL ||
		(rel->rd_rel->relispartition && rri->ri_RootResultRelInfo == NULL))
		return NULL;
	return leaf;
}

bool
dp_load_row(DPLoad *s, TupleTableSlot *slot)
{
	DPLeaf	   *leaf = s->plain;
	uint64		lineno;
	DPFlush		f;

	if (leaf != NULL && s->pending_full < dp_batch_pages &&
		s->leaves.toast_wait.bytes < DP_TOAST_WAIT_MAX_BYTES)
	{
		Relation	rel = leaf->rri->ri_RelationDesc;

		slot->tts_tableOid = RelationGetRelid(rel);
		if (rel->rd_att->constr)
			ExecConstraints(leaf->rri, slot, s->leaves.estate);
		if (s->leaves.mtstate->canSetTag)
			s->leaves.estate->es_processed++;
		s->report.rows++;
		count_full(s, leaf,
				   dp_heap_add_slot(leaf->writer, slot, &slot->tts_tid, NULL));
		return true;
	}

	leaf = leaf_of(s, &slot);
	lineno = s->input ? *s->input->lineno : 0;
	/* a row that waits for its decision asks the flush rule then */
	if (leaf->conflicts == NULL && (f = flush_rule(s, leaf)) != DPF_NONE)
		flush_before_row(s, slot, f);
	if (!check_row(s, leaf, slot))
		return false;
	if (leaf->conflicts)
		add_pending(s, leaf, slot, lineno);
	else
		insert_row(s, leaf, slot, lineno);
	s->plain = plain_leaf(s, leaf);
	return true;
}

/* The input ended before min_bytes: insert the held rows normally. */
static void
finish_normal(DPLoad *s)
{
	char		why[128];

	/* rows inserted one by one get their index entries one by one */
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		dp_indexes_row_by_row(leaf->indexes);
	dp_queue_insert_normal(s->queue, s->leaves.cid);

	if (s->report.rows > 0 && s->report.rows == s->foreign_rows &&
		s->leaves.streams > 0)
		s->report.direct = true;	/* streamed to their servers (shard.c) */
	else if (s->report.rows > s->foreign_rows)
	{
		snprintf(why, sizeof(why),
				 "the statement produced less than directpath.min_bytes (%d bytes) of rows",
				 dp_min_bytes);
		dp_report_normal(&s->report, false, s->kind, why);
	}
	else
		strlcpy(s->report.reason, s->report.rows > 0 ?
				"every row went to a foreign partition" :
				"the statement produced no rows", sizeof(s->report.reason));
}

/* The last flush: every row written, each page builder finished. */
static void
finish_heaps(DPLoad *s)
{
	s->plain = NULL;
	flush(s, true);
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		if (leaf->writer == NULL)
			continue;
		leaf->pages_written = dp_heap_finish(leaf->writer);
		s->report.pages += leaf->pages_written;
		s->report.index_strategies |= dp_indexes_used(leaf->indexes);
	}
	s->state = DPS_WRITTEN;
}

/*
 * Indexes built at the end (new storage), and entries that waited for the
 * end (existing storage), once every row is written.
 */
static void
finish_indexes(DPLoad *s)
{
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->writer != NULL)
		{
			s->report.indexes_rebuilt += dp_indexes_finish(leaf->indexes);
			s->report.index_strategies |= dp_indexes_used(leaf->indexes);
		}
}

void
dp_load_end_rows(DPLoad *s)
{
	if (s->npending > 0)
		decide_pending(s);
	uncount(s, dp_foreign_flush_all(&s->leaves, s->queue));
	if (s->state == DPS_DIRECT)
		finish_heaps(s);
	else
		finish_normal(s);
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

/*
 * The statistics of the leaves that sampled their rows, stored once every
 * row is written, unless rows were taken back or go to core's executor;
 * the sizes of those that had rows; the report says what was done.
 */
static void
finish_statistics(DPLoad *s)
{
	int			gathered = 0;
	int			cut = 0;
	int			sampled = 0;
	int			sized = 0;
	const char *blocked = NULL;
	StringInfoData left;		/* what is left to ANALYZE */

	initStringInfo(&left);
	if (dp_queue_deleted(s->queue) > 0)
		blocked = "rows were taken back after they were written";
	else if (s->upsert)
		blocked = "rows are inserted or updated by core after the load";
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		bool		reduced;

		if (leaf->appends && blocked == NULL &&
			dp_stats_appended(leaf->rri->ri_RelationDesc,
							  (double) dp_heap_rows(leaf->writer),
							  leaf->pages_written, leaf->frozen))
			sized++;
		if (leaf->sample == NULL)
			continue;
		if (blocked == NULL)
		{
			sampled += dp_sample_store(leaf->sample, leaf->frozen, &reduced);
			gathered++;
			cut += reduced;
		}
		else
			dp_sample_discard(leaf->sample);
		leaf->sample = NULL;
	}
	if (cut > 0)
		appendStringInfo(&left, " (reduced for %d: autovacuum analyzes %s again)",
						 cut, cut > 1 ? "them" : "it");
	if (gathered > 0 &&
		s->leaves.mtstate->rootResultRelInfo->ri_RelationDesc->rd_rel->relkind ==
		RELKIND_PARTITIONED_TABLE)
		appendStringInfoString(&left,
							   "; the partitioned table's own left to ANALYZE");
	if (gathered > 0 && s->stats_why)
		appendStringInfo(&left, "; not for every partition: %s", s->stats_why);
	if (gathered > 0)
		snprintf(s->report.statistics, sizeof(s->report.statistics),
				 "gathered for %d relation%s from %d sample rows%s",
				 gathered, gathered > 1 ? "s" : "", sampled, left.data);
	else if (blocked || s->stats_why)
		snprintf(s->report.statistics, sizeof(s->report.statistics),
				 "left to ANALYZE: %s%s", blocked ? blocked : s->stats_why,
				 sized > 0 ? " (its size in pg_class updated)" : "");
}

void
dp_load_finish(DPLoad *s)
{
	if (s->state == DPS_WRITTEN)
	{
		finish_indexes(s);
		finish_statistics(s);
	}
	/*
	 * The rows left to core (DO UPDATE's, MERGE's matched ones), now that
	 * no page builder owns the heap's end and no entry waits to be appended
	 * or merged behind their versions'
	 */
	if (s->upsert)
	{
		dp_upsert_run(s->upsert);
		dp_upsert_describe(s->upsert, s->report.updates,
						   sizeof(s->report.updates));
	}
	s->state = DPS_DONE;
	dp_leaf_end_all(&s->leaves);
	if (s->upsert)
		dp_upsert_end(s->upsert);

	s->report.rows -= dp_queue_deleted(s->queue);
	s->report.relations = s->leaves.count;
	if (s->report.direct)
		dp_report_foreign_keys(&s->report, s->leaves.fk_batched.data,
							   s->leaves.fk_rowwise.data);
	strlcpy(s->report.foreign_partitions, s->leaves.foreign_paths.data,
			sizeof(s->report.foreign_partitions));
	dp_report_publish(&s->report);
}

void
dp_load_pages_begin(DPLoad *s)
{
	if (s->state == DPS_HOLD)
		go_direct(s);
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

/*
 * A page placed whole: each of its rows gets what place() gives a row,
 * its entries spooled for an index build or the row queued for its
 * after-insert work (index entries), with no input line of its own.
 */
static void
page_rows(DPLoad *s, DPLeaf *leaf, Page page, BlockNumber blkno)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	bool		build = dp_indexes_strategy(leaf->indexes) == DP_INDEX_BUILD;
	HeapTupleData tup;

	if (!leaf->needs_post && !build)
		return;					/* no index: nothing per row */
	tup.t_tableOid = RelationGetRelid(leaf->rri->ri_RelationDesc);
	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		lp = PageGetItemId(page, off);

		tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tup.t_len = ItemIdGetLength(lp);
		ItemPointerSet(&tup.t_self, blkno, off);
		if (leaf->needs_post)
		{
			MemoryContext old = MemoryContextSwitchTo(dp_queue_memory(s->queue));

			dp_queue_add(s->queue, leaf, heap_copytuple(&tup), 0, NULL);
			MemoryContextSwitchTo(old);
		}
		if (build)
		{
			ExecStoreHeapTuple(&tup, leaf->slot, false);
			spool(s, leaf, leaf->slot, &tup.t_self);
			ExecClearTuple(leaf->slot);
		}
	}
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
		start_writer(s, leaf);
	f = flush_rule(s, leaf);
	if (f != DPF_NONE)
		flush(s, f == DPF_DRAIN);
	n = dp_heap_add_page(leaf->writer, image, &page, &blkno);
	page_rows(s, leaf, page, blkno);
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed += n;
	s->report.rows += n;
	count_pages(s, leaf);
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
}

void
dp_load_defer(DPLoad *s, TupleTableSlot *planSlot)
{
	defer(s, NULL, planSlot, NULL);
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
