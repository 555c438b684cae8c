/*-------------------------------------------------------------------------
 *
 * fkfind.c
 *	  A chunk of a foreign key set's keys found at once: the referenced
 *	  rows' ctids and xmins, for fklock.c to lock page by page.
 *
 * fkeys.c checks a chunk of keys with a query that probes each key by a
 * subquery of its own (an index rescan and a LockRows per key: about 1.4
 * us a key, 90 ms a chunk of 65,536 on TPC-H's orders).  A chunk goes
 * first to the find query built here, which locks nothing and returns
 * each row's ctid and xmin.  The keys of a chunk are distinct and the
 * referenced key unique, so every key was found iff as many rows come
 * back as there are keys; then fklock.c locks them FOR KEY SHARE page by
 * page.  Otherwise (a key missing, two keys equal but for their bytes, a
 * row changed since the scan) the caller checks the chunk with its check
 * query, which names the missing keys and locks what it finds.
 *
 * The query, by key.
 * - One column: "... WHERE x.pk OPERATOR(=) ANY ($1)", one index scan over
 *	 the sorted array, which btree walks leaf by leaf.
 * - More columns, each an integer type (int2, int4, int8, oid, date,
 *	 timestamp, timestamptz) on both sides, compared by the type's own
 *	 btree equality, so that two values are equal exactly when their
 *	 integers are: the wide query, "... WHERE x.lead OPERATOR(=) ANY
 *	 ($j)" on the referenced index's leading column alone, returning the
 *	 key columns too.  It finds a superset of the chunk's rows (every row
 *	 whose leading value some key has), which is kept to the rows whose
 *	 whole key is in the chunk (a binary search of the chunk's keys, which
 *	 come sorted in the key columns' order: fkset.c's; a search that
 *	 misses keeps fewer rows than keys and the chunk goes to the check
 *	 query, so an order not as assumed costs time, never rows or errors).
 *	 TPC-H's partsupp key
 *	 (partkey, suppkey): 11 ms a chunk of 65,536 against 90-160 ms by
 *	 probes.  Its cost is the rows the leading values have: the scan
 *	 stops past DP_FKFIND_SPREAD rows a key, and from then on the
 *	 statement's chunks take the probes below.  It pays only where a chunk
 *	 holds several keys a leading value (a large load's sorted keys: about
 *	 4 of partsupp's 4 rows a part); a chunk of scattered keys, as a small
 *	 batch has, would read every row of each leading value for one key
 *	 (5,000 keys of a 5,000-row lineitem batch: 24 ms wide, 15 ms by
 *	 probes), so a chunk with few keys a leading value and leading values
 *	 thinly scattered over their range takes the probes (too_sparse).
 * - Any other key of more columns: an index probe per key of unnest's
 *	 rows ("LATERAL (... OFFSET 0)": no join over the table).
 *
 * Run in C.  The one-column query and the wide query are one index scan
 * each, with the chunk's (leading) values as an array key, as btree runs
 * "= ANY": where the referenced index is a btree whose first column's
 * operator family holds the constraint's operator for that column, with
 * the column's collation, the scan runs here (scan_chunk) with the
 * snapshot SPI would take for the query (a fresh one after a command
 * counter increment), and each row's TID and xmin are read from the heap
 * tuple the scan returns: the same rows, without the planning, executor
 * and result tuples of a query (0.25 s of the 0.9 s the finds of TPC-H's
 * lineitem took).  Otherwise the query runs through SPI.  No find runs
 * where the referenced table's owner, whose check it is, may not SELECT
 * from the table: the check query then fails as core's check does.  The
 * scan itself (dp_fkfind_scan) takes the active snapshot and plain values
 * (DPFkeyScan), so that a parallel worker can run it for the leader
 * (fkahead.c, dp_fkfind_ahead).
 *
 * Invariants: the rows handed to fklock.c are exactly those the check
 * query would find (each key's one row, visible to a fresh snapshot); the
 * keys' equality is the constraint's operators', in SQL or by the index's
 * scan, or in C only for the integer types where it is the integers'
 * equality.
 *
 *-------------------------------------------------------------------------
 */
#include "load/fkeys_private.h"

#include "common/compat.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "executor/spi.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

/* Rows a key the wide query may return before a chunk takes the probes. */
#define DP_FKFIND_SPREAD 8
/* ... and the rows a chunk of 'n' keys reads before it gives up */
#define DP_FKFIND_LIMIT(n) ((uint64) (n) * DP_FKFIND_SPREAD + 1)

/*
 * A chunk is probed key by key when it has fewer keys than this a leading
 * value and its leading values cover less than 1 / DP_FKFIND_SPARSE of
 * their range (too_sparse).
 */
#define DP_FKFIND_DENSE 4
#define DP_FKFIND_SPARSE 16

struct DPFkeyFind
{
	DPFkeyScan	scan;			/* the keys, and the scan run in C */
	SPIPlanPtr	exact;			/* one row per key found: ctid, xmin */
	SPIPlanPtr	wide;			/* ctid, xmin, the key columns; or NULL */
	bool		wide_spread;	/* the wide query overflowed: probes only */
	bool		in_c;			/* the scan below may run (scan_prepare) */
	DPFkeyRow  *rows;			/* the last run's rows, in its memory */
};

/*
 * Key column 'i''s condition into 'q': "x.col OPERATOR(op) k.vN", or with
 * 'any' "... ANY ($N)"; false where the operator does not take the
 * columns' types as they are (a cast to write).
 */
static bool
find_clause(StringInfo q, Oid pkrel, AttrNumber pkatt, Oid pf_op, Oid fktype,
			int i, bool any, bool first)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(pf_op));
	Form_pg_operator op;
	bool		exact;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", pf_op);
	op = (Form_pg_operator) GETSTRUCT(tup);
	exact = op->oprleft == get_atttype(pkrel, pkatt) && op->oprright == fktype &&
		OidIsValid(get_array_type(fktype));
	if (exact)
		appendStringInfo(q, "%sx.%s OPERATOR(%s.%s) %s%d%s", first ? " " : " AND ",
						 quote_identifier(get_attname(pkrel, pkatt, false)),
						 quote_identifier(get_namespace_name(op->oprnamespace)),
						 NameStr(op->oprname), any ? "ANY ($" : "k.v", i + 1,
						 any ? ")" : "");
	ReleaseSysCache(tup);
	return exact;
}

static const char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Is a key column compared in C exactly as by its operator: the same
 * integer type on both sides (fkset.c's), and the operator that type's
 * btree equality?  *is_unsigned as dp_fkset_integer_type gives it.
 */
static bool
integer_column(Oid pkrel, AttrNumber pkatt, Oid pf_op, Oid fktype,
			   bool *is_unsigned)
{
	return get_atttype(pkrel, pkatt) == fktype &&
		dp_fkset_integer_type(fktype, is_unsigned) &&
		lookup_type_cache(fktype, TYPECACHE_EQ_OPR)->eq_opr == pf_op;
}

/*
 * The unique index constraint 'conoid' references, and (in *lead) the
 * table column its first key column is; InvalidOid if it has none.
 */
static Oid
constraint_index(Oid conoid, AttrNumber *lead)
{
	HeapTuple	tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(conoid));
	Oid			conindid;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for constraint %u", conoid);
	conindid = ((Form_pg_constraint) GETSTRUCT(tup))->conindid;
	ReleaseSysCache(tup);
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(conindid));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	*lead = ((Form_pg_index) GETSTRUCT(tup))->indkey.values[0];
	ReleaseSysCache(tup);
	return conindid;
}

/*
 * May the find run in C (scan_chunk)?  Where the index is a btree whose
 * first column is key column f->scan.lead, and whose operator family has the
 * constraint's operator for it as the equality of the column's type and
 * the key's, under the column's own collation, which the query's
 * condition takes: the scan the query's plan would run.
 */
static void
scan_prepare(DPFkeyFind *f, Oid conindid, Oid pf_op, Oid fktype)
{
	Relation	index = index_open(conindid, AccessShareLock);
	Oid			opfamily = index->rd_opfamily[0];
	int			strategy;
	Oid			lefttype;
	Oid			righttype;
	Oid			coltype;
	int32		coltypmod;
	Oid			colcoll;

	get_atttypetypmodcoll(f->scan.pkrel, f->scan.pkatts[f->scan.lead], &coltype, &coltypmod,
						  &colcoll);
	f->in_c = index->rd_rel->relam == BTREE_AM_OID &&
		index->rd_index->indkey.values[0] == f->scan.pkatts[f->scan.lead] &&
		index->rd_indcollation[0] == colcoll && op_in_opfamily(pf_op, opfamily);
	if (f->in_c)
	{
		get_op_opfamily_properties(pf_op, opfamily, false, &strategy,
								   &lefttype, &righttype);
		f->in_c = strategy == BTEqualStrategyNumber &&
			lefttype == index->rd_opcintype[0] && righttype == fktype;
		f->scan.index = conindid;
		f->scan.proc = get_opcode(pf_op);
		f->scan.subtype = righttype;
		f->scan.collation = colcoll;
	}
	index_close(index, AccessShareLock);
}

/* The wide query, on the index's leading column; NULL where not possible. */
static SPIPlanPtr
prepare_wide(DPFkeyFind *f, Oid conindid, AttrNumber lead,
			 const AttrNumber *pkatts, const Oid *pf_ops, const Oid *fktypes,
			 Oid *argtypes)
{
	int			j = -1;
	StringInfoData q;

	if (!OidIsValid(conindid))
		return NULL;
	for (int i = 0; i < f->scan.nkeys; i++)
	{
		if (!integer_column(f->scan.pkrel, pkatts[i], pf_ops[i], fktypes[i],
							&f->scan.unsigned_col[i]))
			return NULL;
		if (pkatts[i] == lead)
			j = i;
	}
	if (j < 0)
		return NULL;
	f->scan.lead = j;
	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT x.ctid, x.xmin");
	for (int i = 0; i < f->scan.nkeys; i++)
		appendStringInfo(&q, ", x.%s",
						 quote_identifier(get_attname(f->scan.pkrel, pkatts[i], false)));
	appendStringInfo(&q, " FROM ONLY %s x WHERE", qualified_name(f->scan.pkrel));
	if (!find_clause(&q, f->scan.pkrel, pkatts[j], pf_ops[j], fktypes[j], j, true, true))
		return NULL;
	return dp_fkset_keep_plan(q.data, f->scan.nkeys, argtypes);
}

DPFkeyFind *
dp_fkfind_prepare(Oid pkrel, Oid conoid, int nkeys, const AttrNumber *pkatts,
				  const Oid *pf_ops, const Oid *fktypes)
{
	DPFkeyFind *f = palloc0(sizeof(DPFkeyFind));
	StringInfoData q;
	Oid			argtypes[INDEX_MAX_KEYS];
	AttrNumber	lead = InvalidAttrNumber;
	Oid			conindid = constraint_index(conoid, &lead);

	f->scan.pkrel = pkrel;
	f->scan.nkeys = nkeys;
	for (int i = 0; i < nkeys; i++)
	{
		argtypes[i] = get_array_type(fktypes[i]);
		f->scan.pkatts[i] = pkatts[i];
	}
	initStringInfo(&q);
	/* more than one column: a probe of the index per key (OFFSET 0: no join) */
	if (nkeys > 1)
	{
		appendStringInfoString(&q, "SELECT x.ctid, x.xmin FROM unnest(");
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&q, "%s$%d", i > 0 ? ", " : "", i + 1);
		appendStringInfoString(&q, ") k(");
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&q, "%sv%d", i > 0 ? ", " : "", i + 1);
		appendStringInfoString(&q, "), LATERAL (");
	}
	appendStringInfo(&q, "SELECT x.ctid, x.xmin FROM ONLY %s x WHERE",
					 qualified_name(pkrel));
	for (int i = 0; i < nkeys; i++)
		if (!find_clause(&q, pkrel, pkatts[i], pf_ops[i], fktypes[i], i,
						 nkeys == 1, i == 0))
		{
			pfree(f);
			return NULL;
		}
	if (nkeys > 1)
		appendStringInfoString(&q, " OFFSET 0) x");
	f->exact = dp_fkset_keep_plan(q.data, nkeys, argtypes);
	if (nkeys > 1)
		f->wide = prepare_wide(f, conindid, lead, pkatts, pf_ops, fktypes,
							   argtypes);
	if (OidIsValid(conindid) && (nkeys == 1 || f->wide != NULL))
		scan_prepare(f, conindid, pf_ops[f->scan.lead], fktypes[f->scan.lead]);
	return f;
}

/* Compare key 'a' with key 'b' (integers of the key columns, in order). */
static int
key_cmp(const DPFkeyScan *sc, const Datum *a, const Datum *b)
{
	for (int i = 0; i < sc->nkeys; i++)
	{
		if (a[i] == b[i])
			continue;
		if (sc->unsigned_col[i])
			return (uint64) a[i] < (uint64) b[i] ? -1 : 1;
		return (int64) a[i] < (int64) b[i] ? -1 : 1;
	}
	return 0;
}

/* The chunk's 'n' keys from 'arrays': key k's columns at [k * nkeys]. */
static Datum *
chunk_keys(const DPFkeyScan *sc, const Datum *arrays, int n)
{
	Datum	   *keys = palloc(sizeof(Datum) * sc->nkeys * n);

	for (int i = 0; i < sc->nkeys; i++)
	{
		ArrayType  *a = DatumGetArrayTypeP(arrays[i]);
		Oid			t = ARR_ELEMTYPE(a);
		int16		typlen;
		bool		byval;
		char		align;
		Datum	   *elems;
		int			nelems;

		get_typlenbyvalalign(t, &typlen, &byval, &align);
		deconstruct_array(a, t, typlen, byval, align, &elems, NULL, &nelems);
		for (int k = 0; k < n && k < nelems; k++)
			keys[k * sc->nkeys + i] = elems[k];
	}
	return keys;
}

/*
 * Which of the chunk's 'n' keys (sorted) is the key of a row the wide
 * query returned: its position, marked in met[]; -1 if none; -2 when it
 * was met before (two rows of one key: the check query decides).
 */
static int
match_key(const DPFkeyScan *sc, const Datum *keys, int n, const Datum *row,
		  bool *met)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			c = key_cmp(sc, row, keys + mid * sc->nkeys);

		if (c == 0)
		{
			if (met[mid])
				return -2;
			met[mid] = true;
			return mid;
		}
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

/* Row r of an SPI result (ctid, xmin first) as f->rows[i]. */
static void
row_from_spi(DPFkeyFind *f, int i, SPITupleTable *tt, uint64 r)
{
	bool		isnull;
	Datum		ctid = SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull);
	Datum		xmin = SPI_getbinval(tt->vals[r], tt->tupdesc, 2, &isnull);

	f->rows[i].tid = *(ItemPointer) DatumGetPointer(ctid);
	f->rows[i].xmin = DatumGetTransactionId(xmin);
}

/*
 * The wide query's rows kept to those whose key is one of the chunk's
 * 'n' keys (arrays), into f->rows; how many, or -1 when a key is met
 * twice (the check query decides).
 */
static int64
keep_chunk_rows(DPFkeyFind *f, SPITupleTable *tt, uint64 nrows,
				const Datum *arrays, int n)
{
	Datum	   *keys = chunk_keys(&f->scan, arrays, n);
	bool	   *met = palloc0(sizeof(bool) * n);
	int64		kept = 0;

	for (uint64 r = 0; r < nrows && kept >= 0; r++)
	{
		Datum		row[INDEX_MAX_KEYS];
		bool		isnull = false;
		int			k;

		for (int i = 0; i < f->scan.nkeys && !isnull; i++)
			row[i] = SPI_getbinval(tt->vals[r], tt->tupdesc, i + 3, &isnull);
		if (isnull || (k = match_key(&f->scan, keys, n, row, met)) == -1)
			continue;
		if (k == -2)
			kept = -1;
		else
			row_from_spi(f, kept++, tt, r);
	}
	pfree(keys);
	pfree(met);
	return kept;
}

/*
 * The find run in C (see the file's comment): one scan of the referenced
 * index with the chunk's values of its first column as an array key, each
 * entry's row fetched and tested by the active snapshot, its TID and xmin
 * into rows[] (room for 'n').  With 'wide' each row is kept only if its
 * whole key is one of the chunk's, and the scan gives up (-2) at 'limit'
 * rows (the rows read in *nread).
 * How many rows were kept, or -1 when a key has two (or more rows than
 * the chunk has keys came back): the check query decides.
 */
int64
dp_fkfind_scan(const DPFkeyScan *sc, const Datum *arrays, int n, bool wide,
			   uint64 limit, DPFkeyRow *rows, uint64 *nread)
{
	Relation	heap = table_open(sc->pkrel, AccessShareLock);
	Relation	index = index_open(sc->index, AccessShareLock);
	Datum	   *keys = wide ? chunk_keys(sc, arrays, n) : NULL;
	bool	   *met = wide ? palloc0(sizeof(bool) * n) : NULL;
	ScanKeyData key;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	uint64		read = 0;
	int64		kept = 0;

	elog(DEBUG2, "directpath: %d keys referencing \"%s\" found by a scan of its index",
		 n, get_rel_name(sc->pkrel));
	ScanKeyEntryInitialize(&key, SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
						   sc->subtype, sc->collation, sc->proc,
						   arrays[sc->lead]);
	scan = DP_INDEX_BEGINSCAN(heap, index, GetActiveSnapshot(), 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	slot = table_slot_create(heap, NULL);
	while (kept >= 0 && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		should_free;
		HeapTuple	tup;

		CHECK_FOR_INTERRUPTS();
		if (wide)
		{
			Datum		row[INDEX_MAX_KEYS];
			bool		isnull = false;
			int			k;

			if (++read >= limit)
			{
				kept = -2;
				break;
			}
			for (int i = 0; i < sc->nkeys && !isnull; i++)
				row[i] = slot_getattr(slot, sc->pkatts[i], &isnull);
			if (isnull || (k = match_key(sc, keys, n, row, met)) == -1)
				continue;
			if (k == -2)
			{
				kept = -1;
				break;
			}
		}
		if (kept >= n)
		{
			kept = -1;
			break;
		}
		tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
		rows[kept].tid = slot->tts_tid;
		rows[kept].xmin = HeapTupleHeaderGetRawXmin(tup->t_data);
		kept++;
		if (should_free)
			heap_freetuple(tup);
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	if (wide)
	{
		pfree(keys);
		pfree(met);
	}
	*nread = read;
	return kept;
}

/* dp_fkfind_scan with the snapshot SPI takes for a query that writes */
static int64
scan_chunk(DPFkeyFind *f, const Datum *arrays, int n, bool wide,
		   uint64 limit, uint64 *nread)
{
	int64		kept;

	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	kept = dp_fkfind_scan(&f->scan, arrays, n, wide, limit, f->rows, nread);
	PopActiveSnapshot();
	CommandCounterIncrement();
	return kept;
}

/* qsort order of Datums holding integers: signed, or with 'unsigned' not */
static int
datum_cmp_signed(const void *a, const void *b)
{
	int64		x = (int64) *(const Datum *) a;
	int64		y = (int64) *(const Datum *) b;

	return x < y ? -1 : x > y;
}

static int
datum_cmp_unsigned(const void *a, const void *b)
{
	uint64		x = (uint64) *(const Datum *) a;
	uint64		y = (uint64) *(const Datum *) b;

	return x < y ? -1 : x > y;
}

/*
 * Are the chunk's keys too sparse for the wide query?  It reads every row
 * of each leading value the chunk has, in one scan of the index and the
 * pages it points to, so it pays where the chunk holds several keys a
 * leading value, or where its leading values are dense enough for that
 * scan to find several of its rows on a page.  Measured on TPC-H's
 * partsupp (4 rows a part, 200,000 parts) with scattered keys: 5,000 keys
 * 24 ms wide, 15 ms by probes; 10,000 about equal; 15,000 48 against 50
 * ms; 29,000 71 against 126 ms.  So a chunk with fewer than
 * DP_FKFIND_DENSE keys a leading value, whose leading values cover less
 * than 1 / DP_FKFIND_SPARSE of their range (a small batch's keys), takes
 * the probes.
 */
static bool
too_sparse(DPFkeyFind *f, Datum leading, int n)
{
	ArrayType  *a = DatumGetArrayTypeP(leading);
	Oid			t = ARR_ELEMTYPE(a);
	bool		uns = f->scan.unsigned_col[f->scan.lead];
	int16		typlen;
	bool		byval;
	char		align;
	Datum	   *elems;
	int			nelems;
	int			distinct = 0;
	uint64		range;

	get_typlenbyvalalign(t, &typlen, &byval, &align);
	deconstruct_array(a, t, typlen, byval, align, &elems, NULL, &nelems);
	if (nelems == 0)
		return false;
	qsort(elems, nelems, sizeof(Datum), uns ? datum_cmp_unsigned : datum_cmp_signed);
	for (int k = 0; k < nelems; k++)
		distinct += k == 0 || elems[k] != elems[k - 1];
	range = (uint64) elems[nelems - 1] - (uint64) elems[0];
	pfree(elems);
	return n < DP_FKFIND_DENSE * distinct &&
		(uint64) distinct * DP_FKFIND_SPARSE <= range;
}

/* Does a chunk of 'n' keys take the wide scan (else a key's probe)? */
static bool
takes_wide(DPFkeyFind *f, const Datum *arrays, int n)
{
	if (f->wide == NULL || f->wide_spread)
		return false;
	if (too_sparse(f, arrays[f->scan.lead], n))
	{
		elog(DEBUG2, "directpath: %d keys referencing \"%s\" probed: too sparse for their leading column",
			 n, get_rel_name(f->scan.pkrel));
		return false;
	}
	return true;
}

int64
dp_fkfind_run(DPFkeyFind *f, const Datum *arrays, bool lock)
{
	ArrayType  *a = DatumGetArrayTypeP(arrays[0]);
	int			n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	uint64		limit = DP_FKFIND_LIMIT(n);
	int64		found = -1;
	bool		wide;

	/* an owner who may not read the table: the check query fails as core's */
	if (pg_class_aclcheck(f->scan.pkrel, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return -1;
	f->rows = palloc(sizeof(DPFkeyRow) * Max(n, 1));
	wide = takes_wide(f, arrays, n);
	if (wide)
	{
		bool		spread;
		uint64		read = 0;

		if (f->in_c)
			spread = (found = scan_chunk(f, arrays, n, true, limit, &read)) == -2;
		else if (SPI_execute_plan(f->wide, (Datum *) arrays, NULL, false, limit) != SPI_OK_SELECT)
			elog(ERROR, "directpath: a foreign key's find query failed");
		else if (!(spread = (read = SPI_processed) >= limit))
			found = keep_chunk_rows(f, SPI_tuptable, SPI_processed, arrays, n);
		else
			SPI_freetuptable(SPI_tuptable);
		if (spread)
		{
			f->wide_spread = true;
			elog(DEBUG1, "directpath: the leading key column of \"%s\" has more than %d rows a key: each key probed",
				 get_rel_name(f->scan.pkrel), DP_FKFIND_SPREAD);
		}
		else
			elog(DEBUG2, "directpath: %d keys referencing \"%s\" searched by their leading column: %llu rows read, %lld kept",
				 n, get_rel_name(f->scan.pkrel), (unsigned long long) read,
				 (long long) found);
	}
	if (!wide || f->wide_spread)
	{
		uint64		read;

		if (f->in_c && f->scan.nkeys == 1)
			found = scan_chunk(f, arrays, n, false, 0, &read);
		else if (SPI_execute_plan(f->exact, (Datum *) arrays, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "directpath: a foreign key's find query failed");
		else
		{
			found = (int64) SPI_processed;
			for (int i = 0; found == n && i < n; i++)
				row_from_spi(f, i, SPI_tuptable, i);
		}
	}
	/* a key missing: the check query names it and locks the others */
	if (found != n || n == 0 || !lock)
		return found;
	return dp_fklock_rows(f->scan.pkrel, f->rows, n) ? found : -1;
}

const DPFkeyScan *
dp_fkfind_ahead(DPFkeyFind *f, const Datum *arrays, int n, bool *wide,
				uint64 *limit)
{
	if (!f->in_c ||
		pg_class_aclcheck(f->scan.pkrel, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return NULL;
	/* dp_fkfind_run's choice: the wide scan, or the exact one of one column */
	*wide = takes_wide(f, arrays, n);
	*limit = DP_FKFIND_LIMIT(n);
	if (!*wide && f->scan.nkeys > 1)
		return NULL;
	return &f->scan;
}
