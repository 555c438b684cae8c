/*-------------------------------------------------------------------------
 *
 * fkset.c
 *	  The keys of a foreign key collected over a large load, for one check
 *	  of the whole set at the end (fkeys.c).
 *
 * A load that writes many rows referencing a table checks each batch's
 * keys with one query (fkeys.c); the same parent key met in every batch
 * is probed and locked again each time, and the batches' queries cost
 * their planning and start-up.  Past directpath.fkey_set_rows rows, a
 * leaf's constraint stops checking per batch: each directly written row's
 * key goes into a sort, with the row's place in the load's input order
 * (its ordinal), and the end of the load checks the sorted, distinct keys
 * in large chunks, in the referenced index's order.
 *
 * The sort is core's tuplesort over (key columns, ordinal), ordered by the
 * key columns' default btree operators under their collations, then by
 * the ordinal, within the caller's 'sortmem' (kB; spilling to disk past
 * it), or for integer keys an array (below).  A key equal byte for byte
 * to the one added just before is not added again (the lines of one
 * order reference it in a row; its first ordinal is already in).  Reading
 * it back, a key whose bytes equal the previous key's is dropped, so each
 * key is checked once, with the smallest ordinal of its rows: the first
 * row in input order that has it.  (Keys that are equal but differ in
 * bytes, such as 1.0 and 1.00, are both kept: checked twice, never
 * missed.)  A row with a NULL key column is not added: under MATCH SIMPLE
 * it references nothing.
 *
 * Integer keys.  Where every key column is an int2, int4, int8, oid,
 * date, timestamp or timestamptz (types whose default btree order is the
 * order of their integer value) and there are at most DP_FKSET_INT_KEYS,
 * the keys are kept instead as small entries of integers (DPIntKey1 and
 * DPIntKey2: the values as unsigned words in their order, two columns of
 * at most 32 bits in the halves of one word, and the ordinal; 16 bytes an
 * entry, 24 for a key with a 64-bit column and another) in an array,
 * sorted at the end by a radix sort on the bytes that vary
 * (common/radix.c), or by core's sort template with an inlined comparison
 * where that would not pay: no tuple formed, copied, deformed or compared
 * through a function pointer (a 6M-row load's two sets spent a tenth of
 * its time there).  The array grows up to half the caller's 'sortmem',
 * so that the radix sort finds its second array in the other half (with
 * the array filling all of it, every compaction fell back to the
 * comparison sort: a tenth of a parallel load's leader); full, it is
 * sorted and each key's duplicates dropped in place (its first
 * entry, of the smallest ordinal, kept), and when that leaves it more than
 * half full, its entries move to the tuplesort, which takes every later
 * key (int_spill).  The order and the keys read back are the tuplesort's.
 *
 * Reading back.  fkeys.c reads the keys in chunks and finds each chunk's
 * referenced rows at once (fkfind.c), or checks it with its check query.
 *
 * Invariants: the keys come out sorted, each with the smallest ordinal of
 * the rows that added it; memory is the sort's or the array's (both within
 * 'sortmem') and a chunk's arrays.
 *
 *-------------------------------------------------------------------------
 */
#include "load/fkeys_private.h"

#include "common/radix.h"
#include "common/settings.h"

#include "access/htup_details.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "catalog/pg_operator.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

/* Key columns a set may have to keep its keys as integers. */
#define DP_FKSET_INT_KEYS	2

/*
 * An entry of integers: a key's words, then its row's ordinal.  Each value
 * is an unsigned word in the value's order (a signed value sign-extended
 * with its sign bit flipped, an oid zero-extended), or, for two columns
 * of at most 32 bits, the two as halves of one word (each as a 32-bit
 * word so made; the first column's in the high half): entries of two
 * words (DPIntKey1) where the key fits one, else of three (DPIntKey2).
 * Kept as arrays of words, DPFkeySet.kwords + 1 words an entry.
 */
typedef struct DPIntKey1
{
	uint64		k;
	uint64		ordinal;
} DPIntKey1;

typedef struct DPIntKey2
{
	uint64		v[DP_FKSET_INT_KEYS];
	uint64		ordinal;
} DPIntKey2;

#define DP_INT_SIGN_BIT (UINT64CONST(1) << 63)
#define DP_HALF_SIGN_BIT ((uint32) 1 << 31)

/* How a key column's Datum is kept as an integer. */
typedef enum DPIntKind
{
	DP_INT_16,
	DP_INT_32,
	DP_INT_64,
	DP_INT_OID,
} DPIntKind;

struct DPFkeySet
{
	int			nkeys;
	AttrNumber	fkatts[INDEX_MAX_KEYS]; /* in the leaf */
	TupleTableSlot *row;		/* a leaf row added as a tuple (dp_fkset_add) */
	TupleDesc	sortdesc;		/* the key columns, then the ordinal */
	int			sortmem;		/* kB */
	/* integer keys, while 'ints' is not NULL */
	DPIntKind	kinds[DP_FKSET_INT_KEYS];
	int			kwords;			/* words of an entry's key: 1 or 2 */
	bool		halves;			/* two columns in the halves of one word */
	uint64	   *ints;			/* the entries, kwords + 1 words each */
	int64		nints;
	int64		maxints;		/* allocated */
	int64		limit;			/* entries half of 'sortmem' holds */
	int64		next_int;		/* reading back */
	uint64		last_ordinal;	/* the ordinal added last */
	bool		ordinal_disorder;	/* one added below an earlier one */
	/* else the tuplesort's */
	Tuplesortstate *sort;
	TupleTableSlot *put;		/* virtual */
	TupleTableSlot *got;		/* minimal tuples read back */
	MemoryContext cxt;			/* the sort's */
	MemoryContext last_cxt;		/* the previous chunk's last key */
	/* adding */
	bool		have_added;
	Datum		added[INDEX_MAX_KEYS];	/* the key added last, copied */
	MemoryContext added_cxt;	/* its copy */
	/* reading back */
	bool		sorted;
	bool		have_last;
	Datum		last[INDEX_MAX_KEYS];	/* the previous key, copied */
};

/* The sort of an int key's entries: words in order, then the ordinal. */
static inline int
int_key1_cmp(const DPIntKey1 *a, const DPIntKey1 *b)
{
	if (a->k != b->k)
		return a->k < b->k ? -1 : 1;
	if (a->ordinal != b->ordinal)
		return a->ordinal < b->ordinal ? -1 : 1;
	return 0;
}

static inline int
int_key2_cmp(const DPIntKey2 *a, const DPIntKey2 *b)
{
	for (int i = 0; i < DP_FKSET_INT_KEYS; i++)
		if (a->v[i] != b->v[i])
			return a->v[i] < b->v[i] ? -1 : 1;
	if (a->ordinal != b->ordinal)
		return a->ordinal < b->ordinal ? -1 : 1;
	return 0;
}

#define ST_SORT sort_int_keys1
#define ST_ELEMENT_TYPE DPIntKey1
#define ST_COMPARE(a, b) int_key1_cmp(a, b)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

#define ST_SORT sort_int_keys2
#define ST_ELEMENT_TYPE DPIntKey2
#define ST_COMPARE(a, b) int_key2_cmp(a, b)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/* Bytes of an entry's key, of an entry; entry i's words. */
#define INT_KEY_SIZE(s) ((s)->kwords * sizeof(uint64))
#define INT_ENTRY_SIZE(s) (((s)->kwords + 1) * sizeof(uint64))
#define INT_ENTRY(s, i) ((s)->ints + (Size) (i) * ((s)->kwords + 1))

/* How a key column of type 'typid' is kept as an integer; false if not. */
static bool
int_kind_of(Oid typid, DPIntKind *kind)
{
	switch (typid)
	{
		case INT2OID:
			*kind = DP_INT_16;
			return true;
		case INT4OID:
		case DATEOID:
			*kind = DP_INT_32;
			return true;
		case INT8OID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			*kind = DP_INT_64;
			return true;
		case OIDOID:
			*kind = DP_INT_OID;
			return true;
		default:
			return false;
	}
}

bool
dp_fkset_integer_type(Oid typid, bool *is_unsigned)
{
	DPIntKind	kind;

	if (!int_kind_of(typid, &kind))
		return false;
	*is_unsigned = kind == DP_INT_OID;
	return true;
}

/* Is every key column's type one the set keeps as an integer? */
static bool
int_kinds(DPFkeySet *s)
{
	if (s->nkeys > DP_FKSET_INT_KEYS)
		return false;
	for (int i = 0; i < s->nkeys; i++)
		if (!int_kind_of(TupleDescAttr(s->sortdesc, i)->atttypid, &s->kinds[i]))
			return false;
	s->halves = s->nkeys == 2 && s->kinds[0] != DP_INT_64 &&
		s->kinds[1] != DP_INT_64;
	s->kwords = s->nkeys == 1 || s->halves ? 1 : 2;
	return true;
}

static uint64
int_of(DPIntKind kind, Datum d)
{
	switch (kind)
	{
		case DP_INT_16:
			return (uint64) (int64) DatumGetInt16(d) ^ DP_INT_SIGN_BIT;
		case DP_INT_32:
			return (uint64) (int64) DatumGetInt32(d) ^ DP_INT_SIGN_BIT;
		case DP_INT_64:
			return (uint64) DatumGetInt64(d) ^ DP_INT_SIGN_BIT;
		case DP_INT_OID:
			return (uint64) DatumGetObjectId(d);
	}
	return 0;					/* keep the compiler quiet */
}

/* A word of int_of's as a 32-bit word in the same order (an oid's as it is). */
static inline uint32
half_of(DPIntKind kind, uint64 v)
{
	if (kind == DP_INT_OID)
		return (uint32) v;
	return (uint32) (int32) (int64) (v ^ DP_INT_SIGN_BIT) ^ DP_HALF_SIGN_BIT;
}

/* half_of's inverse. */
static inline uint64
word_of_half(DPIntKind kind, uint32 h)
{
	if (kind == DP_INT_OID)
		return (uint64) h;
	return (uint64) (int64) (int32) (h ^ DP_HALF_SIGN_BIT) ^ DP_INT_SIGN_BIT;
}

/* The words of the key in 'values' into w[]. */
static inline void
key_words(const DPFkeySet *s, const Datum *values, uint64 *w)
{
	for (int i = 0; i < s->nkeys; i++)
		w[i] = int_of(s->kinds[i], values[i]);
	if (s->halves)
		w[0] = (uint64) half_of(s->kinds[0], w[0]) << 32 |
			half_of(s->kinds[1], w[1]);
}

static Datum
datum_of(DPIntKind kind, uint64 v)
{
	switch (kind)
	{
		case DP_INT_16:
			return Int16GetDatum((int16) (int64) (v ^ DP_INT_SIGN_BIT));
		case DP_INT_32:
			return Int32GetDatum((int32) (int64) (v ^ DP_INT_SIGN_BIT));
		case DP_INT_64:
			return Int64GetDatum((int64) (v ^ DP_INT_SIGN_BIT));
		case DP_INT_OID:
			return ObjectIdGetDatum((Oid) v);
	}
	return (Datum) 0;			/* keep the compiler quiet */
}

/* Key column i's value of entry e. */
static inline Datum
key_datum(const DPFkeySet *s, const uint64 *e, int i)
{
	if (s->halves)
		return datum_of(s->kinds[i],
						word_of_half(s->kinds[i], (uint32) (i == 0 ? e[0] >> 32 : e[0])));
	return datum_of(s->kinds[i], e[i]);
}

/*
 * The entries sorted by key, then ordinal: by a radix sort on the key's
 * varying bytes (stable, so ordinals added in order, as a serial load adds
 * them, need no pass; the ordinals too otherwise), or by the comparison
 * sort where that refuses.
 */
static void
int_sort(DPFkeySet *s)
{
	Size		offs[DP_FKSET_INT_KEYS + 1];
	int			nwords = s->kwords;
	Size		esize = INT_ENTRY_SIZE(s);
	Size		used = (Size) s->nints * esize;
	Size		mem = (Size) s->sortmem * 1024;

	for (int i = 0; i <= s->kwords; i++)
		offs[i] = i * sizeof(uint64);
	if (s->ordinal_disorder)
		nwords++;
	if (dp_radix_sort(s->ints, s->nints, esize, offs, nwords,
					  mem > used ? mem - used : 0))
		return;
	if (s->kwords == 1)
		sort_int_keys1((DPIntKey1 *) s->ints, s->nints);
	else
		sort_int_keys2((DPIntKey2 *) s->ints, s->nints);
}

/* The tuplesort over (key columns, ordinal), in the set's memory. */
static void
begin_tuplesort(DPFkeySet *s)
{
	AttrNumber	sortcols[INDEX_MAX_KEYS + 1];
	Oid			ops[INDEX_MAX_KEYS + 1];
	Oid			colls[INDEX_MAX_KEYS + 1];
	bool		nulls_first[INDEX_MAX_KEYS + 1];
	MemoryContext old = MemoryContextSwitchTo(s->cxt);

	for (int i = 0; i < s->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);
		TypeCacheEntry *tc = lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR);

		sortcols[i] = i + 1;
		ops[i] = tc->lt_opr;
		colls[i] = att->attcollation;
		nulls_first[i] = false;
	}
	sortcols[s->nkeys] = s->nkeys + 1;
	ops[s->nkeys] = Int8LessOperator;
	colls[s->nkeys] = InvalidOid;
	nulls_first[s->nkeys] = false;
	s->sort = tuplesort_begin_heap(s->sortdesc, s->nkeys + 1, sortcols, ops,
								   colls, nulls_first, s->sortmem, NULL,
								   TUPLESORT_NONE);
	MemoryContextSwitchTo(old);
}

DPFkeySet *
dp_fkset_begin(Relation leaf, int nkeys, const AttrNumber *fkatts,
			   int sortmem)
{
	DPFkeySet  *s = palloc0(sizeof(DPFkeySet));
	TupleDesc	desc = RelationGetDescr(leaf);
	MemoryContext old;

	s->cxt = AllocSetContextCreate(CurrentMemoryContext,
								   "directpath foreign key set",
								   ALLOCSET_DEFAULT_SIZES);
	s->last_cxt = AllocSetContextCreate(s->cxt, "directpath foreign key",
										ALLOCSET_SMALL_SIZES);
	s->added_cxt = AllocSetContextCreate(s->cxt, "directpath foreign key added",
										 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(s->cxt);
	s->nkeys = nkeys;
	s->sortmem = sortmem;
	memcpy(s->fkatts, fkatts, sizeof(AttrNumber) * nkeys);
	s->sortdesc = CreateTemplateTupleDesc(nkeys + 1);
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, fkatts[i] - 1);

		TupleDescInitEntry(s->sortdesc, i + 1, NameStr(att->attname),
						   att->atttypid, att->atttypmod, 0);
		TupleDescInitEntryCollation(s->sortdesc, i + 1, att->attcollation);
	}
	TupleDescInitEntry(s->sortdesc, nkeys + 1, "ordinal", INT8OID, -1, 0);
	/* half: the radix sort's second array takes the other */
	if (dp_index_key_sort && int_kinds(s))
		s->limit = (int64) sortmem * 1024 / INT_ENTRY_SIZE(s) / 2;
	if (s->limit >= 1024)
	{
		s->maxints = Min(s->limit, 65536);
		s->ints = dp_sort_array_alloc(s->cxt,
									  s->maxints * INT_ENTRY_SIZE(s), 0);
	}
	else
		begin_tuplesort(s);
	s->row = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
	s->put = MakeSingleTupleTableSlot(s->sortdesc, &TTSOpsVirtual);
	s->got = MakeSingleTupleTableSlot(s->sortdesc, &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(old);
	return s;
}

/*
 * Can the key columns of this leaf be sorted?  (Every type with a default
 * btree operator class can.)
 */
bool
dp_fkset_possible(Relation leaf, int nkeys, const AttrNumber *fkatts)
{
	for (int i = 0; i < nkeys; i++)
	{
		Oid			type = TupleDescAttr(RelationGetDescr(leaf), fkatts[i] - 1)->atttypid;

		if (!OidIsValid(lookup_type_cache(type, TYPECACHE_LT_OPR)->lt_opr))
			return false;
	}
	return true;
}

/*
 * Is the key in 'put' byte for byte the one added last?  If not, it
 * becomes the one added last.  Keys often repeat in a row (the lines of
 * an order): the sort gets each run once, with its first (smallest)
 * ordinal, since ordinals only grow.
 */
static bool
same_as_added(DPFkeySet *s)
{
	bool		same = s->have_added;
	MemoryContext old;

	for (int i = 0; i < s->nkeys && same; i++)
	{
		Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);

		same = datumIsEqual(s->put->tts_values[i], s->added[i], att->attbyval,
							att->attlen);
	}
	if (same)
		return true;
	MemoryContextReset(s->added_cxt);
	old = MemoryContextSwitchTo(s->added_cxt);
	for (int i = 0; i < s->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);

		s->added[i] = datumCopy(s->put->tts_values[i], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(old);
	s->have_added = true;
	return false;
}

/* The entries sorted and each key's duplicates dropped, in place. */
static void
int_compact(DPFkeySet *s)
{
	int64		n = 0;

	int_sort(s);
	for (int64 i = 0; i < s->nints; i++)
		if (n == 0 || memcmp(INT_ENTRY(s, i), INT_ENTRY(s, n - 1),
							 INT_KEY_SIZE(s)) != 0)
			memmove(INT_ENTRY(s, n++), INT_ENTRY(s, i), INT_ENTRY_SIZE(s));
	s->nints = n;
}

/* An integer entry into the tuplesort, as its key's Datums. */
static void
put_sorted(DPFkeySet *s, const uint64 *e)
{
	ExecClearTuple(s->put);
	for (int k = 0; k < s->nkeys; k++)
	{
		s->put->tts_values[k] = key_datum(s, e, k);
		s->put->tts_isnull[k] = false;
	}
	s->put->tts_values[s->nkeys] = Int64GetDatum((int64) e[s->kwords]);
	s->put->tts_isnull[s->nkeys] = false;
	ExecStoreVirtualTuple(s->put);
	tuplesort_puttupleslot(s->sort, s->put);
}

/* The entries moved to the tuplesort, which takes every later key. */
static void
int_spill(DPFkeySet *s)
{
	begin_tuplesort(s);
	for (int64 i = 0; i < s->nints; i++)
		put_sorted(s, INT_ENTRY(s, i));
	dp_sort_array_free(s->ints);
	s->ints = NULL;
}

SPIPlanPtr
dp_fkset_keep_plan(const char *query, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "directpath: could not prepare \"%s\": %s", query,
			 SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	SPI_finish();
	return plan;
}

/* Add the key in 'put' as an integer entry, the array grown or compacted. */
static void
int_add(DPFkeySet *s, uint64 ordinal)
{
	uint64		e[DP_FKSET_INT_KEYS + 1];

	key_words(s, s->put->tts_values, e);
	e[s->kwords] = ordinal;
	s->ordinal_disorder |= s->nints > 0 && ordinal < s->last_ordinal;
	s->last_ordinal = ordinal;
	/* the key added just before: its first ordinal is in (ordinals grow) */
	if (s->nints > 0 &&
		memcmp(e, INT_ENTRY(s, s->nints - 1), INT_KEY_SIZE(s)) == 0)
		return;
	if (s->nints == s->maxints)
	{
		if (s->maxints < s->limit)
		{
			s->maxints = Min(s->limit, 2 * s->maxints);
			s->ints = dp_sort_array_grow(s->ints,
										 s->maxints * INT_ENTRY_SIZE(s));
		}
		else
		{
			int_compact(s);
			if (s->nints > s->maxints / 2)
			{
				int_spill(s);
				put_sorted(s, e);
				return;
			}
		}
	}
	memcpy(INT_ENTRY(s, s->nints++), e, INT_ENTRY_SIZE(s));
}

/*
 * The key in s->put (its columns filled, none NULL) added with its
 * ordinal, in the set's memory context.
 */
static void
add_put(DPFkeySet *s, uint64 ordinal)
{
	if (s->ints != NULL)
	{
		int_add(s, ordinal);
		return;
	}
	if (same_as_added(s))
		return;
	s->put->tts_values[s->nkeys] = Int64GetDatum((int64) ordinal);
	s->put->tts_isnull[s->nkeys] = false;
	ExecStoreVirtualTuple(s->put);
	tuplesort_puttupleslot(s->sort, s->put);
}

void
dp_fkset_add(DPFkeySet *s, HeapTuple row, uint64 ordinal)
{
	ExecStoreHeapTuple(row, s->row, false);
	dp_fkset_add_slot(s, s->row, ordinal);
	ExecClearTuple(s->row);
}

void
dp_fkset_add_slot(DPFkeySet *s, TupleTableSlot *slot, uint64 ordinal)
{
	MemoryContext old = MemoryContextSwitchTo(s->cxt);
	bool		null = false;

	ExecClearTuple(s->put);
	for (int i = 0; i < s->nkeys && !null; i++)
	{
		s->put->tts_values[i] = slot_getattr(slot, s->fkatts[i],
											 &s->put->tts_isnull[i]);
		null = s->put->tts_isnull[i];
	}
	/* MATCH SIMPLE: a key with a NULL references nothing */
	if (!null)
		add_put(s, ordinal);
	MemoryContextSwitchTo(old);
}

/* Is the key in 'got' byte for byte the previous one? */
static bool
same_as_last(DPFkeySet *s)
{
	if (!s->have_last)
		return false;
	for (int i = 0; i < s->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);

		if (!datumIsEqual(s->got->tts_values[i], s->last[i], att->attbyval,
						  att->attlen))
			return false;
	}
	return true;
}

/*
 * The next chunk of at most 'max' distinct keys, in key order: values[i]
 * (an array per key column, allocated in the current memory context) and
 * each key's first ordinal; returns how many (0 at the end).
 */
/*
 * dp_fkset_next for integer entries: the array sorted once, each key's
 * first entry (of the smallest ordinal) returned.
 */
static int
int_next(DPFkeySet *s, int max, Datum **values, uint64 *ordinals)
{
	int			n = 0;

	if (!s->sorted)
	{
		int_sort(s);
		s->sorted = true;
	}
	for (; n < max && s->next_int < s->nints; s->next_int++)
	{
		const uint64 *e = INT_ENTRY(s, s->next_int);

		if (s->next_int > 0 &&
			memcmp(e, INT_ENTRY(s, s->next_int - 1), INT_KEY_SIZE(s)) == 0)
			continue;
		for (int i = 0; i < s->nkeys; i++)
			values[i][n] = key_datum(s, e, i);
		ordinals[n++] = e[s->kwords];
	}
	return n;
}

int
dp_fkset_next(DPFkeySet *s, int max, Datum **values, uint64 *ordinals)
{
	int			n = 0;
	MemoryContext old;

	for (int i = 0; i < s->nkeys; i++)
		values[i] = palloc(sizeof(Datum) * max);
	if (s->ints != NULL)
		return int_next(s, max, values, ordinals);
	if (!s->sorted)
	{
		tuplesort_performsort(s->sort);
		s->sorted = true;
	}
	while (n < max && tuplesort_gettupleslot(s->sort, true, false, s->got, NULL))
	{
		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(s->got);
		if (same_as_last(s))
			continue;
		for (int i = 0; i < s->nkeys; i++)
		{
			Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);

			values[i][n] = datumCopy(s->got->tts_values[i], att->attbyval,
									 att->attlen);
			s->last[i] = values[i][n];
		}
		s->have_last = true;
		ordinals[n++] = (uint64) DatumGetInt64(s->got->tts_values[s->nkeys]);
	}
	/* the chunk's arrays go away with the caller's memory: keep the last */
	MemoryContextReset(s->last_cxt);
	old = MemoryContextSwitchTo(s->last_cxt);
	for (int i = 0; i < s->nkeys && n > 0; i++)
	{
		Form_pg_attribute att = TupleDescAttr(s->sortdesc, i);

		s->last[i] = datumCopy(values[i][n - 1], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(old);
	return n;
}

void
dp_fkset_end(DPFkeySet *s)
{
	ExecDropSingleTupleTableSlot(s->row);
	ExecDropSingleTupleTableSlot(s->put);
	ExecDropSingleTupleTableSlot(s->got);
	if (s->sort != NULL)
		tuplesort_end(s->sort);
	MemoryContextDelete(s->cxt);
}
