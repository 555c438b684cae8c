/*-------------------------------------------------------------------------
 *
 * load/fkeys_private.h
 *	  What the files of the foreign key room share among themselves: a
 *	  constraint checked per batch or as a set (fkeys.c), its keys kept for
 *	  the set check (fkset.c), the chunks of keys found at once (fkfind.c)
 *	  and their rows locked page by page (fklock.c), the chunks found
 *	  ahead by a worker (fkahead.c).  The rest of the load uses the room
 *	  through load_private.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_FKEYS_PRIVATE_H
#define DP_FKEYS_PRIVATE_H

#include "load/load_private.h"

typedef struct DPFkeySet DPFkeySet;
typedef struct DPFkeyFind DPFkeyFind;
typedef struct DPFkeyChunk DPFkeyChunk;

/* ---------- fkeys.c: foreign keys checked per batch ---------- */

/* One constraint checked per batch. */
typedef struct DPForeignKey
{
	Oid			conoid;
	char	   *conname;
	Oid			pkrel;			/* the referenced table */
	char		match;			/* FKCONSTR_MATCH_SIMPLE or _FULL */
	int			nkeys;
	AttrNumber	fkatts[INDEX_MAX_KEYS]; /* in the leaf */
	Oid			fktypes[INDEX_MAX_KEYS];
	int16		typlen[INDEX_MAX_KEYS];
	bool		typbyval[INDEX_MAX_KEYS];
	char		typalign[INDEX_MAX_KEYS];
	struct _SPI_plan *plan;		/* the check, kept for the statement */
	DPFkeyFind *find;			/* a set's chunk found at once (fkfind.c),
								 * its rows locked by fklock.c, or NULL */
	bool		set_ok;			/* may be checked as a set (fkset.c) */
	DPFkeySet  *set;			/* ... and is, from some row on, or NULL */
	DPFkeyChunk *ahead;			/* the set's first chunks, read back and
								 * found by a worker (fkahead.c), or NULL */
	uint64		set_keys;		/* distinct keys the set checked */
	uint64		ahead_keys;		/* ... of them found by a worker (fkahead.c) */
} DPForeignKey;

struct DPForeignKeys
{
	ResultRelInfo *rri;
	TriggerDesc *own;			/* the leaf's trigger descriptor */
	TriggerDesc *rowwise;		/* without the triggers of 'keys' */
	DPForeignKey *keys;
	int			nkeys;
	uint64		rows;			/* directly written rows checked so far */
};

/* Chunks of the set check: distinct keys per query. */
#define DP_FKSET_CHUNK 65536

/* The owner of a relation: a foreign key's check runs as its table's. */
extern Oid	dp_fkeys_owner(Oid relid);

/*
 * The keys in 'arrays' (one array a key column) checked as the referenced
 * table's owner: with 'plan' the check query, the positions of the keys
 * not found into missing[] (only the first without 'all'), how many; with
 * 'plan' NULL the constraint's find (fkfind.c): the keys found and
 * locked, or -1.
 */
extern int	dp_fkeys_run_check(DPForeignKey *fk, struct _SPI_plan *plan,
							   Datum *arrays, bool all, int *missing);

/* Add a constraint to a report's list, once (partitions repeat names). */
extern void dp_fkeys_note(StringInfo list, const char *item);

/* The query's arrays of a chunk of 'n' keys read back from a set. */
extern void dp_fkeys_chunk_arrays(DPForeignKey *fk, Datum **values, int n,
								  Datum *arrays);

/* ---------- fkset.c: a foreign key's keys for the set check ---------- */

extern bool dp_fkset_possible(Relation leaf, int nkeys,
							  const AttrNumber *fkatts);
/* A set that keeps its keys within 'sortmem' kB before it spills. */
extern DPFkeySet *dp_fkset_begin(Relation leaf, int nkeys,
								 const AttrNumber *fkatts, int sortmem);

/*
 * Is 'typid' a type whose values a set keeps, and compares, as integers
 * (int2, int4, int8, oid, date, timestamp, timestamptz)?  *is_unsigned
 * for oid, whose order is its unsigned value's; the others' is the signed.
 */
extern bool dp_fkset_integer_type(Oid typid, bool *is_unsigned);

/*
 * A find's scan in C: the referenced table's key and the scan of its
 * unique btree with a chunk's (leading) values as an array key.  Plain
 * values only, so that it can be copied into shared memory for a worker
 * (fkahead.c).
 */
typedef struct DPFkeyScan
{
	Oid			pkrel;			/* the referenced table */
	int			nkeys;
	int			lead;			/* the key column the index leads with */
	bool		unsigned_col[INDEX_MAX_KEYS];	/* an oid: compared unsigned */
	AttrNumber	pkatts[INDEX_MAX_KEYS]; /* the key columns in the table */
	Oid			index;			/* the referenced unique index */
	RegProcedure proc;			/* the constraint's operator's function */
	Oid			subtype;		/* its right-hand type: the key's */
	Oid			collation;		/* the index column's */
} DPFkeyScan;

/* A referenced row a find returned: its TID and its raw xmin. */
typedef struct DPFkeyRow
{
	ItemPointerData tid;
	TransactionId xmin;
} DPFkeyRow;

/*
 * fkfind.c: a set's chunk of keys found at once.  The find queries of a
 * constraint's sets, prepared and kept for the statement, or NULL where
 * the types do not allow them ('conoid' the constraint).
 */
extern DPFkeyFind *dp_fkfind_prepare(Oid pkrel, Oid conoid, int nkeys,
									 const AttrNumber *pkatts,
									 const Oid *pf_ops, const Oid *fktypes);

/*
 * Find the referenced rows of the chunk of keys in 'arrays' (one array a
 * key column, sorted, distinct), in an SPI connection: how many keys were
 * found, with 'lock' each found row locked FOR KEY SHARE (fklock.c); -1
 * when a row could not be locked so or a key was met twice.  The caller
 * checks a chunk whose count is not its keys' with its check query.
 */
extern int64 dp_fkfind_run(DPFkeyFind *f, const Datum *arrays, bool lock);

/*
 * May the chunk of 'n' keys in 'arrays' be found elsewhere by the scan in
 * C that dp_fkfind_run would run for it (fkahead.c)?  The scan, and in
 * *wide and *limit how to run it; NULL where dp_fkfind_run would take a
 * query, or where the current user (the referenced table's owner) may not
 * read the table.
 */
extern const DPFkeyScan *dp_fkfind_ahead(DPFkeyFind *f, const Datum *arrays,
										 int n, bool *wide, uint64 *limit);

/*
 * The scan in C of a chunk of 'n' keys, with the active snapshot: the
 * rows found into rows[] (room for 'n'), how many, or -1 when a key has
 * two rows, -2 when 'wide' read 'limit' rows (*nread the rows read).
 */
extern int64 dp_fkfind_scan(const DPFkeyScan *sc, const Datum *arrays, int n,
							bool wide, uint64 limit, DPFkeyRow *rows,
							uint64 *nread);

/*
 * fklock.c: lock FOR KEY SHARE, page by page, the 'nfound' rows of
 * 'found', one for each key of a chunk.  False when a row could not be
 * locked so (changed since the find, or its xmax set): the caller then
 * checks the chunk with its check query.
 */
extern bool dp_fklock_rows(Oid pkrel, const DPFkeyRow *found, uint64 nfound);

/*
 * A check query prepared and kept for the statement (SPI_keepplan); and
 * the lock its referenced rows take: FOR KEY SHARE as core's check takes
 * it, none under directpath.fkey_table_lock (the table is locked SHARE).
 */
extern struct _SPI_plan *dp_fkset_keep_plan(const char *query, int nargs,
											Oid *argtypes);
#define DP_FKEY_ROW_LOCK (dp_fkey_table_lock ? "" : " FOR KEY SHARE OF x")

/*
 * Add a row's key (a key with a NULL column is not added) and ordinal,
 * from its tuple or from a slot holding it.
 */
extern void dp_fkset_add(DPFkeySet *s, HeapTuple row, uint64 ordinal);
extern void dp_fkset_add_slot(DPFkeySet *s, TupleTableSlot *slot,
							  uint64 ordinal);

/*
 * The next at most 'max' distinct keys in key order (an array per key
 * column in values[], in the current memory context) with the first
 * ordinal of each; returns how many, 0 at the end.
 */
extern int	dp_fkset_next(DPFkeySet *s, int max, Datum **values,
						  uint64 *ordinals);
extern void dp_fkset_end(DPFkeySet *s);

#endif							/* DP_FKEYS_PRIVATE_H */
