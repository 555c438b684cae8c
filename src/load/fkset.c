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
 * the ordinal; it spills to disk past work_mem.  A key equal byte for
 * byte to the one added just before is not added again (the lines of one
 * order reference it in a row; its first ordinal is already in).  Reading
 * it back, a key whose bytes equal the previous key's is dropped, so each
 * key is checked once, with the smallest ordinal of its rows: the first
 * row in input order that has it.  (Keys that are equal but differ in
 * bytes, such as 1.0 and 1.00, are both kept: checked twice, never
 * missed.)  A row with a NULL key column is not added: under MATCH SIMPLE
 * it references nothing.
 *
 * Invariants: the keys come out sorted, each with the smallest ordinal of
 * the rows that added it; memory is the sort's (work_mem) and a chunk's
 * arrays.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "access/htup_details.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

struct DPFkeySet
{
	int			nkeys;
	AttrNumber	fkatts[INDEX_MAX_KEYS]; /* in the leaf */
	TupleDesc	leafdesc;
	TupleDesc	sortdesc;		/* the key columns, then the ordinal */
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

DPFkeySet *
dp_fkset_begin(Relation leaf, int nkeys, const AttrNumber *fkatts)
{
	DPFkeySet  *s = palloc0(sizeof(DPFkeySet));
	TupleDesc	desc = RelationGetDescr(leaf);
	AttrNumber	sortcols[INDEX_MAX_KEYS + 1];
	Oid			ops[INDEX_MAX_KEYS + 1];
	Oid			colls[INDEX_MAX_KEYS + 1];
	bool		nulls_first[INDEX_MAX_KEYS + 1];
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
	s->leafdesc = desc;
	memcpy(s->fkatts, fkatts, sizeof(AttrNumber) * nkeys);
	s->sortdesc = CreateTemplateTupleDesc(nkeys + 1);
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, fkatts[i] - 1);
		TypeCacheEntry *tc = lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR);

		TupleDescInitEntry(s->sortdesc, i + 1, NameStr(att->attname),
						   att->atttypid, att->atttypmod, 0);
		TupleDescInitEntryCollation(s->sortdesc, i + 1, att->attcollation);
		sortcols[i] = i + 1;
		ops[i] = tc->lt_opr;
		colls[i] = att->attcollation;
		nulls_first[i] = false;
	}
	TupleDescInitEntry(s->sortdesc, nkeys + 1, "ordinal", INT8OID, -1, 0);
	sortcols[nkeys] = nkeys + 1;
	ops[nkeys] = Int8LessOperator;
	colls[nkeys] = InvalidOid;
	nulls_first[nkeys] = false;
	s->sort = tuplesort_begin_heap(s->sortdesc, nkeys + 1, sortcols, ops,
								   colls, nulls_first, work_mem, NULL,
								   TUPLESORT_NONE);
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

void
dp_fkset_add(DPFkeySet *s, HeapTuple row, uint64 ordinal)
{
	MemoryContext old = MemoryContextSwitchTo(s->cxt);

	ExecClearTuple(s->put);
	for (int i = 0; i < s->nkeys; i++)
	{
		s->put->tts_values[i] = heap_getattr(row, s->fkatts[i], s->leafdesc,
											 &s->put->tts_isnull[i]);
		if (s->put->tts_isnull[i])
		{
			/* MATCH SIMPLE: a key with a NULL references nothing */
			MemoryContextSwitchTo(old);
			return;
		}
	}
	if (same_as_added(s))
	{
		MemoryContextSwitchTo(old);
		return;
	}
	s->put->tts_values[s->nkeys] = Int64GetDatum((int64) ordinal);
	s->put->tts_isnull[s->nkeys] = false;
	ExecStoreVirtualTuple(s->put);
	tuplesort_puttupleslot(s->sort, s->put);
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
int
dp_fkset_next(DPFkeySet *s, int max, Datum **values, uint64 *ordinals)
{
	int			n = 0;
	MemoryContext old;

	if (!s->sorted)
	{
		tuplesort_performsort(s->sort);
		s->sorted = true;
	}
	for (int i = 0; i < s->nkeys; i++)
		values[i] = palloc(sizeof(Datum) * max);
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
	ExecDropSingleTupleTableSlot(s->put);
	ExecDropSingleTupleTableSlot(s->got);
	tuplesort_end(s->sort);
	MemoryContextDelete(s->cxt);
}
