/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  The after-insert queue: what ExecInsert does after the heap insert,
 *	  done for directly written rows once their pages are on disk.
 *
 * Index entries, AFTER ROW triggers and transition tables, view WITH CHECK
 * OPTION and RETURNING need a row to be readable through the buffer
 * manager, so a row that needs any of them is queued when it is placed
 * (dp_queue_add) and processed, in input order, after the flush that
 * writes its page (dp_queue_process): first the batch's sorted index
 * entries per leaf (indexes.c), then, row by row, the row-by-row index
 * entries, triggers, view checks and RETURNING (dp_queue_post_row), which
 * is also what a foreign partition's row gets once its wrapper reports it
 * inserted (foreign.c), then the batch's foreign keys checked per batch
 * (fkeys.c).  RETURNING rows go to the caller's tuplestore.
 *
 * A load beside other writers learns its rows' blocks only as their pages
 * are written (heap/shared.c): processing a batch first translates each
 * queued row's TID (dp_heap_resolve_tid; the identity for other loads).
 *
 * Before the load commits to the direct path the queue holds the rows
 * themselves (load.c); dp_queue_take() hands them back to be placed, or
 * dp_queue_insert_normal() inserts them on the normal path.
 *
 * Rejected rows (COPY ... REJECTS_TABLE): first the batch's foreign keys
 * checked per batch are checked for every row, and each row's first
 * violation is noted.  Then, row by row: with a unique index its entries
 * are inserted without raising, and a duplicate row is deleted again and
 * recorded in the rejects table; else a row with a noted violation is
 * taken back the same way, before its trigger events.  In a logically
 * logged table, where decoding would still send the row, either fails the
 * statement, as in plain COPY.
 *
 * For COPY each queued row remembers its input line, which is the load's
 * error line while its work runs (COPY's error context names it), so that
 * errors name the right line; COPY's own position is never written.
 *
 * Invariants: no index entry, trigger event or RETURNING row for a row
 * before its page is written; rows are processed in input order; the row
 * memory of a processed batch is released with it.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "heap/heap.h"
#include "index/index.h"

#include "access/heapam.h"
#include "catalog/catalog.h"
#include "access/tableam.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "utils/memutils.h"
#include "utils/rel.h"

struct DPQueue
{
	EState	   *estate;
	ModifyTableState *mtstate;	/* canSetTag, transition capture */
	DPRow	   *rows;			/* queued rows, in input order */
	int			nrows;
	int			maxrows;
	MemoryContext rowcxt;		/* the rows' tuples and line texts */
	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	DPInputLine *input;			/* COPY's input position, or NULL */
	uint64	   *error_line;		/* the load's: the row being processed */
	DPRejects  *rejects;		/* COPY's rejects table, or NULL */
	uint64		deleted;		/* rows taken back as duplicates */
	uint64		next_ordinal;	/* the next placed row's place in the
								 * load's input order, queued or not */
	bool		direct;			/* processing directly written rows */
};

DPQueue *
dp_queue_create(EState *estate, ModifyTableState *mtstate,
				Tuplestorestate *retstore, DPInputLine *input,
				uint64 *error_line, DPRejects *rejects)
{
	DPQueue    *q = palloc0(sizeof(DPQueue));

	q->estate = estate;
	q->mtstate = mtstate;
	q->retstore = retstore;
	q->input = input;
	q->error_line = error_line;
	q->rejects = rejects;
	q->rowcxt = AllocSetContextCreate(estate->es_query_cxt, "directpath rows",
									  ALLOCSET_DEFAULT_SIZES);
	return q;
}

MemoryContext
dp_queue_memory(DPQueue *q)
{
	return q->rowcxt;
}

int
dp_queue_length(DPQueue *q)
{
	return q->nrows;
}

uint64
dp_queue_deleted(DPQueue *q)
{
	return q->deleted;
}

const char *
dp_queue_line_text(DPQueue *q, DPLeaf *leaf)
{
	/* a duplicate or a foreign-key violation is recorded with its text */
	bool		may_reject = leaf->fkeys != NULL ||
		(dp_indexes_strategy(leaf->indexes) == DP_INDEX_ROW &&
		 dp_indexes_has_unique(leaf->indexes));

	if (q->rejects && may_reject && *q->input->line_valid)
		return q->input->raw_line->data;
	return NULL;
}

void
dp_queue_add(DPQueue *q, DPLeaf *leaf, HeapTuple tup, uint64 lineno,
			 const char *raw)
{
	DPRow	   *row;

	if (q->nrows == q->maxrows)
	{
		q->maxrows = Max(q->maxrows * 2, 64);
		q->rows = q->rows == NULL ?
			MemoryContextAlloc(q->estate->es_query_cxt, sizeof(DPRow) * q->maxrows) :
			repalloc_huge(q->rows, sizeof(DPRow) * q->maxrows);
	}
	row = &q->rows[q->nrows++];
	row->leaf = leaf;
	row->tuple = tup;
	row->lineno = lineno;
	row->raw = raw ? MemoryContextStrdup(q->rowcxt, raw) : NULL;
	row->fk.key = -1;
	row->ordinal = q->next_ordinal++;
}

uint64
dp_queue_next_ordinal(DPQueue *q)
{
	return q->next_ordinal++;
}

/*
 * Errors of the row's deferred work name its input line (COPY): the load's
 * error line, which COPY's error context reports; 0 once the work is done.
 */
static inline void
name_line(DPQueue *q, uint64 lineno)
{
	if (q->input)
		*q->error_line = lineno;
}

/*
 * Take a written row back and record it in the rejects table.  Taking it
 * back would not take its INSERT back from the WAL that logical decoding
 * reads: a subscriber would still receive the row.  There, fail as COPY
 * does.
 */
static void
take_back(DPQueue *q, Relation rel, ItemPointer tid, uint64 lineno,
		  const char *raw, int sqlerrcode, const char *message,
		  const char *detail)
{
	if (RelationIsLogicallyLogged(rel))
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg("%s", message),
				 detail ? errdetail("%s", detail) : 0,
				 errhint("REJECTS_TABLE cannot reject duplicate keys or foreign-key violations of a logically logged table (wal_level = logical). "
						 "Remove those rows from the input, or load into a table without the constraint first.")));

	simple_heap_delete(rel, tid);
	dp_rejects_add(q->rejects, lineno, raw, sqlerrcode, message, detail);
	q->deleted++;
	if (q->mtstate->canSetTag)
		q->estate->es_processed--;
}

/*
 * Index entries of a row, row by row; with rejects, a duplicate is taken
 * back and recorded instead (see the file header).  Returns false when the
 * row was taken back; *recheck gets the entries to recheck (deferred
 * constraints).
 */
static bool
insert_entries(DPQueue *q, DPLeaf *leaf, TupleTableSlot *slot,
			   const char *raw, uint64 lineno, List **recheck)
{
	ResultRelInfo *rri = leaf->rri;
	bool		conflict = false;
	char	   *message;
	char	   *detail;

	*recheck = dp_indexes_row(leaf->indexes, slot, q->estate,
							  q->rejects ? &conflict : NULL);
	if (!conflict)
		return true;

	dp_describe_duplicate(rri, *recheck, slot, q->estate, &message, &detail);
	take_back(q, rri->ri_RelationDesc, &slot->tts_tid, lineno, raw,
			  ERRCODE_UNIQUE_VIOLATION, message, detail);
	list_free(*recheck);
	return false;
}

/*
 * ExecInsert's work after the insert for the row in 'slot'; 'row' is its
 * queue entry when it has one.  A row found to violate a foreign key
 * (COPY's rejects) is taken back after its index entries, so that a row
 * that is also a duplicate is recorded as one, as plain COPY would fail on
 * the duplicate first, and before its trigger events.
 */
static void
post_row(DPQueue *q, DPLeaf *leaf, TupleTableSlot *slot, DPRow *row)
{
	EState	   *estate = q->estate;
	ResultRelInfo *rri = leaf->rri;
	TransitionCaptureState *tcs = q->mtstate->mt_transition_capture;
	const char *raw = row ? row->raw : NULL;
	uint64		lineno = row ? row->lineno : 0;
	List	   *recheck = NIL;

	if (leaf->indexes != NULL &&
		dp_indexes_strategy(leaf->indexes) == DP_INDEX_ROW &&
		!insert_entries(q, leaf, slot, raw, lineno, &recheck))
		return;
	if (row && row->fk.key >= 0)
	{
		char	   *message;
		char	   *detail;

		dp_fkeys_describe(leaf->fkeys, row->fk, row->tuple, &message, &detail);
		take_back(q, rri->ri_RelationDesc, &slot->tts_tid, lineno, raw,
				  ERRCODE_FOREIGN_KEY_VIOLATION, message, detail);
		list_free(recheck);
		return;
	}

	if (tcs)
		tcs->tcs_original_insert_tuple = NULL;
	/* a directly written row's batched foreign keys are checked already */
	if (q->direct && leaf->fkeys != NULL)
		dp_fkeys_swap(leaf->fkeys, true);
	ExecARInsertTriggers(estate, rri, slot, recheck, tcs);
	if (q->direct && leaf->fkeys != NULL)
		dp_fkeys_swap(leaf->fkeys, false);
	list_free(recheck);

	if (rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_VIEW_CHECK, rri, slot, estate);

	if (rri->ri_projectReturning)
	{
		dp_returning_prepare(rri->ri_projectReturning, estate, rri, NULL, slot,
							 NULL);
		tuplestore_puttupleslot(q->retstore,
								ExecProject(rri->ri_projectReturning));
	}
}

void
dp_queue_post_row(DPQueue *q, DPLeaf *leaf, TupleTableSlot *slot)
{
	post_row(q, leaf, slot, NULL);
}

/*
 * The queued rows of one leaf, in input order (which is TID order): their
 * tuples, lines and places in the queue.
 */
static int
leaf_rows(DPQueue *q, DPLeaf *leaf, HeapTuple *tuples, uint64 *linenos,
		  int *places)
{
	int			n = 0;

	for (int i = 0; i < q->nrows; i++)
		if (q->rows[i].leaf == leaf)
		{
			places[n] = i;
			linenos[n] = q->rows[i].lineno;
			tuples[n++] = q->rows[i].tuple;
		}
	return n;
}

/* The arrays leaf_rows fills, for the whole queue. */
typedef struct DPLeafRows
{
	HeapTuple  *tuples;
	uint64	   *linenos;
	int		   *places;
} DPLeafRows;

static DPLeafRows
alloc_rows(DPQueue *q)
{
	DPLeafRows	r;

	r.tuples = palloc(sizeof(HeapTuple) * q->nrows);
	r.linenos = palloc(sizeof(uint64) * q->nrows);
	r.places = palloc(sizeof(int) * q->nrows);
	return r;
}

static void
free_rows(DPLeafRows *r)
{
	pfree(r->tuples);
	pfree(r->linenos);
	pfree(r->places);
}

/* Index entries of the queued rows of leaves that take them sorted. */
static void
insert_sorted_entries(DPQueue *q, DPLeaf *leaves)
{
	DPLeafRows	r = alloc_rows(q);

	for (DPLeaf *leaf = leaves; leaf; leaf = leaf->next)
	{
		int			n;

		if (leaf->indexes == NULL ||
			dp_indexes_strategy(leaf->indexes) != DP_INDEX_SORTED ||
			dp_indexes_at_place(leaf->indexes))
			continue;
		n = leaf_rows(q, leaf, r.tuples, r.linenos, r.places);
		if (n > 0)
			dp_indexes_batch(leaf->indexes, q->estate, leaf->slot, r.tuples,
							 r.linenos, n, q->input ? q->error_line : NULL);
	}
	free_rows(&r);
}

/*
 * Foreign keys checked per batch, for every leaf: each violating row gets
 * its first violation noted (with 'all' false, only the first violating
 * row of each constraint is sure to be found).  Returns the first
 * violating row's place in the queue, or -1.
 */
static int
mark_foreign_keys(DPQueue *q, DPLeaf *leaves, bool all)
{
	DPLeafRows	r = alloc_rows(q);
	DPFkeyViolation *v = palloc(sizeof(DPFkeyViolation) * q->nrows);
	int			first = -1;

	for (DPLeaf *leaf = leaves; leaf; leaf = leaf->next)
	{
		int			n;

		if (leaf->fkeys == NULL)
			continue;
		n = leaf_rows(q, leaf, r.tuples, r.linenos, r.places);
		/* each row's place in the load's input order */
		for (int i = 0; i < n; i++)
			r.linenos[i] = q->rows[r.places[i]].ordinal;
		if (n == 0 || dp_fkeys_check(leaf->fkeys, r.tuples, r.linenos, n, all,
									 v) < 0)
			continue;
		for (int i = 0; i < n; i++)
			if (v[i].key >= 0)
			{
				q->rows[r.places[i]].fk = v[i];
				if (first < 0 || r.places[i] < first)
					first = r.places[i];
			}
	}
	free_rows(&r);
	pfree(v);
	return first;
}

/*
 * Foreign keys checked per batch: the violation of the first row in input
 * order is reported, naming its line.
 */
static void
check_foreign_keys(DPQueue *q, DPLeaf *leaves)
{
	int			first = mark_foreign_keys(q, leaves, false);
	DPRow	   *row;

	if (first < 0)
		return;
	row = &q->rows[first];
	name_line(q, row->lineno);
	dp_fkeys_report(row->leaf->fkeys, row->fk, row->tuple);
}

/* Forget the processed rows. */
static void
clear(DPQueue *q)
{
	q->nrows = 0;
	MemoryContextReset(q->rowcxt);
}

void
dp_queue_process(DPQueue *q, DPLeaf *leaves)
{
	if (q->nrows == 0)
		return;
	/* beside other writers, a row's block is known once its page is written */
	for (int i = 0; i < q->nrows; i++)
		if (q->rows[i].leaf->writer != NULL)
			dp_heap_resolve_tid(q->rows[i].leaf->writer,
								&q->rows[i].tuple->t_self);
	/* COPY's rejects: every violation noted, post_row takes them back */
	if (q->rejects)
		mark_foreign_keys(q, leaves, true);
	insert_sorted_entries(q, leaves);
	q->direct = true;
	for (int i = 0; i < q->nrows; i++)
	{
		DPRow	   *row = &q->rows[i];

		ResetPerTupleExprContext(q->estate);
		name_line(q, row->lineno);
		ExecStoreHeapTuple(row->tuple, row->leaf->slot, false);
		post_row(q, row->leaf, row->leaf->slot, row);
		ExecClearTuple(row->leaf->slot);
	}
	q->direct = false;
	if (!q->rejects)
		check_foreign_keys(q, leaves);
	name_line(q, 0);
	clear(q);
}

DPRow *
dp_queue_take(DPQueue *q, int *nrows, MemoryContext *cxt)
{
	DPRow	   *rows = q->rows;

	*nrows = q->nrows;
	*cxt = q->rowcxt;
	q->rows = NULL;
	q->nrows = q->maxrows = 0;
	q->rowcxt = AllocSetContextCreate(q->estate->es_query_cxt,
									  "directpath rows", ALLOCSET_DEFAULT_SIZES);
	return rows;
}

void
dp_queue_insert_normal(DPQueue *q, CommandId cid)
{
	for (int i = 0; i < q->nrows; i++)
	{
		DPRow	   *row = &q->rows[i];
		TupleTableSlot *slot = row->leaf->slot;

		ResetPerTupleExprContext(q->estate);
		name_line(q, row->lineno);
		ExecStoreHeapTuple(row->tuple, slot, false);
		table_tuple_insert(row->leaf->rri->ri_RelationDesc, slot, cid, 0, NULL);
		post_row(q, row->leaf, slot, row);
		ExecClearTuple(slot);
	}
	name_line(q, 0);
	clear(q);
}
