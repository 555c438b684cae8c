/*-------------------------------------------------------------------------
 *
 * index/index.h
 *	  The index stage's public face: a leaf's index maintenance during a
 *	  load (indexes.c; its strategies' work in sorted.c and rebuild.c) and
 *	  sorted lookups in a btree (btprobe.c).  What the stage's own files
 *	  share among themselves (the btree page builder, the right-edge
 *	  append, the merge-rebuild, BRIN summaries, the entries' sort) is in
 *	  index_private.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INDEX_H
#define DP_INDEX_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "storage/itemptr.h"

typedef struct DPIndexes DPIndexes;

/* ---------- indexes.c: a leaf's index maintenance ---------- */

typedef enum DPIndexStrategy
{
	DP_INDEX_NONE,				/* no index */
	DP_INDEX_ROW,				/* per batch, row by row */
	DP_INDEX_SORTED,			/* per batch, sorted by key per index */
	DP_INDEX_BUILD,				/* built at the end from sorted entries */
	DP_INDEX_REBUILD,			/* rebuilt once at the end (REINDEX) */
	DP_INDEX_APPEND,			/* reported only: a DP_INDEX_SORTED batch
								 * appended at an index's right edge */
	DP_INDEX_MERGE,				/* reported only: a DP_INDEX_SORTED index
								 * rewritten with its entries merged in */
	DP_INDEX_SUMMARIZE,			/* reported only: BRIN ranges summarized
								 * at the end (brin.c) */
	DP_INDEX_RUNS,				/* reported only: a DP_INDEX_SORTED batch
								 * written run by run into leaves */
	DP_INDEX_LEAF_MERGE,		/* reported only: a DP_INDEX_SORTED batch
								 * merged into a leaf's items */
} DPIndexStrategy;

/*
 * Choose the leaf's strategy (its indexes are open).  With 'per_batch',
 * every batch's entries must be in the indexes once its work is done (ON
 * CONFLICT's probes find them there), so nothing waits for the end.  With
 * 'beside', other sessions write the table meanwhile: per batch too, and
 * every entry goes in through core's insertion (index_insert), which
 * takes their entries and their uniqueness into account.  With
 * 'updates', the statement also changes rows the leaf held (MERGE), and
 * a key it frees may be taken by a loaded row only after that change: a
 * unique index's entries then never wait on a leaf that had rows.
 */
extern DPIndexes *dp_indexes_begin(ResultRelInfo *rri, bool reject_duplicates,
								   bool beside, bool per_batch, bool updates);
extern DPIndexStrategy dp_indexes_strategy(DPIndexes *ix);

/*
 * The leaf's entries are new versions of its rows (versions.c), each with
 * its old version's key in every unique index: the statement assigns no
 * column of one (no key, INCLUDE, expression or predicate column), none of
 * them is generated (admission's keys_rule), and the leaf is locked
 * against other writers.  A valid unique index then holds no other live
 * row with that key, and the old version is this transaction's to
 * replace, so core's uniqueness check, which would visit the old
 * version's heap page for every entry to find it deleted by us, is not
 * made: the entries are inserted (and written in runs) as a non-unique
 * index's are.
 */
extern void dp_indexes_keys_repeat(DPIndexes *ix);

/* The strategies used so far: bit (1 << DPIndexStrategy) per one. */
extern uint32 dp_indexes_used(DPIndexes *ix);
extern bool dp_indexes_has_unique(DPIndexes *ix);

/* From now on, entries row by row (rows go the normal path). */
extern void dp_indexes_row_by_row(DPIndexes *ix);

/*
 * DP_INDEX_ROW: one written row's entries; returns the recheck list.  With
 * 'conflict', a unique violation sets it instead of raising.
 */
extern List *dp_indexes_row(DPIndexes *ix, TupleTableSlot *slot,
							EState *estate, bool *conflict);

/*
 * DP_INDEX_SORTED: the entries of 'ntuples' written rows (t_self set, in
 * ascending TID order; 'linenos' their input lines or NULL), each index in
 * key order.  'slot' is a heap-tuple slot of the leaf's row type.
 * 'error_line' (with 'linenos'), when given, is set to the input line of
 * the row whose entry goes in next, for the caller's error context.
 */
extern void dp_indexes_batch(DPIndexes *ix, EState *estate,
							 TupleTableSlot *slot, HeapTuple *tuples,
							 uint64 *linenos, int ntuples, uint64 *error_line);

/*
 * Are the leaf's entries taken as each row is placed (dp_indexes_spool),
 * not per batch: DP_INDEX_BUILD, or DP_INDEX_SORTED whose every index
 * waits for the end (an empty table's btrees, non-unique btrees that no
 * trigger reads)?
 */
extern bool dp_indexes_at_place(DPIndexes *ix);

/*
 * dp_indexes_at_place: a placed row (values in 'slot', at 'tid') gives
 * each index its entry, sorted at the end.
 */
extern void dp_indexes_spool(DPIndexes *ix, EState *estate,
							 TupleTableSlot *slot, ItemPointer tid);

/* DP_INDEX_BUILD, _REBUILD: build every index; returns how many (else 0). */
extern int	dp_indexes_finish(DPIndexes *ix);

/* ---------- btprobe.c: sorted keys looked up leaf by leaf ---------- */

/*
 * Called with the leaf share-locked for each heap TID of an entry equal to
 * key 'key' (in order); returns true once the key is settled.  Must not
 * wait for anything.
 */
typedef bool (*DPProbeVisit) (void *arg, int key, ItemPointer tid);

/*
 * Visit the entries of 'nkeys' keys ('values', 'isnull': the index's key
 * columns, key after key, ascending in the index's order) in the btree
 * 'index' of 'heap'.  False (nothing visited) when the btree is older than
 * version 4.  The caller keeps writers and VACUUM out (btprobe.c).
 */
extern bool dp_btree_probe(Relation heap, Relation index, int nkeys,
						   Datum *values, bool *isnull, DPProbeVisit visit,
						   void *arg);

#endif							/* DP_INDEX_H */
