/*-------------------------------------------------------------------------
 *
 * fastin.c
 *	  Exact fast input for the common types of a direct COPY's text and CSV
 *	  columns: the first piece of the COPY row former.
 *
 * Core's COPY reader calls each column's input function through the
 * FmgrInfo in cstate->in_functions[] (InputFunctionCall, or
 * InputFunctionCallSafe under ON_ERROR), after it has split and de-escaped
 * the line.  dp_fastin_install, called once after BeginCopyFrom, replaces
 * the FmgrInfo of each column whose type has a fast parser here with one
 * that calls fast_input: it parses the field's text itself when the text
 * has a form whose result it can prove identical, bit for bit, to the type's
 * input function under any setting the function consults, and otherwise
 * calls the type's own input function with the very same call (arguments,
 * escontext, its own FmgrInfo and cache), so every other value, and every
 * error with its message and context, stays core's.
 *
 * The forms taken (anything else, including whitespace, a '+' sign,
 * underscores, other bases, another spelling, a value out of range, a
 * typmod other than a character type's or numeric's, is the input
 * function's):
 *
 *	int2, int4, int8	-?[0-9]{1,n}, n = 4, 9, 18 (no overflow possible)
 *	bool				t, f, true, false
 *	date				YYYY-MM-DD, year 0001-9999, a real day (with 4 year
 *						digits core reads Y-M-D under every DateStyle)
 *	timestamp			YYYY-MM-DD HH:MM:SS[.f{1,6}], hour 00-23, second
 *						00-59 (typmod -1)
 *	timestamptz			the same, then an optional offset +HH, +HH:MM or
 *						+HH:MM:SS (hour at most 15, as core's limit); without
 *						one the session's TimeZone decides, by the same call
 *						core makes (DetermineTimeZoneOffset)
 *	uuid				the canonical 8-4-4-4-12 hex digits, either case
 *	float4, float8		-?D+(.D+)?([eE][+-]?D{1,3})? with at most 19
 *						digits, whose value is m / 10^k with m < 2^64 and
 *						k <= 19 (the exponent applied): m and 10^k fit in 64
 *						bits, so the quotient m / 10^k is computed in
 *						128-bit integers with enough bits, and its remainder,
 *						to round it to 24 or 53 bits exactly as strtof and
 *						strtod (float4in's and float8in's) round: to the
 *						nearest, ties to even (on compilers with a 128-bit
 *						integer)
 *	numeric				-?D+(.D+)? with at most 30 digits in all, and a
 *						typmod of scale 0-63 or none: rounded to the
 *						typmod's scale half away from zero (round_var's
 *						rule, the first dropped digit decides), refused when
 *						the rounded value has more integer digits than the
 *						precision leaves (numeric_in's overflow error), then
 *						stored as numeric_in stores it: base-10000 digits
 *						aligned on the decimal point, leading and trailing
 *						zero digits stripped, a zero positive with weight 0,
 *						the short header (the display scale is the typmod's
 *						or the input's number of decimals)
 *	text				any text (textin copies it)
 *	varchar(n)			at most n bytes (so at most n characters: core's
 *						clipping of longer values is never needed)
 *	character(n)		at most n characters (pg_mbstrlen_with_len, as
 *						core counts them), padded with spaces to n
 *
 * Binary COPY (dp_fastin_binary_of, dp_fastin_read_binary, for the row
 * former's binary tuples): a field of int2, int4, int8, float4, float8,
 * bool, date, timestamp, timestamptz (typmod -1) or uuid whose length is
 * the type's is converted from network byte order as the type's receive
 * function converts it, without the call; a date or timestamp outside the
 * range the receive function accepts (its error), any other length (its
 * error too) and every other type go to the receive function.
 *
 * For these forms the result is computed by the functions core's own path
 * ends in (date2j, tm2timestamp, DetermineTimeZoneOffset), so it cannot
 * differ; fractional seconds of at most 6 digits are exact integers where
 * core rounds (rint) a double.  directpath.copy_fast_input = check runs
 * both and fails on any difference (the tests' oracle); off leaves
 * in_functions alone.
 *
 * Counts of fields taken and handed on, per type, are kept for the last
 * COPY of this process (directpath.last_copy_input()); a parallel COPY's
 * workers hand theirs to the leader at their end (parallel.c).
 *
 * Long: over 700 lines.  A short exact parser per type (fourteen), the
 * stand-in they share, and the input stage's counts and their two SQL
 * functions; each piece is small and they change together.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "pgtime.h"
#include "port/pg_bitutils.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

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

/* The input function each kind stands in for, and its type. */
static const struct
{
	Oid			func;
	Oid			type;
}			kinds[FAST_KINDS] = {
	{F_INT2IN, INT2OID},
	{F_INT4IN, INT4OID},
	{F_INT8IN, INT8OID},
	{F_BOOLIN, BOOLOID},
	{F_DATE_IN, DATEOID},
	{F_TIMESTAMP_IN, TIMESTAMPOID},
	{F_TIMESTAMPTZ_IN, TIMESTAMPTZOID},
	{F_UUID_IN, UUIDOID},
	{F_FLOAT4IN, FLOAT4OID},
	{F_FLOAT8IN, FLOAT8OID},
	{F_TEXTIN, TEXTOID},
	{F_VARCHARIN, VARCHAROID},
	{F_BPCHARIN, BPCHAROID},
	{F_NUMERIC_IN, NUMERICOID},
};

/* Whether a typmod other than -1 leaves the kind's parser in charge. */
#define KIND_TAKES_TYPMOD(k) \
	((k) == FAST_VARCHAR || (k) == FAST_BPCHAR || (k) == FAST_NUMERIC)

/* The receive function each kind's binary form stands in for (0: none). */
static const Oid binary_kinds[FAST_KINDS] = {
	F_INT2RECV, F_INT4RECV, F_INT8RECV, F_BOOLRECV, F_DATE_RECV,
	F_TIMESTAMP_RECV, F_TIMESTAMPTZ_RECV, F_UUID_RECV, F_FLOAT4RECV,
	F_FLOAT8RECV, 0, 0, 0, 0
};

/* A column's stand-in: what fast_input needs (the FmgrInfo's fn_extra). */
struct DPFastIn
{
	FmgrInfo	orig;			/* the type's input (binary: receive)
								 * function, its own cache */
	DPFastKind	kind;
	bool		check;			/* also call orig, and compare */
};

StaticAssertDecl(FAST_KINDS == DP_FASTIN_KINDS, "DP_FASTIN_KINDS is the kinds' count");

/* Fields of the last COPY: taken here, handed to the input function. */
static uint64 n_fast[FAST_KINDS];
static uint64 n_slow[FAST_KINDS];
static uint64 n_rows_formed;
static uint64 n_rows_core;
static char reader_refusal[DP_REASON_LEN];	/* why core's reader read it all */

/* n decimal digits at s as a number; false unless all are digits. */
static inline bool
digits(const char *s, int n, int64 *v)
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

/* -?[0-9]{1,maxdigits} and nothing else, in the 'n' bytes at s. */
static inline bool
read_int(const char *s, int n, int maxdigits, int64 *v)
{
	bool		neg = (*s == '-');

	if (neg)
	{
		s++;
		n--;
	}
	if (n < 1 || n > maxdigits || !digits(s, n, v))
		return false;
	if (neg)
		*v = -*v;
	return true;
}

/*
 * -?[0-9]{1,maxdigits} in the 'n' bytes at s, when at least 8 bytes at s
 * (9 after a sign) may be read: up to 8 digits are checked and converted
 * in one 64-bit word (the word's bytes beyond the digits are replaced by
 * leading zeros; a byte is a digit when its high nibble is 3 and adding 6
 * to its low nibble does not carry; then pairs, quads and the two halves
 * are combined by multiplications, the least significant digit in the
 * highest byte on a little-endian machine).  Longer numbers, and every
 * number on a big-endian machine, are read digit by digit.
 */
static inline bool
read_int_wide(const char *s, int n, int maxdigits, int64 *v)
{
#ifndef WORDS_BIGENDIAN
	bool		neg = (*s == '-');
	uint64		w;

	if (neg)
	{
		s++;
		n--;
	}
	if (n < 1 || n > 8 || n > maxdigits)
		return read_int(neg ? s - 1 : s, neg ? n + 1 : n, maxdigits, v);
	memcpy(&w, s, sizeof(w));
	if (n < 8)
		w = (w << (8 * (8 - n))) | (UINT64CONST(0x3030303030303030) >> (8 * n));
	if ((w & UINT64CONST(0xF0F0F0F0F0F0F0F0)) != UINT64CONST(0x3030303030303030) ||
		((w + UINT64CONST(0x0606060606060606)) & UINT64CONST(0xF0F0F0F0F0F0F0F0)) !=
		UINT64CONST(0x3030303030303030))
		return false;
	w -= UINT64CONST(0x3030303030303030);
	w = (w * 10 + (w >> 8)) & UINT64CONST(0x00FF00FF00FF00FF);
	w = (w * 100 + (w >> 16)) & UINT64CONST(0x0000FFFF0000FFFF);
	w = (w * 10000 + (w >> 32)) & UINT64CONST(0xFFFFFFFF);
	*v = neg ? -(int64) w : (int64) w;
	return true;
#else
	return read_int(s, n, maxdigits, v);
#endif
}

/* YYYY-MM-DD, a real day of years 1-9999, into tm; the rest at *end. */
static bool
read_date(const char *s, struct pg_tm *tm, const char **end)
{
	int64		y,
				m,
				d;

	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &m) ||
		s[7] != '-' || !digits(s + 8, 2, &d))
		return false;
	if (y < 1 || m < 1 || m > MONTHS_PER_YEAR || d < 1 ||
		d > day_tab[isleap(y)][m - 1])
		return false;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = (int) y;
	tm->tm_mon = (int) m;
	tm->tm_mday = (int) d;
	*end = s + 10;
	return true;
}

/*
 * " HH:MM:SS[.f{1,6}]" after a date, hour 0-23 and second 0-59, into tm
 * and *fsec; the rest at *end.
 */
static bool
read_time(const char *s, struct pg_tm *tm, fsec_t *fsec, const char **end)
{
	int64		h,
				mi,
				sec,
				f = 0;
	int			n = 0;

	if (s[0] != ' ' || !digits(s + 1, 2, &h) || s[3] != ':' ||
		!digits(s + 4, 2, &mi) || s[6] != ':' || !digits(s + 7, 2, &sec))
		return false;
	if (h > 23 || mi > 59 || sec > 59)
		return false;
	s += 9;
	if (*s == '.')
	{
		s++;
		while (s[n] >= '0' && s[n] <= '9')
			n++;
		if (n < 1 || n > 6)
			return false;
		(void) digits(s, n, &f);
		for (int i = n; i < 6; i++)
			f *= 10;
		s += n;
	}
	tm->tm_hour = (int) h;
	tm->tm_min = (int) mi;
	tm->tm_sec = (int) sec;
	*fsec = (fsec_t) f;
	*end = s;
	return true;
}

/* "+HH", "+HH:MM" or "+HH:MM:SS" (or '-') and nothing after: *tz as core's. */
static bool
read_offset(const char *s, int *tz)
{
	int64		h,
				mi = 0,
				sec = 0;
	int			secs;

	if ((s[0] != '+' && s[0] != '-') || !digits(s + 1, 2, &h))
		return false;
	if (s[3] == ':')
	{
		if (!digits(s + 4, 2, &mi))
			return false;
		if (s[6] == ':')
		{
			if (!digits(s + 7, 2, &sec) || s[9] != '\0')
				return false;
		}
		else if (s[6] != '\0')
			return false;
	}
	else if (s[3] != '\0')
		return false;
	if (h > 15 || mi > 59 || sec > 59)
		return false;
	secs = (int) ((h * MINS_PER_HOUR + mi) * SECS_PER_MINUTE + sec);
	/* core's DecodeTimezone: seconds west of Greenwich */
	*tz = s[0] == '-' ? secs : -secs;
	return true;
}

static bool
read_timestamp(const char *s, bool with_tz, Timestamp *result)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	const char *p;

	if (!read_date(s, &tm, &p) || !read_time(p, &tm, &fsec, &p))
		return false;
	if (!with_tz)
		return *p == '\0' && tm2timestamp(&tm, fsec, NULL, result) == 0;
	if (*p == '\0')
		tz = DetermineTimeZoneOffset(&tm, session_timezone);
	else if (!read_offset(p, &tz))
		return false;
	return tm2timestamp(&tm, fsec, &tz, result) == 0;
}

/* Each byte's value as a hex digit, or -1 (filled by dp_fastin_install). */
static int8 hex_digits[256];

static void
fill_hex_digits(void)
{
	memset(hex_digits, -1, sizeof(hex_digits));
	for (int c = 0; c < 10; c++)
		hex_digits['0' + c] = c;
	for (int c = 0; c < 6; c++)
		hex_digits['a' + c] = hex_digits['A' + c] = 10 + c;
}

static inline int
hexval(char c)
{
	return hex_digits[(unsigned char) c];
}

static bool
read_uuid(const char *s, pg_uuid_t *u)
{
	int			i = 0;

	for (int pos = 0; pos < 36; pos += 2)
	{
		int			hi,
					lo;

		if (pos == 8 || pos == 13 || pos == 18 || pos == 23)
		{
			if (s[pos] != '-')
				return false;
			pos--;				/* the next pair starts after the hyphen */
			continue;
		}
		hi = hexval(s[pos]);
		lo = hexval(s[pos + 1]);
		if (hi < 0 || lo < 0)
			return false;
		u->data[i++] = (unsigned char) (hi << 4 | lo);
	}
	return i == UUID_LEN && s[36] == '\0';
}

/*
 * -?D+(.D+)? with at most 19 digits in all: *m the integer of its digits
 * (below 10^19, so a uint64), *k the number of decimals, *neg the sign.
 */
static bool
read_decimal(const char *s, int len, uint64 *m, int *k, bool *neg)
{
	const char *e = s + len;
	const char *dot;
	uint64		v = 0;
	int			n = 0;

	*neg = (s < e && *s == '-');
	if (*neg)
		s++;
	dot = memchr(s, '.', e - s);
	for (const char *p = s; p < e; p++)
	{
		if (p == dot)
			continue;
		if (*p < '0' || *p > '9' || ++n > 19)
			return false;
		v = v * 10 + (*p - '0');
	}
	/* digits on both sides of a dot */
	if (dot == s || dot == e - 1 || n == 0)
		return false;
	*m = v;
	*k = dot ? e - dot - 1 : 0;
	return true;
}

#ifdef HAVE_INT128
static const uint64 pow10_u64[] = {
	UINT64CONST(1), UINT64CONST(10), UINT64CONST(100), UINT64CONST(1000),
	UINT64CONST(10000), UINT64CONST(100000), UINT64CONST(1000000),
	UINT64CONST(10000000), UINT64CONST(100000000), UINT64CONST(1000000000),
	UINT64CONST(10000000000), UINT64CONST(100000000000),
	UINT64CONST(1000000000000), UINT64CONST(10000000000000),
	UINT64CONST(100000000000000), UINT64CONST(1000000000000000),
	UINT64CONST(10000000000000000), UINT64CONST(100000000000000000),
	UINT64CONST(1000000000000000000), UINT64CONST(10000000000000000000)
};

/*
 * m / 10^k, m > 0, rounded to a binary significand of 'bits' bits, ties to
 * even (as strtod and strtof round): the value is *mant * 2^*exp.  The
 * quotient of m * 2^s by 10^k is taken with 'bits' + 2 or + 3 bits (s is
 * chosen so; m * 2^s fits in 128 bits because m and 10^k fit in 64), and
 * its low bits with the division's remainder tell exactly whether the
 * value lies below, on or above the midpoint between two significands.
 */
static double
nearest_binary(uint64 m, int k, int bits)
{
	uint128		d = pow10_u64[k];
	int			s = bits + 2 + pg_leftmost_one_pos64(pow10_u64[k]) -
		pg_leftmost_one_pos64(m);
	uint128		n;
	uint64		q;
	bool		inexact;
	int			shift;
	uint64		mant;
	uint64		rest;
	uint64		half;

	if (s >= 0)
		n = (uint128) m << s;
	else
	{
		n = m;
		d <<= -s;
	}
	q = (uint64) (n / d);
	inexact = (n % d) != 0;
	shift = pg_leftmost_one_pos64(q) + 1 - bits;
	mant = q >> shift;
	rest = q & ((UINT64CONST(1) << shift) - 1);
	half = UINT64CONST(1) << (shift - 1);
	if (rest > half || (rest == half && (inexact || (mant & 1))))
		mant++;
	/* mant may have become 2^bits: still exact in a double */
	return ldexp((double) mant, shift - s);
}

/*
 * The exponent [+-]?D{1,3} in the 'len' bytes at s applied to m / 10^k:
 * false unless the value stays m' / 10^k' with m' < 2^64 and k' <= 19 (a
 * positive exponent multiplies m, if it does not overflow).
 */
static bool
apply_exponent(const char *s, int len, uint64 *m, int *k)
{
	bool		neg = len > 0 && *s == '-';
	int			skip = (len > 0 && (*s == '-' || *s == '+')) ? 1 : 0;
	int			x = 0;
	int			t;

	if (len - skip < 1 || len - skip > 3)
		return false;
	for (int i = skip; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	t = (neg ? -x : x) - *k;	/* the value is m * 10^t */
	if (t <= 0)
	{
		if (-t > 19)
			return false;
		*k = -t;
		return true;
	}
	if (t > 19 || *m > PG_UINT64_MAX / pow10_u64[t])
		return false;
	*m *= pow10_u64[t];
	*k = 0;
	return true;
}

#endif

/*
 * float8 and float4 of a decimal of at most 19 digits: the nearest value,
 * which is what strtod and strtof (float8in's and float4in's) return;
 * every such decimal is a normal number of either type.
 */
static bool
read_float(const char *s, int len, bool is_float4, Datum *d)
{
#ifdef HAVE_INT128
	uint64		m;
	int			k;
	bool		neg;
	double		v;
	const char *e = memchr(s, 'e', len);

	if (e == NULL)
		e = memchr(s, 'E', len);
	if (!read_decimal(s, e ? e - s : len, &m, &k, &neg))
		return false;
	if (e != NULL && !apply_exponent(e + 1, len - (e + 1 - s), &m, &k))
		return false;
	v = m == 0 ? 0.0 : nearest_binary(m, k, is_float4 ? FLT_MANT_DIG : DBL_MANT_DIG);
	if (neg)
		v = -v;
	*d = is_float4 ? Float4GetDatum((float) v) : Float8GetDatum(v);
	return true;
#else
	return false;
#endif
}

/*
 * Whether the len bytes at s are all ASCII, a word at a time: then each is
 * a character in every server encoding.
 */
static inline bool
all_ascii(const char *s, int len)
{
	uint64		seen = 0;
	int			i = 0;

	for (; i + 8 <= len; i += 8)
	{
		uint64		w;

		memcpy(&w, s + i, sizeof(w));
		seen |= w;
	}
	for (; i < len; i++)
		seen |= (unsigned char) s[i];
	return (seen & UINT64CONST(0x8080808080808080)) == 0;
}

/*
 * character(n): the text padded with spaces to n characters, as
 * bpchar_input makes it; a value longer than n characters (which core
 * clips when the rest is spaces, or refuses) is the input function's.
 */
static bool
read_bpchar(const char *s, int len, int32 typmod, Datum *d)
{
	int			charlen;
	int			padded = len;
	BpChar	   *result;

	if (typmod >= (int32) VARHDRSZ)
	{
		charlen = all_ascii(s, len) ? len : pg_mbstrlen_with_len(s, len);
		if (charlen > typmod - (int32) VARHDRSZ)
			return false;
		padded = len + (typmod - VARHDRSZ - charlen);
	}
	result = (BpChar *) palloc(padded + VARHDRSZ);
	SET_VARSIZE(result, padded + VARHDRSZ);
	memcpy(VARDATA(result), s, len);
	memset(VARDATA(result) + len, ' ', padded - len);
	*d = PointerGetDatum(result);
	return true;
}

/*
 * numeric's on-disk form, as numeric.c defines it (a stable format): a
 * 4-byte varlena header, then in the short form a 16-bit header word (the
 * flag bits 10, a sign bit, six bits of display scale, a weight sign bit
 * and six bits of weight), then the base-10000 digits as int16, the first
 * of weight 'weight'.
 */
#define NUM_SHORT			0x8000
#define NUM_SHORT_NEG		0x2000
#define NUM_SHORT_DSCALE_SHIFT 7
#define NUM_SHORT_DSCALE_MAX 63
#define NUM_SHORT_WEIGHT_NEG 0x0040
#define NUM_SHORT_WEIGHT_MASK 0x003F
#define NUM_FAST_DIGITS		30	/* decimal digits taken */
#define NUM_DEC_DIGITS		4	/* per base-10000 digit */

/* The value of the k <= 4 decimal digits at p. */
static inline int16
nbase_digit(const char *p, int k)
{
	int			v = 0;

	for (int i = 0; i < k; i++)
		v = v * 10 + (p[i] - '0');
	return (int16) v;
}

/*
 * The digits of a decimal of nint integer digits at ip and nfrac decimals
 * at fp rounded to 'scale' < nfrac decimals as round_var rounds (the first
 * digit dropped decides, away from zero), into buf: a leading digit for
 * the carry, then nint integer digits and 'scale' decimals.
 */
static void
round_decimal(const char *ip, int nint, const char *fp, int scale, char *buf)
{
	int			k = nint + scale;	/* the last digit kept */

	buf[0] = '0';
	memcpy(buf + 1, ip, nint);
	memcpy(buf + 1 + nint, fp, scale);
	if (fp[scale] < '5')
		return;
	while (buf[k] == '9')
		buf[k--] = '0';
	buf[k]++;
}

/*
 * numeric_in's stored value of the decimal of nint integer digits at ip
 * and nfrac decimals at fp, with display scale dscale: base-10000 digits
 * aligned on the decimal point (leading zeros of the integer part dropped
 * first: they only add zero digits), then the leading and trailing zero
 * digits stripped, a zero positive; false when the short form cannot hold
 * it.
 */
static bool
make_numeric(bool neg, const char *ip, int nint, const char *fp, int nfrac,
			 int dscale, Datum *d)
{
	int16		nbase[NUM_FAST_DIGITS / NUM_DEC_DIGITS + 3];
	int			n = 0;
	int			first = 0;
	int			weight = -1;
	uint16		header;
	char	   *result;

	while (nint > 0 && *ip == '0')
	{
		ip++;
		nint--;
	}
	if (nint > 0)
	{
		int			lead = nint - ((nint - 1) / NUM_DEC_DIGITS) * NUM_DEC_DIGITS;

		weight = (nint - 1) / NUM_DEC_DIGITS;
		nbase[n++] = nbase_digit(ip, lead);
		for (int i = lead; i < nint; i += NUM_DEC_DIGITS)
			nbase[n++] = nbase_digit(ip + i, NUM_DEC_DIGITS);
	}
	for (int i = 0; i < nfrac; i += NUM_DEC_DIGITS)
	{
		static const int16 pad[] = {10000, 1000, 100, 10, 1};
		int			k = Min(NUM_DEC_DIGITS, nfrac - i);

		/* the last one padded with zeros */
		nbase[n++] = nbase_digit(fp + i, k) * pad[k];
	}
	while (first < n && nbase[first] == 0)
	{
		first++;
		weight--;
	}
	while (n > first && nbase[n - 1] == 0)
		n--;
	n -= first;
	if (n == 0)
	{
		weight = 0;
		neg = false;
	}
	if (dscale > NUM_SHORT_DSCALE_MAX ||
		weight > NUM_SHORT_WEIGHT_MASK || weight < -(NUM_SHORT_WEIGHT_MASK + 1))
		return false;

	header = NUM_SHORT | (neg ? NUM_SHORT_NEG : 0) |
		(dscale << NUM_SHORT_DSCALE_SHIFT) |
		(weight < 0 ? NUM_SHORT_WEIGHT_NEG : 0) |
		(weight & NUM_SHORT_WEIGHT_MASK);
	result = palloc(VARHDRSZ + sizeof(uint16) + n * sizeof(int16));
	SET_VARSIZE(result, VARHDRSZ + sizeof(uint16) + n * sizeof(int16));
	memcpy(result + VARHDRSZ, &header, sizeof(uint16));
	memcpy(result + VARHDRSZ + sizeof(uint16), nbase + first, n * sizeof(int16));
	*d = PointerGetDatum(result);
	return true;
}

/*
 * numeric of a plain decimal, with numeric_in's typmod rules; see the top
 * of the file.
 */
static bool
read_numeric(const char *s, int len, int32 typmod, Datum *d)
{
	const char *e = s + len;
	const char *ip;
	const char *fp;
	bool		neg;
	int			nint;
	int			nfrac = 0;
	int			dscale;
	char		rounded[1 + NUM_FAST_DIGITS];

	neg = (s < e && *s == '-');
	ip = s + neg;
	for (s = ip; s < e && (unsigned char) (*s - '0') <= 9; s++)
		;
	nint = s - ip;
	fp = s;
	if (s < e)
	{
		if (*s != '.')
			return false;
		for (fp = ++s; s < e && (unsigned char) (*s - '0') <= 9; s++)
			;
		nfrac = s - fp;
		if (nfrac == 0 || s != e)
			return false;
	}
	if (nint == 0 || nint + nfrac > NUM_FAST_DIGITS)
		return false;

	dscale = nfrac;
	if (typmod >= (int32) VARHDRSZ)
	{
		int			precision = ((typmod - VARHDRSZ) >> 16) & 0xffff;
		int			scale = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;

		if (scale < 0 || scale > NUM_SHORT_DSCALE_MAX)
			return false;
		if (nfrac > scale)
		{
			round_decimal(ip, nint, fp, scale, rounded);
			ip = rounded;
			nint++;
			fp = rounded + nint;
			nfrac = scale;
		}
		dscale = scale;
		/* apply_typmod: integer digits beyond precision - scale overflow */
		while (nint > 0 && *ip == '0')
		{
			ip++;
			nint--;
		}
		if (nint > precision - scale)
			return false;
	}
	return make_numeric(neg, ip, nint, fp, nfrac, dscale, d);
}

/* int2, int4, int8: at most 4, 9, 18 digits, so no overflow is possible. */
static bool
read_integer(DPFastKind kind, const char *s, int len, Datum *d)
{
	int64		v;

	switch (kind)
	{
		case FAST_INT2:
			if (!read_int(s, len, 4, &v))
				return false;
			*d = Int16GetDatum((int16) v);
			return true;
		case FAST_INT4:
			if (!read_int(s, len, 9, &v))
				return false;
			*d = Int32GetDatum((int32) v);
			return true;
		default:
			if (!read_int(s, len, 18, &v))
				return false;
			*d = Int64GetDatum(v);
			return true;
	}
}

/* uuid, palloc'd as uuid_in returns it. */
static bool
read_uuid_datum(const char *s, Datum *d)
{
	pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));

	if (!read_uuid(s, u))
	{
		pfree(u);
		return false;
	}
	*d = UUIDPGetDatum(u);
	return true;
}

/* The value of 's' as 'kind', if it has a form taken here. */
static bool
read_value(DPFastKind kind, const char *s, int len, int32 typmod, Datum *d)
{
	struct pg_tm tm;
	const char *end;
	Timestamp	ts;

	/* a typmod changes the value of every other kind */
	if (typmod != -1 && !KIND_TAKES_TYPMOD(kind))
		return false;
	switch (kind)
	{
		case FAST_INT2:
		case FAST_INT4:
		case FAST_INT8:
			return read_integer(kind, s, len, d);
		case FAST_BOOL:
			if (strcmp(s, "t") == 0 || strcmp(s, "true") == 0)
				*d = BoolGetDatum(true);
			else if (strcmp(s, "f") == 0 || strcmp(s, "false") == 0)
				*d = BoolGetDatum(false);
			else
				return false;
			return true;
		case FAST_DATE:
			if (!read_date(s, &tm, &end) || *end != '\0')
				return false;
			*d = DateADTGetDatum(date2j(tm.tm_year, tm.tm_mon, tm.tm_mday) -
								 POSTGRES_EPOCH_JDATE);
			return true;
		case FAST_TIMESTAMP:
		case FAST_TIMESTAMPTZ:
			if (!read_timestamp(s, kind == FAST_TIMESTAMPTZ, &ts))
				return false;
			*d = TimestampGetDatum(ts);
			return true;
		case FAST_UUID:
			return read_uuid_datum(s, d);
		case FAST_FLOAT4:
		case FAST_FLOAT8:
			return read_float(s, len, kind == FAST_FLOAT4, d);
		case FAST_TEXT:
			*d = PointerGetDatum(cstring_to_text_with_len(s, len));
			return true;
		case FAST_VARCHAR:
			if (typmod >= (int32) VARHDRSZ && len > typmod - VARHDRSZ)
				return false;
			*d = PointerGetDatum(cstring_to_text_with_len(s, len));
			return true;
		case FAST_BPCHAR:
			return read_bpchar(s, len, typmod, d);
		case FAST_NUMERIC:
			return read_numeric(s, len, typmod, d);
		case FAST_KINDS:
			break;
	}
	return false;
}

/* Call the type's own input function, as core would have. */
static Datum
call_orig(FunctionCallInfo fcinfo, DPFastIn *f)
{
	FmgrInfo   *mine = fcinfo->flinfo;
	Datum		d;

	fcinfo->flinfo = &f->orig;
	d = FunctionCallInvoke(fcinfo);
	fcinfo->flinfo = mine;
	return d;
}

/* The stand-in input function (args: cstring, typioparam, typmod). */
static Datum
fast_input(PG_FUNCTION_ARGS)
{
	DPFastIn   *f = (DPFastIn *) fcinfo->flinfo->fn_extra;
	char	   *s = PG_GETARG_CSTRING(0);
	Datum		d;

	if (!read_value(f->kind, s, strlen(s), PG_GETARG_INT32(2), &d))
	{
		n_slow[f->kind]++;
		return call_orig(fcinfo, f);
	}
	n_fast[f->kind]++;
	if (f->check)
	{
		Datum		want = InputFunctionCall(&f->orig, s, PG_GETARG_OID(1),
											 PG_GETARG_INT32(2));
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(kinds[f->kind].type, &typlen, &typbyval);
		if (!datumIsEqual(d, want, typbyval, typlen))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: fast input of \"%s\" as %s differs from the type's input function",
							s, format_type_be(kinds[f->kind].type)),
					 errhint("Set directpath.copy_fast_input to off and report this.")));
	}
	return d;
}

/*
 * The row former's parser for a column whose input function is 'in' and
 * typmod 'typmod': the stand-in's, when 'in' is one (not in check mode,
 * which needs the call) and the typmod leaves the kind's value alone.
 */
const DPFastIn *
dp_fastin_of(FmgrInfo *in, int32 typmod)
{
	DPFastIn   *f;

	if (in->fn_addr != fast_input)
		return NULL;
	f = (DPFastIn *) in->fn_extra;
	if (f->check ||
		(typmod != -1 && !KIND_TAKES_TYPMOD(f->kind)))
		return NULL;
	return f;
}

/*
 * The row former's direct call: the value of the 'len' bytes at s (a
 * terminated string, with at least DP_FASTIN_SLACK bytes readable from s
 * whatever len is) when f's parser takes them (counted); false when the
 * input function must be called (which counts it).  The integers, most of
 * what many inputs hold, are read here without read_value's dispatch, a
 * word at a time.
 */
bool
dp_fastin_parse(const DPFastIn *f, const char *s, int len, int32 typmod,
				Datum *d)
{
	int64		v;

	switch (f->kind)
	{
		case FAST_INT2:
			if (!read_int_wide(s, len, 4, &v))
				return false;
			*d = Int16GetDatum((int16) v);
			return true;
		case FAST_INT4:
			if (!read_int_wide(s, len, 9, &v))
				return false;
			*d = Int32GetDatum((int32) v);
			return true;
		case FAST_INT8:
			if (!read_int_wide(s, len, 18, &v))
				return false;
			*d = Int64GetDatum(v);
			return true;
		default:
			return read_value(f->kind, s, len, typmod, d);
	}
}

bool
dp_fastin_read(const DPFastIn *f, const char *s, int len, int32 typmod,
			   Datum *d)
{
	if (!dp_fastin_parse(f, s, len, typmod, d))
		return false;
	n_fast[f->kind]++;
	return true;
}

void
dp_fastin_count(const DPFastIn *f, uint64 n)
{
	n_fast[f->kind] += n;
}

bool
dp_fastin_bounded(const DPFastIn *f)
{
	switch (f->kind)
	{
		case FAST_INT2:
		case FAST_INT4:
		case FAST_INT8:
		case FAST_FLOAT4:
		case FAST_FLOAT8:
		case FAST_NUMERIC:
		case FAST_TEXT:
		case FAST_VARCHAR:
		case FAST_BPCHAR:
			return true;
		default:
			/* bool, date, timestamps and uuid look for the terminator */
			return false;
	}
}

/*
 * The binary fast input of a column whose receive function is 'recv', of
 * type 'type' and typmod 'typmod', or NULL.
 */
const DPFastIn *
dp_fastin_binary_of(FmgrInfo *recv, Oid type, int32 typmod)
{
	DPFastIn   *f;
	int			k;

	if (dp_copy_fast_input == DP_FASTIN_OFF || typmod != -1)
		return NULL;
	for (k = 0; k < FAST_KINDS; k++)
		if (binary_kinds[k] != InvalidOid && recv->fn_oid == binary_kinds[k] &&
			type == kinds[k].type)
			break;
	if (k == FAST_KINDS)
		return NULL;
	f = palloc(sizeof(DPFastIn));
	f->orig = *recv;
	f->kind = (DPFastKind) k;
	f->check = dp_copy_fast_input == DP_FASTIN_CHECK;
	return f;
}

/* A 64-bit integer in network byte order, at any alignment. */
static inline uint64
net64(const char *s)
{
	uint64		v;

	memcpy(&v, s, sizeof(v));
	return pg_ntoh64(v);
}

/*
 * The value of a binary field as the kind's receive function makes it;
 * false for another length, or a date or timestamp out of the range the
 * receive function accepts (its error).  In that range timestamp2tm, which
 * the timestamp receive functions also call, cannot fail: its one check is
 * the day's.
 *
 * Long: a case per kind, each its receive function's few lines.
 */
static bool
read_binary(DPFastKind kind, const char *s, int len, Datum *d)
{
	static const int8 sizes[FAST_KINDS] = {2, 4, 8, 1, 4, 8, 8, UUID_LEN, 4, 8};
	uint32		u32;
	uint64		u64;
	pg_uuid_t  *u;

	if (len != sizes[kind])
		return false;
	switch (kind)
	{
		case FAST_INT2:
			*d = Int16GetDatum((int16) dp_get_net_int(s, 2));
			return true;
		case FAST_INT4:
			*d = Int32GetDatum(dp_get_net_int(s, 4));
			return true;
		case FAST_INT8:
			*d = Int64GetDatum((int64) net64(s));
			return true;
		case FAST_BOOL:
			*d = BoolGetDatum(*s != 0);
			return true;
		case FAST_DATE:
			u32 = (uint32) dp_get_net_int(s, 4);
			if (!DATE_NOT_FINITE((DateADT) u32) && !IS_VALID_DATE((DateADT) u32))
				return false;
			*d = DateADTGetDatum((DateADT) u32);
			return true;
		case FAST_TIMESTAMP:
		case FAST_TIMESTAMPTZ:
			u64 = net64(s);
			if (!TIMESTAMP_NOT_FINITE((Timestamp) u64) &&
				!IS_VALID_TIMESTAMP((Timestamp) u64))
				return false;
			*d = TimestampGetDatum((Timestamp) u64);
			return true;
		case FAST_UUID:
			u = palloc(UUID_LEN);
			memcpy(u->data, s, UUID_LEN);
			*d = UUIDPGetDatum(u);
			return true;
		case FAST_FLOAT4:
			{
				float4		f;

				u32 = (uint32) dp_get_net_int(s, 4);
				memcpy(&f, &u32, sizeof(f));
				*d = Float4GetDatum(f);
				return true;
			}
		case FAST_FLOAT8:
			{
				float8		f;

				u64 = net64(s);
				memcpy(&f, &u64, sizeof(f));
				*d = Float8GetDatum(f);
				return true;
			}
		default:
			return false;
	}
}

/*
 * The binary field of 'len' bytes at s, when f's kind takes it (counted);
 * false when the receive function must be called (dp_fastin_count_fallback
 * counts that).  In check mode the receive function is called too and its
 * value compared.
 */
bool
dp_fastin_read_binary(const DPFastIn *f, const char *s, int len, Datum *d)
{
	if (!read_binary(f->kind, s, len, d))
		return false;
	n_fast[f->kind]++;
	if (f->check)
	{
		StringInfoData buf;
		Datum		want;
		int16		typlen;
		bool		typbyval;

		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, s, len);
		want = ReceiveFunctionCall((FmgrInfo *) &f->orig, &buf, InvalidOid, -1);
		get_typlenbyval(kinds[f->kind].type, &typlen, &typbyval);
		if (buf.cursor != len || !datumIsEqual(*d, want, typbyval, typlen))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: fast binary input of a %s differs from its receive function",
							format_type_be(kinds[f->kind].type)),
					 errhint("Set directpath.copy_fast_input to off and report this.")));
	}
	return true;
}

/* A field of f's kind that the receive function read. */
void
dp_fastin_count_fallback(const DPFastIn *f)
{
	n_slow[f->kind]++;
}

/* A COPY begins: its counts start from zero. */
void
dp_input_reset_counts(void)
{
	memset(n_fast, 0, sizeof(n_fast));
	memset(n_slow, 0, sizeof(n_slow));
	n_rows_formed = n_rows_core = 0;
}

void
dp_input_get_counts(DPInputCounts *counts)
{
	memcpy(counts->fast, n_fast, sizeof(n_fast));
	memcpy(counts->fallback, n_slow, sizeof(n_slow));
	counts->rows_formed = n_rows_formed;
	counts->rows_core = n_rows_core;
}

void
dp_input_add_counts(const DPInputCounts *counts)
{
	for (int k = 0; k < FAST_KINDS; k++)
	{
		n_fast[k] += counts->fast[k];
		n_slow[k] += counts->fallback[k];
	}
	n_rows_formed += counts->rows_formed;
	n_rows_core += counts->rows_core;
}

/* Why core's reader reads the whole COPY (NULL: the row former reads it). */
void
dp_input_note_reader(const char *why)
{
	strlcpy(reader_refusal, why ? why : "", sizeof(reader_refusal));
}

/* Rows the row former (rowform.c) formed, and rows core's reader read. */
void
dp_input_count_rows(uint64 formed, uint64 core)
{
	n_rows_formed += formed;
	n_rows_core += core;
}

/*
 * Put the stand-ins in place of the input functions of a text or CSV COPY
 * just begun (BeginCopyFrom).
 */
void
dp_fastin_install(CopyFromState cstate)
{
	TupleDesc	desc = RelationGetDescr(cstate->rel);
	ListCell   *lc;

	if (dp_copy_fast_input == DP_FASTIN_OFF || cstate->opts.binary)
		return;
	if (hex_digits['g'] == 0)	/* not filled yet */
		fill_hex_digits();
	foreach(lc, cstate->attnumlist)
	{
		int			m = lfirst_int(lc) - 1;
		FmgrInfo   *fi = &cstate->in_functions[m];
		DPFastIn   *f;
		int			k;

		for (k = 0; k < FAST_KINDS; k++)
			if (fi->fn_oid == kinds[k].func &&
				TupleDescAttr(desc, m)->atttypid == kinds[k].type)
				break;
		if (k == FAST_KINDS)
			continue;
		f = MemoryContextAlloc(fi->fn_mcxt, sizeof(DPFastIn));
		f->orig = *fi;
		f->kind = (DPFastKind) k;
		f->check = dp_copy_fast_input == DP_FASTIN_CHECK;
		fi->fn_addr = fast_input;
		fi->fn_extra = f;
	}
}

PG_FUNCTION_INFO_V1(directpath_last_copy_input);

/*
 * directpath.last_copy_input(): per type, the fields of this process's
 * last direct text or CSV COPY that the fast input took, and those it
 * handed to the type's input function.
 */
Datum
directpath_last_copy_input(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int k = 0; k < FAST_KINDS; k++)
	{
		Datum		values[3];
		bool		nulls[3] = {0};

		if (n_fast[k] == 0 && n_slow[k] == 0)
			continue;
		values[0] = ObjectIdGetDatum(kinds[k].type);
		values[1] = Int64GetDatum((int64) n_fast[k]);
		values[2] = Int64GetDatum((int64) n_slow[k]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(directpath_last_copy_reader);

/*
 * directpath.last_copy_reader(): the rows of this process's last direct
 * COPY that the row former formed and those core's reader read (a
 * parallel COPY's workers' included), and why core's reader read them all
 * (NULL when the former read the input).
 */
Datum
directpath_last_copy_reader(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum((int64) n_rows_formed);
	values[1] = Int64GetDatum((int64) n_rows_core);
	if (reader_refusal[0])
		values[2] = CStringGetTextDatum(reader_refusal);
	else
		nulls[2] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
