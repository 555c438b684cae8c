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
 * Bit i of bits[i / 64] set when data[i] is one of specials[0..nspecials),
 * and bit i of firsts[i / 64] when it is specials[0]; each has
 * (len + 63) / 64 words, and the bits past len are zero.
 */
extern void dp_scan_specials(const char *specials, int nspecials,
							 const char *data, Size len, uint64 *bits,
							 uint64 *firsts);

/* The first byte in [p, end) that is one of specials; end if none. */
extern const char *dp_scan_next(const char *specials, int nspecials,
								const char *p, const char *end);

/*
 * Count the bytes equal to 'eol' in whole 64-byte blocks from p, at most n
 * bytes, up to the first block that holds one of stops; *skipped gets the
 * bytes counted over (a multiple of 64, 0 where there is no vector code).
 */
extern uint64 dp_scan_count(char eol, const char *stops, int nstops,
							const char *p, Size n, Size *skipped);

#endif							/* DP_SCAN_H */
