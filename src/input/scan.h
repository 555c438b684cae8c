/*-------------------------------------------------------------------------
 *
 * input/scan.h
 *	  A buffer's special bytes as a bitmap (scan.c), for the row former.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_SCAN_H
#define DP_SCAN_H

#include "input/input.h"

#define DP_SCAN_MAX_SPECIALS 5

/*
 * Bit i of bits[i / 64] set when data[i] is one of specials[0..nspecials);
 * bits has (len + 63) / 64 words, and the bits past len are zero.
 */
extern void dp_scan_specials(const char *specials, int nspecials,
							 const char *data, Size len, uint64 *bits);

/* The first byte in [p, end) that is one of specials; end if none. */
extern const char *dp_scan_next(const char *specials, int nspecials,
								const char *p, const char *end);

#endif							/* DP_SCAN_H */
