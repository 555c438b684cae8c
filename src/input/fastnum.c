/*-------------------------------------------------------------------------
 *
 * fastnum.c
 *	  The fast parsers of float4, float8 and numeric: a plain decimal to
 *	  the value the type's input function makes of it, for fastin.c's
 *	  dispatch.
 *
 * The forms taken (anything else is the type's input function's):
 *
 *	float4, float8		-?D+(.D+)?([eE][+-]?D{1,3})? with at most 19
 *						digits, whose value is m / 10^k with m < 2^64 and
 *						k <= 19 (the exponent applied): m and 10^k fit in 64
 *						bits, so the quotient m / 10^k is computed in
 *						128-bit integers with enough bits, and its remainder,
 *						to round it to 24 or 53 bits exactly as strtof and
 *						strtod (float4in's and float8in's) round: to the
 *						nearest, ties to even (on compilers with a 128-bit
 *						integer; without one no float is taken)
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
 *
 * Both read exactly the 'len' bytes they are given (they are
 * dp_fastin_bounded: the bytes need no terminator), and raise no error: a
 * value they cannot prove is false, for the input function.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include <float.h>
#include <math.h>

#include "port/pg_bitutils.h"

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
bool
dp_read_float(const char *s, int len, bool is_float4, Datum *d)
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
			 int dscale, DPValueSpace *vs, Datum *d)
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
	result = dp_value_alloc(vs, VARHDRSZ + sizeof(uint16) + n * sizeof(int16));
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
bool
dp_read_numeric(const char *s, int len, int32 typmod, DPValueSpace *vs,
				Datum *d)
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
	return make_numeric(neg, ip, nint, fp, nfrac, dscale, vs, d);
}
