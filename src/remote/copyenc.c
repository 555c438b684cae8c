/*-------------------------------------------------------------------------
 *
 * copyenc.c
 *	  Rows of a foreign partition encoded as COPY data for its server
 *	  (shard.c streams them): binary where both sides' types allow it,
 *	  text otherwise.
 *
 * The columns sent are the partition's columns but the dropped and the
 * generated ones (postgres_fdw sends DEFAULT for those), under the names
 * postgres_fdw uses (the column_name option, else the local name).
 *
 * Binary.  When the remote server runs the same major and each column's
 * remote type is the local one, a built-in base type (the same OID on
 * every server of that major), the stream is COPY's binary format: a
 * header, then per row a field count and per field a length and the
 * bytes of the type's send function, then a trailer.  The send functions
 * of the common types are written here without a call (integers, floats,
 * dates, times and timestamps are the value in network order; text,
 * varchar, character and bytea their bytes, which postgres_fdw's
 * client_encoding, the local database's, makes the remote read as sent;
 * uuid its 16 bytes); others call the type's send function.  No setting
 * changes a send function's output, and the remote recv functions apply
 * the remote typmods as input functions would.
 *
 * Text.  Otherwise each value is written by its type's output function, as
 * postgres_fdw writes its parameters, escaped for COPY's text format.
 * Output that may depend on settings (dates, times, floats: any type not
 * on a short list whose text does not) is written under postgres_fdw's
 * transmission modes (DateStyle ISO, IntervalStyle postgres,
 * extra_float_digits 3, search_path pg_catalog): such rows wait in slots
 * and are formatted DP_COPYENC_BATCH at a time, so that the settings change
 * once per batch and never around code that is not ours.
 *
 * Invariant: rows come out in the order they went in; dp_copyenc_flush
 * leaves none waiting.
 *
 *-------------------------------------------------------------------------
 */
#include "remote/remote.h"

#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/uuid.h"

#define DP_COPYENC_BATCH	1000	/* text rows per change of settings */

/* How a column's value is written in binary. */
typedef enum DPBinKind
{
	DPB_SEND,					/* the type's send function */
	DPB_BOOL,					/* one byte */
	DPB_INT2,					/* the value, network order */
	DPB_INT4,
	DPB_INT8,
	DPB_FLOAT4,					/* the bits, network order */
	DPB_VARLENA,				/* the bytes of a text-like value */
	DPB_UUID,					/* 16 bytes */
} DPBinKind;

struct DPCopyEncoder
{
	int			ncols;
	AttrNumber *cols;			/* the columns sent, in order */
	Oid		   *types;			/* their types */
	const char **names;			/* their remote names */
	bool		binary;
	/* text */
	FmgrInfo   *out;			/* output functions */
	bool		modes;			/* some output depends on settings */
	TupleDesc	batchdesc;
	TupleTableSlot **batch;		/* rows waiting for formatting (modes) */
	int			nbatch;
	int			nslots;
	/* binary */
	DPBinKind  *kinds;
	FmgrInfo   *send;			/* send functions (DPB_SEND) */
	MemoryContext cxt;
	MemoryContext valuecxt;		/* one row's values */
};

DPCopyEncoder *
dp_copyenc_begin(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	DPCopyEncoder *e = palloc0(sizeof(DPCopyEncoder));

	e->cxt = CurrentMemoryContext;
	e->valuecxt = AllocSetContextCreate(e->cxt, "directpath COPY values",
										ALLOCSET_SMALL_SIZES);
	e->cols = palloc(sizeof(AttrNumber) * desc->natts);
	e->types = palloc(sizeof(Oid) * desc->natts);
	e->names = palloc(sizeof(char *) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);
		ListCell   *lc;

		if (att->attisdropped || att->attgenerated)
			continue;
		foreach(lc, GetForeignColumnOptions(RelationGetRelid(rel), att->attnum))
		{
			DefElem    *def = lfirst(lc);

			if (strcmp(def->defname, "column_name") == 0)
				name = defGetString(def);
		}
		e->cols[e->ncols] = att->attnum;
		e->types[e->ncols] = att->atttypid;
		e->names[e->ncols] = pstrdup(name);
		e->ncols++;
	}
	return e;
}

int
dp_copyenc_columns(DPCopyEncoder *e, const char ***names)
{
	*names = e->names;
	return e->ncols;
}

/* Types whose text output no setting changes. */
static bool
output_is_fixed(Oid type)
{
	switch (type)
	{
		case BOOLOID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case CHAROID:
		case UUIDOID:
		case JSONOID:
		case JSONBOID:
		case BYTEAOID:			/* hex or escape: the remote reads both */
			return true;
		default:
			return false;
	}
}

static DPBinKind
binary_kind(Oid type)
{
	switch (type)
	{
		case BOOLOID:
			return DPB_BOOL;
		case INT2OID:
			return DPB_INT2;
		case INT4OID:
		case OIDOID:
		case DATEOID:
			return DPB_INT4;
		case INT8OID:
		case FLOAT8OID:			/* its Datum holds the bits */
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return DPB_INT8;
		case FLOAT4OID:
			return DPB_FLOAT4;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BYTEAOID:
			return DPB_VARLENA;
		case UUIDOID:
			return DPB_UUID;
		default:
			return DPB_SEND;
	}
}

/* Can the column's type go in binary to a remote column of 'remote'? */
static bool
binary_allowed(Oid type, Oid remote)
{
	HeapTuple	tup;
	bool		ok;

	if (type != remote || type >= FirstGenbkiObjectId)
		return false;
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	if (!HeapTupleIsValid(tup))
		return false;
	ok = ((Form_pg_type) GETSTRUCT(tup))->typtype == TYPTYPE_BASE &&
		OidIsValid(((Form_pg_type) GETSTRUCT(tup))->typsend);
	ReleaseSysCache(tup);
	return ok;
}

bool
dp_copyenc_choose(DPCopyEncoder *e, bool same_major, const Oid *remote_types)
{
	MemoryContext old = MemoryContextSwitchTo(e->cxt);

	e->binary = same_major;
	for (int i = 0; i < e->ncols && e->binary; i++)
		e->binary = binary_allowed(e->types[i], remote_types[i]);
	if (e->binary)
	{
		e->kinds = palloc(sizeof(DPBinKind) * e->ncols);
		e->send = palloc0(sizeof(FmgrInfo) * e->ncols);
		for (int i = 0; i < e->ncols; i++)
		{
			Oid			func;
			bool		varlena;

			e->kinds[i] = binary_kind(e->types[i]);
			if (e->kinds[i] != DPB_SEND)
				continue;
			getTypeBinaryOutputInfo(e->types[i], &func, &varlena);
			fmgr_info(func, &e->send[i]);
		}
	}
	else
	{
		e->out = palloc(sizeof(FmgrInfo) * e->ncols);
		for (int i = 0; i < e->ncols; i++)
		{
			Oid			func;
			bool		varlena;

			getTypeOutputInfo(e->types[i], &func, &varlena);
			fmgr_info(func, &e->out[i]);
			e->modes |= !output_is_fixed(e->types[i]);
		}
		if (e->modes)
			e->batch = palloc0(sizeof(TupleTableSlot *) * DP_COPYENC_BATCH);
	}
	MemoryContextSwitchTo(old);
	return e->binary;
}

/* ---------- binary ---------- */

static const char binary_signature[11] = "PGCOPY\n\377\r\n\0";

void
dp_copyenc_header(DPCopyEncoder *e, StringInfo buf)
{
	uint32		zero = 0;

	if (!e->binary)
		return;
	appendBinaryStringInfo(buf, binary_signature, sizeof(binary_signature));
	appendBinaryStringInfo(buf, (char *) &zero, 4);	/* flags */
	appendBinaryStringInfo(buf, (char *) &zero, 4);	/* header extension */
}

void
dp_copyenc_trailer(DPCopyEncoder *e, StringInfo buf)
{
	uint16		end = pg_hton16((uint16) -1);

	if (e->binary)
		appendBinaryStringInfo(buf, (char *) &end, 2);
}

static inline void
put_field(StringInfo buf, const void *data, int32 len)
{
	uint32		n = pg_hton32((uint32) len);

	appendBinaryStringInfo(buf, (char *) &n, 4);
	appendBinaryStringInfo(buf, data, len);
}

/* A field of 'width' bytes holding 'v' in network order. */
static inline void
put_uint(StringInfo buf, uint64 v, int width)
{
	char		b[8];

	for (int k = width - 1; k >= 0; k--, v >>= 8)
		b[k] = (char) (v & 0xFF);
	put_field(buf, b, width);
}

/* One non-null value as its type's send function writes it. */
static void
binary_value(DPCopyEncoder *e, int i, Datum v, StringInfo buf)
{
	switch (e->kinds[i])
	{
		case DPB_BOOL:
			put_uint(buf, DatumGetBool(v) ? 1 : 0, 1);
			break;
		case DPB_INT2:
			put_uint(buf, (uint16) DatumGetInt16(v), 2);
			break;
		case DPB_INT4:
			put_uint(buf, (uint32) DatumGetInt32(v), 4);
			break;
		case DPB_INT8:
			put_uint(buf, (uint64) DatumGetInt64(v), 8);
			break;
		case DPB_FLOAT4:
			{
				float4		f = DatumGetFloat4(v);
				uint32		bits;

				memcpy(&bits, &f, sizeof(bits));
				put_uint(buf, bits, 4);
				break;
			}
		case DPB_VARLENA:
			{
				struct varlena *p = PG_DETOAST_DATUM_PACKED(v);

				put_field(buf, VARDATA_ANY(p), VARSIZE_ANY_EXHDR(p));
				break;
			}
		case DPB_UUID:
			put_field(buf, DatumGetUUIDP(v)->data, UUID_LEN);
			break;
		case DPB_SEND:
			{
				bytea	   *b = SendFunctionCall(&e->send[i], v);

				put_field(buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
				break;
			}
	}
}

static void
binary_row(DPCopyEncoder *e, TupleTableSlot *slot, StringInfo buf)
{
	uint16		count = pg_hton16((uint16) e->ncols);
	uint32		null = pg_hton32((uint32) -1);
	MemoryContext old = MemoryContextSwitchTo(e->valuecxt);

	appendBinaryStringInfo(buf, (char *) &count, 2);
	for (int i = 0; i < e->ncols; i++)
	{
		int			att = e->cols[i] - 1;

		if (slot->tts_isnull[att])
			appendBinaryStringInfo(buf, (char *) &null, 4);
		else
			binary_value(e, i, slot->tts_values[att], buf);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(e->valuecxt);
}

/* ---------- text ---------- */

/* 's' in COPY's text format: backslash, newline, return and tab escaped. */
static void
append_escaped(StringInfo buf, const char *s)
{
	for (;;)
	{
		size_t		plain = strcspn(s, "\\\n\r\t");

		appendBinaryStringInfo(buf, s, plain);
		s += plain;
		switch (*s)
		{
			case '\0':
				return;
			case '\\':
				appendBinaryStringInfo(buf, "\\\\", 2);
				break;
			case '\n':
				appendBinaryStringInfo(buf, "\\n", 2);
				break;
			case '\r':
				appendBinaryStringInfo(buf, "\\r", 2);
				break;
			default:
				appendBinaryStringInfo(buf, "\\t", 2);
				break;
		}
		s++;
	}
}

static void
text_row(DPCopyEncoder *e, TupleTableSlot *slot, StringInfo buf)
{
	MemoryContext old = MemoryContextSwitchTo(e->valuecxt);

	for (int i = 0; i < e->ncols; i++)
	{
		int			att = e->cols[i] - 1;

		if (i > 0)
			appendStringInfoChar(buf, '\t');
		if (slot->tts_isnull[att])
			appendBinaryStringInfo(buf, "\\N", 2);
		else
			append_escaped(buf, OutputFunctionCall(&e->out[i],
												   slot->tts_values[att]));
	}
	appendStringInfoChar(buf, '\n');
	MemoryContextSwitchTo(old);
	MemoryContextReset(e->valuecxt);
}

void
dp_copyenc_flush(DPCopyEncoder *e, StringInfo buf)
{
	int			nest;

	if (e->nbatch == 0)
		return;
	/* postgres_fdw's transmission modes; see the header */
	nest = NewGUCNestLevel();
	if (DateStyle != USE_ISO_DATES)
		(void) set_config_option("datestyle", "ISO", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (IntervalStyle != INTSTYLE_POSTGRES)
		(void) set_config_option("intervalstyle", "postgres", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (extra_float_digits < 3)
		(void) set_config_option("extra_float_digits", "3", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	for (int i = 0; i < e->nbatch; i++)
	{
		text_row(e, e->batch[i], buf);
		ExecClearTuple(e->batch[i]);
	}
	AtEOXact_GUC(true, nest);
	e->nbatch = 0;
}

void
dp_copyenc_row(DPCopyEncoder *e, TupleTableSlot *slot, StringInfo buf)
{
	slot_getallattrs(slot);
	if (e->binary)
		binary_row(e, slot, buf);
	else if (!e->modes)
		text_row(e, slot, buf);
	else
	{
		if (e->nbatch == e->nslots)
		{
			MemoryContext old = MemoryContextSwitchTo(e->cxt);

			if (e->batchdesc == NULL)
				e->batchdesc = CreateTupleDescCopy(slot->tts_tupleDescriptor);
			e->batch[e->nslots++] =
				MakeSingleTupleTableSlot(e->batchdesc, &TTSOpsVirtual);
			MemoryContextSwitchTo(old);
		}
		ExecCopySlot(e->batch[e->nbatch++], slot);
		if (e->nbatch == DP_COPYENC_BATCH)
			dp_copyenc_flush(e, buf);
	}
}

int
dp_copyenc_waiting(DPCopyEncoder *e)
{
	return e->nbatch;
}

void
dp_copyenc_end(DPCopyEncoder *e)
{
	for (int i = 0; i < e->nslots; i++)
		ExecDropSingleTupleTableSlot(e->batch[i]);
	e->nslots = 0;
}
