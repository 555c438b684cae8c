/*-------------------------------------------------------------------------
 *
 * decide.c
 *	  ON CONFLICT's rows waiting for their batch's decisions, and the rows
 *	  a load leaves to core's executor.
 *
 * Under ON CONFLICT a checked row is not inserted at once: it is copied
 * into the load's pending rows (dp_load_add_pending) and its key joins its
 * leaf's batch (conflict.c).  When DP_CONFLICT_BATCH rows wait, or
 * DP_CONFLICT_BATCH_PAGES batches' worth of their bytes, or the input
 * ends, the batch is decided (dp_load_decide_pending): every leaf's keys
 * are probed, then each row is decided in input order: skipped if its key
 * is taken (DO NOTHING; counted as EXPLAIN ANALYZE's "Conflicting
 * Tuples"), kept for core's update after the load (DO UPDATE), or
 * inserted as any row is (place.c), the flush rule asked first.
 *
 * Rows kept for core (dp_load_keep: DO UPDATE's, COPY's ON_CONFLICT
 * 'update', MERGE's matched rows) go to upsert.c, whose state is begun
 * with the first of them and lives as long as the load.
 *
 * Invariants: pending rows are decided and inserted in input order, all
 * of them before the load's rows end (dp_load_end_rows); a pending row
 * asks the flush rule only once decided.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "common/settings.h"
#include "executor/executor.h"
#include "utils/memutils.h"
#include "utils/rel.h"

void
dp_load_keep(DPLoad *s, ResultRelInfo *rri, TupleTableSlot *slot,
			 ItemPointer found)
{
	if (rri != NULL)
		slot->tts_tableOid = RelationGetRelid(rri->ri_RelationDesc);
	s->kept++;
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

uint64
dp_load_kept(DPLoad *s)
{
	return s->kept;
}

/*
 * The pending rows decided (conflict.c): keys probed, rows decided in
 * input order, the others inserted in that order, flush rule first.
 */
void
dp_load_decide_pending(DPLoad *s)
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
			dp_load_keep(s, row->leaf->rri, slot, &found[i]);
			ExecClearTuple(slot);
			continue;
		}
		if ((f = dp_load_flush_rule(s, row->leaf)) != DPF_NONE)
			dp_load_flush_before_row(s, slot, f);
		dp_load_insert_row(s, row->leaf, slot, row->lineno);
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
void
dp_load_add_pending(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot,
					uint64 lineno)
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
		dp_load_decide_pending(s);
}
