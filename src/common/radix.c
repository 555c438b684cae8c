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
 * The arrays.  Such a sort's entries, and its second array, are tens to
 * hundreds of megabytes that a backend touches for the first time as it
 * fills them: with the kernel's 4 kB pages, one page fault per 4 kB, which
 * took a sixth of a parallel load's leader (its index entries, its foreign
 * key sets and their sorts; a perf profile of the demo's COPY), and an
 * array grown by repalloc was copied at each doubling below glibc's mmap
 * threshold (32 MB), touching every page again.  So where the system has
 * mremap (Linux), an array of DP_ARRAY_MAP_MIN bytes or more is a mapping
 * of its own: allocated by dp_sort_array_alloc, grown in place or moved
 * without a copy by dp_sort_array_grow (the kernel moves the page tables),
 * freed by dp_sort_array_free or, if an error or the end of the statement
 * deletes its memory context first, by the context's reset callback.  The
 * kernel is asked for transparent huge pages on it (madvise MADV_HUGEPAGE):
 * one fault per 2 MB.  The advice changes no contents (the kernel may not
 * follow it).  Smaller arrays, and any the system refuses a mapping (no
 * memory, too many mappings), are palloc's as before.  A mapping is
 * outside palloc's accounting (pg_backend_memory_contexts shows only its
 * small record); the callers bound their arrays by their workmem as
 * before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/radix.h"

#include <sys/mman.h>
#include <unistd.h>

#include "utils/memutils.h"

/* Fewer entries than this are not worth the passes. */
#define DP_RADIX_MIN_ENTRIES 4096

/* More varying bytes than this: a comparison sort is as fast. */
#define DP_RADIX_MAX_PASSES 10

/* A transparent huge page's size (x86-64's and arm64's with 4 kB pages). */
#define DP_HUGE_PAGE ((Size) 2 * 1024 * 1024)

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
	dst = dp_sort_array_alloc(CurrentMemoryContext, (Size) n * size,
							  MCXT_ALLOC_NO_OOM);
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
		if (size == 16)
			scatter(src, dst, n, 16, &passes[k]);
		else if (size == 24)
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
	dp_sort_array_free(dst);
	pfree(passes);
	return true;
}

/*
 * What precedes every sort array: its mapping, or NULL for an array palloc
 * gave, with that array's size.
 */
typedef struct DPSortMapping DPSortMapping;
typedef struct DPSortArrayHead
{
	DPSortMapping *m;
	Size		size;			/* a palloc'd array's bytes */
} DPSortArrayHead;

#define DP_ARRAY_HEAD MAXALIGN(sizeof(DPSortArrayHead))
#define HEAD_OF(p) ((DPSortArrayHead *) ((char *) (p) - DP_ARRAY_HEAD))

/* Smaller arrays are palloc's: a batch's sorts, a small load's. */
#define DP_ARRAY_MAP_MIN ((Size) 1024 * 1024)

#ifdef MREMAP_MAYMOVE

/*
 * A mapped array's mapping, kept in the caller's memory context with the
 * callback that unmaps it if the context goes first (an error, the end of
 * the statement); 'base' is NULL once the array is freed.  The mapping
 * begins with the array's head.
 */
struct DPSortMapping
{
	MemoryContextCallback cb;
	char	   *base;
	Size		mapped;			/* the mapping's bytes, whole pages */
};

static void
unmap_array(void *arg)
{
	DPSortMapping *m = arg;

	if (m->base != NULL)
		(void) munmap(m->base, m->mapped);
	m->base = NULL;
}

/*
 * Huge pages asked for the mapping at 'base', whole: advice on part of it
 * would split it into mappings of different flags, which mremap cannot
 * grow as one.
 */
static void
advise_huge(char *base, Size mapped)
{
#ifdef MADV_HUGEPAGE
	if (mapped >= 2 * DP_HUGE_PAGE)
		(void) madvise(base, mapped, MADV_HUGEPAGE);
#endif
}

/* The whole pages a mapping takes for 'size' bytes of array and its head. */
static Size
mapping_bytes(Size size)
{
	return TYPEALIGN((Size) sysconf(_SC_PAGESIZE), size + DP_ARRAY_HEAD);
}

/*
 * A mapping for 'size' bytes of array, registered with 'cxt'; NULL when
 * the system refuses it (no memory, too many mappings).
 */
static void *
map_array(MemoryContext cxt, Size size)
{
	Size		mapped = mapping_bytes(size);
	DPSortMapping *m = MemoryContextAllocZero(cxt, sizeof(DPSortMapping));
	char	   *base;

	/* the record first: a mapping is never without its way back */
	base = mmap(NULL, mapped, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
	{
		pfree(m);
		return NULL;
	}
	m->base = base;
	m->mapped = mapped;
	m->cb.func = unmap_array;
	m->cb.arg = m;
	MemoryContextRegisterResetCallback(cxt, &m->cb);
	advise_huge(base, mapped);
	((DPSortArrayHead *) base)->m = m;
	return base + DP_ARRAY_HEAD;
}

/* The bytes an array holds. */
static Size
capacity(DPSortArrayHead *h)
{
	return h->m != NULL ? h->m->mapped - DP_ARRAY_HEAD : h->size;
}

/* The mapping grown for 'size' bytes of array; NULL if refused. */
static void *
remap_array(DPSortMapping *m, Size size)
{
	Size		mapped = mapping_bytes(size);
	char	   *base;

	if (mapped > m->mapped)
	{
		base = mremap(m->base, m->mapped, mapped, MREMAP_MAYMOVE);
		if (base == MAP_FAILED)
			return NULL;
		m->base = base;
		m->mapped = mapped;
		advise_huge(base, mapped);
	}
	return m->base + DP_ARRAY_HEAD;
}

#else

static Size
capacity(DPSortArrayHead *h)
{
	return h->size;
}

static void *
map_array(MemoryContext cxt, Size size)
{
	return NULL;
}

static void *
remap_array(DPSortMapping *m, Size size)
{
	return NULL;
}

#endif							/* MREMAP_MAYMOVE */

/* A palloc'd array; NULL if palloc fails and 'flags' allow it. */
static void *
palloced_array(MemoryContext cxt, Size size, int flags)
{
	DPSortArrayHead *h;

	h = MemoryContextAllocExtended(cxt, size + DP_ARRAY_HEAD,
								   flags | MCXT_ALLOC_HUGE);
	if (h == NULL)
		return NULL;
	h->m = NULL;
	h->size = size;
	return (char *) h + DP_ARRAY_HEAD;
}

void *
dp_sort_array_alloc(MemoryContext cxt, Size size, int flags)
{
	void	   *p = NULL;

	if (size >= DP_ARRAY_MAP_MIN)
		p = map_array(cxt, size);
	return p != NULL ? p : palloced_array(cxt, size, flags);
}

void *
dp_sort_array_grow(void *p, Size size)
{
	DPSortArrayHead *h = HEAD_OF(p);
	MemoryContext cxt;
	void	   *grown;

	if (h->m != NULL && (grown = remap_array(h->m, size)) != NULL)
		return grown;
	if (h->m == NULL && size <= h->size)
		return p;
	/* palloc'd and now large, or a mapping refused to grow: move it */
	cxt = GetMemoryChunkContext(h->m != NULL ? (void *) h->m : (void *) h);
	grown = NULL;
	if (size >= DP_ARRAY_MAP_MIN)
		grown = map_array(cxt, size);
	if (grown == NULL)
		grown = palloced_array(cxt, size, 0);
	memcpy(grown, p, capacity(h));
	dp_sort_array_free(p);
	return grown;
}

void
dp_sort_array_free(void *p)
{
	DPSortArrayHead *h = HEAD_OF(p);

#ifdef MREMAP_MAYMOVE
	if (h->m != NULL)
	{
		unmap_array(h->m);
		return;
	}
#endif
	pfree(h);
}
