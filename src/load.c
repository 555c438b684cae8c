/*-------------------------------------------------------------------------
 *
 * load.c
 *	  The row pipeline of a direct-path load, shared by INSERT (exec.c) and
 *	  COPY FROM (copy.c).
 *
 * The caller owns an EState and a ModifyTableState for the target (for
 * INSERT, the ones the executor built for the plan; for COPY, ones built
 * as core's CopyFrom does), fires the statement-level triggers and feeds
 * rows in the target's format to dp_load_row().  Per row, this file does
 * what ExecInsert does before the heap insert, in the same order:
 *
 *	route to a leaf partition (ExecFindPartition) and convert the row,
 *	stored generated columns, RLS WITH CHECK, NOT NULL and CHECK
 *	constraints, the partition constraint when inserting into a partition
 *	directly.
 *
 * The row then goes to the leaf's page writer (writer.c), or, for a
 * foreign partition, to its foreign-data wrapper (foreign.c), whose rows
 * get their AFTER ROW triggers, view checks and RETURNING as soon as the
 * wrapper reports them inserted, as in core; when such a row needs that
 * work and is sent at once (no batching), the rows before it are written
 * and processed first, so that the work stays in input order.
 *
 * What ExecInsert does after the heap insert (index entries, AFTER ROW triggers and
 * transition tables, view WITH CHECK OPTION, RETURNING) needs the row to be
 * readable through the buffer manager, so it is deferred: the row is queued
 * and processed, in input order, after the flush that writes its page.  A
 * flush happens when directpath.batch_pages full pages are waiting across
 * all writers, and at the end; while rows are queued, the flush writes the
 * page that is still filling too, so that no row waits indefinitely.
 * RETURNING rows produced by a flush go to the caller's tuplestore.  For
 * COPY, each queued row remembers its input line, and the line is put back
 * while its deferred work runs, so errors name the right line.
 *
 * Small statements.  Rows are first held in memory.  Once they add up to
 * directpath.min_bytes the load commits to the direct path; if the input
 * ends before that, the held rows are inserted through table_tuple_insert
 * (the normal path, shared buffers) so that a one-row INSERT does not cost
 * a fresh page.
 *
 * With a rejects table (COPY ... REJECTS_TABLE, rejects.c), constraints
 * are evaluated without raising and duplicate keys are detected when index
 * entries are inserted; a duplicate row is deleted again and recorded,
 * except in a logically logged table, where decoding would still send the
 * row: there a duplicate fails the statement, as in plain COPY.
 *
 * Invariants: no index entry, trigger event or RETURNING row for a row
 * before its page is written; rows are post-processed in input order; the
 * row count and pg_stat counters are the plain path's.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/catalog.h"
#include "commands/trigger.h"
#include "executor/execPartition.h"
#include "executor/nodeModifyTable.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

typedef enum DPState
{
	DPS_HOLD,					/* collecting rows until min_bytes */
	DPS_DIRECT,					/* writing pages */
	DPS_DONE,
} DPState;

/* One leaf relation the statement writes. */
typedef struct DPLeaf
{
	ResultRelInfo *rri;
	DPWriter   *writer;			/* NULL until the direct path is chosen */
	DPForeign  *foreign;		/* a foreign partition: its batch, else NULL */
	TupleTableSlot *slot;		/* heap-tuple slot for deferred work */
	bool		needs_post;		/* anything to do after the heap insert? */
	bool		defer_indexes;	/* indexes rebuilt at the end instead */
	bool	   *sort_index;		/* entries inserted sorted per batch: per
								 * index, still worth sorting?  Else NULL */
	bool		has_unique;		/* any immediate unique index? */
	int			full_pages;		/* writer's full pages last counted */
	struct DPLeaf *next;
} DPLeaf;

/* A row waiting for its page to be written (or for the decision). */
typedef struct DPRow
{
	DPLeaf	   *leaf;
	HeapTuple	tuple;
	uint64		lineno;			/* input line (COPY), for error context */
	char	   *raw;			/* input line text, kept only for rejects */
} DPRow;

struct DPLoad
{
	const char *kind;			/* "INSERT" or "COPY", for messages */
	EState	   *estate;
	ModifyTableState *mtstate;
	bool		hinted;
	bool		freeze_allowed;
	DPState		state;
	bool		went_direct;
	bool		flushed_once;

	DPLeaf	   *leaves;
	DPLeaf	   *last_leaf;
	int			nleaves;

	DPRow	   *rows;
	int			nrows;
	int			maxrows;
	Size		held_bytes;
	int			pending_full;	/* full pages waiting, all writers */
	DPToastWait toast_wait;		/* rows whose TOAST chunks wait (wal.c) */
	uint64		foreign_rows;	/* rows sent to foreign partitions */
	MemoryContext rowcxt;

	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	DPRejects  *rejects;		/* COPY's rejects table, or NULL */
	StringInfo	raw_line;		/* COPY's current input line */
	bool	   *raw_valid;
	uint64		deleted;		/* rows rejected as duplicates after writing */
	uint64	   *lineno;			/* caller's current input line, or NULL */
	bool	   *line_valid;		/* caller's "line text is current" flag */
	uint64		lineno_now;

	TransactionId xid;
	CommandId	cid;
	uint64		nrows_total;
	uint64		pages_total;
	int			indexes_rebuilt;
	bool		any_frozen;
};

DPLoad *
dp_load_begin(const char *kind, EState *estate, ModifyTableState *mtstate,
			  bool hinted, bool freeze_allowed, Tuplestorestate *retstore,
			  uint64 *lineno, bool *line_valid)
{
	DPLoad	   *s = palloc0(sizeof(DPLoad));

	s->kind = kind;
	s->estate = estate;
	s->mtstate = mtstate;
	s->hinted = hinted;
	s->freeze_allowed = freeze_allowed;
	s->retstore = retstore;
	s->lineno = lineno;
	s->line_valid = line_valid;
	dp_fault_reset();
	s->state = dp_min_bytes > 0 ? DPS_HOLD : DPS_DIRECT;
	s->went_direct = s->state == DPS_DIRECT;
	s->rowcxt = AllocSetContextCreate(estate->es_query_cxt, "directpath rows",
									  ALLOCSET_DEFAULT_SIZES);
	s->maxrows = 1024;
	s->rows = palloc(sizeof(DPRow) * s->maxrows);
	s->xid = GetCurrentTransactionId();
	s->cid = GetCurrentCommandId(true);
	return s;
}

/* Tell the user why the normal path was taken. */
void
dp_report_fallback(bool hinted, const char *kind, const char *why)
{
	ereport(hinted ? dp_fallback_level : DEBUG1,
			(errmsg("directpath: %s uses the normal path: %s", kind, why)));
}

/* Start writing one leaf directly. */
static void
leaf_start_writer(DPLoad *s, DPLeaf *leaf)
{
	Relation	rel = leaf->rri->ri_RelationDesc;
	bool		freeze = s->freeze_allowed && dp_storage_new_in_subxact(rel) &&
		!(s->rejects && leaf->has_unique);

	leaf->writer = dp_writer_begin(rel, freeze, s->xid, s->cid,
								   &s->toast_wait);
	s->any_frozen |= freeze;
}

static DPLeaf *
get_leaf(DPLoad *s, ResultRelInfo *rri)
{
	EState	   *estate = s->estate;
	TransitionCaptureState *tcs = s->mtstate->mt_transition_capture;
	Relation	rel = rri->ri_RelationDesc;
	TriggerDesc *trig = rri->ri_TrigDesc;
	DPLeaf	   *leaf;
	const char *why;
	MemoryContext old;

	if (s->last_leaf && s->last_leaf->rri == rri)
		return s->last_leaf;
	for (leaf = s->leaves; leaf; leaf = leaf->next)
		if (leaf->rri == rri)
			return s->last_leaf = leaf;

	/* A partition seen for the first time: check and lock it. */
	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE &&
		s->mtstate->mt_partition_tuple_routing != NULL)
		why = dp_partition_ineligible(rel);
	else
		why = dp_relation_ineligible(rel, false);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("directpath: partition \"%s\" cannot be written directly: %s",
						RelationGetRelationName(rel), why),
				 errhint("Retry the statement; it was planned before the partition changed.")));

	/*
	 * Appending requires that nobody else extends the relation.  The target
	 * is normally locked at parse analysis already (then this is a local
	 * lock-table hit); partitions, and base tables reached through an
	 * updatable view, are locked here.  Rows of a foreign partition go
	 * through its wrapper: routing's lock is what a plain INSERT takes.
	 */
	if (rel->rd_rel->relkind != RELKIND_FOREIGN_TABLE)
		LockRelationOid(RelationGetRelid(rel), ShareRowExclusiveLock);

	old = MemoryContextSwitchTo(estate->es_query_cxt);
	/* as ExecInsert: open the indexes on first use */
	if (rel->rd_rel->relhasindex && rri->ri_IndexRelationDescs == NULL)
		ExecOpenIndices(rri, false);
	leaf = palloc0(sizeof(DPLeaf));
	leaf->rri = rri;
	leaf->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (rri->ri_IndexRelationDescs[i]->rd_index->indisunique &&
			rri->ri_IndexRelationDescs[i]->rd_index->indimmediate)
			leaf->has_unique = true;
	/* duplicates can only be rejected row by row */
	leaf->defer_indexes = dp_can_defer_indexes(rri) &&
		!(s->rejects && leaf->has_unique);
	if (!leaf->defer_indexes && !(s->rejects && leaf->has_unique) &&
		dp_can_sort_indexes(rri))
	{
		leaf->sort_index = palloc(sizeof(bool) * rri->ri_NumIndices);
		memset(leaf->sort_index, true, sizeof(bool) * rri->ri_NumIndices);
	}
	leaf->needs_post = (rri->ri_NumIndices > 0 && !leaf->defer_indexes) ||
		(trig && (trig->trig_insert_after_row || trig->trig_insert_new_table)) ||
		tcs != NULL ||
		rri->ri_WithCheckOptions != NIL ||
		rri->ri_projectReturning != NULL;
	MemoryContextSwitchTo(old);

	leaf->next = s->leaves;
	s->leaves = leaf;
	s->nleaves++;
	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		leaf->foreign = dp_foreign_begin(rri, estate);
	else if (s->state == DPS_DIRECT)
		leaf_start_writer(s, leaf);
	return s->last_leaf = leaf;
}

/*
 * Deferred work for a COPY row: errors name its line, as core's batched
 * COPY does (line number only: the line's text is gone by now).
 */
static inline void
restore_line(DPLoad *s, DPRow *row)
{
	if (s->lineno)
	{
		*s->lineno = row->lineno;
		*s->line_valid = false;
	}
}

static void
queue_row(DPLoad *s, DPLeaf *leaf, HeapTuple tup)
{
	if (s->nrows == s->maxrows)
	{
		s->maxrows *= 2;
		s->rows = repalloc_huge(s->rows, sizeof(DPRow) * s->maxrows);
	}
	s->rows[s->nrows].leaf = leaf;
	s->rows[s->nrows].tuple = tup;
	s->rows[s->nrows].lineno = s->lineno_now;
	s->rows[s->nrows].raw = NULL;
	if (s->rejects && leaf->has_unique && *s->raw_valid)
	{
		MemoryContext old = MemoryContextSwitchTo(s->rowcxt);

		s->rows[s->nrows].raw = pstrdup(s->raw_line->data);
		MemoryContextSwitchTo(old);
	}
	s->nrows++;
}

/*
 * What ExecInsert does after the heap insert: index entries, AFTER ROW
 * triggers (and transition tables), view WITH CHECK OPTION, RETURNING.
 */
static void
post_process(DPLoad *s, DPRow *row, TupleTableSlot *slot)
{
	EState	   *estate = s->estate;
	DPLeaf	   *leaf = row->leaf;
	ResultRelInfo *rri = leaf->rri;
	TransitionCaptureState *tcs = s->mtstate->mt_transition_capture;
	List	   *recheck = NIL;

	if (rri->ri_NumIndices > 0 && !leaf->defer_indexes && leaf->sort_index == NULL)
	{
		if (s->rejects && leaf->has_unique)
		{
			bool		conflict = false;

			recheck = DP_INSERT_INDEX_TUPLES_NODUP(rri, slot, estate, &conflict);
			if (conflict)
			{
				char	   *message;
				char	   *detail;

				dp_describe_duplicate(rri, recheck, slot, estate, &message, &detail);

				/*
				 * Taking the row back would not take back its INSERT from
				 * the WAL that logical decoding reads: a subscriber would
				 * still receive the duplicate.  Fail as COPY does.
				 */
				if (RelationIsLogicallyLogged(rri->ri_RelationDesc))
					ereport(ERROR,
							(errcode(ERRCODE_UNIQUE_VIOLATION),
							 errmsg("%s", message),
							 detail ? errdetail("%s", detail) : 0,
							 errhint("REJECTS_TABLE cannot reject duplicate keys of a logically logged table (wal_level = logical). "
									 "Remove the duplicates from the input, or load into a table without the unique index first.")));

				/* a duplicate: take the row back and record it */
				simple_heap_delete(rri->ri_RelationDesc, &slot->tts_tid);
				dp_rejects_add(s->rejects, row->lineno, row->raw,
							   ERRCODE_UNIQUE_VIOLATION, message, detail);
				s->deleted++;
				if (s->mtstate->canSetTag)
					estate->es_processed--;
				list_free(recheck);
				return;
			}
		}
		else
			recheck = DP_INSERT_INDEX_TUPLES(rri, slot, estate);
	}

	if (tcs)
		tcs->tcs_original_insert_tuple = NULL;
	ExecARInsertTriggers(estate, rri, slot, recheck, tcs);
	list_free(recheck);

	if (rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_VIEW_CHECK, rri, slot, estate);

	if (rri->ri_projectReturning)
	{
		dp_returning_prepare(rri->ri_projectReturning, estate, rri, slot);
		tuplestore_puttupleslot(s->retstore,
								ExecProject(rri->ri_projectReturning));
	}
}

/* One leaf's queued rows, in TID order, for entry_line(). */
typedef struct DPLeafRows
{
	DPLoad	   *load;
	DPRow	  **rows;
	int			nrows;
} DPLeafRows;

/* Sorted index insertion (indexes.c) is about to insert the entry of 'tid'. */
static void
entry_line(void *arg, ItemPointer tid)
{
	DPLeafRows *lr = (DPLeafRows *) arg;
	DPRow	  **rows = lr->rows;
	int			lo = 0,
				hi = lr->nrows - 1;

	/* the leaf's rows are in TID order: find the row, name its line */
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			cmp = ItemPointerCompare(&rows[mid]->tuple->t_self, tid);

		if (cmp == 0)
		{
			restore_line(lr->load, rows[mid]);
			return;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
}

/* Index entries of the queued rows of leaves that take them sorted. */
static void
insert_sorted_entries(DPLoad *s)
{
	HeapTuple  *tuples = NULL;
	DPLeafRows	lr = {s, NULL, 0};

	for (DPLeaf *leaf = s->leaves; leaf; leaf = leaf->next)
	{
		if (leaf->sort_index == NULL)
			continue;
		if (tuples == NULL)
		{
			tuples = palloc(sizeof(HeapTuple) * s->nrows);
			lr.rows = palloc(sizeof(DPRow *) * s->nrows);
		}
		lr.nrows = 0;
		for (int i = 0; i < s->nrows; i++)
			if (s->rows[i].leaf == leaf)
			{
				lr.rows[lr.nrows] = &s->rows[i];
				tuples[lr.nrows++] = s->rows[i].tuple;
			}
		if (lr.nrows > 0)
			dp_insert_indexes_sorted(leaf->rri, s->estate, leaf->slot,
									 tuples, lr.nrows, leaf->sort_index,
									 s->lineno ? entry_line : NULL, &lr);
	}
	if (tuples != NULL)
	{
		pfree(tuples);
		pfree(lr.rows);
	}
}

/* Deferred work for every queued row, in input order. */
static void
process_queue(DPLoad *s)
{
	EState	   *estate = s->estate;

	insert_sorted_entries(s);

	for (int i = 0; i < s->nrows; i++)
	{
		DPRow	   *row = &s->rows[i];

		ResetPerTupleExprContext(estate);
		restore_line(s, row);
		ExecStoreHeapTuple(row->tuple, row->leaf->slot, false);
		post_process(s, row, row->leaf->slot);
		ExecClearTuple(row->leaf->slot);
	}
	s->nrows = 0;
	MemoryContextReset(s->rowcxt);
}

/*
 * Write every writer's pages, then do the queued rows' deferred work.
 * With 'drain', or while rows are queued, pages still filling are written
 * too.
 */
static void
flush_all(DPLoad *s, bool drain)
{
	bool		partial = drain || s->nrows > 0;
	DPLeaf	   *leaf;

	if (!s->flushed_once)
	{
		s->flushed_once = true;
		dp_fault("first_batch");
	}
	for (leaf = s->leaves; leaf; leaf = leaf->next)
	{
		if (leaf->writer)
			dp_writer_flush(leaf->writer, partial);
		leaf->full_pages = 0;
	}
	s->pending_full = 0;
	dp_fault("batch_written");
	if (s->rejects && s->toast_wait.writers == 0)
		dp_rejects_write_queued(s->rejects);
	process_queue(s);
	dp_fault("batch_done");
}

/* Count full pages after a placement; flush when a batch is ready. */
static inline void
after_place(DPLoad *s, DPLeaf *leaf)
{
	int			full = dp_writer_full_pages(leaf->writer);

	s->pending_full += full - leaf->full_pages;
	leaf->full_pages = full;
	if (s->pending_full >= dp_batch_pages)
		flush_all(s, false);

	/*
	 * A decoder keeps the TOAST chunks of rows it has not seen yet in
	 * memory (wal.c): bound that by writing the pages still filling too.
	 */
	if (s->toast_wait.bytes >= DP_TOAST_WAIT_MAX_BYTES)
		flush_all(s, true);
}

/* Put a formed (held) row on a page; queue it if it has deferred work. */
static void
place_tuple(DPLoad *s, DPLeaf *leaf, HeapTuple tup)
{
	ItemPointerData tid;

	dp_writer_add(leaf->writer, tup, &tid);
	if (leaf->needs_post)
	{
		MemoryContext old = MemoryContextSwitchTo(s->rowcxt);

		queue_row(s, leaf, heap_copytuple(tup));
		MemoryContextSwitchTo(old);
	}
	after_place(s, leaf);
}

/* Put the row in 'slot' on a page; queue it if it has deferred work. */
static inline void
place_slot(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot)
{
	if (leaf->needs_post)
	{
		MemoryContext old = MemoryContextSwitchTo(s->rowcxt);
		HeapTuple	copy;

		dp_writer_add_slot(leaf->writer, slot, &slot->tts_tid, &copy);
		queue_row(s, leaf, copy);
		MemoryContextSwitchTo(old);
	}
	else
		dp_writer_add_slot(leaf->writer, slot, &slot->tts_tid, NULL);
	after_place(s, leaf);
}

/* Enough rows: commit to the direct path and place the held rows. */
static void
go_direct(DPLoad *s)
{
	DPRow	   *held = s->rows;
	int			nheld = s->nrows;
	MemoryContext heldcxt = s->rowcxt;
	DPLeaf	   *leaf;

	s->state = DPS_DIRECT;
	s->went_direct = true;
	for (leaf = s->leaves; leaf; leaf = leaf->next)
		if (leaf->foreign == NULL)
			leaf_start_writer(s, leaf);

	/* place the held rows into a fresh queue */
	s->rowcxt = AllocSetContextCreate(s->estate->es_query_cxt,
									  "directpath rows", ALLOCSET_DEFAULT_SIZES);
	s->rows = palloc(sizeof(DPRow) * s->maxrows);
	s->nrows = 0;
	for (int i = 0; i < nheld; i++)
	{
		s->lineno_now = held[i].lineno;
		place_tuple(s, held[i].leaf, held[i].tuple);
	}
	pfree(held);
	MemoryContextDelete(heldcxt);
	s->held_bytes = 0;
}

/* The input ended before min_bytes: insert the held rows normally. */
static void
finish_normal(DPLoad *s)
{
	/* rows inserted one by one get their index entries one by one */
	for (DPLeaf *leaf = s->leaves; leaf; leaf = leaf->next)
	{
		leaf->defer_indexes = false;
		leaf->sort_index = NULL;
	}

	for (int i = 0; i < s->nrows; i++)
	{
		DPRow	   *row = &s->rows[i];
		TupleTableSlot *slot = row->leaf->slot;

		ResetPerTupleExprContext(s->estate);
		restore_line(s, row);
		ExecStoreHeapTuple(row->tuple, slot, false);
		table_tuple_insert(row->leaf->rri->ri_RelationDesc, slot, s->cid, 0, NULL);
		post_process(s, row, slot);
		ExecClearTuple(slot);
	}
	s->nrows = 0;
	MemoryContextReset(s->rowcxt);
}

/* What foreign_done() works for: the load, and a row of the leaf. */
typedef struct DPForeignCall
{
	DPLoad	   *load;
	DPRow		row;
} DPForeignCall;

/* A row the wrapper reports inserted: ExecInsert's work after the insert. */
static void
foreign_done(void *arg, TupleTableSlot *slot)
{
	DPForeignCall *fc = (DPForeignCall *) arg;

	if (fc->row.leaf->needs_post)
		post_process(fc->load, &fc->row, slot);
}

/* Rows the wrapper did not insert ("do nothing") are not counted. */
static void
foreign_uncount(DPLoad *s, uint64 skipped)
{
	if (skipped == 0)
		return;
	if (s->mtstate->canSetTag)
		s->estate->es_processed -= skipped;
	s->nrows_total -= skipped;
	s->foreign_rows -= skipped;
}

/* A row for a foreign partition (foreign.c). */
static void
foreign_row(DPLoad *s, DPLeaf *leaf, TupleTableSlot *slot)
{
	DPForeignCall fc = {s, {leaf, NULL, s->lineno_now, NULL}};

	/* work for this row now: the rows before it first */
	if (leaf->needs_post && !dp_foreign_batched(leaf->foreign) && s->nrows > 0)
	{
		if (s->state == DPS_HOLD)
			go_direct(s);
		flush_all(s, true);
	}
	s->foreign_rows++;
	foreign_uncount(s, dp_foreign_insert(leaf->foreign, s->estate, slot,
										 foreign_done, &fc));
}

/* Send every foreign partition's waiting rows. */
static void
foreign_flush_all(DPLoad *s)
{
	for (DPLeaf *leaf = s->leaves; leaf; leaf = leaf->next)
		if (leaf->foreign)
		{
			DPForeignCall fc = {s, {leaf, NULL, s->lineno_now, NULL}};

			foreign_uncount(s, dp_foreign_flush(leaf->foreign, s->estate,
												foreign_done, &fc));
		}
}

/* One input row: route, apply row semantics, hold or place it. */
bool
dp_load_row(DPLoad *s, TupleTableSlot *slot)
{
	EState	   *estate = s->estate;
	ModifyTableState *mt = s->mtstate;
	ResultRelInfo *rri = mt->rootResultRelInfo;
	Relation	rel;
	DPLeaf	   *leaf;

	if (mt->mt_partition_tuple_routing)
	{
		TupleConversionMap *map;

		rri = ExecFindPartition(mt, rri, mt->mt_partition_tuple_routing,
								slot, estate);
		map = DP_ROOT_TO_CHILD_MAP(rri, estate);
		if (map != NULL)
			slot = execute_attr_map_slot(map->attrMap, slot,
										 rri->ri_PartitionTupleSlot);
	}
	leaf = get_leaf(s, rri);
	rel = rri->ri_RelationDesc;

	/* ExecInsert's checks, in ExecInsert's order */
	slot->tts_tableOid = RelationGetRelid(rel);
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, slot, CMD_INSERT);
	if (rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_RLS_INSERT_CHECK, rri, slot, estate);
	/* (a foreign partition's constraints are the remote side's, as in core) */
	if (s->rejects && leaf->foreign == NULL)
	{
		int			code;
		char	   *message;
		char	   *detail;

		/* rejects held back for long (rejects.c): write out every page */
		if (dp_rejects_queued(s->rejects) >= DP_REJECTS_QUEUE_MAX &&
			s->state == DPS_DIRECT)
			flush_all(s, true);
		if (!dp_soft_constraints(rri, slot, estate, &code, &message, &detail))
		{
			dp_rejects_add(s->rejects, *s->lineno,
						   *s->raw_valid ? s->raw_line->data : NULL,
						   code, message, detail);
			return false;
		}
	}
	else if (leaf->foreign == NULL)
	{
		if (rel->rd_att->constr)
			ExecConstraints(rri, slot, estate);
		if (rel->rd_rel->relispartition && rri->ri_RootResultRelInfo == NULL)
			ExecPartitionCheck(rri, slot, estate, true);
	}

	if (mt->canSetTag)
		estate->es_processed++;
	s->nrows_total++;
	s->lineno_now = s->lineno ? *s->lineno : 0;

	if (leaf->foreign)
		foreign_row(s, leaf, slot);
	else if (s->state == DPS_HOLD)
	{
		MemoryContext old = MemoryContextSwitchTo(s->rowcxt);
		HeapTuple	tup = ExecCopySlotHeapTuple(slot);

		MemoryContextSwitchTo(old);
		queue_row(s, leaf, tup);
		s->held_bytes += tup->t_len;
		if (s->held_bytes >= (Size) dp_min_bytes)
			go_direct(s);
	}
	else
		place_slot(s, leaf, slot);
	return true;
}


/*
 * The input ended: write everything, set the visibility map, rebuild
 * deferred indexes, record the statistics.  Statement-level triggers are
 * the caller's.
 */
void
dp_load_finish(DPLoad *s)
{
	DPLeaf	   *leaf;
	bool		direct;
	char		why[128];

	foreign_flush_all(s);
	direct = s->state == DPS_DIRECT;
	if (!direct)
	{
		finish_normal(s);
		if (s->nrows_total > s->foreign_rows)
		{
			snprintf(why, sizeof(why),
					 "the statement produced less than directpath.min_bytes (%d bytes) of rows",
					 dp_min_bytes);
			dp_report_fallback(s->hinted, s->kind, why);
		}
		else
			snprintf(why, sizeof(why), "%s",
					 s->nrows_total > 0 ? "every row went to a foreign partition" :
					 "the statement produced no rows");
	}
	else
	{
		flush_all(s, true);
		for (leaf = s->leaves; leaf; leaf = leaf->next)
		{
			if (leaf->writer == NULL)
				continue;
			s->pages_total += dp_writer_pages_written(leaf->writer);
			if (dp_writer_frozen(leaf->writer))
				dp_fault("before_vm");
			dp_writer_finish(leaf->writer);
			if (leaf->defer_indexes)
			{
				dp_fault("before_index_rebuild");
				s->indexes_rebuilt += dp_rebuild_indexes(leaf->rri);
				dp_fault("after_index_rebuild");
			}
		}
		dp_fault("finish");
	}
	Assert(s->toast_wait.writers == 0);
	if (s->rejects)
		dp_rejects_write_queued(s->rejects);
	s->state = DPS_DONE;
	for (leaf = s->leaves; leaf; leaf = leaf->next)
	{
		ExecDropSingleTupleTableSlot(leaf->slot);
		if (leaf->foreign)
			dp_foreign_end(leaf->foreign);
	}

	dp_set_last(direct, direct ? NULL : why, s->nrows_total - s->deleted, s->pages_total,
				direct && s->any_frozen, s->nleaves, s->indexes_rebuilt);
}

/* COPY ... REJECTS_TABLE: reject bad rows instead of failing. */
void
dp_load_set_rejects(DPLoad *s, DPRejects *rejects, StringInfo raw_line,
					bool *raw_valid)
{
	s->rejects = rejects;
	s->raw_line = raw_line;
	s->raw_valid = raw_valid;
	dp_rejects_hold_while(rejects, &s->toast_wait.writers);
}

/* Rows accepted by dp_load_row and later rejected as duplicates. */
uint64
dp_load_deleted(DPLoad *s)
{
	return s->deleted;
}

bool
dp_load_went_direct(DPLoad *s)
{
	return s->went_direct;
}

uint64
dp_load_pages(DPLoad *s)
{
	return s->pages_total;
}

bool
dp_load_frozen(DPLoad *s)
{
	return s->any_frozen;
}

int
dp_load_indexes_rebuilt(DPLoad *s)
{
	return s->indexes_rebuilt;
}
