/*-------------------------------------------------------------------------
 *
 * conflict.c
 *	  INSERT ... ON CONFLICT DO NOTHING on the direct path: which rows are
 *	  skipped.
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
 * The direct path writes rows in batches and their index entries after
 * the batch, so an earlier row's key may not be in the index yet.  Per leaf
 * and arbiter, dp_conflicts_skip therefore looks in two places, in the
 * leaf's index order as core does:
 *
 *	the keys of the rows this statement accepted whose entries may not be
 *	  in the index yet: a hash set of key images (below);
 *	the index, probed as core probes it: equality scan keys from the
 *	  index's unique operators, a dirty snapshot, one scan kept open and
 *	  rescanned per row instead of one begun per row.
 *
 * A row found in neither is accepted and its keys go into every arbiter's
 * set.  When the leaf's entries are inserted per batch (indexes.c's row
 * and sorted strategies), a flush that did the batch's index work leaves
 * every accepted row findable in the index, and the sets are emptied
 * (dp_conflicts_indexed); when indexes are built at the end, the sets
 * hold every accepted key until then.
 *
 * Key images.  The set compares keys by their bytes (varlenas detoasted,
 * header form ignored, as nbtree's deduplication compares them), which is
 * the index's equality only where its operator classes declare "equal
 * image" (_bt_allequalimage: not numeric, not a nondeterministic
 * collation).  eligibility.c keeps other arbiters off the direct path, and
 * dp_conflicts_begin checks again for a partition first written later.
 *
 * What the strong lock excludes.  The load holds ShareRowExclusiveLock on
 * every leaf it writes, which conflicts with the RowExclusiveLock of every
 * other writer, prepared transactions included; so an entry the probe
 * finds belongs to a committed row or to this transaction's.  Rows locked
 * FOR SHARE/UPDATE by others stay visible to the dirty snapshot, as in
 * core.  Should an in-progress inserter show up anyway, the probe waits for
 * it as core does.  Exclusion constraints and deferrable unique
 * constraints are not arbiters here: the first is refused at plan time,
 * the second raises core's error.
 *
 * Isolation.  Under REPEATABLE READ and SERIALIZABLE a conflicting row that
 * the statement's snapshot cannot see, inserted by another transaction,
 * raises a serialization failure, as ExecCheckTupleVisible
 * (nodeModifyTable.c, static there) does.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* One key image in an arbiter's set: its bytes and their hash. */
typedef struct DPKeyImage
{
	const char *bytes;
	uint32		len;
	uint32		hash;
} DPKeyImage;

typedef struct DPSeenKey
{
	DPKeyImage	key;
	char		status;			/* simplehash's */
} DPSeenKey;

#define SH_PREFIX		dpkeys
#define SH_ELEMENT_TYPE DPSeenKey
#define SH_KEY_TYPE		DPKeyImage
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	((k).hash)
#define SH_EQUAL(tb, a, b)	((a).len == (b).len && memcmp((a).bytes, (b).bytes, (a).len) == 0)
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
	IndexScanDesc scan;			/* open for the load, rescanned per row */
	ScanKeyData keys[INDEX_MAX_KEYS];
	dpkeys_hash *seen;			/* keys accepted, maybe not indexed yet */
	bool		has_key;		/* this row: a key to look for? */
	int			image_at;		/* this row: its image's offset in 'image' */
	int			image_len;
} DPArbiter;

struct DPConflicts
{
	ResultRelInfo *rri;
	EState	   *estate;
	SnapshotData dirty;			/* the probes' snapshot */
	TupleTableSlot *existing;	/* a conflicting row, fetched by a probe */
	int			narbiters;
	DPArbiter  *arbiters;
	MemoryContext keys_cxt;		/* the sets' images */
	StringInfoData image;		/* this row's images, every arbiter */
	uint64		skipped;
	uint64		seen_count;		/* images in the sets now */
};

/* Is index 'i' of the leaf an arbiter of 'arbiters' (NIL: every unique)? */
static bool
is_arbiter(ResultRelInfo *rri, int i, List *arbiters)
{
	Relation	index = rri->ri_IndexRelationDescs[i];
	IndexInfo  *info = rri->ri_IndexRelationInfo[i];

	if (index == NULL || (!info->ii_Unique && info->ii_ExclusionOps == NULL))
		return false;
	if (!info->ii_ReadyForInserts)
		return false;
	return arbiters == NIL ||
		list_member_oid(arbiters, RelationGetRelid(index));
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
	if (a->info->ii_ExclusionOps != NULL ||
		a->index->rd_rel->relam != BTREE_AM_OID ||
		!_bt_allequalimage(a->index, false))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("directpath: ON CONFLICT index \"%s\" of \"%s\" cannot be checked on the direct path",
						RelationGetRelationName(a->index),
						RelationGetRelationName(heap)),
				 errdetail("Its keys are not compared by their bytes (an exclusion constraint, numeric, or a nondeterministic collation)."),
				 errhint("Retry the statement; it was planned before the partition changed.")));
	/* the unique operators, as ExecOpenIndices(..., true) sets them */
	if (a->info->ii_UniqueOps == NULL)
		BuildSpeculativeIndexInfo(a->index, a->info);
	a->nkeys = IndexRelationGetNumberOfKeyAttributes(a->index);
	a->scan = DP_INDEX_BEGINSCAN(heap, a->index, &c->dirty, a->nkeys, 0);
	a->seen = dpkeys_create(c->keys_cxt, 1024, NULL);
}

DPConflicts *
dp_conflicts_begin(ResultRelInfo *rri, EState *estate, List *arbiters)
{
	DPConflicts *c = palloc0(sizeof(DPConflicts));
	int			n = 0;

	c->rri = rri;
	c->estate = estate;
	InitDirtySnapshot(c->dirty);
	c->existing = table_slot_create(rri->ri_RelationDesc, NULL);
	c->keys_cxt = AllocSetContextCreate(CurrentMemoryContext,
										"directpath conflict keys",
										ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&c->image);
	c->arbiters = palloc0(sizeof(DPArbiter) * Max(rri->ri_NumIndices, 1));
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (is_arbiter(rri, i, arbiters))
			arbiter_begin(c, &c->arbiters[n++], i);
	c->narbiters = n;
	return c;
}

/* Append one key column's image: a NULL flag, then its bytes. */
static void
image_column(StringInfo buf, Form_pg_attribute att, Datum value, bool isnull)
{
	appendStringInfoChar(buf, isnull ? 'n' : 'v');
	if (isnull)
		return;
	if (att->attbyval)
		appendBinaryStringInfo(buf, (char *) &value, sizeof(Datum));
	else if (att->attlen > 0)
		appendBinaryStringInfo(buf, DatumGetPointer(value), att->attlen);
	else if (att->attlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));
		uint32		len = VARSIZE_ANY_EXHDR(v);

		appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(buf, VARDATA_ANY(v), len);
	}
	else
		appendBinaryStringInfo(buf, DatumGetPointer(value),
							   strlen(DatumGetPointer(value)) + 1);
}

/*
 * The row's key in arbiter 'a' (in per-tuple memory): its image in
 * c->image and the probe's scan keys.  False when the row has no key
 * there that could conflict.
 */
static bool
form_key(DPConflicts *c, DPArbiter *a, ExprContext *econtext)
{
	IndexInfo  *info = a->info;
	TupleDesc	desc = RelationGetDescr(a->index);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	if (info->ii_Predicate != NIL)
	{
		if (info->ii_PredicateState == NULL)
			info->ii_PredicateState = ExecPrepareQual(info->ii_Predicate,
													  c->estate);
		if (!ExecQual(info->ii_PredicateState, econtext))
			return false;
	}
	FormIndexDatum(info, econtext->ecxt_scantuple, c->estate, values, isnull);
	a->image_at = c->image.len;
	for (int k = 0; k < a->nkeys; k++)
	{
		if (isnull[k] && !info->ii_NullsNotDistinct)
			return false;
		ScanKeyEntryInitialize(&a->keys[k],
							   isnull[k] ? SK_ISNULL | SK_SEARCHNULL : 0,
							   k + 1, info->ii_UniqueStrats[k], InvalidOid,
							   a->index->rd_indcollation[k],
							   info->ii_UniqueProcs[k], values[k]);
		image_column(&c->image, TupleDescAttr(desc, k), values[k], isnull[k]);
	}
	a->image_len = c->image.len - a->image_at;
	return true;
}

static DPKeyImage
image_of(DPConflicts *c, DPArbiter *a)
{
	DPKeyImage	k;

	k.bytes = c->image.data + a->image_at;
	k.len = a->image_len;
	k.hash = hash_bytes((const unsigned char *) k.bytes, k.len);
	return k;
}

/*
 * Under REPEATABLE READ or SERIALIZABLE, a conflicting row the snapshot
 * cannot see must be this transaction's own (ExecCheckTupleVisible).
 */
static void
check_visible(DPConflicts *c, TupleTableSlot *slot)
{
	Datum		xmin;
	bool		isnull;

	if (!IsolationUsesXactSnapshot())
		return;
	if (table_tuple_satisfies_snapshot(c->rri->ri_RelationDesc, slot,
									   c->estate->es_snapshot))
		return;
	xmin = slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull);
	if (!TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin)))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update")));
}

/* Does the index hold a live entry with the key set up in 'a'? */
static bool
probe(DPConflicts *c, DPArbiter *a)
{
	for (;;)
	{
		TransactionId xwait;

		index_rescan(a->scan, a->keys, a->nkeys, NULL, 0);
		if (!index_getnext_slot(a->scan, ForwardScanDirection, c->existing))
			return false;
		xwait = TransactionIdIsValid(c->dirty.xmin) ? c->dirty.xmin :
			c->dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		/* not expected under the load's lock; wait as core would */
		XactLockTableWait(xwait, c->rri->ri_RelationDesc,
						  &c->existing->tts_tid, XLTW_InsertIndex);
	}
	check_visible(c, c->existing);
	ExecClearTuple(c->existing);
	return true;
}

bool
dp_conflicts_skip(DPConflicts *c, TupleTableSlot *slot)
{
	ExprContext *econtext = GetPerTupleExprContext(c->estate);

	econtext->ecxt_scantuple = slot;
	resetStringInfo(&c->image);
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];

		a->has_key = form_key(c, a, econtext);
		if (!a->has_key)
			continue;
		if (dpkeys_lookup(a->seen, image_of(c, a)) != NULL || probe(c, a))
		{
			c->skipped++;
			return true;
		}
	}

	/* accepted: its keys join the sets */
	for (int i = 0; i < c->narbiters; i++)
	{
		DPArbiter  *a = &c->arbiters[i];
		DPKeyImage	k;
		bool		found;
		char	   *copy;

		if (!a->has_key)
			continue;
		k = image_of(c, a);
		copy = MemoryContextAlloc(c->keys_cxt, k.len);
		memcpy(copy, k.bytes, k.len);
		k.bytes = copy;
		dpkeys_insert(a->seen, k, &found);
		Assert(!found);
		c->seen_count++;
	}
	return false;
}

void
dp_conflicts_indexed(DPConflicts *c)
{
	if (c->seen_count == 0)
		return;
	/* the sets and their images live in keys_cxt */
	MemoryContextReset(c->keys_cxt);
	for (int i = 0; i < c->narbiters; i++)
		c->arbiters[i].seen = dpkeys_create(c->keys_cxt, 1024, NULL);
	c->seen_count = 0;
}

uint64
dp_conflicts_skipped(DPConflicts *c)
{
	return c->skipped;
}

void
dp_conflicts_end(DPConflicts *c)
{
	for (int i = 0; i < c->narbiters; i++)
		index_endscan(c->arbiters[i].scan);
	ExecDropSingleTupleTableSlot(c->existing);
	MemoryContextDelete(c->keys_cxt);
}
