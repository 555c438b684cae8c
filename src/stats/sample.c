/*-------------------------------------------------------------------------
 *
 * sample.c
 *	  The sample of a load's rows: a uniform random share of the rows of
 *	  each page as it is written, held until the statistics are computed
 *	  from it (store.c), and cut then to its allotment.
 *
 * How rows are drawn.  In effect every row of a leaf gets a random key,
 * uniform in [0, 1); the leaf keeps the rows whose key is below its
 * threshold, which only ever falls, and at the end the rows with the
 * smallest keys, as many as its allotment then (dp_cut_to_allotment): a
 * uniform random sample of its rows (any threshold above the last one
 * admits every row the end takes).  Keys are drawn only for the rows
 * kept: the rows passed over before the next one kept are a geometric
 * number (the chance of each is the threshold), counted off a page at a
 * time, and a kept row's key is uniform below the threshold it was drawn
 * for.
 *
 * The allotment: for a load into one table, targrows rows, or every row
 * when it has no more (then the statistics are exactly ANALYZE's).  A
 * load that fills many partitions would pay for an ANALYZE of each, and
 * hold a sample of targrows rows for each (sorting each column of 30,000
 * rows costs more than loading a partition of 50,000 narrow rows); so
 * the samples of a load form a group that shares the sampling: a leaf's
 * allotment is targrows times its part of the group's rows, raised to one
 * row in DP_ROWS_PER_SAMPLE_ROW of its own as long as the group's samples
 * add up to no more than DP_SAMPLES_PER_LOAD samples, and to ANALYZE's
 * smallest sample; never more than targrows or its rows.  A load whose
 * rows add up to no more than a sample keeps every row of every leaf.
 * The allotment's share of a leaf's rows only falls as the load goes on,
 * so the threshold can follow it down, and the group sweeps its samples
 * down to their thresholds whenever the rows kept have doubled: what a
 * load holds stays within a small multiple of what it will keep.
 *
 * A kept row is copied, with its TID, into the sample's blocks of rows
 * (DPRowBlock), filled in order; a sweep that leaves less than half their
 * bytes in kept rows copies these into new blocks and frees the old ones.
 *
 * Invariants: the rows kept are in the order their pages were written
 * (block order, then offset order), which is TID order: rows are only
 * appended, and dropping rows keeps the order of the others; the group's
 * count of rows kept is the sum of its samples' rows; the sample memory's
 * live bytes are those of the rows kept.
 *
 *-------------------------------------------------------------------------
 */
#include "stats/stats_private.h"

#include <math.h>

#include "access/htup_details.h"
#include "utils/memutils.h"
#include "utils/sampling.h"

/*
 * The sampling a load's leaves share (see "The allotment" above): a
 * leaf's sample is its part of the load's rows times targrows, or one row
 * in DP_ROWS_PER_SAMPLE_ROW of its own while the load's samples add up to
 * no more than DP_SAMPLES_PER_LOAD samples, but no fewer than
 * DP_SAMPLE_MIN_ROWS rows (ANALYZE's smallest sample) and no more than
 * targrows or its rows.
 */
#define DP_ROWS_PER_SAMPLE_ROW	32
#define DP_SAMPLES_PER_LOAD		32
#define DP_SAMPLE_MIN_ROWS		100

/* The group is swept no sooner than it keeps this many rows. */
#define DP_SWEEP_MIN_ROWS		1024

DPSampleGroup *
dp_sample_group(void)
{
	DPSampleGroup *g = palloc0(sizeof(DPSampleGroup));

	g->next_sweep = DP_SWEEP_MIN_ROWS;
	return g;
}

/* ---- the rows kept as the pages are written ---- */

/* The rows the sample is to end with, as far as the load has gone. */
static double
allotment(const DPSample *s)
{
	double		part = s->seen / Max(s->group->offered, s->seen);
	double		rows = s->targrows * part;

	rows = Max(rows, Min(s->seen / DP_ROWS_PER_SAMPLE_ROW,
						 DP_SAMPLES_PER_LOAD * s->targrows * part));
	rows = Max(rows, DP_SAMPLE_MIN_ROWS);
	return Min(rows, Min(s->targrows, s->seen));
}

/*
 * The chance a row offered now is kept: a tenth more than the allotment's
 * share of the rows, and 64 rows, so that the end finds enough rows below
 * its threshold.  Both terms only fall as rows are offered (the allotment
 * grows no faster than the rows seen).
 */
static double
threshold(const DPSample *s)
{
	if (s->seen <= 0)
		return 1.0;
	return Min(1.0, (1.1 * allotment(s) + 64) / s->seen);
}

/*
 * Rows to pass before the next one kept, each kept with chance 'p';
 * 'log_q' is log1p(-p), taken once per page.
 */
static int64
draw_skip(DPSample *s, double p, double log_q)
{
	double		u = sampler_random_fract(&s->random);
	double		skip;

	if (p >= 1.0)
		return 0;
	skip = floor(log(u) / log_q);
	return skip < (double) PG_INT64_MAX / 2 ? (int64) skip : PG_INT64_MAX / 2;
}

/* MAXALIGNed bytes of a kept row of 'len' tuple bytes. */
#define ROW_BYTES(len)	MAXALIGN(HEAPTUPLESIZE + (len))

/* Room for a kept row of 'bytes' (ROW_BYTES) in the sample's blocks. */
static void *
row_space(DPSample *s, Size bytes)
{
	void	   *r;

	if (bytes > s->room)
	{
		Size		size = Max(DP_ROW_BLOCK, offsetof(DPRowBlock, data) + bytes);
		DPRowBlock *b = MemoryContextAlloc(s->mcxt, size);

		b->next = s->blocks;
		s->blocks = b;
		s->free = (char *) MAXALIGN(b->data);
		s->room = size - (s->free - (char *) b);
		s->held += size;
	}
	r = s->free;
	s->free += bytes;
	s->room -= bytes;
	s->live += bytes;
	return r;
}

/* The kept rows copied into new blocks, the old ones freed. */
static void
compact_rows(DPSample *s)
{
	DPRowBlock *old = s->blocks;

	s->blocks = NULL;
	s->room = 0;
	s->held = 0;
	s->live = 0;
	for (int r = 0; r < s->numrows; r++)
	{
		HeapTuple	t = s->rows[r];
		HeapTuple	c = row_space(s, ROW_BYTES(t->t_len));

		memcpy(c, t, HEAPTUPLESIZE + t->t_len);
		c->t_data = (HeapTupleHeader) ((char *) c + HEAPTUPLESIZE);
		s->rows[r] = c;
	}
	while (old != NULL)
	{
		DPRowBlock *next = old->next;

		pfree(old);
		old = next;
	}
}

/* Keep the row at 'off' of the page, block 'blkno', with key 'key'. */
static void
keep(DPSample *s, Page page, BlockNumber blkno, OffsetNumber off, double key)
{
	ItemId		lp = PageGetItemId(page, off);
	uint32		len = ItemIdGetLength(lp);
	HeapTuple	t;

	if (s->numrows == s->maxrows)
	{
		s->maxrows *= 2;
		s->rows = repalloc(s->rows, s->maxrows * sizeof(HeapTuple));
		s->keys = repalloc(s->keys, s->maxrows * sizeof(double));
	}
	t = row_space(s, ROW_BYTES(len));
	t->t_len = len;
	ItemPointerSet(&t->t_self, blkno, off);
	t->t_tableOid = RelationGetRelid(s->rel);
	t->t_data = (HeapTupleHeader) ((char *) t + HEAPTUPLESIZE);
	memcpy(t->t_data, PageGetItem(page, lp), len);
	s->rows[s->numrows] = t;
	s->keys[s->numrows++] = key;
	s->group->kept++;
}

/*
 * The rows kept whose key is 'below' or more dropped, but for the first
 * 'ties' whose key equals it (order kept).
 */
static void
drop_keys_from(DPSample *s, double below, int ties)
{
	int			n = 0;

	for (int r = 0; r < s->numrows; r++)
	{
		if (s->keys[r] < below || (s->keys[r] == below && ties-- > 0))
		{
			s->rows[n] = s->rows[r];
			s->keys[n++] = s->keys[r];
		}
		else
			s->live -= ROW_BYTES(s->rows[r]->t_len);
	}
	s->group->kept -= s->numrows - n;
	s->numrows = n;
}

/*
 * Every sample of the group brought down to its threshold, once the rows
 * kept have doubled since the last sweep: the rows held stay within about
 * twice what the samples will end with.
 */
static void
sweep(DPSampleGroup *g)
{
	ListCell   *lc;

	foreach(lc, g->samples)
	{
		DPSample   *s = lfirst(lc);

		drop_keys_from(s, threshold(s), 0);
		if (s->live < s->held / 2)
			compact_rows(s);
	}
	g->next_sweep = Max(DP_SWEEP_MIN_ROWS, 2 * g->kept);
}

void
dp_sample_page(DPSample *s, Page page, BlockNumber blkno)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	OffsetNumber off = FirstOffsetNumber;
	double		p = threshold(s);
	double		log_q = p < 1.0 ? log1p(-p) : 0.0;

	s->pages++;
	while (off <= maxoff)
	{
		int			left = maxoff - off + 1;

		if (s->skip < 0)
		{
			s->skip = draw_skip(s, p, log_q);
			s->skip_below = p;
		}
		if (s->skip >= left)
		{
			s->skip -= left;
			break;
		}
		off += (OffsetNumber) s->skip;
		keep(s, page, blkno, off++,
			 s->skip_below * sampler_random_fract(&s->random));
		s->skip = -1;
	}
	s->seen += maxoff;
	s->group->offered += maxoff;
	if (s->group->kept > s->group->next_sweep)
		sweep(s->group);
}

/* ---- the cut, when the sample is stored ---- */

/*
 * The n-th smallest of 'keys' (1 <= n <= count), found by selection
 * (Hoare's, the middle element as the pivot); 'keys' is reordered.
 */
static double
nth_smallest(double *keys, int count, int n)
{
	int			lo = 0;
	int			hi = count - 1;
	int			want = n - 1;

	while (lo < hi)
	{
		double		pivot = keys[lo + (hi - lo) / 2];
		int			i = lo;
		int			j = hi;

		while (i <= j)
		{
			while (keys[i] < pivot)
				i++;
			while (keys[j] > pivot)
				j--;
			if (i <= j)
			{
				double		t = keys[i];

				keys[i++] = keys[j];
				keys[j--] = t;
			}
		}
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			break;				/* keys[j + 1 .. i - 1] equal the pivot */
	}
	return keys[want];
}

/*
 * The sample cut to its allotment: the rows with the smallest keys.  The
 * allotment's largest key is found by selection, and the rows are kept
 * in place, so they stay in TID order (the order they were written in,
 * which ANALYZE's compute functions get too: correlation needs it).
 */
void
dp_cut_to_allotment(DPSample *s)
{
	int			n = (int) Min(ceil(allotment(s)), (double) s->numrows);
	double	   *keys;
	double		last;
	int			ties;			/* rows with the key 'last' to keep */

	if (n >= s->numrows)
		return;
	keys = palloc(s->numrows * sizeof(double));
	memcpy(keys, s->keys, s->numrows * sizeof(double));
	last = nth_smallest(keys, s->numrows, n);
	pfree(keys);
	ties = n;
	for (int r = 0; r < s->numrows; r++)
		ties -= s->keys[r] < last;
	drop_keys_from(s, last, ties);
}
