/*-------------------------------------------------------------------------
 *
 * keysort.c
 *	  The sort of the btree page builder's entries (btree.c): on integer
 *	  sort words for indexes whose every column is an integer, an oid, a
 *	  date, a timestamp or a uuid ordered by its default operator class,
 *	  else core's btree tuplesort.
 *
 * Why.  A load sorts each batch's entries of each index (sorted.c), and a
 * multi-column key with few distinct values in its first column (a device
 * id before a time) sends most of tuplesort's comparisons past the first
 * column's abbreviated key to its full comparison, which deforms both
 * index tuples and calls each column's comparator through a function
 * pointer: the leader of a parallel load into such an index spent a fifth
 * of its time there.  Here each entry's key columns are mapped to
 * unsigned 64-bit integers whose order is the operator class's order, and
 * the entries are sorted by those words and the heap TID: by a radix sort
 * on the bytes of the words that vary (common/radix.c; stable, so the
 * TIDs need no pass when they were added in order, as a load adds them),
 * or with an inlined comparison (core's sort template) where the radix
 * sort would not pay or its second array does not fit in workmem.
 *
 * Which indexes (words_begin): no INCLUDE columns; key columns taking at
 * most DP_KEYSORT_KEYS words; each column's btree comparison function
 * (support function 1, read from the relcache) is btint2cmp, btint4cmp,
 * btint8cmp, btoidcmp, date_cmp or timestamp_cmp (timestamptz's too), and
 * its stored form is the matching pass-by-value width, or uuid_cmp on the
 * 16-byte uuid.  The integer functions compare the Datum as a signed (oid:
 * unsigned) integer of that width, so the mapping is: sign-extend, flip
 * the sign bit (oid: zero-extend), one word; uuid_cmp compares the bytes as
 * memcmp does, so a uuid is two words, its bytes read big-endian; a DESC
 * column takes the complement of its words.  NULLS FIRST/LAST does not matter:
 * an entry with a NULL key is not taken.  Collations do not apply.
 *
 * An entry is its sort words and its TID, packed: 16 bytes for a key of
 * one integer column, at most 32 (tuplesort's entry and index tuple take
 * about 56); the array is a load's largest memory, first touched page by
 * page, and the radix sort moves it once a pass.  The key columns are the
 * whole index tuple and the words give their values back, so the tuple is
 * formed when the entry is read, in sorted order: every tuple of such an
 * index has one layout (fixed-width columns, no NULL), computed once
 * (tuple_layout), so form_tuple writes index_form_tuple's bytes without
 * its walk over the descriptor or a palloc.
 *
 * Invariants.
 * - The order is btree order with heap-TID tiebreak, exactly the order
 *	 tuplesort_begin_index_btree gives these entries (every key of two
 *	 entries compares equal only when the Datums are equal).
 * - A tuple read stays valid for the next DP_KEYSORT_READ_SPAN reads at
 *	 least: the tuples are formed in two buffers of that many tuples in
 *	 turn, each reused when its turn comes again.  The callers' contract
 *	 (index_private.h) is until a later read, and what they keep longer
 *	 they copy.
 * - Memory stays within the caller's workmem and those two spans of
 *	 tuples.  The entries take at most half of it, so that the radix sort
 *	 finds its second array in the other half; when they fill it, they are
 *	 sorted and written to a temporary file as a run (words_spill), and
 *	 reading merges the runs and the entries in memory (merge_begin,
 *	 merge_next: one entry a run in memory, a binary heap of the runs), so
 *	 a load's entries stay on sort words however many they are (core's
 *	 spilled tuplesort compares index tuples: 45% of a parallel leader on
 *	 the demo's COPY).  Only an entry with a NULL key, or a workmem too
 *	 small for a run of DP_KEYSORT_MIN_RUN entries, moves every entry
 *	 taken, runs included, to a tuplesort (words_move), which orders NULLs.
 * - A sort that must check uniqueness (the build of a unique index on
 *	 storage new in the transaction, rebuild.c; a unique index's entries
 *	 waiting for a merge at the end, sorted.c) checks it as the entries are
 *	 read in order: an entry whose words equal the previous one's has an
 *	 equal key (no key here is NULL), and raises the error core's tuplesort
 *	 raises for it (check_duplicate), which rebuild.c reports as an
 *	 INSERT's.  Core's tuplesort reports the first equal pair its
 *	 comparisons meet; here it is the smallest duplicated key.
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "catalog/pg_index.h"
#include "commands/tablespace.h"
#include "port/pg_bswap.h"
#include "common/radix.h"
#include "common/settings.h"
#include "storage/buffile.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"
#include "utils/uuid.h"

/* Key columns an index may have to be sorted here. */
#define DP_KEYSORT_KEYS 3

/* Reads a tuple read stays valid for, at least. */
#define DP_KEYSORT_READ_SPAN 1024

/* The fewest entries a run spilled to disk holds (else: core's tuplesort). */
#define DP_KEYSORT_MIN_RUN 4096

/* How a key column's Datum maps to its sort word. */
typedef enum DPKeyKind
{
	DP_KEY_INT16,
	DP_KEY_INT32,
	DP_KEY_INT64,
	DP_KEY_UINT32,
	DP_KEY_UUID,				/* two words */
} DPKeyKind;

/* An entry unpacked, its words (unused ones 0) and TID; packed: packed_at. */
typedef struct DPKeyEntry
{
	uint64		key[DP_KEYSORT_KEYS];
	uint64		tid;			/* block << 16 | offset */
} DPKeyEntry;

#define DP_SIGN_BIT (UINT64CONST(1) << 63)

typedef struct DPWordSort
{
	Relation	heaprel;		/* for a duplicate's report */
	Relation	index;
	int			nkeys;
	int			nwords;			/* the key columns' words */
	DPKeyKind	kind[DP_KEYSORT_KEYS];
	bool		desc[DP_KEYSORT_KEYS];
	int			word[DP_KEYSORT_KEYS];	/* each column's first word */
	Size		entsize;		/* a packed entry's bytes: nwords + 1 words */
	char	   *entries;		/* the packed entries */
	int64		n;				/* entries taken */
	int64		max;			/* room in 'entries' */
	int64		next;			/* next to return, once sorted */
	uint64		last_tid;		/* the TID added last */
	bool		tid_disorder;	/* a TID added below an earlier one */
	bool		sorted;
	Size		limit;			/* workmem */
	/* sorted runs spilled to temporary files, merged when read */
	int			nruns;
	int			maxruns;
	BufFile   **runs;
	int64	   *run_left;		/* entries of each run not read yet */
	DPKeyEntry *heads;			/* each source's next entry: the runs, then
								 * the entries in memory (index nruns) */
	int		   *heap;			/* sources with a head, a min-heap by it */
	int			nheap;
	DPKeyEntry	out;			/* the entry merged or read last */
	bool		check_unique;	/* two entries of equal words: an error */
	bool		have_prev;		/* a key read before (prev_key) */
	uint64		prev_key[DP_KEYSORT_KEYS];
	MemoryContext cxt;			/* the entries */
	/* the index tuples read: every one of the same layout (tuple_layout) */
	Size		tupsize;		/* MAXALIGN'd, the header's size */
	uint16		off[DP_KEYSORT_KEYS];	/* each column's, from the tuple */
	int16		len[DP_KEYSORT_KEYS];	/* and its width (attlen) */
	char	   *read_buf[2];	/* DP_KEYSORT_READ_SPAN tuples each, in turn */
	int			read_turn;		/* which one takes them now */
	int			read_count;		/* tuples it took this turn */
} DPWordSort;

struct DPKeySort
{
	DPWordSort *words;			/* the entries on sort words, or */
	Tuplesortstate *sort;		/* ... in core's tuplesort (NULL until needed) */
	bool		sorted;			/* the tuplesort performed */
	Relation	heap;
	Relation	index;
	int			workmem;		/* kB */
	bool		check_unique;	/* the tuplesort raises duplicates */
	MemoryContext cxt;			/* the sort's lifetime (the caller's at
								 * begin): a tuplesort begun later, when the
								 * caller reads in a shorter context, lives
								 * here too */
};

/* Two packed entries of 'nwords' words each (the TID's the last). */
static inline int
packed_cmp(const void *a, const void *b, int *nwords)
{
	const uint64 *x = a;
	const uint64 *y = b;

	for (int i = 0; i < *nwords; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

/* Two unpacked entries: their words, then their TIDs. */
static inline int
entry_cmp(const DPKeyEntry *a, const DPKeyEntry *b)
{
	int			words = DP_KEYSORT_KEYS + 1;	/* key[], then tid */

	return packed_cmp(a, b, &words);
}

static void words_end(DPWordSort *ks);
static void words_spill(DPWordSort *ks);

#define ST_SORT sort_packed
#define ST_ELEMENT_TYPE_VOID
#define ST_COMPARE(a, b, arg) packed_cmp(a, b, arg)
#define ST_COMPARE_ARG_TYPE int
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* Packed entry i of the array. */
static inline uint64 *
packed_at(DPWordSort *ks, int64 i)
{
	return (uint64 *) (ks->entries + i * ks->entsize);
}

/* A packed entry's words and TID into 'e'. */
static inline void
unpack(DPWordSort *ks, const uint64 *p, DPKeyEntry *e)
{
	memset(e->key, 0, sizeof(e->key));
	memcpy(e->key, p, ks->nwords * sizeof(uint64));
	e->tid = p[ks->nwords];
}

/* Column 'col' of 'index' as a sort word's kind; false if it has none. */
static bool
key_kind(Relation index, int col, DPKeyKind *kind)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), col);
	RegProcedure cmp = index_getprocid(index, col + 1, BTORDER_PROC);
	int			len;

	switch (cmp)
	{
		case F_BTINT2CMP:
			*kind = DP_KEY_INT16;
			len = sizeof(int16);
			break;
		case F_BTINT4CMP:
		case F_DATE_CMP:
			*kind = DP_KEY_INT32;
			len = sizeof(int32);
			break;
		case F_BTINT8CMP:
		case F_TIMESTAMP_CMP:
			*kind = DP_KEY_INT64;
			len = sizeof(int64);
			break;
		case F_BTOIDCMP:
			*kind = DP_KEY_UINT32;
			len = sizeof(Oid);
			break;
		case F_UUID_CMP:
			*kind = DP_KEY_UUID;
			return !att->attbyval && att->attlen == UUID_LEN;
		default:
			return false;
	}
	return att->attbyval && att->attlen == len;
}

/*
 * The layout index_form_tuple gives every tuple of these key columns (of
 * fixed width, never NULL): the data after a MAXALIGN'd header without a
 * null bitmap, each column at its type's alignment, the whole MAXALIGN'd;
 * t_info holds the size alone.
 */
static void
tuple_layout(DPWordSort *ks, TupleDesc desc)
{
	Size		off = IndexInfoFindDataOffset(0);

	for (int i = 0; i < ks->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		off = att_align_nominal(off, att->attalign);
		ks->off[i] = (uint16) off;
		ks->len[i] = att->attlen;
		off += att->attlen;
	}
	ks->tupsize = MAXALIGN(off);
}

static DPWordSort *
words_begin(Relation heap, Relation index, int workmem, bool check_unique)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	DPWordSort *ks;

	if (!dp_index_key_sort || nkeys > DP_KEYSORT_KEYS ||
		IndexRelationGetNumberOfAttributes(index) != nkeys)
		return NULL;
	ks = palloc0(sizeof(DPWordSort));
	for (int i = 0; i < nkeys; i++)
	{
		if (!key_kind(index, i, &ks->kind[i]))
		{
			pfree(ks);
			return NULL;
		}
		ks->desc[i] = (index->rd_indoption[i] & INDOPTION_DESC) != 0;
		ks->word[i] = ks->nwords;
		ks->nwords += ks->kind[i] == DP_KEY_UUID ? 2 : 1;
		if (ks->nwords > DP_KEYSORT_KEYS)
		{
			pfree(ks);
			return NULL;
		}
	}
	ks->entsize = (ks->nwords + 1) * sizeof(uint64);
	ks->heaprel = heap;
	ks->index = index;
	ks->check_unique = check_unique;
	ks->nkeys = nkeys;
	ks->limit = (Size) workmem * 1024;
	ks->cxt = AllocSetContextCreate(CurrentMemoryContext,
									"directpath key sort",
									ALLOCSET_DEFAULT_SIZES);
	tuple_layout(ks, RelationGetDescr(index));
	for (int i = 0; i < 2; i++)
		ks->read_buf[i] = MemoryContextAlloc(ks->cxt,
											 DP_KEYSORT_READ_SPAN * ks->tupsize);
	return ks;
}

/* The sort word of one key column's value. */
static inline uint64
sort_word(DPKeyKind kind, bool desc, Datum d)
{
	uint64		w;

	switch (kind)
	{
		case DP_KEY_INT16:
			w = (uint64) (int64) DatumGetInt16(d) ^ DP_SIGN_BIT;
			break;
		case DP_KEY_INT32:
			w = (uint64) (int64) DatumGetInt32(d) ^ DP_SIGN_BIT;
			break;
		case DP_KEY_INT64:
			w = (uint64) DatumGetInt64(d) ^ DP_SIGN_BIT;
			break;
		default:
			w = (uint64) DatumGetObjectId(d);
			break;
	}
	return desc ? ~w : w;
}

/* The value of a sort word: sort_word inverted. */
static inline Datum
word_value(DPKeyKind kind, bool desc, uint64 w)
{
	if (desc)
		w = ~w;
	switch (kind)
	{
		case DP_KEY_INT16:
			return Int16GetDatum((int16) (int64) (w ^ DP_SIGN_BIT));
		case DP_KEY_INT32:
			return Int32GetDatum((int32) (int64) (w ^ DP_SIGN_BIT));
		case DP_KEY_INT64:
			return Int64GetDatum((int64) (w ^ DP_SIGN_BIT));
		default:
			return ObjectIdGetDatum((Oid) w);
	}
}

static bool
words_add(DPWordSort *ks, ItemPointer tid, Datum *values, bool *isnull)
{
	uint64	   *p;

	Assert(!ks->sorted);
	for (int i = 0; i < ks->nkeys; i++)
		if (isnull[i])
			return false;
	if (ks->n == ks->max)
	{
		int64		cap = ks->limit / 2 / ks->entsize;
		int64		max = Min(Max(ks->max * 2, 1024), cap);

		if (max > ks->max)
		{
			ks->entries = ks->entries == NULL ?
				dp_sort_array_alloc(ks->cxt, max * ks->entsize, 0) :
				dp_sort_array_grow(ks->entries, max * ks->entsize);
			ks->max = max;
		}
		else if (cap >= DP_KEYSORT_MIN_RUN)
			words_spill(ks);
		else
			return false;
	}
	p = packed_at(ks, ks->n++);	/* every one of its words is written */
	for (int i = 0; i < ks->nkeys; i++)
	{
		uint64	   *w = &p[ks->word[i]];

		if (ks->kind[i] != DP_KEY_UUID)
		{
			*w = sort_word(ks->kind[i], ks->desc[i], values[i]);
			continue;
		}
		/* a uuid's bytes as two big-endian words: memcmp's order */
		memcpy(w, DatumGetUUIDP(values[i])->data, UUID_LEN);
		w[0] = pg_ntoh64(w[0]);
		w[1] = pg_ntoh64(w[1]);
		if (ks->desc[i])
		{
			w[0] = ~w[0];
			w[1] = ~w[1];
		}
	}
	p[ks->nwords] = ((uint64) ItemPointerGetBlockNumberNoCheck(tid) << 16) |
		ItemPointerGetOffsetNumberNoCheck(tid);
	ks->tid_disorder |= ks->n > 1 && p[ks->nwords] < ks->last_tid;
	ks->last_tid = p[ks->nwords];
	return true;
}

/*
 * The entries sorted: by radix on the key words, and the TIDs when they
 * were not added in order (the radix sort is stable, so TIDs added in
 * order, a load's usual case, stay in order among equal keys); else, or
 * when the radix sort refuses, by the comparison sort.
 */
static void
words_sort(DPWordSort *ks)
{
	Size		offs[DP_KEYSORT_KEYS + 1];
	int			nwords = ks->nwords;
	int			all = ks->nwords + 1;
	Size		used = (Size) ks->n * ks->entsize;

	for (int i = 0; i <= ks->nwords; i++)
		offs[i] = i * sizeof(uint64);	/* the TID's is the last */
	if (ks->tid_disorder)
		nwords++;
	if (!dp_radix_sort(ks->entries, ks->n, ks->entsize, offs, nwords,
					   ks->limit > used ? ks->limit - used : 0))
		sort_packed(ks->entries, ks->n, ks->entsize, &all);
	ks->sorted = true;
}

/*
 * The entries in memory, full: sorted and written to a temporary file of
 * their own as a run, and the array emptied for the next ones.
 */
static void
words_spill(DPWordSort *ks)
{
	MemoryContext old = MemoryContextSwitchTo(ks->cxt);
	BufFile    *file;

	words_sort(ks);
	if (ks->nruns == 0)
		PrepareTempTablespaces();	/* temp_tablespaces, as tuplesort */
	if (ks->nruns == ks->maxruns)
	{
		ks->maxruns = Max(ks->maxruns * 2, 8);
		ks->runs = ks->runs == NULL ?
			palloc(ks->maxruns * sizeof(BufFile *)) :
			repalloc(ks->runs, ks->maxruns * sizeof(BufFile *));
		ks->run_left = ks->run_left == NULL ?
			palloc(ks->maxruns * sizeof(int64)) :
			repalloc(ks->run_left, ks->maxruns * sizeof(int64));
	}
	file = BufFileCreateTemp(false);
	BufFileWrite(file, ks->entries, ks->n * ks->entsize);
	if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind temporary file of a directpath key sort")));
	elog(DEBUG2, "directpath: key sort of index \"%s\": run %d of %lld entries written",
		 RelationGetRelationName(ks->index), ks->nruns + 1, (long long) ks->n);
	ks->runs[ks->nruns] = file;
	ks->run_left[ks->nruns++] = ks->n;
	ks->n = 0;
	ks->sorted = false;
	ks->tid_disorder = false;
	MemoryContextSwitchTo(old);
}

/* The next entry of run 'r' into 'e'; false at the run's end. */
static bool
run_read(DPWordSort *ks, int r, DPKeyEntry *e)
{
	uint64		p[DP_KEYSORT_KEYS + 1];
	size_t		got;

	if (ks->run_left[r] == 0)
		return false;
	got = BufFileRead(ks->runs[r], p, ks->entsize);
	if (got != ks->entsize)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("could not read temporary file of a directpath key sort: read only %zu of %zu bytes",
						got, ks->entsize)));
	unpack(ks, p, e);
	ks->run_left[r]--;
	return true;
}

/* Source r's next entry into its head: a run's, or the memory's (nruns). */
static bool
source_next(DPWordSort *ks, int r)
{
	if (r < ks->nruns)
		return run_read(ks, r, &ks->heads[r]);
	if (ks->next >= ks->n)
		return false;
	unpack(ks, packed_at(ks, ks->next++), &ks->heads[r]);
	return true;
}

/* Move the heap's entry at 'i' down to its place. */
static void
heap_sift_down(DPWordSort *ks, int i)
{
	for (;;)
	{
		int			least = i;
		int			l = 2 * i + 1;
		int			tmp;

		if (l < ks->nheap &&
			entry_cmp(&ks->heads[ks->heap[l]], &ks->heads[ks->heap[least]]) < 0)
			least = l;
		if (l + 1 < ks->nheap &&
			entry_cmp(&ks->heads[ks->heap[l + 1]], &ks->heads[ks->heap[least]]) < 0)
			least = l + 1;
		if (least == i)
			return;
		tmp = ks->heap[i];
		ks->heap[i] = ks->heap[least];
		ks->heap[least] = tmp;
		i = least;
	}
}

/* The merge's start: every source's first entry, heaped. */
static void
merge_begin(DPWordSort *ks)
{
	int			nsources = ks->nruns + 1;

	ks->heads = MemoryContextAlloc(ks->cxt, nsources * sizeof(DPKeyEntry));
	ks->heap = MemoryContextAlloc(ks->cxt, nsources * sizeof(int));
	ks->nheap = 0;
	for (int r = 0; r < nsources; r++)
		if (source_next(ks, r))
			ks->heap[ks->nheap++] = r;
	for (int i = ks->nheap / 2 - 1; i >= 0; i--)
		heap_sift_down(ks, i);
}

/* The least entry of all sources (copied to ks->out), or NULL at the end. */
static DPKeyEntry *
merge_next(DPWordSort *ks)
{
	int			r;

	if (ks->nheap == 0)
		return NULL;
	r = ks->heap[0];
	ks->out = ks->heads[r];
	if (!source_next(ks, r))
		ks->heap[0] = ks->heap[--ks->nheap];
	heap_sift_down(ks, 0);
	return &ks->out;
}

/* Entry e's values (a uuid's in 'uuids', the caller's) and TID. */
static void
entry_values(DPWordSort *ks, DPKeyEntry *e, Datum *values, ItemPointer tid,
			 pg_uuid_t *uuids)
{
	for (int i = 0; i < ks->nkeys; i++)
	{
		const uint64 *w = &e->key[ks->word[i]];
		uint64		be[2];

		if (ks->kind[i] != DP_KEY_UUID)
		{
			values[i] = word_value(ks->kind[i], ks->desc[i], *w);
			continue;
		}
		be[0] = pg_hton64(ks->desc[i] ? ~w[0] : w[0]);
		be[1] = pg_hton64(ks->desc[i] ? ~w[1] : w[1]);
		memcpy(uuids[i].data, be, UUID_LEN);
		values[i] = UUIDPGetDatum(&uuids[i]);
	}
	ItemPointerSet(tid, (BlockNumber) (e->tid >> 16),
				   (OffsetNumber) (e->tid & 0xFFFF));
}

/*
 * A unique build's check, on the entries in sorted order: equal sort words
 * are equal keys (none is NULL here), so an entry equal to the one before
 * is the duplicate core's tuplesort raises, with its message.
 */
static void
check_duplicate(DPWordSort *ks, DPKeyEntry *e, Datum *values)
{
	static const bool isnull[DP_KEYSORT_KEYS] = {false};
	char	   *key_desc;

	if (!ks->have_prev ||
		memcmp(ks->prev_key, e->key, sizeof(ks->prev_key)) != 0)
	{
		memcpy(ks->prev_key, e->key, sizeof(ks->prev_key));
		ks->have_prev = true;
		return;
	}
	key_desc = BuildIndexValueDescription(ks->index, values, (bool *) isnull);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"",
					RelationGetRelationName(ks->index)),
			 key_desc ? errdetail("Key %s is duplicated.", key_desc) :
			 errdetail("Duplicate keys exist."),
			 errtableconstraint(ks->heaprel, RelationGetRelationName(ks->index))));
}

/*
 * The index tuple of the key values and tid at itup, in tuple_layout's
 * layout: what index_form_tuple makes of them, padding zeroed.
 */
static void
form_tuple(DPWordSort *ks, const Datum *values, ItemPointer tid,
		   IndexTuple itup)
{
	char	   *data = (char *) itup;

	memset(itup, 0, ks->tupsize);
	itup->t_tid = *tid;
	itup->t_info = (unsigned short) ks->tupsize;
	for (int i = 0; i < ks->nkeys; i++)
	{
		/* a uuid is the one by-reference kind (key_kind) */
		if (ks->kind[i] == DP_KEY_UUID)
			memcpy(data + ks->off[i], DatumGetPointer(values[i]), ks->len[i]);
		else
			store_att_byval(data + ks->off[i], values[i], ks->len[i]);
	}
}

static IndexTuple
words_next(DPWordSort *ks)
{
	Datum		values[DP_KEYSORT_KEYS];
	pg_uuid_t	uuids[DP_KEYSORT_KEYS];
	ItemPointerData tid;
	IndexTuple	itup;
	DPKeyEntry *e = NULL;

	if (!ks->sorted)
	{
		words_sort(ks);
		if (ks->nruns > 0)
			merge_begin(ks);
	}
	if (ks->nruns > 0)
		e = merge_next(ks);
	else if (ks->next < ks->n)
	{
		e = &ks->out;
		unpack(ks, packed_at(ks, ks->next++), e);
	}
	if (e == NULL)
		return NULL;
	entry_values(ks, e, values, &tid, uuids);
	if (ks->check_unique)
		check_duplicate(ks, e, values);
	if (++ks->read_count > DP_KEYSORT_READ_SPAN)
	{
		/* the other buffer's tuples are a whole span old */
		ks->read_turn = 1 - ks->read_turn;
		ks->read_count = 1;
	}
	itup = (IndexTuple) (ks->read_buf[ks->read_turn] +
						 (ks->read_count - 1) * ks->tupsize);
	form_tuple(ks, values, &tid, itup);
	return itup;
}

/* Entry e into core's tuplesort. */
static void
move_entry(DPWordSort *ks, Tuplesortstate *sort, DPKeyEntry *e)
{
	static const bool isnull[DP_KEYSORT_KEYS] = {false};
	Datum		values[DP_KEYSORT_KEYS];
	pg_uuid_t	uuids[DP_KEYSORT_KEYS];
	ItemPointerData tid;

	entry_values(ks, e, values, &tid, uuids);
	tuplesort_putindextuplevalues(sort, ks->index, &tid, values,
								  (bool *) isnull);
}

/* Every entry taken, the runs' and the memory's, into core's tuplesort. */
static void
words_move(DPWordSort *ks, Tuplesortstate *sort)
{
	DPKeyEntry	e;

	Assert(!ks->sorted);
	for (int r = 0; r < ks->nruns; r++)
		while (run_read(ks, r, &e))
			move_entry(ks, sort, &e);
	for (int64 i = 0; i < ks->n; i++)
	{
		unpack(ks, packed_at(ks, i), &e);
		move_entry(ks, sort, &e);
	}
	words_end(ks);
}

static void
words_end(DPWordSort *ks)
{
	for (int r = 0; r < ks->nruns; r++)
		BufFileClose(ks->runs[r]);
	MemoryContextDelete(ks->cxt);
	pfree(ks);
}

/* ---------- the sort of a build's entries ---------- */

DPKeySort *
dp_keysort_begin(Relation heap, Relation index, int workmem,
				 bool check_unique)
{
	DPKeySort  *s = palloc0(sizeof(DPKeySort));

	s->heap = heap;
	s->index = index;
	s->workmem = workmem;
	s->check_unique = check_unique && index->rd_index->indisunique;
	s->cxt = CurrentMemoryContext;
	s->words = words_begin(heap, index, workmem, s->check_unique);
	return s;
}

/* The tuplesort, begun with the entries the sort words took so far. */
static Tuplesortstate *
tuplesort_of(DPKeySort *s)
{
	if (s->sort == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(s->cxt);

		s->sort = tuplesort_begin_index_btree(s->heap, s->index,
											  s->check_unique,
											  s->index->rd_index->indnullsnotdistinct,
											  s->workmem, NULL, TUPLESORT_NONE);
		if (s->words != NULL)
			words_move(s->words, s->sort);
		s->words = NULL;
		MemoryContextSwitchTo(old);
	}
	return s->sort;
}

void
dp_keysort_add(DPKeySort *s, ItemPointer tid, Datum *values, bool *isnull)
{
	if (s->words == NULL || !words_add(s->words, tid, values, isnull))
		tuplesort_putindextuplevalues(tuplesort_of(s), s->index, tid,
									  values, isnull);
}

IndexTuple
dp_keysort_next(DPKeySort *s)
{
	if (s->words != NULL)
		return words_next(s->words);
	if (!s->sorted)
	{
		tuplesort_performsort(tuplesort_of(s));
		s->sorted = true;
	}
	return tuplesort_getindextuple(s->sort, true);
}

void
dp_keysort_end(DPKeySort *s)
{
	if (s->words != NULL)
		words_end(s->words);
	if (s->sort != NULL)
		tuplesort_end(s->sort);
	pfree(s);
}
