/*-------------------------------------------------------------------------
 *
 * leaf.c
 *	  The leaf relations a load writes, each set up once, when the first
 *	  row reaches it: checked, locked, and given its strategy.
 *
 * A leaf is the target table itself, or a partition that tuple routing
 * chose.  On first use a leaf is
 *
 *	checked	against the relation rules (eligibility.c): a partition may have
 *			changed since the statement was planned;
 *	locked	ShareRowExclusive, since appending requires that nobody else
 *			extends the relation (the target is normally locked already,
 *			at admission; partitions, and base tables reached through an
 *			updatable view, are locked here).  A load beside other writers
 *			(DPLeafSet.beside: a plain table, RowExclusive) takes no more;
 *			its writer appends through shared buffers (heap/shared.c).  A foreign partition's rows
 *			go through its wrapper, and routing's lock is what a plain
 *			INSERT takes;
 *	given	its index strategy (indexes.c), whether its rows need work
 *			after the insert (queue.c), under ON CONFLICT DO NOTHING its
 *			arbiters (conflict.c), and its writer: a heap page builder
 *			(pages.c) once the load goes direct, or for a foreign
 *			partition a COPY stream or the wrapper's batches (foreign.c).
 *
 * Freezing is decided per leaf when its builder starts: the statement
 * allows it (admission.c), the leaf's storage is new in this
 * subtransaction, and no row may have to be taken back (COPY's rejects
 * delete duplicates and rows violating a foreign key again, which frozen
 * rows forbid).
 *
 * Finding a row's leaf: the previous row's leaf is tried first (a plain
 * table, or rows that arrive grouped by partition); otherwise a hash table
 * of the leaves by their ResultRelInfo, so that a load routing each row
 * to one of hundreds of partitions does not walk the list per row.
 *
 * Invariant: every leaf of a load is in its list and in its hash table
 * exactly once, and is locked before any row is placed into it.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "admission/admission.h"
#include "heap/heap.h"
#include "index/index.h"

#include "common/hashfn.h"
#include "executor/executor.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* A pointer's hash: its bits above the allocation alignment, mixed. */
static inline uint32
pointer_hash(const void *p)
{
	uint64		bits = (uint64) (uintptr_t) p >> 3;

	return murmurhash32((uint32) bits ^ (uint32) (bits >> 32));
}

/* The leaves by their ResultRelInfo (routing keeps one per partition). */
typedef struct DPLeafEntry
{
	ResultRelInfo *rri;
	DPLeaf	   *leaf;
	char		status;			/* simplehash's */
} DPLeafEntry;

#define SH_PREFIX		dpleaves
#define SH_ELEMENT_TYPE DPLeafEntry
#define SH_KEY_TYPE		ResultRelInfo *
#define SH_KEY			rri
#define SH_HASH_KEY(tb, k)	pointer_hash(k)
#define SH_EQUAL(tb, a, b)	((a) == (b))
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* Refuse a partition that can no longer be written directly. */
static void
check_leaf(Relation rel, bool routed)
{
	const char *why;

	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE && routed)
		why = dp_partition_ineligible(rel);
	else
		why = dp_relation_ineligible(rel, false);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("directpath: partition \"%s\" cannot be written directly: %s",
						RelationGetRelationName(rel), why),
				 errhint("Retry the statement; it was planned before the partition changed.")));
}

/*
 * Does a row of this leaf need work after its heap insert, other than its
 * AFTER ROW INSERT triggers' events (*after_rows: does it have some)?
 */
static bool
needs_post_but_triggers(DPLeaf *leaf, ModifyTableState *mt, bool *after_rows)
{
	ResultRelInfo *rri = leaf->rri;
	TriggerDesc *trig = rri->ri_TrigDesc;
	DPIndexStrategy ix = dp_indexes_strategy(leaf->indexes);

	*after_rows = trig && (trig->trig_insert_after_row ||
						   trig->trig_insert_new_table);
	return ix == DP_INDEX_ROW ||
		(ix == DP_INDEX_SORTED && !dp_indexes_at_place(leaf->indexes)) ||
		mt->mt_transition_capture != NULL ||
		rri->ri_WithCheckOptions != NIL ||
		rri->ri_projectReturning != NULL;
}

/* Set up a leaf seen for the first time. */
static DPLeaf *
leaf_create(DPLeafSet *set, ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;
	bool		foreign = rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE;
	MemoryContext old;
	DPLeaf	   *leaf;

	/* a relation the statement created was judged by born.c */
	if (!set->born)
		check_leaf(rel, set->mtstate->mt_partition_tuple_routing != NULL);
	/* beside other writers, the target's RowExclusiveLock is all we hold */
	if (!foreign && !set->beside)
		LockRelationOid(RelationGetRelid(rel), ShareRowExclusiveLock);

	old = MemoryContextSwitchTo(set->estate->es_query_cxt);
	/* as ExecInsert: open the indexes on first use */
	if (rel->rd_rel->relhasindex && rri->ri_IndexRelationDescs == NULL)
		ExecOpenIndices(rri, false);
	leaf = palloc0(sizeof(DPLeaf));
	leaf->rri = rri;
	leaf->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
	leaf->indexes = dp_indexes_begin(rri, set->reject_duplicates, set->beside,
									 set->on_conflict,
									 set->mtstate->operation == CMD_MERGE);
	if (!foreign)
		leaf->fkeys = dp_fkeys_begin(rri, &set->fk_batched, &set->fk_rowwise);
	if (!foreign && set->on_conflict && !set->decided)
		leaf->conflicts = dp_conflicts_begin(rri, set->estate,
											 dp_leaf_arbiters(set, rri),
											 set->do_update);
	{
		bool		after_rows;
		bool		other = needs_post_but_triggers(leaf, set->mtstate,
													&after_rows);

		leaf->needs_post = other || after_rows;
		/* the batched foreign keys may be all (dp_fkeys_at_place) */
		leaf->post_is_fkeys = !other && after_rows && leaf->fkeys != NULL;
	}
	MemoryContextSwitchTo(old);

	if (foreign)
		leaf->foreign = dp_foreign_begin(leaf, set);
	leaf->next = set->list;
	set->list = leaf;
	set->count++;
	return leaf;
}

DPLeaf *
dp_leaf_get(DPLeafSet *set, ResultRelInfo *rri)
{
	DPLeafEntry *entry;
	bool		found;

	if (set->last && set->last->rri == rri)
		return set->last;
	if (set->by_rri == NULL)
		set->by_rri = dpleaves_create(set->estate->es_query_cxt, 16, NULL);
	entry = dpleaves_lookup(set->by_rri, rri);
	if (entry == NULL)
	{
		/* set up first: an error leaves no entry without its leaf */
		DPLeaf	   *leaf = leaf_create(set, rri);

		entry = dpleaves_insert(set->by_rri, rri, &found);
		entry->leaf = leaf;
	}
	return set->last = entry->leaf;
}

bool
dp_leaf_may_freeze(DPLeafSet *set, Relation rel)
{
	return set->freeze_allowed && dp_storage_new_in_subxact(rel);
}

bool
dp_leaf_start_writer(DPLeafSet *set, DPLeaf *leaf)
{
	Relation	rel = leaf->rri->ri_RelationDesc;
	bool		takes_back = set->reject_duplicates &&
		(dp_indexes_has_unique(leaf->indexes) || leaf->fkeys != NULL);
	bool		freeze = dp_leaf_may_freeze(set, rel) && !takes_back;

	if (set->beside)
	{
		leaf->writer = dp_heap_begin_shared(rel, set->xid, set->cid);
		return false;
	}
	leaf->writer = dp_heap_begin(rel, freeze, set->xid, set->cid,
								 &set->toast_wait);
	return freeze;
}

void
dp_leaf_end_all(DPLeafSet *set)
{
	for (DPLeaf *leaf = set->list; leaf; leaf = leaf->next)
	{
		ExecDropSingleTupleTableSlot(leaf->slot);
		if (leaf->conflicts)
			dp_conflicts_end(leaf->conflicts);
		if (leaf->foreign)
			dp_foreign_end(leaf->foreign);
	}
}
