/*-------------------------------------------------------------------------
 *
 * radix.c
 *	  A stable least-significant-digit radix sort of fixed-size entries by
 *	  unsigned 64-bit words.
 *
 * The integer sorts of a load (an index's sort words and heap TIDs,
 * keysort.c; a foreign key set's integer keys and ordinals, fkset.c) hold
 * millions of small entries whose keys vary in a few of their bytes: the
 * dates of a few years, the order keys of one table.  A comparison sort
 * pays about log2(n) comparisons an entry (22 for 6M); this one pays one
 * pass over the entries for each byte that varies, with no comparison.
 *
 * Algorithm.  One pass over the entries finds which bytes of which words
 * differ from the first entry's (the others are the same in every entry
 * and order nothing), and whether every entry's words are at least its
 * predecessor's: entries that came in order (a serial key, rows loaded in
 * their primary key's order, as dumps and generators write them) are
 * sorted already, and a stable sort leaves them as they are.  Otherwise it
 * counts each varying byte's values.  Then
 * one counting-sort pass per varying byte, least significant first (the
 * last word's low byte) to most significant (the first word's high byte):
 * the pass moves every entry to the place its byte's running count gives,
 * from one array to the other.  Each pass is stable, so after the last the
 * entries are in the order of their words, and entries equal in every
 * word stay in the order they had: a caller whose tiebreak is the order
 * of arrival (ordinals that grow, TIDs added in order) need not sort on it.
 *
 * Invariants: the sort takes as much memory again as the entries, within
 * the caller's limit, for the time of the call; it refuses (returns false
 * with the entries untouched) below DP_RADIX_MIN_ENTRIES entries, where a
 * comparison sort is as fast, past DP_RADIX_MAX_PASSES varying bytes, where
 * it is faster, and when the memory is not there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/radix.h"

#include "utils/memutils.h"

/* Fewer entries than this are not worth the passes. */
#define DP_RADIX_MIN_ENTRIES 4096

/* More varying bytes than this: a comparison sort is as fast. */
#define DP_RADIX_MAX_PASSES 10

/* One pass: the byte it sorts on, and its counts. */
typedef struct DPRadixPass
{
	Size		off;			/* the word's offset in an entry */
	int			shift;			/* the byte's, in the word */
	int64		count[256];		/* entries with each value; then where the
								 * next entry of that value goes */
} DPRadixPass;

static inline uint64
word_at(const char *entry, Size off)
{
	uint64		w;

	memcpy(&w, entry + off, sizeof(w));
	return w;
}

/* One counting-sort pass from 'src' to 'dst', for entries of 'size' bytes. */
static pg_attribute_always_inline void
scatter(const char *src, char *dst, int64 n, Size size, DPRadixPass *p)
{
	int64		at = 0;

	for (int v = 0; v < 256; v++)
	{
		int64		c = p->count[v];

		p->count[v] = at;
		at += c;
	}
	for (int64 i = 0; i < n; i++)
	{
		const char *e = src + i * size;
		int			v = (word_at(e, p->off) >> p->shift) & 0xFF;

		memcpy(dst + p->count[v]++ * size, e, size);
	}
}

/*
 * The bits of each word that differ between entries into 'diff'; true when
 * every entry's words are at least its predecessor's (in order already).
 */
static bool
survey(const char *src, int64 n, Size size, const Size *offs, int nwords,
	   uint64 *diff)
{
	bool		disorder = false;

	for (int64 i = 1; i < n; i++)
	{
		const char *e = src + i * size;

		for (int w = 0; w < nwords; w++)
			diff[w] |= word_at(e, offs[w]) ^ word_at(src, offs[w]);
		for (int w = 0; w < nwords && !disorder; w++)
		{
			uint64		cur = word_at(e, offs[w]);
			uint64		prev = word_at(e - size, offs[w]);

			if (cur != prev)
			{
				disorder = cur < prev;
				break;
			}
		}
	}
	return !disorder;
}

bool
dp_radix_sort(void *entries, int64 n, Size size, const Size *offs,
			  int nwords, Size limit)
{
	uint64		diff[DP_RADIX_MAX_WORDS] = {0};
	DPRadixPass *passes;
	int			npasses = 0;
	char	   *src = entries;
	char	   *dst;

	Assert(nwords > 0 && nwords <= DP_RADIX_MAX_WORDS);
	if (n < DP_RADIX_MIN_ENTRIES || (Size) n * size > limit)
		return false;

	if (survey(src, n, size, offs, nwords, diff))
		return true;			/* sorted as they came: a stable sort keeps it */
	for (int w = 0; w < nwords; w++)
		for (int b = 0; b < 8; b++)
			npasses += ((diff[w] >> (8 * b)) & 0xFF) != 0;
	if (npasses > DP_RADIX_MAX_PASSES)
		return false;
	dst = MemoryContextAllocExtended(CurrentMemoryContext, (Size) n * size,
									 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (dst == NULL)
		return false;

	/* least significant first: the last word's low byte */
	passes = palloc0(sizeof(DPRadixPass) * npasses);
	npasses = 0;
	for (int w = nwords - 1; w >= 0; w--)
		for (int b = 0; b < 8; b++)
			if (((diff[w] >> (8 * b)) & 0xFF) != 0)
			{
				passes[npasses].off = offs[w];
				passes[npasses++].shift = 8 * b;
			}
	for (int64 i = 0; i < n; i++)
		for (int k = 0; k < npasses; k++)
			passes[k].count[(word_at(src + i * size, passes[k].off) >>
							 passes[k].shift) & 0xFF]++;

	for (int k = 0; k < npasses; k++)
	{
		char	   *t;

		/* the common sizes with a constant memcpy */
		if (size == 24)
			scatter(src, dst, n, 24, &passes[k]);
		else if (size == 32)
			scatter(src, dst, n, 32, &passes[k]);
		else
			scatter(src, dst, n, size, &passes[k]);
		t = src;
		src = dst;
		dst = t;
	}
	if (src != entries)
	{
		memcpy(entries, src, (Size) n * size);
		dst = src;
	}
	pfree(dst);
	pfree(passes);
	return true;
}
