/*-------------------------------------------------------------------------
 *
 * conflict.c
 *	  INSERT ... ON CONFLICT on the direct path: which rows are skipped (or,
 *	  under DO UPDATE, updated), decided a batch of rows at a time.
 *
 * Core's rule (ExecInsert, ExecCheckIndexConstraints).  After its NOT NULL,
 * CHECK and partition checks, each row's key in every arbiter index (the
 * unique indexes the conflict target names; all unique indexes without
 * one) is looked up in the index with a dirty snapshot; if a live entry
 * has an equal key, the row is skipped.  Rows are inserted one at a time,
 * so the earlier rows of the statement are in the index when a later row
 * is checked.  The outcome: a row is inserted iff no row of the table, and
 * no row the statement inserted before it, has an equal key in an arbiter
 * index.  A key with a NULL never conflicts (unless the index says NULLS
 * NOT DISTINCT); a row outside a partial index's predicate has no key
 * there.
 *
 * The direct path reaches the same outcome per batch.  The load (load.c)
 * holds up to DP_CONFLICT_BATCH checked rows; each leaf's arbiters get
 * their keys as the rows arrive (dp_conflicts_add).  Then, per leaf:
 *
 *	probe		every distinct key of the batch is looked up in the index
 *				once, as core looks (the unique operators, a dirty
 *				snapshot), by one scan per arbiter: for a one-column key
 *				the keys go as one array (= ANY), which btree sorts and
 *				walks leaf by leaf; a key of several columns is probed on
 *				its own.  An entry found is live if its heap page is
 *				all-visible (as an index-only scan trusts the visibility
 *				map), else if the heap fetch finds a row the dirty
 *				snapshot sees.  A key found live is marked "in the table";
 *	decide		the rows, in input order across leaves: a row is skipped
 *				when, in the first arbiter (in the leaf's index order)
 *				where it has a key, that key is in the table, was accepted
 *				from this batch already, or is in the statement's set
 *				(below); otherwise it is accepted and its keys are marked
 *				accepted;
 *	then the load inserts the accepted rows in input order, and the
 *	batch's accepted keys move to the set (dp_conflicts_batch_done).
 *
 * Under DO UPDATE (upsert.c) a row whose key is in the table is kept for
 * core's update instead of skipped, and stays "in the table" for the rows
 * after it; one whose key was accepted raises core's cardinality error.
 *
 * The set holds the keys of accepted rows whose index entries may not be in
 * the index yet (the direct path makes entries after a batch of pages is
 * written).  A leaf of ON CONFLICT gets its entries per batch (indexes.c's
 * row and sorted strategies, never a build at the end), so a flush that did
 * the batch's index work leaves every row inserted so far findable in the
 * index, and the set is emptied (dp_conflicts_indexed): it holds at most a
 * decision's and a batch's keys.  A later probe that finds one of those
 * rows through the index knows it by its header (xmin this transaction,
 * cmin this statement's command) and takes its key as the statement's
 * (DPK_OURS, decided as accepted), not as a row of the table: under DO UPDATE a key the statement inserted and meets
 * again is core's cardinality error however far apart the two rows are.
 * Deciding the whole batch before inserting any of it keeps a flush from
 * emptying the set between a probe and the decisions that rely on it.
 *
 * Key images.  Keys are compared by their bytes (keyimage.c), which is the
 * index's equality only where its operator classes declare "equal image"
 * (_bt_allequalimage: not numeric, not float, not a nondeterministic
 * collation).  eligibility.c keeps other arbiters off the direct path, and
 * dp_conflicts_begin checks again for a partition first written later.
 *
 * What the strong lock excludes.  The load holds ShareRowExclusiveLock on
 * every leaf it writes, which conflicts with the RowExclusiveLock of every
 * other writer, prepared transactions included; so an entry the probe
 * finds belongs to a committed row or to this transaction's.  Rows locked
 * FOR SHARE/UPDATE by others stay visible to the dirty snapshot, as in
 * core.  Should an in-progress inserter show up anyway, the probe waits for
 * it and starts again, as core does.  Exclusion constraints are not
 * arbiters here (refused at plan time); a deferrable unique constraint
 * raises core's error.
 *
 * Isolation.  Under REPEATABLE READ and SERIALIZABLE a conflicting row that
 * the statement's snapshot cannot see, inserted by another transaction,
 * raises a serialization failure when the row that meets it is decided, as
 * ExecCheckTupleVisible (nodeModifyTable.c, static there) does.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "admission/admission.h"
#include "index/index.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"

/* What a batch key is known as. */
typedef enum DPKeyState
{
	DPK_UNKNOWN,				/* not found in the index */
	DPK_TABLE,					/* a live row of the table has it */
	DPK_INVISIBLE,				/* ... one the snapshot cannot see (RR) */
	DPK_OURS,					/* a row this statement inserted earlier has
								 * it, found in the index */
	DPK_ACCEPTED,				/* a row of this statement has it (this
								 * batch's, or one the probe found) */
	DPK_WAIT,					/* its writer is in progress: probed again */
} DPKeyState;

/*
 * A distinct key of the batch, in one arbiter; or of the statement's set
 * (keys accepted, maybe not in the index yet), where only the image counts.
 */
typedef struct DPBatchKey
{
	DPKeyImage	key;
	int			first;			/* the first row with it (its datums) */
	ItemPointerData tid;		/* DPK_TABLE: the entry found (its row's
								 * HOT chain) */
	uint8		state;			/* DPKeyState */
	char		status;			/* simplehash's */
} DPBatchKey;

#define SH_PREFIX		dpbatch
#define SH_ELEMENT_TYPE DPBatchKey
#define SH_KEY_TYPE		DPKeyImage
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	((k).hash)
#define SH_EQUAL(tb, a, b)	DP_KEY_EQUAL(a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a)	((a)->key.hash)
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* One arbiter index of the leaf. */
typedef struct DPArbiter
{
	Relation	index;
	IndexInfo  *info;
	int			nkeys;
	SortSupportData *sort;		/* the index's order, per key column */
	IndexScanDesc scan;			/* open for the load, rescanned per probe */
	dpbatch_hash *seen;			/* the statement's set (keys_cxt) */
	dpbatch_hash *batch;		/* the batch's distinct keys (batch_cxt) */
	int		   *firsts;			/* their first rows, in input order */
	int			nfirsts;
	/* per row of the batch: */
	bool	   *has_key;
	DPKeyImage *keys;
	Datum	   *values;			/* nkeys per row */
	bool	   *isnull;
} DPArbiter;

struct DPConflicts
{
	ResultRelInfo *rri;
	EState	   *estate;
	SnapshotData dirty;			/* the probes' snapshot */
	TupleTableSlot *existing;	/* a row fetched by a probe */
	Buffer		vmbuffer;		/* the heap's visibility map page */
	IndexFetchTableData *fetch; /* heap fetches of entries found */
	TupleTableSlot *row;		/* a decided row, for the load */
	bool		do_update;		/* DO UPDATE: a key in the table keeps the
								 * row for upsert.c */
	CommandId	cid;			/* the statement's: its own rows' cmin */
	int			narbiters;
	DPArbiter  *arbiters;
	MemoryContext scan_cxt;		/* the scans' (they keep memory of their own
								 * in the context current when they run) */
	MemoryContext keys_cxt;		/* the statement's sets */
	MemoryContext batch_cxt;	/* the batch's keys */
	StringInfoData image;		/* a key's image being formed */
	int			nrows;			/* rows in the batch */
	int			cap;			/* room for rows in the arrays */
	int			next;			/* the next row to decide */
	uint64		seen_count;		/* keys in the sets */
};

/* Is index 'i' an arbiter of 'arbiters' (NIL: every unique index)? */
static bool
is_arbiter(ResultRelInfo *rri, int i, List *arbiters)
{
	Relation	index = rri->ri_IndexRelationDescs[i];
	IndexInfo  *info = rri->ri_IndexRelationInfo[i];

	return index != NULL && info->ii_ReadyForInserts &&
		(info->ii_Unique || info->ii_ExclusionOps != NULL) &&
		dp_index_is_arbiter(index, arbiters);
}

/* An array of the batch's, of 'size' bytes: new (the batch's first), or grown. */
static void *
batch_array(DPConflicts *c, void *array, Size size)
{
	return c->cap == 0 ? MemoryContextAlloc(c->batch_cxt, size) :
		repalloc(array, size);
}

/* Room for 'rows' rows in every arbiter's arrays (batch_cxt). */
static void
batch_room(DPConflicts *c, int rows)
{
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];

		a->has_key = batch_array(c, a->has_key, sizeof(bool) * rows);
		a->firsts = batch_array(c, a->firsts, sizeof(int) * rows);
		a->keys = batch_array(c, a->keys, sizeof(DPKeyImage) * rows);
		a->values = batch_array(c, a->values, sizeof(Datum) * a->nkeys * rows);
		a->isnull = batch_array(c, a->isnull, sizeof(bool) * a->nkeys * rows);
	}
	c->cap = rows;
}

/* The batch's structures, empty (in batch_cxt, just reset). */
static void
batch_start(DPConflicts *c)
{
	for (int i = 0; i < c->narbiters; i++)
	{
		c->arbiters[i].batch = dpbatch_create(c->batch_cxt, 256, NULL);
		c->arbiters[i].nfirsts = 0;
	}
	c->cap = 0;
	batch_room(c, 256);
	c->nrows = 0;
	c->next = 0;
}

/* Set up one arbiter: its equality operators, its scan, its set. */
static void
arbiter_begin(DPConflicts *c, DPArbiter *a, int i)
{
	Relation	heap = c->rri->ri_RelationDesc;

	a->index = c->rri->ri_IndexRelationDescs[i];
	a->info = c->rri->ri_IndexRelationInfo[i];
	if (!a->index->rd_index->indimmediate)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ON CONFLICT does not support deferrable unique constraints/exclusion constraints as arbiters"),
				 errtableconstraint(heap, RelationGetRelationName(a->index))));
	if (a->info->ii_ExclusionOps != NULL || !dp_index_keys_equal_image(a->index))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("directpath: ON CONFLICT index \"%s\" of \"%s\" cannot be checked on the direct path",
						RelationGetRelationName(a->index),
						RelationGetRelationName(heap)),
				 errdetail("Its keys are not compared by their bytes (an exclusion constraint, numeric, float, or a nondeterministic collation)."),
				 errhint("Retry the statement; it was planned before the partition changed.")));
	/* the unique operators, as ExecOpenIndices(..., true) sets them */
	if (a->info->ii_UniqueOps == NULL)
		BuildSpeculativeIndexInfo(a->index, a->info);
	a->nkeys = IndexRelationGetNumberOfKeyAttributes(a->index);
	a->scan = DP_INDEX_BEGINSCAN(heap, a->index, &c->dirty, a->nkeys, 0);
	a->sort = palloc0(sizeof(SortSupportData) * a->nkeys);
	for (int j = 0; j < a->nkeys; j++)
	{
		SortSupport ss = &a->sort[j];

		ss->ssup_cxt = CurrentMemoryContext;
		ss->ssup_collation = a->index->rd_indcollation[j];
		ss->ssup_nulls_first =
			(a->index->rd_indoption[j] & INDOPTION_NULLS_FIRST) != 0;
		ss->ssup_attno = j + 1;
		DP_SORT_SUPPORT_FROM_INDEX(a->index, ss);
	}
	a->seen = dpbatch_create(c->keys_cxt, 1024, NULL);
}

DPConflicts *
dp_conflicts_begin(ResultRelInfo *rri, EState *estate, List *arbiters,
				   bool do_update)
{
	DPConflicts *c = palloc0(sizeof(DPConflicts));
	int			n = 0;

	c->rri = rri;
	c->do_update = do_update;
	c->cid = GetCurrentCommandId(false);
	c->estate = estate;
	c->scan_cxt = CurrentMemoryContext;
	c->vmbuffer = InvalidBuffer;
	InitDirtySnapshot(c->dirty);
	c->existing = table_slot_create(rri->ri_RelationDesc, NULL);
	c->fetch = table_index_fetch_begin(rri->ri_RelationDesc);
	c->row = MakeSingleTupleTableSlot(RelationGetDescr(rri->ri_RelationDesc),
									  &TTSOpsHeapTuple);
	c->keys_cxt = AllocSetContextCreate(CurrentMemoryContext,
										"directpath conflict keys",
										ALLOCSET_DEFAULT_SIZES);
	c->batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath conflict batch",
										 ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&c->image);
	c->arbiters = palloc0(sizeof(DPArbiter) * Max(rri->ri_NumIndices, 1));
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (is_arbiter(rri, i, arbiters))
			arbiter_begin(c, &c->arbiters[n++], i);
	c->narbiters = n;
	batch_start(c);
	return c;
}

/*
 * Row 'r''s key in arbiter 'a' (the row is econtext's scan tuple), kept
 * in the batch; false when it has none that could conflict.
 */
static bool
add_key(DPConflicts *c, DPArbiter *a, int r, ExprContext *econtext)
{
	IndexInfo  *info = a->info;
	TupleDesc	desc = RelationGetDescr(a->index);
	Datum	   *values = &a->values[r * a->nkeys];
	bool	   *isnull = &a->isnull[r * a->nkeys];
	Datum		all[INDEX_MAX_KEYS];
	bool		allnull[INDEX_MAX_KEYS];
	DPKeyImage	k;
	DPBatchKey *e;
	bool		found;
	char	   *copy;

	if (info->ii_Predicate != NIL)
	{
		if (info->ii_PredicateState == NULL)
			info->ii_PredicateState = ExecPrepareQual(info->ii_Predicate,
													  c->estate);
		if (!ExecQual(info->ii_PredicateState, econtext))
			return false;
	}
	/* every column, INCLUDE ones too; the key is the first nkeys */
	FormIndexDatum(info, econtext->ecxt_scantuple, c->estate, all, allnull);
	for (int j = 0; j < a->nkeys; j++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, j);

		if (allnull[j] && !info->ii_NullsNotDistinct)
			return false;
		isnull[j] = allnull[j];
		values[j] = allnull[j] ? (Datum) 0 :
			datumCopy(all[j], att->attbyval, att->attlen);
	}
	k = dp_key_image(&c->image, a->index, values, isnull);
	copy = palloc(k.len);
	memcpy(copy, k.bytes, k.len);
	k.bytes = copy;
	a->keys[r] = k;
	e = dpbatch_insert(a->batch, k, &found);
	if (!found)
	{
		e->first = r;
		e->state = DPK_UNKNOWN;
		a->firsts[a->nfirsts++] = r;
	}
	return true;
}

void
dp_conflicts_add(DPConflicts *c, TupleTableSlot *slot)
{
	ExprContext *econtext = GetPerTupleExprContext(c->estate);
	MemoryContext old = MemoryContextSwitchTo(c->batch_cxt);
	int			r = c->nrows++;

	Assert(r < DP_CONFLICT_BATCH);
	if (r == c->cap)
		batch_room(c, c->cap * 2);
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < c->narbiters; i++)
		c->arbiters[i].has_key[r] = add_key(c, &c->arbiters[i], r, econtext);
	MemoryContextSwitchTo(old);
}

/*
 * Did this statement insert the row?  Its xmin is this transaction's and
 * its cmin the statement's command id (or later), as heap_lock_tuple finds
 * a row "invisible" to the command that inserted it.  A frozen row shows
 * no xmin of ours: only a load into storage new in this transaction
 * freezes, never under DO UPDATE, and under DO NOTHING such a row is
 * skipped as a row of the table would be.
 */
static bool
inserted_by_statement(DPConflicts *c, TupleTableSlot *slot)
{
	HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, NULL);
	HeapTupleHeader h = tuple->t_data;

	return TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(h)) &&
		HeapTupleHeaderGetCmin(h) >= c->cid;
}

/*
 * What a live row found by a probe makes of its key: accepted, if this
 * statement inserted the row (an earlier batch's, indexed by a flush since:
 * the statement's set no longer holds it); in the table; or, under
 * REPEATABLE READ or SERIALIZABLE, invisible to the snapshot and another
 * transaction's (ExecCheckTupleVisible).
 */
static DPKeyState
found_state(DPConflicts *c, TupleTableSlot *slot)
{
	Datum		xmin;
	bool		isnull;

	if (inserted_by_statement(c, slot))
		return DPK_OURS;
	if (!IsolationUsesXactSnapshot() ||
		table_tuple_satisfies_snapshot(c->rri->ri_RelationDesc, slot,
									   c->estate->es_snapshot))
		return DPK_TABLE;
	xmin = slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull);
	return TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin)) ?
		DPK_TABLE : DPK_INVISIBLE;
}

/*
 * What the index entry pointing at 'tid' makes of its key: DPK_UNKNOWN for
 * a dead entry; DPK_WAIT, with *xwait, when an in-progress transaction
 * wrote or is deleting its row; else the key is in the table (found_state).
 * An entry whose heap page is all-visible is live and visible to every
 * snapshot, as an index-only scan trusts, so its row is not fetched.
 */
static DPKeyState
entry_state(DPConflicts *c, ItemPointer tid, TransactionId *xwait)
{
	bool		call_again = false;
	bool		all_dead = false;
	DPKeyState	state;
	ItemPointerData fetched = *tid;

	*xwait = InvalidTransactionId;
	if (VM_ALL_VISIBLE(c->rri->ri_RelationDesc, ItemPointerGetBlockNumber(tid),
					   &c->vmbuffer))
		return DPK_TABLE;
	/* the fetch moves its TID along the HOT chain: never the caller's */
	if (!table_index_fetch_tuple(c->fetch, &fetched, &c->dirty, c->existing,
								 &call_again, &all_dead))
		return DPK_UNKNOWN;
	*xwait = TransactionIdIsValid(c->dirty.xmin) ? c->dirty.xmin : c->dirty.xmax;
	state = TransactionIdIsValid(*xwait) ? DPK_WAIT : found_state(c, c->existing);
	ExecClearTuple(c->existing);
	return state;
}

/*
 * One key probed on its own, by an index scan as core's (a btree older than
 * version 4; a key whose row was being written by another transaction).
 */
static DPKeyState
probe_one(DPConflicts *c, DPArbiter *a, int r, ItemPointer found)
{
	ScanKeyData keys[INDEX_MAX_KEYS];
	DPKeyState	state;

	for (int j = 0; j < a->nkeys; j++)
	{
		bool		isnull = a->isnull[r * a->nkeys + j];

		ScanKeyEntryInitialize(&keys[j], isnull ? SK_ISNULL | SK_SEARCHNULL : 0,
							   j + 1, a->info->ii_UniqueStrats[j], InvalidOid,
							   a->index->rd_indcollation[j],
							   a->info->ii_UniqueProcs[j],
							   a->values[r * a->nkeys + j]);
	}
	for (;;)
	{
		ItemPointer tid;
		TransactionId xwait = InvalidTransactionId;

		state = DPK_UNKNOWN;
		index_rescan(a->scan, keys, a->nkeys, NULL, 0);
		while ((tid = index_getnext_tid(a->scan, ForwardScanDirection)) != NULL &&
			   (state = entry_state(c, tid, &xwait)) == DPK_UNKNOWN)
			;
		if (state != DPK_WAIT)
		{
			if (state == DPK_TABLE)
				*found = *tid;
			return state;
		}
		/* wait as core does (not expected under the load's lock), again */
		XactLockTableWait(xwait, c->rri->ri_RelationDesc, tid, XLTW_InsertIndex);
	}
}

/* A batch key to sort: its first column inline, for the comparisons. */
typedef struct DPSortItem
{
	Datum		first;
	bool		first_null;
	DPBatchKey *e;
} DPSortItem;

/* qsort_arg's comparator: two batch keys in the index's order. */
static int
key_order(const void *x, const void *y, void *arg)
{
	DPArbiter  *a = arg;
	const DPSortItem *ix = x;
	const DPSortItem *iy = y;
	int			r = ApplySortComparator(ix->first, ix->first_null,
										iy->first, iy->first_null, &a->sort[0]);

	for (int j = 1; r == 0 && j < a->nkeys; j++)
	{
		int			px = ix->e->first * a->nkeys + j;
		int			py = iy->e->first * a->nkeys + j;

		r = ApplySortComparator(a->values[px], a->isnull[px],
								a->values[py], a->isnull[py], &a->sort[j]);
	}
	return r;
}

/* What dp_btree_probe's visitor needs. */
typedef struct DPProbe
{
	DPConflicts *c;
	DPBatchKey **order;			/* the keys, sorted */
} DPProbe;

/*
 * dp_btree_probe's visitor: is the entry's row live?  Without waiting: a
 * row an in-progress writer holds leaves its key to be probed again on its
 * own (probe_one), which waits.
 */
static bool
visit_entry(void *arg, int k, ItemPointer tid)
{
	DPProbe    *p = arg;
	TransactionId xwait;
	DPKeyState	state = entry_state(p->c, tid, &xwait);

	if (state == DPK_UNKNOWN)
		return false;
	p->order[k]->state = state;
	p->order[k]->tid = *tid;
	return true;
}

/*
 * The batch's keys looked up in the index's order, leaf by leaf
 * (btprobe.c).  They are sorted from their input order, so that keys that
 * arrive in the index's order (staged rows sorted by their key) cost the
 * sort one pass: qsort's check for input already in order.
 */
static void
probe_sorted(DPConflicts *c, DPArbiter *a)
{
	int			members = Max(a->batch->members, 1);
	DPSortItem *items = MemoryContextAlloc(c->batch_cxt, sizeof(DPSortItem) * members);
	DPBatchKey **order = MemoryContextAlloc(c->batch_cxt, sizeof(DPBatchKey *) * members);
	Datum	   *values = MemoryContextAlloc(c->batch_cxt, sizeof(Datum) * a->nkeys * members);
	bool	   *isnull = MemoryContextAlloc(c->batch_cxt, sizeof(bool) * a->nkeys * members);
	int			n = 0;
	DPProbe		p;

	/* the table is complete: its entries stay where they are */
	for (int f = 0; f < a->nfirsts; f++)
	{
		DPBatchKey *e = dpbatch_lookup(a->batch, a->keys[a->firsts[f]]);

		if (dpbatch_lookup(a->seen, e->key) == NULL)
		{
			items[n].first = a->values[e->first * a->nkeys];
			items[n].first_null = a->isnull[e->first * a->nkeys];
			items[n++].e = e;
		}
	}
	qsort_arg(items, n, sizeof(DPSortItem), key_order, a);
	for (int k = 0; k < n; k++)
	{
		order[k] = items[k].e;
		memcpy(&values[k * a->nkeys], &a->values[order[k]->first * a->nkeys],
			   sizeof(Datum) * a->nkeys);
		memcpy(&isnull[k * a->nkeys], &a->isnull[order[k]->first * a->nkeys],
			   sizeof(bool) * a->nkeys);
	}
	p.c = c;
	p.order = order;
	if (!dp_btree_probe(c->rri->ri_RelationDesc, a->index, n, values, isnull,
						visit_entry, &p))
	{
		for (int k = 0; k < n; k++)
			order[k]->state = probe_one(c, a, order[k]->first, &order[k]->tid);
		return;
	}
	for (int k = 0; k < n; k++)
		if (order[k]->state == DPK_WAIT)
			order[k]->state = probe_one(c, a, order[k]->first, &order[k]->tid);
}

void
dp_conflicts_probe(DPConflicts *c)
{
	MemoryContext old = MemoryContextSwitchTo(c->scan_cxt);

	for (int i = 0; i < c->narbiters; i++)
		probe_sorted(c, &c->arbiters[i]);
	MemoryContextSwitchTo(old);
}

/* What row 'r''s key in 'a' is known as (and, in the table, its entry). */
static DPKeyState
key_state(DPArbiter *a, int r, ItemPointer found)
{
	DPBatchKey *e;

	if (dpbatch_lookup(a->seen, a->keys[r]) != NULL)
		return DPK_ACCEPTED;
	e = dpbatch_lookup(a->batch, a->keys[r]);
	*found = e->tid;
	return e->state;
}

DPDecision
dp_conflicts_decide(DPConflicts *c, ItemPointer found)
{
	int			r = c->next++;

	Assert(r < c->nrows);
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];

		if (!a->has_key[r])
			continue;
		switch (key_state(a, r, found))
		{
			case DPK_UNKNOWN:
				continue;
			case DPK_INVISIBLE:
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
				break;
			case DPK_TABLE:
				return c->do_update ? DP_ROW_UPDATE : DP_ROW_SKIP;
			case DPK_OURS:
			case DPK_ACCEPTED:
				if (c->do_update)
					dp_affected_twice(CMD_INSERT);
				return DP_ROW_SKIP;
			case DPK_WAIT:
				elog(ERROR, "directpath: conflict key left unprobed");
		}
	}
	for (int i = 0; i < c->narbiters; i++)
		if (c->arbiters[i].has_key[r])
			dpbatch_lookup(c->arbiters[i].batch, c->arbiters[i].keys[r])->state =
				DPK_ACCEPTED;
	return DP_ROW_INSERT;
}

bool
dp_conflicts_provisional(DPConflicts *c)
{
	int			r = c->next - 1;

	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];
		DPKeyState	state;

		if (!a->has_key[r])
			continue;
		state = dpbatch_lookup(a->batch, a->keys[r])->state;
		if (state == DPK_TABLE || state == DPK_OURS || state == DPK_INVISIBLE)
			return false;
	}
	/* its keys count as accepted for the rows after it */
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];
		DPBatchKey *e;

		if (!a->has_key[r])
			continue;
		e = dpbatch_lookup(a->batch, a->keys[r]);
		if (e->state == DPK_UNKNOWN)
			e->state = DPK_ACCEPTED;
	}
	return true;
}

void
dp_conflicts_row_images(DPConflicts *c, StringInfo out)
{
	int			r = c->next - 1;

	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];
		int32		len = a->has_key[r] ? (int32) a->keys[r].len : -1;

		appendBinaryStringInfo(out, (char *) &len, sizeof(len));
		if (len > 0)
			appendBinaryStringInfo(out, a->keys[r].bytes, len);
	}
}

TupleTableSlot *
dp_conflicts_slot(DPConflicts *c)
{
	return c->row;
}

int
dp_conflicts_batch_rows(DPConflicts *c)
{
	return c->nrows;
}

void
dp_conflicts_batch_done(DPConflicts *c)
{
	Assert(c->next == c->nrows);
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];
		dpbatch_iterator it;
		DPBatchKey *e;

		dpbatch_start_iterate(a->batch, &it);
		while ((e = dpbatch_iterate(a->batch, &it)) != NULL)
		{
			DPKeyImage	k = e->key;
			bool		found;

			if (e->state != DPK_ACCEPTED)
				continue;
			k.bytes = MemoryContextAlloc(c->keys_cxt, k.len);
			memcpy((char *) k.bytes, e->key.bytes, k.len);
			dpbatch_insert(a->seen, k, &found);
			if (!found)
				c->seen_count++;
		}
	}
	MemoryContextReset(c->batch_cxt);
	batch_start(c);
}

void
dp_conflicts_indexed(DPConflicts *c)
{
	if (c->seen_count == 0)
		return;
	/* the sets and their images live in keys_cxt */
	MemoryContextReset(c->keys_cxt);
	for (int i = 0; i < c->narbiters; i++)
		c->arbiters[i].seen = dpbatch_create(c->keys_cxt, 1024, NULL);
	c->seen_count = 0;
}

void
dp_conflicts_end(DPConflicts *c)
{
	for (int i = 0; i < c->narbiters; i++)
		index_endscan(c->arbiters[i].scan);
	if (BufferIsValid(c->vmbuffer))
		ReleaseBuffer(c->vmbuffer);
	table_index_fetch_end(c->fetch);
	ExecDropSingleTupleTableSlot(c->existing);
	ExecDropSingleTupleTableSlot(c->row);
	MemoryContextDelete(c->keys_cxt);
	MemoryContextDelete(c->batch_cxt);
}
