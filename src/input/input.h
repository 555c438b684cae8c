/*-------------------------------------------------------------------------
 *
 * input/input.h
 *	  The input stage: how a direct COPY's text becomes values.  Today the
 *	  exact fast input of common types (fastin.c), under core's COPY reader.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INPUT_H
#define DP_INPUT_H

#include "directpath.h"

/* A COPY begins: the counts of directpath.last_copy_input() start from zero. */
extern void dp_fastin_reset(void);

/*
 * The counts (fields taken, fields handed to the input function, per type
 * with a fast parser), for a parallel worker to hand its own to the leader,
 * which adds them to its.
 */
#define DP_FASTIN_KINDS 8

typedef struct DPFastInCounts
{
	uint64		fast[DP_FASTIN_KINDS];
	uint64		fallback[DP_FASTIN_KINDS];
} DPFastInCounts;

extern void dp_fastin_get_counts(DPFastInCounts *counts);
extern void dp_fastin_add_counts(const DPFastInCounts *counts);

/*
 * After BeginCopyFrom of a text or CSV COPY (or of a parallel COPY's
 * chunk): the columns whose type has an exact fast parser get it in place
 * of their input function, which still takes every form the parser does
 * not.
 */
extern void dp_fastin_install(CopyFromState cstate);

#endif							/* DP_INPUT_H */
