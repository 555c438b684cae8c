/*-------------------------------------------------------------------------
 *
 * index/keysort.h
 *	  The sort of the btree page builder's entries (keysort.c, for
 *	  btree.c): on integer sort words where the index's key columns allow,
 *	  else core's btree tuplesort.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_KEYSORT_H
#define DP_KEYSORT_H

#include "compat.h"

#include "access/itup.h"
#include "utils/relcache.h"

typedef struct DPKeySort DPKeySort;

/*
 * A sort of 'index's entries within 'workmem' kB; with 'check_unique', a
 * unique index's duplicates raise core's error.
 */
extern DPKeySort *dp_keysort_begin(Relation heap, Relation index,
								   int workmem, bool check_unique);

/* One entry (copied). */
extern void dp_keysort_add(DPKeySort *s, ItemPointer tid, Datum *values,
						   bool *isnull);

/*
 * The entries in btree order (sorted at the first call); NULL after the
 * last.  Each stays valid until the next call, at least (until the call
 * after the next 1024 on sort words).
 */
extern IndexTuple dp_keysort_next(DPKeySort *s);

extern void dp_keysort_end(DPKeySort *s);

#endif							/* DP_KEYSORT_H */
