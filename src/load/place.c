/*-------------------------------------------------------------------------
 *
 * place.c
 *	  Where a load's rows go once decided on: held in memory, placed on
 *	  their leaf's pages, or sent to a foreign partition; and the one flush
 *	  rule that says when the pages are written.
 *
 * A row that passed its checks (and, under ON CONFLICT, its decision:
 * decide.c) is counted and goes on (dp_load_insert_row): to the foreign
 * partition's wrapper or stream (foreign.c), held, or placed on a page by
 * its leaf's page builder (pages.c), its index entries spooled for a build
 * at the end (indexes.c) or the row queued for its after-insert work
 * (queue.c).  A parallel load's leader gives the rows of a worker's whole
 * page the same (dp_load_page_rows).
 *
 * Small statements.  Rows are first held in memory (state HOLD).  Once
 * they add up to directpath.min_bytes the load commits to the direct path
 * (dp_load_go_direct); if the input ends before that, the held rows are
 * inserted on the normal path (finish.c), through table_tuple_insert and
 * shared buffers, so that a one-row INSERT does not cost a fresh page.  A
 * leaf's page builder starts when the load goes direct, or at the leaf's
 * first row after that; one that starts on an empty relation samples the
 * rows it writes for the statistics (stats/stats.c).
 *
 * The flush rule, asked before each row and nowhere else
 * (dp_load_flush_rule): write every builder's full pages when
 * directpath.batch_pages of them wait across the leaves; write everything,
 * pages still filling included ("drain"), when toasted rows of a logically
 * logged table wait for more than DP_TOAST_WAIT_MAX_BYTES (a decoder keeps
 * their chunks in memory), when the rejects table holds back
 * DP_REJECTS_QUEUE_MAX rows, or when the row goes unbatched to a foreign
 * partition and needs its after-insert work at once, so the rows before
 * it go first.  A flush writes the pages still filling too whenever rows
 * are queued, so that no row waits indefinitely, then processes the queue.
 * The end of the input drains (finish.c).
 *
 * A flush tells the load's progress (common/progress.c) each phase it
 * enters: writing pages, index entries (the queued rows' work), reading
 * input again.
 *
 * Invariants: no index entry, trigger event or RETURNING row for a row
 * before its page is written (queue.c); pending_full is the count of full
 * pages waiting across the builders, each leaf's share in full_pages.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"
#include "stats/stats.h"

#include "access/htup_details.h"
#include "common/fault.h"
#include "common/settings.h"
#include "executor/executor.h"
#include "utils/memutils.h"
#include "utils/rel.h"

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
	else if (s->leaves.beside)
		why = "loaded beside other writers of the table";
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
void
dp_load_start_writer(DPLoad *s, DPLeaf *leaf)
{
	leaf->frozen = dp_leaf_start_writer(&s->leaves, leaf);
	if (leaf->frozen)
		s->report.frozen = true;
	start_sample(s, leaf);
}

/*
 * After a flush that wrote every page and did the queue's work, rows
 * inserted under ON CONFLICT DO NOTHING are in their indexes (such a
 * leaf's entries are made per batch: leaf.c asks indexes.c for that); the
 * deciders are told, a parallel load's through its callback.
 */
static void
conflicts_indexed(DPLoad *s)
{
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->conflicts)
			dp_conflicts_indexed(leaf->conflicts);
	if (s->indexed)
		s->indexed(s->indexed_arg);
}

/*
 * Write the builders' pages (all of them with 'drain', or while rows are
 * queued), then do the queued rows' after-insert work.
 */
void
dp_load_flush(DPLoad *s, bool drain)
{
	bool		partial = drain || dp_queue_length(s->queue) > 0;

	if (!s->flushed_once)
	{
		s->flushed_once = true;
		dp_fault("first_batch");
	}
	dp_progress_phase(s, DP_PHASE_WRITING, s->rows_in);
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
	{
		if (leaf->writer)
			dp_heap_flush(leaf->writer, partial);
		leaf->full_pages = 0;
	}
	s->pending_full = 0;
	dp_fault("batch_written");
	dp_progress_phase(s, DP_PHASE_ENTRIES, s->rows_in);
	if (s->rejects && s->leaves.toast_wait.writers == 0)
		dp_rejects_write_queued(s->rejects);
	dp_queue_process(s->queue, s->leaves.list);
	if (partial)
		conflicts_indexed(s);
	dp_progress_phase(s, DP_PHASE_READING, s->rows_in);
	dp_fault("batch_done");
}

/* The one flush rule (see the file header), asked before each row. */
DPFlush
dp_load_flush_rule(DPLoad *s, DPLeaf *leaf)
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

/* The placed row's index entries, for indexes built or spooled for the end. */
static inline void
spool(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, ItemPointer tid)
{
	if (dp_indexes_at_place(leaf->indexes))
		dp_indexes_spool(leaf->indexes, s->leaves.estate, slot, tid);
}

/*
 * Is the leaf's only after-insert work its foreign keys' set check, which
 * takes a row's keys as it is placed (fkeys.c)?  Then the row is not
 * queued: no copy of it is kept until its page is written.  Not with a
 * rejects table, which wants every violating row found per batch.
 */
static bool
keys_at_place(DPLoad *s, DPLeaf *leaf)
{
	if (!leaf->fkeys_at_place && leaf->post_is_fkeys && s->rejects == NULL)
		leaf->fkeys_at_place = dp_fkeys_at_place(leaf->fkeys);
	return leaf->fkeys_at_place;
}

/* Put the row in 'slot' on a page; queue it if it has deferred work. */
static void
place(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot, uint64 lineno)
{
	int			full;

	if (leaf->needs_post && keys_at_place(s, leaf))
	{
		full = dp_heap_add_slot(leaf->writer, slot, &slot->tts_tid, NULL);
		dp_fkeys_add_row(leaf->fkeys, slot, dp_queue_next_ordinal(s->queue));
	}
	else if (leaf->needs_post)
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
	dp_load_count_full(s, leaf, full);
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
void
dp_load_go_direct(DPLoad *s)
{
	MemoryContext heldcxt;
	int			nheld;
	DPRow	   *held = dp_queue_take(s->queue, &nheld, &heldcxt);

	s->state = DPS_DIRECT;
	s->report.direct = true;
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (leaf->foreign == NULL)
			dp_load_start_writer(s, leaf);

	for (int i = 0; i < nheld; i++)
	{
		DPLeaf	   *leaf = held[i].leaf;
		ItemPointerData tid;

		dp_heap_add(leaf->writer, held[i].tuple, &tid);
		if (dp_indexes_at_place(leaf->indexes))
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
		dp_load_count_pages(s, leaf);
	}
	if (held)
		pfree(held);
	MemoryContextDelete(heldcxt);
	s->held_bytes = 0;
}

/* Rows the wrapper did not insert ("do nothing") are not counted. */
void
dp_load_uncount(DPLoad *s, uint64 skipped)
{
	if (skipped == 0)
		return;
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed -= skipped;
	s->report.rows -= skipped;
	s->foreign_rows -= skipped;
}

/*
 * Flush before a row.  The row's values may live in per-tuple memory,
 * which the queued rows' work resets: the row is materialized first.  (The
 * queued rows' errors name their lines through the load's error line; the
 * row's own position, COPY's, is not touched.)
 */
void
dp_load_flush_before_row(DPLoad *s, TupleTableSlot *slot, DPFlush f)
{
	ExecMaterializeSlot(slot);
	if (s->state == DPS_HOLD)
		dp_load_go_direct(s);
	dp_load_flush(s, f == DPF_DRAIN);
}

/* A row decided on: counted, then held, placed or sent. */
void
dp_load_insert_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
				   uint64 lineno)
{
	if (s->leaves.mtstate->canSetTag)
		s->leaves.estate->es_processed++;
	s->report.rows++;

	if (leaf->foreign)
	{
		s->foreign_rows++;
		dp_load_uncount(s, dp_foreign_insert(leaf, s->leaves.estate, slot, s->queue,
									 lineno));
	}
	else if (s->state == DPS_HOLD)
	{
		hold(s, leaf, slot, lineno);
		if (s->held_bytes >= (Size) dp_min_bytes)
			dp_load_go_direct(s);
	}
	else
		place(s, leaf, slot, lineno);
}

/*
 * A page placed whole: each of its rows gets what place() gives a row,
 * its entries spooled for an index build, its foreign keys' values added
 * to their sets, or the row queued for its after-insert work, with no
 * input line of its own.
 */
void
dp_load_page_rows(DPLoad *s, DPLeaf *leaf, Page page, BlockNumber blkno)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	bool		build = dp_indexes_at_place(leaf->indexes);
	bool		keys = leaf->needs_post && keys_at_place(s, leaf);
	bool		queue = leaf->needs_post && !keys;
	HeapTupleData tup;

	if (!queue && !keys && !build)
		return;					/* no index: nothing per row */
	tup.t_tableOid = RelationGetRelid(leaf->rri->ri_RelationDesc);
	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		lp = PageGetItemId(page, off);

		tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tup.t_len = ItemIdGetLength(lp);
		ItemPointerSet(&tup.t_self, blkno, off);
		if (queue)
		{
			MemoryContext old = MemoryContextSwitchTo(dp_queue_memory(s->queue));

			dp_queue_add(s->queue, leaf, heap_copytuple(&tup), 0, NULL);
			MemoryContextSwitchTo(old);
		}
		if (build || keys)
		{
			/* one deforming of the row for its entries and its keys */
			ExecStoreHeapTuple(&tup, leaf->slot, false);
			if (build)
				spool(s, leaf, leaf->slot, &tup.t_self);
			if (keys)
				dp_fkeys_add_row(leaf->fkeys, leaf->slot,
								 dp_queue_next_ordinal(s->queue));
			ExecClearTuple(leaf->slot);
		}
	}
}
