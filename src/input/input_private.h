/*-------------------------------------------------------------------------
 *
 * input/input_private.h
 *	  What the input stage's files share among themselves: the fast input
 *	  (fastin.c and its parsers by type family: fasttime.c, fastnum.c,
 *	  fasttext.c, fastbin.c), the scan of special bytes (scan.c), and the
 *	  row former's state and steps (rowform.c, rowsplit.c, rowvalues.c).
 *
 *	  Only the files of src/input/ include it; input.h is the stage's
 *	  public face, what the other stages use.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INPUT_PRIVATE_H
#define DP_INPUT_PRIVATE_H

#include "input/input.h"

#include "datatype/timestamp.h"
#include "pgtime.h"

/* Rows the row former formed, and rows core's reader read (fastin.c). */
extern void dp_input_count_rows(uint64 formed, uint64 core);

/*
 * A big-endian signed integer of n = 2 or 4 bytes at p (binary COPY's
 * field counts and lengths, and its values), at any alignment.
 */
static inline int32
dp_get_net_int(const char *p, int n)
{
	uint32		v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | (unsigned char) p[i];
	return n == 2 ? (int32) (int16) v : (int32) v;
}

/* ---------- fastin.c: the fast input ---------- */

/*
 * Memory for the by-reference values of one row (text, varchar,
 * character(n), numeric, uuid), which the row former's parsers would
 * otherwise palloc one by one: a block the row former owns, taken from
 * the front and emptied before each record (dp_values_reset).  The values
 * live as long as palloc'd ones would: the row former's callers reset the
 * per-tuple memory the values are made in before each row, and nothing may
 * hold a row's values past the next row's forming without copying them.
 * A value that does not fit is palloc'd, and the block grows at the next
 * reset.  The type's own input function (the stand-in's call) passes NULL:
 * palloc.
 */
typedef struct DPValueSpace
{
	char	   *buf;
	Size		used;
	Size		cap;
	Size		short_by;		/* bytes palloc'd since the reset */
} DPValueSpace;

#define DP_VALUE_SPACE_MAX	(1024 * 1024)

static inline void *
dp_value_alloc(DPValueSpace *vs, Size n)
{
	if (vs != NULL)
	{
		Size		at = MAXALIGN(vs->used);

		if (at + n <= vs->cap)
		{
			vs->used = at + n;
			return vs->buf + at;
		}
		vs->short_by += MAXALIGN(n);
	}
	return palloc(n);
}

extern void dp_values_reset(DPValueSpace *vs, MemoryContext mcxt);

/*
 * For the row former: the fast parser of a column whose input function is
 * 'in' (NULL when 'in' is not a stand-in, or the typmod changes its
 * values), and its call: the value of the 'len' bytes at s (terminated,
 * and at least DP_FASTIN_SLACK bytes readable from s whatever len is) when
 * the parser takes them; false when the input function must be called.
 */
#define DP_FASTIN_SLACK 9

typedef struct DPFastIn DPFastIn;

extern const DPFastIn *dp_fastin_of(FmgrInfo *in, int32 typmod);
extern bool dp_fastin_read(const DPFastIn *f, const char *s, int len,
						   int32 typmod, DPValueSpace *vs, Datum *d);

/* The same without counting the field; count n fields taken by f. */
extern bool dp_fastin_parse(const DPFastIn *f, const char *s, int len,
							int32 typmod, DPValueSpace *vs, Datum *d);
extern void dp_fastin_count(const DPFastIn *f, uint64 n);

/*
 * Whether f's parser reads only the 'len' bytes (and the slack), so that
 * the bytes at s need no terminator: s may point into the input.
 */
extern bool dp_fastin_bounded(const DPFastIn *f);

/*
 * Binary COPY: the fast input of a column by its receive function, type
 * and typmod, or NULL; a field of 'len' bytes at s converted when its kind
 * takes it (counted), false when the receive function must be called, and
 * the count of such a call.
 */
extern const DPFastIn *dp_fastin_binary_of(FmgrInfo *recv, Oid type,
										   int32 typmod);
extern bool dp_fastin_read_binary(const DPFastIn *f, const char *s, int len,
								  Datum *d);
extern void dp_fastin_count_fallback(const DPFastIn *f);

/* The kinds of fast input; fastin.c's tables are in this order. */
typedef enum DPFastKind
{
	FAST_INT2,
	FAST_INT4,
	FAST_INT8,
	FAST_BOOL,
	FAST_DATE,
	FAST_TIMESTAMP,
	FAST_TIMESTAMPTZ,
	FAST_UUID,
	FAST_FLOAT4,
	FAST_FLOAT8,
	FAST_TEXT,
	FAST_VARCHAR,
	FAST_BPCHAR,
	FAST_NUMERIC,
	FAST_KINDS
} DPFastKind;

/* n decimal digits at s as a number; false unless all are digits. */
static inline bool
dp_digits(const char *s, int n, int64 *v)
{
	int64		r = 0;

	for (int i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		r = r * 10 + (s[i] - '0');
	}
	*v = r;
	return true;
}

/* fasttime.c: YYYY-MM-DD into tm, the rest at *end; a timestamp(tz). */
extern bool dp_read_date(const char *s, struct pg_tm *tm, const char **end);
extern bool dp_read_timestamp(const char *s, bool with_tz, Timestamp *result);

/* fastnum.c: float4 (is_float4) or float8, and numeric, of a decimal. */
extern bool dp_read_float(const char *s, int len, bool is_float4, Datum *d);
extern bool dp_read_numeric(const char *s, int len, int32 typmod,
							DPValueSpace *vs, Datum *d);

/* fasttext.c: character(n), padded. */
extern bool dp_read_bpchar(const char *s, int len, int32 typmod,
						   DPValueSpace *vs, Datum *d);

/* fastbin.c: a binary field of the kind, as its receive function reads it. */
extern bool dp_read_binary(DPFastKind kind, const char *s, int len, Datum *d);

/* ---------- scan.c: a buffer's special bytes as a bitmap ---------- */

#define DP_SCAN_MAX_SPECIALS 5

/*
 * Bit i of bits[i / 64] set when data[i] is one of specials[0..nspecials),
 * and bit i of firsts[i / 64] when it is specials[0]; each has
 * (len + 63) / 64 words, and the bits past len are zero.
 */
extern void dp_scan_specials(const char *specials, int nspecials,
							 const char *data, Size len, uint64 *bits,
							 uint64 *firsts);

/*
 * Bit i of pairs[i / 64] set when data[i] == a and data[i + 1] == b;
 * (len + 63) / 64 words, the bits past len zero.
 */
extern void dp_scan_pairs(const char *data, Size len, char a, char b,
						  uint64 *pairs);

/* The first byte in [p, end) that is one of specials; end if none. */
extern const char *dp_scan_next(const char *specials, int nspecials,
								const char *p, const char *end);

/* dp_scan_block's bytes: a chunker block's newlines, escapes, quotes. */
#define DP_BLOCK_BYTES 5

/* The 64 bytes at p as a bitmap per byte of 'bytes' (DP_BLOCK_BYTES). */
extern void dp_scan_block(const char *p, const char *bytes, uint64 *maps);

/* ---------- the row former: rowform.c, rowsplit.c, rowvalues.c ---------- */

/* What a record's split found. */
typedef enum DPSplit
{
	SPLIT_ROW,					/* a record of as many fields as columns */
	SPLIT_END,					/* no bytes left in the chunk */
	SPLIT_CORE,					/* something core's reader must see */
	SPLIT_HEADER				/* the header line: core's reader reads it */
} DPSplit;

/* A field of the record being formed: byte offsets in the chunk. */
typedef struct DPField
{
	Size		start;
	Size		end;
	bool		marked;			/* text: has a backslash; CSV: a quote */
} DPField;

/* A column COPY reads, in the order of its fields. */
typedef struct DPColumn
{
	int			m;				/* attribute index */
	FmgrInfo   *in;				/* cstate->in_functions[m] */
	const DPFastIn *fast;		/* its fast parser, or NULL */
	bool		bounded;		/* which reads a field where it lies */
	Oid			ioparam;
	int32		typmod;
	const char *name;
	uint64		plain_nulls;	/* NULLs dp_form_plain made, not yet counted */
} DPColumn;

/*
 * A row former: the COPY's format and columns, the chunk and the place in
 * it, the record being formed, and core's reader while that reads.
 */
struct DPRowFormer
{
	CopyFromState cstate;		/* the COPY's; its state names the row */
	MemoryContext mcxt;
	bool		binary;			/* binary tuples, not text or CSV lines */
	StringInfoData field;		/* binary: a field for its receive function */
	ParseState *pstate;			/* for core's reader */
	List	   *attlist;
	List	   *options;
	/* the format */
	bool		csv;
	char		delim;
	char		quote;
	char		escape;			/* CSV; '\0' when it is the quote */
	const char *null_print;
	int			null_len;
	bool		null_escaped;	/* text: the NULL string is a backslash and
								 * bytes that are not special (\N) */
	int			ncolumns;
	DPColumn   *columns;
	DPField    *fields;			/* ncolumns + 1 */
	DPField    *runs;			/* a plain CSV record's quoted runs: each
								 * one's quotes (start, end); ncolumns */
	char	  **strings;		/* the record's field strings, NULL for NULL */
	int		   *lengths;		/* and their lengths */
	bool	   *in_data;		/* a string is in the chunk, unterminated */
	bool		all_fast;		/* every column has a fast parser */
	uint64		formed_rows;	/* rows formed, not yet counted */
	uint64		plain_rows;		/* ... of which dp_form_plain made */
	char		specials[DP_SCAN_MAX_SPECIALS];
	int			nspecials;
	/* the chunk */
	const char *data;
	Size		len;
	Size		pos;			/* next record */
	uint64	   *bits;			/* special bytes of data */
	uint64	   *delims;			/* its delimiters alone */
	uint64	   *nulls;			/* text, a NULL string of two bytes (\N):
								 * the backslashes of fields that are it;
								 * else NULL (rowsplit.c) */
	Size		nwords;
	Size		bits_cap;		/* words of bits, delims (and nulls) */
	uint64		lineno;			/* lines before 'pos' */
	int			eol;			/* EolType in force at 'pos' */
	bool		header_next;	/* the header line is at 'pos' */
	/* the record formed: its fields' text, its line for the error context */
	char	   *out;
	Size		out_cap;
	DPValueSpace values;		/* its varlena values (dp_value_alloc) */
	Size		line_start;
	Size		line_len;
	bool		line_pending;	/* not yet copied into cstate->line_buf */
	/* core's reader over the chunk's rest (or the header), while it reads */
	CopyFromState core;
	char	   *core_input;		/* binary: the file header and the rest */
	bool		core_header;	/* it reads the header line only */
	bool		in_core;		/* inside its NextCopyFrom */
};

/*
 * Are the len bytes at s, a field as it lies, the NULL string?  Compared
 * byte by byte here: the NULL string is short (\N, or empty in CSV), and a
 * call to memcmp per NULL field was 4% of a NULL-heavy text COPY.
 */
static inline bool
dp_null_string(const DPRowFormer *rf, const char *s, Size len)
{
	if (len != (Size) rf->null_len)
		return false;
	for (Size k = 0; k < len; k++)
	{
		if (s[k] != rf->null_print[k])
			return false;
	}
	return true;
}

/* rowsplit.c: the chunk's special bytes marked; a record's fields. */
extern void dp_scan_chunk(DPRowFormer *rf);
extern bool dp_split_plain(DPRowFormer *rf, Size *end, Size *next);
extern DPSplit dp_split_record(DPRowFormer *rf, Size *end, Size *next,
							   int *nl, int *eol);
extern bool dp_simply_quoted(const DPRowFormer *rf, int i);
extern DPSplit dp_split_binary(DPRowFormer *rf, Size *next);

/* rowvalues.c: a split record's values; the rows formed counted. */
extern bool dp_field_strings(DPRowFormer *rf, Size start, Size end,
							 char **strings);
extern void dp_form_values(DPRowFormer *rf, char **strings,
						   ExprContext *econtext, Datum *values, bool *nulls);
extern bool dp_form_plain(DPRowFormer *rf, Datum *values, bool *nulls,
						  bool split_plain);
extern void dp_form_binary(DPRowFormer *rf, ExprContext *econtext,
						   Datum *values, bool *nulls);
extern void dp_fill_defaults(DPRowFormer *rf, ExprContext *econtext,
							 Datum *values, bool *nulls);
extern void dp_count_formed(DPRowFormer *rf);

#endif							/* DP_INPUT_PRIVATE_H */
