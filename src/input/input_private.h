/*-------------------------------------------------------------------------
 *
 * input/input_private.h
 *	  What the input stage's files share among themselves: the fast input
 *	  (fastin.c and its parsers by type family: fasttime.c, fastnum.c,
 *	  fasttext.c, fastbin.c), the scan of special bytes (scan.c), and
 *	  binary COPY's integers.
 *
 *	  Only the files of src/input/ include it; input.h is the stage's
 *	  public face, what the other stages use.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INPUT_PRIVATE_H
#define DP_INPUT_PRIVATE_H

#include "input/input.h"

#include "datatype/timestamp.h"
#include "pgtime.h"

/* Rows the row former formed, and rows core's reader read (fastin.c). */
extern void dp_input_count_rows(uint64 formed, uint64 core);

/*
 * A big-endian signed integer of n = 2 or 4 bytes at p (binary COPY's
 * field counts and lengths, and its values), at any alignment.
 */
static inline int32
dp_get_net_int(const char *p, int n)
{
	uint32		v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | (unsigned char) p[i];
	return n == 2 ? (int32) (int16) v : (int32) v;
}

/* ---------- fastin.c: the fast input ---------- */

/*
 * For the row former: the fast parser of a column whose input function is
 * 'in' (NULL when 'in' is not a stand-in, or the typmod changes its
 * values), and its call: the value of the 'len' bytes at s (terminated,
 * and at least DP_FASTIN_SLACK bytes readable from s whatever len is) when
 * the parser takes them; false when the input function must be called.
 */
#define DP_FASTIN_SLACK 9

typedef struct DPFastIn DPFastIn;

extern const DPFastIn *dp_fastin_of(FmgrInfo *in, int32 typmod);
extern bool dp_fastin_read(const DPFastIn *f, const char *s, int len,
						   int32 typmod, Datum *d);

/* The same without counting the field; count n fields taken by f. */
extern bool dp_fastin_parse(const DPFastIn *f, const char *s, int len,
							int32 typmod, Datum *d);
extern void dp_fastin_count(const DPFastIn *f, uint64 n);

/*
 * Whether f's parser reads only the 'len' bytes (and the slack), so that
 * the bytes at s need no terminator: s may point into the input.
 */
extern bool dp_fastin_bounded(const DPFastIn *f);

/*
 * Binary COPY: the fast input of a column by its receive function, type
 * and typmod, or NULL; a field of 'len' bytes at s converted when its kind
 * takes it (counted), false when the receive function must be called, and
 * the count of such a call.
 */
extern const DPFastIn *dp_fastin_binary_of(FmgrInfo *recv, Oid type,
										   int32 typmod);
extern bool dp_fastin_read_binary(const DPFastIn *f, const char *s, int len,
								  Datum *d);
extern void dp_fastin_count_fallback(const DPFastIn *f);

/* The kinds of fast input; fastin.c's tables are in this order. */
typedef enum DPFastKind
{
	FAST_INT2,
	FAST_INT4,
	FAST_INT8,
	FAST_BOOL,
	FAST_DATE,
	FAST_TIMESTAMP,
	FAST_TIMESTAMPTZ,
	FAST_UUID,
	FAST_FLOAT4,
	FAST_FLOAT8,
	FAST_TEXT,
	FAST_VARCHAR,
	FAST_BPCHAR,
	FAST_NUMERIC,
	FAST_KINDS
} DPFastKind;

/* n decimal digits at s as a number; false unless all are digits. */
static inline bool
dp_digits(const char *s, int n, int64 *v)
{
	int64		r = 0;

	for (int i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		r = r * 10 + (s[i] - '0');
	}
	*v = r;
	return true;
}

/* fasttime.c: YYYY-MM-DD into tm, the rest at *end; a timestamp(tz). */
extern bool dp_read_date(const char *s, struct pg_tm *tm, const char **end);
extern bool dp_read_timestamp(const char *s, bool with_tz, Timestamp *result);

/* fastnum.c: float4 (is_float4) or float8, and numeric, of a decimal. */
extern bool dp_read_float(const char *s, int len, bool is_float4, Datum *d);
extern bool dp_read_numeric(const char *s, int len, int32 typmod, Datum *d);

/* fasttext.c: character(n), padded. */
extern bool dp_read_bpchar(const char *s, int len, int32 typmod, Datum *d);

/* fastbin.c: a binary field of the kind, as its receive function reads it. */
extern bool dp_read_binary(DPFastKind kind, const char *s, int len, Datum *d);

/* ---------- scan.c: a buffer's special bytes as a bitmap ---------- */

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

#endif							/* DP_INPUT_PRIVATE_H */
