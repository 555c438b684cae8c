/*-------------------------------------------------------------------------
 *
 * radix.h
 *	  A stable radix sort of fixed-size entries by unsigned 64-bit words
 *	  (radix.c), for the sorts of integer keys (index/keysort.c,
 *	  load/fkset.c), and the arrays of such sorts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_RADIX_H
#define DP_RADIX_H

/* Words a sort may be by. */
#define DP_RADIX_MAX_WORDS 4

/*
 * Sort the n entries of 'size' bytes at 'entries' by their words at byte
 * offsets offs[0 .. nwords - 1] (each a uint64, word 0 the most
 * significant), stably: entries equal in every word keep their order.
 * 'limit' bounds the bytes the sort may use beside the entries (it needs
 * as much again).  False, with the entries untouched, when the sort would
 * not pay (few entries, or too many bytes that vary) or would not fit:
 * the caller sorts them another way.
 */
extern bool dp_radix_sort(void *entries, int64 n, Size size,
						  const Size *offs, int nwords, Size limit);

/*
 * A sort's array of 'size' bytes, freed with 'cxt' at the latest ('flags':
 * MCXT_ALLOC_NO_OOM returns NULL when the memory is not there); the same
 * array grown to 'size' bytes, its contents kept, maybe moved; and freed.
 * Only these three may touch such an array's memory as a whole (never
 * pfree or repalloc: it may be a mapping of its own, radix.c).
 */
extern void *dp_sort_array_alloc(MemoryContext cxt, Size size, int flags);
extern void *dp_sort_array_grow(void *p, Size size);
extern void dp_sort_array_free(void *p);

#endif							/* DP_RADIX_H */
