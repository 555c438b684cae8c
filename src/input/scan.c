/*-------------------------------------------------------------------------
 *
 * scan.c
 *	  The row former's first step: a buffer's special bytes marked in a
 *	  bitmap, one bit per byte, in one vectorized pass.
 *
 * Algorithm.  For each 64 bytes of the buffer, one 64-bit word whose bit i
 * says whether byte i equals one of at most DP_SCAN_MAX_SPECIALS special
 * bytes, and a second one for the first special byte alone (the row
 * former's delimiter, so that a plain record's fields are found from the
 * bits without reading its bytes again): with AVX2 two 32-byte compares per special byte (the CPU asked at
 * run time, __builtin_cpu_supports), else SSE2 four 16-byte ones (every
 * x86-64 has it), else, on little-endian machines, eight 8-byte words
 * compared in a register; the tail of fewer than 64 bytes, and big-endian
 * machines, byte by byte.  Bits past the buffer's end are zero.
 *
 * The caller then walks the set bits (rowsplit.c's next_marked), so each
 * ordinary byte is looked at once, here, 16 to 32 at a time.
 *
 * dp_scan_pairs marks where a pair of bytes starts (the row former's NULL
 * string \N in text format: its fields are then found without a stop at
 * each of their backslashes): with AVX2, each 64 bytes compared as they are
 * and one byte further on, the two masks and-ed; without it, byte by byte.
 *
 * dp_scan_next finds the first special byte after a position without a
 * bitmap, 16 bytes at a time with SSE2, for a scan whose special bytes are
 * rare and whose buffer moves (the chunker's search for line ends).
 * dp_scan_block gives the chunker a 64-byte block's newlines, backslashes,
 * carriage returns, quotes and escapes as five bitmaps (AVX2 where the CPU
 * has it, else SSE2), from which it counts the lines of blocks it need not
 * cut (chunker.c's count_lines).
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "port/pg_bitutils.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DP_HAVE_X86 1
#endif

/* Mark one byte at a time: the tail, and machines without vectors. */
static void
mark_bytes(const char *specials, int nspecials, const char *p, Size n,
		   uint64 *bits, uint64 *firsts, Size at)
{
	for (Size i = 0; i < n; i++)
		for (int k = 0; k < nspecials; k++)
			if (p[i] == specials[k])
			{
				bits[(at + i) >> 6] |= UINT64CONST(1) << ((at + i) & 63);
				if (k == 0)
					firsts[(at + i) >> 6] |= UINT64CONST(1) << ((at + i) & 63);
				break;
			}
}

#ifdef DP_HAVE_X86
/* 64 bytes at a time with SSE2 (every x86-64 has it). */
static Size
mark_sse2(const char *specials, int nspecials, const char *p, Size n,
		  uint64 *bits, uint64 *firsts)
{
	__m128i		want[DP_SCAN_MAX_SPECIALS];
	Size		i;

	for (int k = 0; k < nspecials; k++)
		want[k] = _mm_set1_epi8(specials[k]);
	for (i = 0; i + 64 <= n; i += 64)
	{
		uint64		m = 0;
		uint64		f = 0;

		for (int q = 0; q < 4; q++)
		{
			__m128i		v = _mm_loadu_si128((const __m128i *) (p + i + 16 * q));
			__m128i		first = _mm_cmpeq_epi8(v, want[0]);
			__m128i		hit = first;

			for (int k = 1; k < nspecials; k++)
				hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, want[k]));
			m |= (uint64) (uint16) _mm_movemask_epi8(hit) << (16 * q);
			f |= (uint64) (uint16) _mm_movemask_epi8(first) << (16 * q);
		}
		bits[i >> 6] = m;
		firsts[i >> 6] = f;
	}
	return i;
}

/* The same with AVX2, where the CPU has it. */
__attribute__((target("avx2")))
static Size
mark_avx2(const char *specials, int nspecials, const char *p, Size n,
		  uint64 *bits, uint64 *firsts)
{
	__m256i		want[DP_SCAN_MAX_SPECIALS];
	Size		i;

	for (int k = 0; k < nspecials; k++)
		want[k] = _mm256_set1_epi8(specials[k]);
	for (i = 0; i + 64 <= n; i += 64)
	{
		__m256i		lo = _mm256_loadu_si256((const __m256i *) (p + i));
		__m256i		hi = _mm256_loadu_si256((const __m256i *) (p + i + 32));
		__m256i		flo = _mm256_cmpeq_epi8(lo, want[0]);
		__m256i		fhi = _mm256_cmpeq_epi8(hi, want[0]);
		__m256i		hlo = flo;
		__m256i		hhi = fhi;

		for (int k = 1; k < nspecials; k++)
		{
			hlo = _mm256_or_si256(hlo, _mm256_cmpeq_epi8(lo, want[k]));
			hhi = _mm256_or_si256(hhi, _mm256_cmpeq_epi8(hi, want[k]));
		}
		bits[i >> 6] = (uint64) (uint32) _mm256_movemask_epi8(hlo) |
			((uint64) (uint32) _mm256_movemask_epi8(hhi) << 32);
		firsts[i >> 6] = (uint64) (uint32) _mm256_movemask_epi8(flo) |
			((uint64) (uint32) _mm256_movemask_epi8(fhi) << 32);
	}
	return i;
}
#elif !defined(WORDS_BIGENDIAN)
/*
 * 8 bytes at a time in a word: a byte equal to a special one becomes zero
 * after the xor, and ((x & 7f..) + 7f..) | x has the high bit of exactly
 * the non-zero bytes; the high bits are gathered by a multiplication.
 */
static Size
mark_words(const char *specials, int nspecials, const char *p, Size n,
		   uint64 *bits, uint64 *firsts)
{
	const uint64 lo7 = UINT64CONST(0x7f7f7f7f7f7f7f7f);
	Size		i;

	for (i = 0; i + 64 <= n; i += 64)
	{
		uint64		m = 0;
		uint64		f = 0;

		for (int w = 0; w < 8; w++)
		{
			uint64		v;
			uint64		hit = 0;
			uint64		first = 0;

			memcpy(&v, p + i + 8 * w, 8);
			for (int k = 0; k < nspecials; k++)
			{
				uint64		x = v ^ (UINT64CONST(0x0101010101010101) * (unsigned char) specials[k]);

				hit |= ~(((x & lo7) + lo7) | x | lo7);
				if (k == 0)
					first = hit;
			}
			m |= (((hit >> 7) * UINT64CONST(0x0102040810204080)) >> 56) << (8 * w);
			f |= (((first >> 7) * UINT64CONST(0x0102040810204080)) >> 56) << (8 * w);
		}
		bits[i >> 6] = m;
		firsts[i >> 6] = f;
	}
	return i;
}
#endif

/*
 * Mark the special bytes of data[0, len) in bits[0, (len + 63) / 64), and
 * the first special byte's in firsts.
 */
void
dp_scan_specials(const char *specials, int nspecials, const char *data,
				 Size len, uint64 *bits, uint64 *firsts)
{
	Size		nwords = (len + 63) / 64;
	Size		done;

	Assert(nspecials >= 1 && nspecials <= DP_SCAN_MAX_SPECIALS);
#ifdef DP_HAVE_X86
	if (__builtin_cpu_supports("avx2"))
		done = mark_avx2(specials, nspecials, data, len, bits, firsts);
	else
		done = mark_sse2(specials, nspecials, data, len, bits, firsts);
#elif !defined(WORDS_BIGENDIAN)
	done = mark_words(specials, nspecials, data, len, bits, firsts);
#else
	done = 0;
#endif
	if (done < len)
	{
		memset(bits + done / 64, 0, (nwords - done / 64) * sizeof(uint64));
		memset(firsts + done / 64, 0, (nwords - done / 64) * sizeof(uint64));
		mark_bytes(specials, nspecials, data + done, len - done, bits, firsts,
				   done);
	}
}

#ifdef DP_HAVE_X86
/* The pairs of 64 bytes at a time with AVX2; the bytes read end at n. */
__attribute__((target("avx2")))
static Size
pairs_avx2(const char *p, Size n, char a, char b, uint64 *pairs)
{
	__m256i		wa = _mm256_set1_epi8(a);
	__m256i		wb = _mm256_set1_epi8(b);
	Size		i;

	for (i = 0; i + 65 <= n; i += 64)
	{
		__m256i		lo = _mm256_loadu_si256((const __m256i *) (p + i));
		__m256i		lo1 = _mm256_loadu_si256((const __m256i *) (p + i + 1));
		__m256i		hi = _mm256_loadu_si256((const __m256i *) (p + i + 32));
		__m256i		hi1 = _mm256_loadu_si256((const __m256i *) (p + i + 33));

		lo = _mm256_and_si256(_mm256_cmpeq_epi8(lo, wa), _mm256_cmpeq_epi8(lo1, wb));
		hi = _mm256_and_si256(_mm256_cmpeq_epi8(hi, wa), _mm256_cmpeq_epi8(hi1, wb));
		pairs[i >> 6] = (uint64) (uint32) _mm256_movemask_epi8(lo) |
			((uint64) (uint32) _mm256_movemask_epi8(hi) << 32);
	}
	return i;
}
#endif

/*
 * Bit i of pairs[i / 64] set when data[i] == a and data[i + 1] == b, for i
 * in [0, len); (len + 63) / 64 words, the bits past len zero.
 */
void
dp_scan_pairs(const char *data, Size len, char a, char b, uint64 *pairs)
{
	Size		nwords = (len + 63) / 64;
	Size		done = 0;

#ifdef DP_HAVE_X86
	if (__builtin_cpu_supports("avx2"))
		done = pairs_avx2(data, len, a, b, pairs);
#endif
	if (done < len)
	{
		memset(pairs + done / 64, 0, (nwords - done / 64) * sizeof(uint64));
		for (Size i = done; i + 1 < len; i++)
			if (data[i] == a && data[i + 1] == b)
				pairs[i >> 6] |= UINT64CONST(1) << (i & 63);
	}
}

/* The first byte in [p, end) that is one of specials; end if none. */
const char *
dp_scan_next(const char *specials, int nspecials, const char *p,
			 const char *end)
{
#ifdef DP_HAVE_X86
	__m128i		want[DP_SCAN_MAX_SPECIALS];

	for (int k = 0; k < nspecials; k++)
		want[k] = _mm_set1_epi8(specials[k]);
	for (; p + 16 <= end; p += 16)
	{
		__m128i		v = _mm_loadu_si128((const __m128i *) p);
		__m128i		hit = _mm_cmpeq_epi8(v, want[0]);
		int			m;

		for (int k = 1; k < nspecials; k++)
			hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, want[k]));
		m = _mm_movemask_epi8(hit);
		if (m != 0)
			return p + pg_rightmost_one_pos32((uint32) m);
	}
#endif
	for (; p < end; p++)
		for (int k = 0; k < nspecials; k++)
			if (*p == specials[k])
				return p;
	return end;
}

#ifdef DP_HAVE_X86
/* dp_scan_block with AVX2: two 32-byte compares per byte. */
__attribute__((target("avx2")))
static void
block_avx2(const char *p, const char *bytes, uint64 *maps)
{
	__m256i		lo = _mm256_loadu_si256((const __m256i *) p);
	__m256i		hi = _mm256_loadu_si256((const __m256i *) (p + 32));

	for (int k = 0; k < DP_BLOCK_BYTES; k++)
	{
		__m256i		want = _mm256_set1_epi8(bytes[k]);

		uint32		mlo = (uint32) _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, want));
		uint32		mhi = (uint32) _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, want));

		maps[k] = (uint64) mlo | ((uint64) mhi << 32);
	}
}
#endif

/*
 * The 64 bytes at p as one bitmap per byte of 'bytes': bit i of maps[k] is
 * set when p[i] == bytes[k].
 */
void
dp_scan_block(const char *p, const char *bytes, uint64 *maps)
{
#ifdef DP_HAVE_X86
	static int	avx2 = -1;
	__m128i		v[4];

	if (avx2 < 0)
		avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
	if (avx2)
	{
		block_avx2(p, bytes, maps);
		return;
	}

	for (int q = 0; q < 4; q++)
		v[q] = _mm_loadu_si128((const __m128i *) (p + 16 * q));
	for (int k = 0; k < DP_BLOCK_BYTES; k++)
	{
		__m128i		want = _mm_set1_epi8(bytes[k]);
		uint64		m = 0;

		for (int q = 0; q < 4; q++)
			m |= (uint64) (uint16) _mm_movemask_epi8(_mm_cmpeq_epi8(v[q], want)) << (16 * q);
		maps[k] = m;
	}
#else
	for (int k = 0; k < DP_BLOCK_BYTES; k++)
	{
		uint64		m = 0;

		for (int i = 0; i < 64; i++)
			if (p[i] == bytes[k])
				m |= UINT64CONST(1) << i;
		maps[k] = m;
	}
#endif
}
