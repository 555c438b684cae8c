/*-------------------------------------------------------------------------
 *
 * fastin.c
 *	  Exact fast input for the common types of a direct COPY's text and CSV
 *	  columns: the first piece of the COPY row former.
 *
 * Core's COPY reader calls each column's input function through the
 * FmgrInfo in cstate->in_functions[] (InputFunctionCall, or
 * InputFunctionCallSafe under ON_ERROR), after it has split and de-escaped
 * the line.  dp_fastin_install, called once after BeginCopyFrom, replaces
 * the FmgrInfo of each column whose type has a fast parser here with one
 * that calls fast_input: it parses the field's text itself when the text
 * has a form whose result it can prove identical, bit for bit, to the type's
 * input function under any setting the function consults, and otherwise
 * calls the type's own input function with the very same call (arguments,
 * escontext, its own FmgrInfo and cache), so every other value, and every
 * error with its message and context, stays core's.
 *
 * The forms taken (anything else, including whitespace, a '+' sign,
 * underscores, other bases, another spelling, a value out of range, a
 * typmod other than a character type's or numeric's, is the input
 * function's):
 *
 *	int2, int4, int8	-?[0-9]{1,n}, n = 4, 9, 18 (no overflow possible)
 *	bool				t, f, true, false
 *	date, timestamp,	a date, a time of day and an offset in their ISO
 *	timestamptz			forms (fasttime.c)
 *	uuid				the canonical 8-4-4-4-12 hex digits, either case
 *	float4, float8,		a plain decimal of at most 19 (floats) or 30
 *	numeric				(numeric) digits, rounded as core rounds it
 *						(fastnum.c)
 *	text				any text (textin copies it)
 *	varchar(n)			at most n bytes (so at most n characters: core's
 *						clipping of longer values is never needed)
 *	character(n)		at most n characters, padded (fasttext.c)
 *
 * This file holds the stand-in and what every kind shares: the kinds'
 * tables, the dispatch by kind (read_value), the parsers of a few lines
 * (the integers, bool, uuid, text, varchar), the row former's direct calls
 * (dp_fastin_parse reads the integers, most of what many inputs hold, a
 * word at a time without the dispatch), the binary input's stand-in, and
 * the counts.  The longer parsers are in the files named above, each
 * called from read_value only.
 *
 * Binary COPY (dp_fastin_binary_of, dp_fastin_read_binary, for the row
 * former's binary tuples): a field of int2, int4, int8, float4, float8,
 * bool, date, timestamp, timestamptz (typmod -1) or uuid whose length is
 * the type's is converted by fastbin.c as the type's receive function
 * converts it, without the call; every other type goes to the receive
 * function.
 *
 * directpath.copy_fast_input = check runs both the parser and the type's
 * own function and fails on any difference (the tests' oracle); off
 * leaves in_functions alone.
 *
 * Counts of fields taken and handed on, per type, are kept for the last
 * COPY of this process (directpath.last_copy_input()); a parallel COPY's
 * workers hand theirs to the leader at their end (parallel.c).
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "catalog/pg_type.h"
#include "common/report.h"
#include "common/settings.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "funcapi.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The input function each kind stands in for, and its type. */
static const struct
{
	Oid			func;
	Oid			type;
}			kinds[FAST_KINDS] = {
	{F_INT2IN, INT2OID},
	{F_INT4IN, INT4OID},
	{F_INT8IN, INT8OID},
	{F_BOOLIN, BOOLOID},
	{F_DATE_IN, DATEOID},
	{F_TIMESTAMP_IN, TIMESTAMPOID},
	{F_TIMESTAMPTZ_IN, TIMESTAMPTZOID},
	{F_UUID_IN, UUIDOID},
	{F_FLOAT4IN, FLOAT4OID},
	{F_FLOAT8IN, FLOAT8OID},
	{F_TEXTIN, TEXTOID},
	{F_VARCHARIN, VARCHAROID},
	{F_BPCHARIN, BPCHAROID},
	{F_NUMERIC_IN, NUMERICOID},
};

/* Whether a typmod other than -1 leaves the kind's parser in charge. */
#define KIND_TAKES_TYPMOD(k) \
	((k) == FAST_VARCHAR || (k) == FAST_BPCHAR || (k) == FAST_NUMERIC)

/* The receive function each kind's binary form stands in for (0: none). */
static const Oid binary_kinds[FAST_KINDS] = {
	F_INT2RECV, F_INT4RECV, F_INT8RECV, F_BOOLRECV, F_DATE_RECV,
	F_TIMESTAMP_RECV, F_TIMESTAMPTZ_RECV, F_UUID_RECV, F_FLOAT4RECV,
	F_FLOAT8RECV, 0, 0, 0, 0
};

/* A column's stand-in: what fast_input needs (the FmgrInfo's fn_extra). */
struct DPFastIn
{
	FmgrInfo	orig;			/* the type's input (binary: receive)
								 * function, its own cache */
	DPFastKind	kind;
	bool		check;			/* also call orig, and compare */
};

StaticAssertDecl(FAST_KINDS == DP_FASTIN_KINDS, "DP_FASTIN_KINDS is the kinds' count");

/* Fields of the last COPY: taken here, handed to the input function. */
static uint64 n_fast[FAST_KINDS];
static uint64 n_slow[FAST_KINDS];
static uint64 n_rows_formed;
static uint64 n_rows_core;
static char reader_refusal[DP_REASON_LEN];	/* why core's reader read it all */

/* -?[0-9]{1,maxdigits} and nothing else, in the 'n' bytes at s. */
static inline bool
read_int(const char *s, int n, int maxdigits, int64 *v)
{
	bool		neg = (*s == '-');

	if (neg)
	{
		s++;
		n--;
	}
	if (n < 1 || n > maxdigits || !dp_digits(s, n, v))
		return false;
	if (neg)
		*v = -*v;
	return true;
}

/*
 * -?[0-9]{1,maxdigits} in the 'n' bytes at s, when at least 8 bytes at s
 * (9 after a sign) may be read: up to 8 digits are checked and converted
 * in one 64-bit word (the word's bytes beyond the digits are replaced by
 * leading zeros; a byte is a digit when its high nibble is 3 and adding 6
 * to its low nibble does not carry; then pairs, quads and the two halves
 * are combined by multiplications, the least significant digit in the
 * highest byte on a little-endian machine).  Longer numbers, and every
 * number on a big-endian machine, are read digit by digit.
 */
static inline bool
read_int_wide(const char *s, int n, int maxdigits, int64 *v)
{
#ifndef WORDS_BIGENDIAN
	bool		neg = (*s == '-');
	uint64		w;

	if (neg)
	{
		s++;
		n--;
	}
	if (n < 1 || n > 8 || n > maxdigits)
		return read_int(neg ? s - 1 : s, neg ? n + 1 : n, maxdigits, v);
	memcpy(&w, s, sizeof(w));
	if (n < 8)
		w = (w << (8 * (8 - n))) | (UINT64CONST(0x3030303030303030) >> (8 * n));
	if ((w & UINT64CONST(0xF0F0F0F0F0F0F0F0)) != UINT64CONST(0x3030303030303030) ||
		((w + UINT64CONST(0x0606060606060606)) & UINT64CONST(0xF0F0F0F0F0F0F0F0)) !=
		UINT64CONST(0x3030303030303030))
		return false;
	w -= UINT64CONST(0x3030303030303030);
	w = (w * 10 + (w >> 8)) & UINT64CONST(0x00FF00FF00FF00FF);
	w = (w * 100 + (w >> 16)) & UINT64CONST(0x0000FFFF0000FFFF);
	w = (w * 10000 + (w >> 32)) & UINT64CONST(0xFFFFFFFF);
	*v = neg ? -(int64) w : (int64) w;
	return true;
#else
	return read_int(s, n, maxdigits, v);
#endif
}

/* Each byte's value as a hex digit, or -1 (filled by dp_fastin_install). */
static int8 hex_digits[256];

static void
fill_hex_digits(void)
{
	memset(hex_digits, -1, sizeof(hex_digits));
	for (int c = 0; c < 10; c++)
		hex_digits['0' + c] = c;
	for (int c = 0; c < 6; c++)
		hex_digits['a' + c] = hex_digits['A' + c] = 10 + c;
}

static inline int
hexval(char c)
{
	return hex_digits[(unsigned char) c];
}

static bool
read_uuid(const char *s, pg_uuid_t *u)
{
	int			i = 0;

	for (int pos = 0; pos < 36; pos += 2)
	{
		int			hi,
					lo;

		if (pos == 8 || pos == 13 || pos == 18 || pos == 23)
		{
			if (s[pos] != '-')
				return false;
			pos--;				/* the next pair starts after the hyphen */
			continue;
		}
		hi = hexval(s[pos]);
		lo = hexval(s[pos + 1]);
		if (hi < 0 || lo < 0)
			return false;
		u->data[i++] = (unsigned char) (hi << 4 | lo);
	}
	return i == UUID_LEN && s[36] == '\0';
}

/* int2, int4, int8: at most 4, 9, 18 digits, so no overflow is possible. */
static bool
read_integer(DPFastKind kind, const char *s, int len, Datum *d)
{
	int64		v;

	switch (kind)
	{
		case FAST_INT2:
			if (!read_int(s, len, 4, &v))
				return false;
			*d = Int16GetDatum((int16) v);
			return true;
		case FAST_INT4:
			if (!read_int(s, len, 9, &v))
				return false;
			*d = Int32GetDatum((int32) v);
			return true;
		default:
			if (!read_int(s, len, 18, &v))
				return false;
			*d = Int64GetDatum(v);
			return true;
	}
}

/* uuid, by reference as uuid_in returns it. */
static bool
read_uuid_datum(const char *s, DPValueSpace *vs, Datum *d)
{
	pg_uuid_t	u;
	pg_uuid_t  *result;

	if (!read_uuid(s, &u))
		return false;
	result = dp_value_alloc(vs, sizeof(pg_uuid_t));
	*result = u;
	*d = UUIDPGetDatum(result);
	return true;
}

/* text (and varchar) of the len bytes at s, as textin makes it. */
static inline Datum
make_text(const char *s, int len, DPValueSpace *vs)
{
	text	   *result = dp_value_alloc(vs, len + VARHDRSZ);

	SET_VARSIZE(result, len + VARHDRSZ);
	memcpy(VARDATA(result), s, len);
	return PointerGetDatum(result);
}

/* The value of 's' as 'kind', if it has a form taken here. */
static bool
read_value(DPFastKind kind, const char *s, int len, int32 typmod,
		   DPValueSpace *vs, Datum *d)
{
	struct pg_tm tm;
	const char *end;
	Timestamp	ts;

	/* a typmod changes the value of every other kind */
	if (typmod != -1 && !KIND_TAKES_TYPMOD(kind))
		return false;
	switch (kind)
	{
		case FAST_INT2:
		case FAST_INT4:
		case FAST_INT8:
			return read_integer(kind, s, len, d);
		case FAST_BOOL:
			if (strcmp(s, "t") == 0 || strcmp(s, "true") == 0)
				*d = BoolGetDatum(true);
			else if (strcmp(s, "f") == 0 || strcmp(s, "false") == 0)
				*d = BoolGetDatum(false);
			else
				return false;
			return true;
		case FAST_DATE:
			/* exactly YYYY-MM-DD: the ten bytes are the whole field */
			if (len != 10 || !dp_read_date(s, &tm, &end))
				return false;
			*d = DateADTGetDatum(date2j(tm.tm_year, tm.tm_mon, tm.tm_mday) -
								 POSTGRES_EPOCH_JDATE);
			return true;
		case FAST_TIMESTAMP:
		case FAST_TIMESTAMPTZ:
			if (!dp_read_timestamp(s, kind == FAST_TIMESTAMPTZ, &ts))
				return false;
			*d = TimestampGetDatum(ts);
			return true;
		case FAST_UUID:
			return read_uuid_datum(s, vs, d);
		case FAST_FLOAT4:
		case FAST_FLOAT8:
			return dp_read_float(s, len, kind == FAST_FLOAT4, d);
		case FAST_VARCHAR:
			if (typmod >= (int32) VARHDRSZ && len > typmod - VARHDRSZ)
				return false;
			/* FALLTHROUGH */
		case FAST_TEXT:
			*d = make_text(s, len, vs);
			return true;
		case FAST_BPCHAR:
			return dp_read_bpchar(s, len, typmod, vs, d);
		case FAST_NUMERIC:
			return dp_read_numeric(s, len, typmod, vs, d);
		case FAST_KINDS:
			break;
	}
	return false;
}

/* Call the type's own input function, as core would have. */
static Datum
call_orig(FunctionCallInfo fcinfo, DPFastIn *f)
{
	FmgrInfo   *mine = fcinfo->flinfo;
	Datum		d;

	fcinfo->flinfo = &f->orig;
	d = FunctionCallInvoke(fcinfo);
	fcinfo->flinfo = mine;
	return d;
}

/* The stand-in input function (args: cstring, typioparam, typmod). */
static Datum
fast_input(PG_FUNCTION_ARGS)
{
	DPFastIn   *f = (DPFastIn *) fcinfo->flinfo->fn_extra;
	char	   *s = PG_GETARG_CSTRING(0);
	Datum		d;

	if (!read_value(f->kind, s, strlen(s), PG_GETARG_INT32(2), NULL, &d))
	{
		n_slow[f->kind]++;
		return call_orig(fcinfo, f);
	}
	n_fast[f->kind]++;
	if (f->check)
	{
		Datum		want = InputFunctionCall(&f->orig, s, PG_GETARG_OID(1),
											 PG_GETARG_INT32(2));
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(kinds[f->kind].type, &typlen, &typbyval);
		if (!datumIsEqual(d, want, typbyval, typlen))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: fast input of \"%s\" as %s differs from the type's input function",
							s, format_type_be(kinds[f->kind].type)),
					 errhint("Set directpath.copy_fast_input to off and report this.")));
	}
	return d;
}

/*
 * The row former's parser for a column whose input function is 'in' and
 * typmod 'typmod': the stand-in's, when 'in' is one (not in check mode,
 * which needs the call) and the typmod leaves the kind's value alone.
 */
const DPFastIn *
dp_fastin_of(FmgrInfo *in, int32 typmod)
{
	DPFastIn   *f;

	if (in->fn_addr != fast_input)
		return NULL;
	f = (DPFastIn *) in->fn_extra;
	if (f->check ||
		(typmod != -1 && !KIND_TAKES_TYPMOD(f->kind)))
		return NULL;
	return f;
}

/*
 * The row former's direct call: the value of the 'len' bytes at s (a
 * terminated string, with at least DP_FASTIN_SLACK bytes readable from s
 * whatever len is) when f's parser takes them (counted), a varlena or
 * uuid made in vs; false when the input function must be called (which
 * counts it).  The integers, most of what many inputs hold, are read here
 * without read_value's dispatch, a word at a time.
 */
bool
dp_fastin_parse(const DPFastIn *f, const char *s, int len, int32 typmod,
				DPValueSpace *vs, Datum *d)
{
	int64		v;

	switch (f->kind)
	{
		case FAST_INT2:
			if (!read_int_wide(s, len, 4, &v))
				return false;
			*d = Int16GetDatum((int16) v);
			return true;
		case FAST_INT4:
			if (!read_int_wide(s, len, 9, &v))
				return false;
			*d = Int32GetDatum((int32) v);
			return true;
		case FAST_INT8:
			if (!read_int_wide(s, len, 18, &v))
				return false;
			*d = Int64GetDatum(v);
			return true;
		default:
			return read_value(f->kind, s, len, typmod, vs, d);
	}
}

bool
dp_fastin_read(const DPFastIn *f, const char *s, int len, int32 typmod,
			   DPValueSpace *vs, Datum *d)
{
	if (!dp_fastin_parse(f, s, len, typmod, vs, d))
		return false;
	n_fast[f->kind]++;
	return true;
}

void
dp_fastin_count(const DPFastIn *f, uint64 n)
{
	n_fast[f->kind] += n;
}

bool
dp_fastin_bounded(const DPFastIn *f)
{
	switch (f->kind)
	{
		case FAST_INT2:
		case FAST_INT4:
		case FAST_INT8:
		case FAST_FLOAT4:
		case FAST_FLOAT8:
		case FAST_NUMERIC:
		case FAST_TEXT:
		case FAST_VARCHAR:
		case FAST_BPCHAR:
		case FAST_DATE:			/* read_value takes ten bytes only */
			return true;
		default:
			/* bool, timestamps and uuid look for the terminator */
			return false;
	}
}

/*
 * The binary fast input of a column whose receive function is 'recv', of
 * type 'type' and typmod 'typmod', or NULL.
 */
const DPFastIn *
dp_fastin_binary_of(FmgrInfo *recv, Oid type, int32 typmod)
{
	DPFastIn   *f;
	int			k;

	if (dp_copy_fast_input == DP_FASTIN_OFF || typmod != -1)
		return NULL;
	for (k = 0; k < FAST_KINDS; k++)
		if (binary_kinds[k] != InvalidOid && recv->fn_oid == binary_kinds[k] &&
			type == kinds[k].type)
			break;
	if (k == FAST_KINDS)
		return NULL;
	f = palloc(sizeof(DPFastIn));
	f->orig = *recv;
	f->kind = (DPFastKind) k;
	f->check = dp_copy_fast_input == DP_FASTIN_CHECK;
	return f;
}

/*
 * The binary field of 'len' bytes at s, when f's kind takes it (counted);
 * false when the receive function must be called (dp_fastin_count_fallback
 * counts that).  In check mode the receive function is called too and its
 * value compared.
 */
bool
dp_fastin_read_binary(const DPFastIn *f, const char *s, int len, Datum *d)
{
	if (!dp_read_binary(f->kind, s, len, d))
		return false;
	n_fast[f->kind]++;
	if (f->check)
	{
		StringInfoData buf;
		Datum		want;
		int16		typlen;
		bool		typbyval;

		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, s, len);
		want = ReceiveFunctionCall((FmgrInfo *) &f->orig, &buf, InvalidOid, -1);
		get_typlenbyval(kinds[f->kind].type, &typlen, &typbyval);
		if (buf.cursor != len || !datumIsEqual(*d, want, typbyval, typlen))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: fast binary input of a %s differs from its receive function",
							format_type_be(kinds[f->kind].type)),
					 errhint("Set directpath.copy_fast_input to off and report this.")));
	}
	return true;
}

/* A field of f's kind that the receive function read. */
void
dp_fastin_count_fallback(const DPFastIn *f)
{
	n_slow[f->kind]++;
}

/* A COPY begins: its counts start from zero. */
void
dp_input_reset_counts(void)
{
	memset(n_fast, 0, sizeof(n_fast));
	memset(n_slow, 0, sizeof(n_slow));
	n_rows_formed = n_rows_core = 0;
}

void
dp_input_get_counts(DPInputCounts *counts)
{
	memcpy(counts->fast, n_fast, sizeof(n_fast));
	memcpy(counts->fallback, n_slow, sizeof(n_slow));
	counts->rows_formed = n_rows_formed;
	counts->rows_core = n_rows_core;
}

void
dp_input_add_counts(const DPInputCounts *counts)
{
	for (int k = 0; k < FAST_KINDS; k++)
	{
		n_fast[k] += counts->fast[k];
		n_slow[k] += counts->fallback[k];
	}
	n_rows_formed += counts->rows_formed;
	n_rows_core += counts->rows_core;
}

/* Why core's reader reads the whole COPY (NULL: the row former reads it). */
void
dp_input_note_reader(const char *why)
{
	strlcpy(reader_refusal, why ? why : "", sizeof(reader_refusal));
}

/* Rows the row former (rowform.c) formed, and rows core's reader read. */
void
dp_input_count_rows(uint64 formed, uint64 core)
{
	n_rows_formed += formed;
	n_rows_core += core;
}

/*
 * Put the stand-ins in place of the input functions of a text or CSV COPY
 * just begun (BeginCopyFrom).
 */
void
dp_fastin_install(CopyFromState cstate)
{
	TupleDesc	desc = RelationGetDescr(cstate->rel);
	ListCell   *lc;

	if (dp_copy_fast_input == DP_FASTIN_OFF || cstate->opts.binary)
		return;
	if (hex_digits['g'] == 0)	/* not filled yet */
		fill_hex_digits();
	foreach(lc, cstate->attnumlist)
	{
		int			m = lfirst_int(lc) - 1;
		FmgrInfo   *fi = &cstate->in_functions[m];
		DPFastIn   *f;
		int			k;

		for (k = 0; k < FAST_KINDS; k++)
			if (fi->fn_oid == kinds[k].func &&
				TupleDescAttr(desc, m)->atttypid == kinds[k].type)
				break;
		if (k == FAST_KINDS)
			continue;
		f = MemoryContextAlloc(fi->fn_mcxt, sizeof(DPFastIn));
		f->orig = *fi;
		f->kind = (DPFastKind) k;
		f->check = dp_copy_fast_input == DP_FASTIN_CHECK;
		fi->fn_addr = fast_input;
		fi->fn_extra = f;
	}
}

PG_FUNCTION_INFO_V1(directpath_last_copy_input);

/*
 * directpath.last_copy_input(): per type, the fields of this process's
 * last direct text or CSV COPY that the fast input took, and those it
 * handed to the type's input function.
 */
Datum
directpath_last_copy_input(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int k = 0; k < FAST_KINDS; k++)
	{
		Datum		values[3];
		bool		nulls[3] = {0};

		if (n_fast[k] == 0 && n_slow[k] == 0)
			continue;
		values[0] = ObjectIdGetDatum(kinds[k].type);
		values[1] = Int64GetDatum((int64) n_fast[k]);
		values[2] = Int64GetDatum((int64) n_slow[k]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(directpath_last_copy_reader);

/*
 * directpath.last_copy_reader(): the rows of this process's last direct
 * COPY that the row former formed and those core's reader read (a
 * parallel COPY's workers' included), and why core's reader read them all
 * (NULL when the former read the input).
 */
Datum
directpath_last_copy_reader(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum((int64) n_rows_formed);
	values[1] = Int64GetDatum((int64) n_rows_core);
	if (reader_refusal[0])
		values[2] = CStringGetTextDatum(reader_refusal);
	else
		nulls[2] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
