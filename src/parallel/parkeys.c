/*-------------------------------------------------------------------------
 *
 * parkeys.c
 *	  The leader's side of a parallel ON CONFLICT (parconflict.c has the
 *	  processes' side): every row's keys checked, in input order, against
 *	  the keys of the rows taken before it.
 *
 * Each page a process hands on (and each row that needs TOAST) comes just
 * after its keys message, in the input's order (parorder.c).  The message
 * holds entries in input order: one per row of the page, its key image in
 * each arbiter; and, with two or more arbiters, the rows the process
 * skipped provisionally (for keys only its own accepted rows have), each
 * carried whole.  For each entry, in order:
 *
 *	check	its keys are looked up in the set of keys taken, one set per
 *			arbiter.  A key found was taken from an earlier row, accepted by
 *			another process (or taken off or skipped since, for a row of
 *			this one) that the process's probe could not see;
 *	decide	a row with a key found is not inserted: a row of the page is
 *			taken off it (the page rebuilt without it, not written when
 *			empty), a provisional row stays skipped; both are counted as
 *			skipped.  Under DO UPDATE a key found is core's cardinality
 *			error instead.  Else the row's keys join the sets at once (a
 *			later entry meets them), and a provisional row is inserted by
 *			the leader after the page (dp_load_row);
 *	taken	once the page and those rows are in the load, the keys get the
 *			generation current then.
 *
 * Why the provisional rows make two arbiters exact.  Core inserts a row iff
 * none of its keys is in the table or in a row inserted before it.  A
 * process's decisions differ from that only through rows the leader takes
 * off: such a row's other keys are free again, and a later row of the same
 * process that its set skipped for one of them may have to be inserted.
 * Those are exactly the provisional rows (their keys count as accepted in
 * the process, so a row after one that shares its key is provisional too),
 * and they come here at their place among the process's rows, where the
 * sets hold every key inserted before them.  A row whose key is in the
 * table, or in a row the statement inserted that the probe found, is
 * skipped for good.
 *
 * Generations bound the sets.  G goes up each time a flush has left every
 * row taken so far in the indexes (load.c calls back), and is published in
 * the shared memory.  A probe that read G finds every row taken in a
 * generation below G itself.  A process's messages come in its order with
 * their G never going down and never above their rows', so a key taken in
 * a generation below every process's last G can never be met again from
 * a set: such keys are dropped (prune) whenever the sets have doubled.
 *
 * Invariants: the entries of one message are checked in their order, all
 * before the page or row that follows is loaded; a key joins the sets with
 * a generation only once its row is in the load.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "load/load.h"

#include "common/hashfn.h"
#include "executor/executor.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"

/* A key the leader took, and the generation it took it in. */
typedef struct DPTakenKey
{
	DPKeyImage	key;
	uint64		gen;
	char		status;			/* simplehash's */
} DPTakenKey;

#define SH_PREFIX		dptaken
#define SH_ELEMENT_TYPE DPTakenKey
#define SH_KEY_TYPE		DPKeyImage
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	((k).hash)
#define SH_EQUAL(tb, a, b)	DP_KEY_EQUAL(a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a)	((a)->key.hash)
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* An entry of the last keys message (its bytes in the message's copy). */
typedef struct DPEntry
{
	bool		placed;			/* a row of the page (or the row), else a
								 * provisional row */
	bool		dup;			/* a key was taken: not inserted */
	const char *tuple;			/* a provisional row's minimal tuple */
	int32		tuple_len;
} DPEntry;

struct DPTakeConflicts
{
	DPLoad	   *load;
	DPParallelShared *live;		/* where the generation is published */
	uint64		gen;			/* the current generation */
	int			narbiters;
	dptaken_hash **taken;		/* per arbiter: the keys taken */
	uint64		members;		/* keys in the sets */
	MemoryContext keys_cxt;
	uint64		kept_after_prune;	/* keys the last pruning kept */
	uint64	   *last_gen;		/* per process (the leader last): the
								 * generation of its last keys message */
	int			nprocs;
	uint64		skipped;		/* rows taken off pages, provisional rows
								 * skipped */
	bool		do_update;		/* a key taken twice is an error */
	TupleTableSlot *slot;		/* a provisional row, to insert */
	/* the last keys message, waiting for its page or row: */
	bool		waiting;
	uint64		msg_gen;
	int			nentries;
	int			nplaced;		/* entries of rows placed */
	int			ndup;			/* ... of them taken off */
	DPEntry    *entries;
	bool	   *dup;			/* per row placed, in its page's order */
	DPKeyImage *images;			/* per entry and arbiter (len -1: no key) */
	StringInfoData copy;
	int			cap;
};

/* The load's callback: every row taken so far is in the indexes. */
static void
indexed(void *arg)
{
	DPTakeConflicts *tc = arg;

	if (tc->live == NULL)
		return;					/* the workers are gone: no probe is left */
	tc->gen++;
	pg_memory_barrier();
	pg_atomic_write_u64(&tc->live->indexed_gen, tc->gen);
}

static void
new_sets(DPTakeConflicts *tc, Size size)
{
	for (int i = 0; i < tc->narbiters; i++)
		tc->taken[i] = dptaken_create(tc->keys_cxt, size, NULL);
}

DPTakeConflicts *
dp_take_conflicts_begin(DPLoad *load, DPParallelShared *live, int nworkers,
						TupleDesc desc)
{
	DPTakeConflicts *tc = palloc0(sizeof(DPTakeConflicts));

	tc->nprocs = nworkers + 1;
	tc->last_gen = palloc0(sizeof(uint64) * tc->nprocs);
	tc->load = load;
	tc->live = live;
	tc->gen = pg_atomic_read_u64(&live->indexed_gen);
	tc->do_update = live->do_update;
	tc->narbiters = Max(live->narbiters, 1);
	tc->taken = palloc(sizeof(dptaken_hash *) * tc->narbiters);
	tc->keys_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath parallel conflict keys",
										 ALLOCSET_DEFAULT_SIZES);
	new_sets(tc, 8192);
	tc->slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	initStringInfo(&tc->copy);
	tc->cap = 512;
	tc->entries = palloc(sizeof(DPEntry) * tc->cap);
	tc->dup = palloc(sizeof(bool) * tc->cap);
	tc->images = palloc(sizeof(DPKeyImage) * tc->cap * tc->narbiters);
	dp_load_conflicts_decided(load, indexed, tc);
	return tc;
}

/* Read 'n' bytes at '*p' of a message ending at 'end'. */
static const char *
read_bytes(const char **p, const char *end, Size n)
{
	const char *at = *p;

	if (end - at < (ptrdiff_t) n)
		elog(ERROR, "directpath: a short keys message from a parallel process");
	*p += n;
	return at;
}

/* Entry 'r''s key images read; true if one of them was taken. */
static bool
read_keys(DPTakeConflicts *tc, int r, const char **p, const char *end)
{
	bool		taken = false;

	for (int i = 0; i < tc->narbiters; i++)
	{
		DPKeyImage *k = &tc->images[r * tc->narbiters + i];
		int32		klen;

		memcpy(&klen, read_bytes(p, end, sizeof(int32)), sizeof(int32));
		k->len = klen;
		if (klen < 0)
			continue;			/* no key that could conflict */
		k->bytes = read_bytes(p, end, klen);
		k->hash = hash_bytes((const unsigned char *) k->bytes, klen);
		if (dptaken_lookup(tc->taken[i], *k) != NULL)
			taken = true;
	}
	return taken;
}

/* Entry 'r''s keys join the sets, for the entries after it. */
static void
take_keys(DPTakeConflicts *tc, int r)
{
	for (int i = 0; i < tc->narbiters; i++)
	{
		DPKeyImage *k = &tc->images[r * tc->narbiters + i];
		DPTakenKey *e;
		bool		found;

		if ((int32) k->len < 0)
			continue;
		e = dptaken_insert(tc->taken[i], *k, &found);
		if (!found)
		{
			e->key.bytes = memcpy(MemoryContextAlloc(tc->keys_cxt, k->len),
								  k->bytes, k->len);
			tc->members++;
		}
		e->gen = tc->gen;
	}
}

static void
make_room(DPTakeConflicts *tc, int count)
{
	if (count <= tc->cap)
		return;
	tc->cap = count;
	tc->entries = repalloc(tc->entries, sizeof(DPEntry) * count);
	tc->dup = repalloc(tc->dup, sizeof(bool) * count);
	tc->images = repalloc(tc->images, sizeof(DPKeyImage) * count * tc->narbiters);
}

bool
dp_take_conflicts_keys(DPTakeConflicts *tc, const char *data, Size len)
{
	const char *end;
	const char *p;
	int32		process;
	int32		count;

	if (tc->waiting)
		elog(ERROR, "directpath: two keys messages in a row");
	/* the message may sit in a queue's buffer: keep a copy */
	resetStringInfo(&tc->copy);
	appendBinaryStringInfo(&tc->copy, data, len);
	p = tc->copy.data;
	end = p + len;
	memcpy(&tc->msg_gen, read_bytes(&p, end, sizeof(uint64)), sizeof(uint64));
	memcpy(&process, read_bytes(&p, end, sizeof(int32)), sizeof(int32));
	memcpy(&count, read_bytes(&p, end, sizeof(int32)), sizeof(int32));
	if (process < -1 || process >= tc->nprocs - 1)
		elog(ERROR, "directpath: keys from an unknown parallel process %d", process);
	/* a process's messages come in its order, their generations rising */
	tc->last_gen[process < 0 ? tc->nprocs - 1 : process] = tc->msg_gen;
	make_room(tc, count);
	tc->nentries = count;
	tc->nplaced = 0;
	tc->ndup = 0;
	for (int r = 0; r < count; r++)
	{
		DPEntry    *e = &tc->entries[r];
		char		kind = *read_bytes(&p, end, 1);

		e->placed = kind == 'P';
		e->dup = read_keys(tc, r, &p, end);
		if (!e->placed)
		{
			memcpy(&e->tuple_len, read_bytes(&p, end, sizeof(int32)),
				   sizeof(int32));
			e->tuple = read_bytes(&p, end, e->tuple_len);
		}
		if (e->dup && tc->do_update)
			dp_affected_twice(CMD_INSERT);
		if (e->placed)
		{
			tc->dup[tc->nplaced++] = e->dup;
			tc->ndup += e->dup;
		}
		if (e->dup)
			tc->skipped++;
		else
			take_keys(tc, r);
	}
	tc->waiting = tc->nplaced > 0;
	return tc->waiting;
}

/* The verdict a page or row of 'rows' rows comes to take. */
static void
verdict_for(DPTakeConflicts *tc, int rows)
{
	if (!tc->waiting || tc->nplaced != rows)
		elog(ERROR, "directpath: a parallel page without its keys (%d rows, %d keys)",
			 rows, tc->waiting ? tc->nplaced : -1);
}

const char *
dp_take_conflicts_page(DPTakeConflicts *tc, const char *image, char *buf)
{
	PGAlignedBlock src;
	Page		page = (Page) buf;
	OffsetNumber maxoff;

	memcpy(src.data, image, BLCKSZ);
	maxoff = PageGetMaxOffsetNumber((Page) src.data);
	verdict_for(tc, maxoff);
	if (tc->ndup == 0)
		return image;
	if (tc->ndup == tc->nplaced)
		return NULL;
	/* the page again, without the rows taken off, its flags kept */
	PageInit(page, BLCKSZ, 0);
	((PageHeader) page)->pd_flags = ((PageHeader) src.data)->pd_flags;
	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		lp = PageGetItemId((Page) src.data, off);

		if (tc->dup[off - 1])
			continue;
		if (PageAddItem(page, PageGetItem((Page) src.data, lp),
						ItemIdGetLength(lp), InvalidOffsetNumber,
						false, true) == InvalidOffsetNumber)
			elog(ERROR, "directpath: a row did not fit its page again");
	}
	return buf;
}

bool
dp_take_conflicts_row(DPTakeConflicts *tc)
{
	verdict_for(tc, 1);
	return !tc->dup[0];
}

/*
 * Drop the keys no process can meet again: taken in a generation below
 * every process's last keys message's, hence in the indexes before any
 * probe still to be read from, which finds their rows itself.
 */
static void
prune(DPTakeConflicts *tc)
{
	uint64		floor = PG_UINT64_MAX;
	MemoryContext old_cxt = tc->keys_cxt;
	dptaken_hash **old = palloc(sizeof(dptaken_hash *) * tc->narbiters);

	for (int p = 0; p < tc->nprocs; p++)
		floor = Min(floor, tc->last_gen[p]);
	memcpy(old, tc->taken, sizeof(dptaken_hash *) * tc->narbiters);
	tc->keys_cxt = AllocSetContextCreate(GetMemoryChunkContext(tc),
										 "directpath parallel conflict keys",
										 ALLOCSET_DEFAULT_SIZES);
	new_sets(tc, Max(tc->members / (2 * tc->narbiters), 8192));
	tc->members = 0;
	for (int i = 0; i < tc->narbiters; i++)
	{
		dptaken_iterator it;
		DPTakenKey *e;

		dptaken_start_iterate(old[i], &it);
		while ((e = dptaken_iterate(old[i], &it)) != NULL)
		{
			DPKeyImage	k = e->key;
			bool		found;

			if (e->gen < floor)
				continue;
			k.bytes = memcpy(MemoryContextAlloc(tc->keys_cxt, k.len), k.bytes, k.len);
			dptaken_insert(tc->taken[i], k, &found)->gen = e->gen;
			tc->members++;
		}
	}
	MemoryContextDelete(old_cxt);
	pfree(old);
	tc->kept_after_prune = tc->members;
}

void
dp_take_conflicts_taken(DPTakeConflicts *tc)
{
	/* the provisional rows decided again that are inserted after all */
	for (int r = 0; r < tc->nentries; r++)
	{
		DPEntry    *e = &tc->entries[r];
		MinimalTuple mt;

		if (e->placed || e->dup)
			continue;
		mt = palloc(e->tuple_len);
		memcpy(mt, e->tuple, e->tuple_len);
		ExecStoreMinimalTuple(mt, tc->slot, true);
		dp_load_row(tc->load, tc->slot);
		ExecClearTuple(tc->slot);
	}
	/* the generation they were taken in: a flush the rows set off came first */
	for (int r = 0; r < tc->nentries; r++)
		if (!tc->entries[r].dup)
			take_keys(tc, r);
	tc->waiting = false;
	tc->nentries = 0;
	if (tc->members >= Max(2 * tc->kept_after_prune, 65536))
		prune(tc);
}

uint64
dp_take_conflicts_end(DPTakeConflicts *tc)
{
	if (tc->waiting)
		elog(ERROR, "directpath: a parallel keys message without its page");
	MemoryContextDelete(tc->keys_cxt);
	ExecDropSingleTupleTableSlot(tc->slot);
	/* skipped by every process's decisions, and here */
	tc->skipped += pg_atomic_read_u64(&tc->live->rows_skipped);
	tc->live = NULL;
	return tc->skipped;
}
