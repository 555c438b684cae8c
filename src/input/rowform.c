/*-------------------------------------------------------------------------
 *
 * rowform.c
 *	  The COPY row former: a text or CSV chunk of whole lines (chunker.c)
 *	  to rows, in one pass over its bytes, with core's results and errors.
 *
 * Core's reader copies each line into line_buf (CopyReadLine, byte by
 * byte), then splits and de-escapes it into attribute_buf (byte by byte
 * again), then calls each column's input function.  The row former reads
 * the chunk where it lies:
 *
 * 1. Scan.  The chunk's special bytes (the delimiter, \n, \r, and the
 *	  backslash in text format or the quote and escape in CSV) are marked in
 *	  a bitmap, one bit per byte, by one vectorized pass over the chunk
 *	  (scan.c).  Everything after walks the set bits only, so an ordinary
 *	  byte is looked at once.
 * 2. Split.  From the bitmap, a record's fields (start, end, whether
 *	  escaped or quoted) and its end, by the rules of core's line reader
 *	  (CopyReadLineText: the end-of-line style fixed by the first line, a
 *	  backslash taking the next byte in text, quotes and escapes in CSV,
 *	  a newline inside quotes counted as a line) and its field splitters
 *	  (CopyReadAttributesText / CopyReadAttributesCSV: the NULL string
 *	  compared with the raw field, unquoted in CSV).
 * 3. Values.  The record is copied once into a buffer where each field is
 *	  terminated (de-escaped or de-quoted in place when it has to be), and
 *	  each column's input function is called as NextCopyFrom calls it
 *	  (cstate->in_functions, so fastin.c's exact fast input takes the
 *	  common types), with cur_attname and cur_attval set for the error
 *	  context; then the defaults of the columns not read, as core.  A
 *	  field whose fast parser reads only its bytes (dp_fastin_bounded) is
 *	  parsed where it lies in the chunk, copied only if the parser hands
 *	  it on.
 *
 * Plain records.  A record that ends with \n and holds no special byte but
 * delimiters is split from the delimiters' bitmap alone (split_plain),
 * without reading its bytes; if every column has a fast parser, its fields
 * go straight to their parsers (form_plain), without the strings, lengths
 * and copies of step 3.  The parsers raise no errors, so a record
 * form_plain gives up on (a NULL, a field a parser hands on) is formed
 * again the general way with the same result and errors; a record that is
 * not plain (the wrong number of fields too) is split by split_record.
 *
 * Binary input.  A chunk of whole binary tuples (the chunker cuts them,
 * each chunk after a file header) is read tuple by tuple as
 * CopyFromBinaryOneRow reads it: the field count, then each field's length
 * and bytes; fields of the common fixed-width types are converted by
 * fastin.c's binary input, the others by their receive function with
 * core's check that it read the whole field, NULLs by the receive function
 * as core calls it (a domain's checks its constraints).  A tuple whose
 * field count is not the column count (the trailer included), a length
 * below -1 or a tuple cut short goes, with the rest of the chunk, to core's
 * reader (given a file header first).
 *
 * Exactness.  Whatever the former does not reproduce goes to core's own
 * reader: a record with a different number of fields than columns, a
 * newline or carriage return that is not the line style's, an unterminated
 * quote, an end-of-copy marker, an escape that makes a byte the encoding
 * rejects (all of them errors or end-of-input rules) make the former hand
 * the rest of the chunk, from that record on, to BeginCopyFrom over those
 * bytes with the line counter and line style in force there, and its rows
 * are returned as they come; a chunk whose bytes the file encoding rejects
 * (pg_encoding_verifymbstr, core's check) goes to core whole; so does the
 * header line (HEADER and HEADER MATCH), on its own.  Chunks are cut where
 * core's line reader ends a line, so core reading from a record's start
 * reads what it would have read there.  COPYs whose options change how
 * fields become values (FORCE_NULL, FORCE_NOT_NULL, DEFAULT, ON_ERROR,
 * encoding conversion) are not taken at all (dp_rowform_refusal).
 *
 * Errors.  dp_rowform_error_callback is the COPY's error context: core's
 * CopyFromErrorCallback for the main reader (the line's text copied into
 * line_buf only when an error needs it) or for core's reader while that
 * reads.  A row core read leaves its line number and text in the main
 * reader's state, so later errors of the row (constraints, deferred index
 * work) name them as core would.
 *
 * Long: over 700 lines.  Steps 2 and 3 and the hand-over to core's reader
 * share the former's state (its chunk, position, line count and style, the
 * record's fields); split into files, that state would be in a header for
 * them alone.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"

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
} DPColumn;

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
	int			ncolumns;
	DPColumn   *columns;
	DPField    *fields;			/* ncolumns + 1 */
	char	  **strings;		/* the record's field strings, NULL for NULL */
	int		   *lengths;		/* and their lengths */
	bool	   *in_data;		/* a string is in the chunk, unterminated */
	bool		all_fast;		/* every column has a fast parser */
	uint64		formed_rows;	/* rows formed, not yet counted */
	uint64		plain_rows;		/* ... of which form_plain made */
	char		specials[DP_SCAN_MAX_SPECIALS];
	int			nspecials;
	/* the chunk */
	const char *data;
	Size		len;
	Size		pos;			/* next record */
	uint64	   *bits;			/* special bytes of data */
	uint64	   *delims;			/* its delimiters alone */
	Size		nwords;
	Size		bits_cap;
	uint64		lineno;			/* lines before 'pos' */
	int			eol;			/* EolType in force at 'pos' */
	bool		header_next;	/* the header line is at 'pos' */
	/* the record formed: its fields' text, its line for the error context */
	char	   *out;
	Size		out_cap;
	Size		line_start;
	Size		line_len;
	bool		line_pending;	/* not yet copied into cstate->line_buf */
	/* core's reader over the chunk's rest (or the header), while it reads */
	CopyFromState core;
	char	   *core_input;		/* binary: the file header and the rest */
	bool		core_header;	/* it reads the header line only */
	bool		in_core;		/* inside its NextCopyFrom */
};

/* ---- 1. the scan (scan.c) ---- */

/* Mark the chunk's special bytes: rf->bits, one bit per byte. */
static void
scan_chunk(DPRowFormer *rf)
{
	rf->nwords = (rf->len + 63) / 64;
	if (rf->nwords > rf->bits_cap)
	{
		rf->bits_cap = Max(rf->nwords, 2 * rf->bits_cap);
		if (rf->bits)
		{
			pfree(rf->bits);
			pfree(rf->delims);
		}
		rf->bits = MemoryContextAlloc(rf->mcxt, rf->bits_cap * sizeof(uint64));
		rf->delims = MemoryContextAlloc(rf->mcxt, rf->bits_cap * sizeof(uint64));
	}
	dp_scan_specials(rf->specials, rf->nspecials, rf->data, rf->len, rf->bits,
					 rf->delims);
}

/*
 * The first special byte at or after 'from' (with 'others', the first
 * that is not the delimiter); the chunk's length if none.
 */
static inline Size
next_marked(const DPRowFormer *rf, Size from, bool others)
{
	Size		w = from >> 6;
	uint64		m;

	if (from >= rf->len)
		return rf->len;
	m = (rf->bits[w] & (others ? ~rf->delims[w] : ~UINT64CONST(0))) &
		(~UINT64CONST(0) << (from & 63));
	while (m == 0)
	{
		if (++w >= rf->nwords)
			return rf->len;
		m = rf->bits[w] & (others ? ~rf->delims[w] : ~UINT64CONST(0));
	}
	return (w << 6) + pg_rightmost_one_pos64(m);
}

/* ---- 2. the split: a record's fields and end ---- */

/*
 * A plain record at rf->pos: one that ends with \n under the \n line style
 * (or the first line's), with no other special byte than delimiters (no
 * backslash, carriage return, quote or escape) and as many fields as
 * columns.  Its fields are the gaps between the delimiters' bits: no byte
 * of the record is read.  False for any other record, which split_record
 * reads (with the same result for a plain one).
 */
static bool
split_plain(DPRowFormer *rf, Size *end, Size *next)
{
	const char *d = rf->data;
	Size		p = rf->pos;
	Size		e;
	Size		w;
	int			nf = 0;

	/* a backslash first may be an end-of-copy marker, in CSV too */
	if (p >= rf->len || d[p] == '\\' || rf->eol == EOL_CR ||
		rf->eol == EOL_CRNL)
		return false;
	e = next_marked(rf, p, true);
	if (e >= rf->len || d[e] != '\n')
		return false;

	rf->fields[0].start = p;
	rf->fields[0].marked = false;
	for (w = p >> 6; (w << 6) < e; w++)
	{
		uint64		m = rf->delims[w];

		if ((w << 6) < p)
			m &= ~UINT64CONST(0) << (p & 63);
		if (((w + 1) << 6) > e)
			m &= ~(~UINT64CONST(0) << (e & 63));
		while (m != 0)
		{
			Size		q = (w << 6) + pg_rightmost_one_pos64(m);

			m &= m - 1;
			if (++nf >= rf->ncolumns)
				return false;
			rf->fields[nf - 1].end = q;
			rf->fields[nf].start = q + 1;
			rf->fields[nf].marked = false;
		}
	}
	if (nf + 1 != rf->ncolumns)
		return false;
	rf->fields[nf].end = e;
	*end = e;
	*next = e + 1;
	return true;
}

/*
 * A line ends at 'q' (an unquoted \n or \r): the bytes the end takes (in
 * *step), with the line style as CopyReadLineText fixes and checks it; 0
 * when core would raise an error there.
 */
static int
line_end(const DPRowFormer *rf, Size q, int *eol)
{
	if (rf->data[q] == '\n')
	{
		if (*eol == EOL_CR || *eol == EOL_CRNL)
			return 0;
		*eol = EOL_NL;
		return 1;
	}
	if (*eol == EOL_NL)
		return 0;
	if (*eol == EOL_CR)
		return 1;
	if (q + 1 < rf->len && rf->data[q + 1] == '\n')
	{
		*eol = EOL_CRNL;
		return 2;
	}
	if (*eol == EOL_CRNL)
		return 0;
	*eol = EOL_CR;
	return 1;
}

/* What a special byte outside quotes does to the walk over a record. */
typedef enum DPWalk
{
	WALK_ON,					/* the record goes on */
	WALK_EOL,					/* a line end: the caller's */
	WALK_CORE					/* core's reader must read the record */
} DPWalk;

/*
 * A special byte at q inside CSV quotes: the quote that closes them (a
 * doubled quote, when the escape is the quote, is one quote of data), an
 * escape before the escape or the quote, or a byte of data; a newline of
 * the line style 'eol' is counted in *nl.  Where the walk goes on.
 */
static Size
quoted_byte(const DPRowFormer *rf, Size q, int eol, int *nl, bool *in_quote)
{
	const char *d = rf->data;
	char		c = d[q];

	if (c == rf->quote)
	{
		/* a doubled quote (escape = quote) is one quote */
		if (rf->escape == '\0' && q + 1 < rf->len && d[q + 1] == c)
			return q + 2;
		*in_quote = false;
		return q + 1;
	}
	if (c == rf->escape && q + 1 < rf->len &&
		(d[q + 1] == rf->escape || d[q + 1] == rf->quote))
		return q + 2;
	if (c == (eol == EOL_NL ? '\n' : '\r'))
		(*nl)++;
	return q + 1;
}

/*
 * A special byte at q outside quotes, in field *nf: a delimiter ends the
 * field (one too many is core's error), a backslash (text) makes the next
 * byte data and marks the field, a quote (CSV) opens quotes and marks it,
 * an escape is an ordinary byte; *p is where the walk goes on.  A \n or
 * \r is WALK_EOL, for the caller.
 */
static DPWalk
unquoted_byte(DPRowFormer *rf, Size q, int *nf, bool *in_quote, Size *p)
{
	const char *d = rf->data;
	char		c = d[q];

	if (c == rf->delim)
	{
		rf->fields[*nf].end = q;
		if (++(*nf) >= rf->ncolumns)
			return WALK_CORE;	/* extra data: core's error */
		rf->fields[*nf].start = q + 1;
		rf->fields[*nf].marked = false;
		*p = q + 1;
		return WALK_ON;
	}
	if (c == '\n' || c == '\r')
		return WALK_EOL;
	if (!rf->csv)
	{
		/* a backslash: the next byte is data, whatever it is */
		Assert(c == '\\');
		rf->fields[*nf].marked = true;
		if (q + 1 < rf->len && d[q + 1] == '.')
			return WALK_CORE;
		*p = Min(q + 2, rf->len);
		return WALK_ON;
	}
	if (c == rf->quote)
	{
		rf->fields[*nf].marked = true;
		*in_quote = true;
	}
	/* else an escape outside quotes: an ordinary byte */
	*p = q + 1;
	return WALK_ON;
}

/*
 * Split the record at rf->pos: its fields into rf->fields, *end the end of
 * its bytes, *next where the next one starts, *nl the newlines inside its
 * quotes, *eol the line style after it.  One walk over the record's special
 * bytes, as core's line reader and field splitter have them: those inside
 * quotes (quoted_byte), the others (unquoted_byte), and the line end.
 */
static DPSplit
split_record(DPRowFormer *rf, Size *end, Size *next, int *nl, int *eol)
{
	const char *d = rf->data;
	Size		p = rf->pos;
	int			nf = 0;
	bool		in_quote = false;

	*nl = 0;
	*eol = rf->eol;
	if (p >= rf->len)
		return SPLIT_END;
	/* an end-of-copy marker, or what core may take for one */
	if (d[p] == '\\' && p + 1 < rf->len && d[p + 1] == '.')
		return SPLIT_CORE;

	rf->fields[0].start = p;
	rf->fields[0].marked = false;
	for (;;)
	{
		Size		q = next_marked(rf, p, false);
		DPWalk		walk;
		int			step;

		if (q >= rf->len)
		{
			/* the input's last line, without a line end */
			if (in_quote)
				return SPLIT_CORE;
			*end = *next = rf->len;
			break;
		}
		if (in_quote)
		{
			p = quoted_byte(rf, q, *eol, nl, &in_quote);
			continue;
		}
		walk = unquoted_byte(rf, q, &nf, &in_quote, &p);
		if (walk == WALK_CORE)
			return SPLIT_CORE;
		if (walk == WALK_ON)
			continue;
		step = line_end(rf, q, eol);
		if (step == 0)
			return SPLIT_CORE;
		*end = q;
		*next = q + step;
		break;
	}
	rf->fields[nf].end = *end;
	if (nf + 1 != rf->ncolumns)
		return SPLIT_CORE;		/* missing data: core's error */
	return SPLIT_ROW;
}

/* ---- 3. values ---- */

static inline int
octal_value(char c)
{
	return c - '0';
}

static inline bool
is_octal(char c)
{
	return c >= '0' && c <= '7';
}

static inline int
hex_value(char c)
{
	return isdigit((unsigned char) c) ? c - '0' : pg_ascii_tolower(c) - 'a' + 10;
}

/*
 * De-escape a text field in place, as CopyReadAttributesText does, and
 * terminate it; *len becomes its new length.  False when an escape made a
 * byte the database encoding rejects (core's error, on core's reading).
 */
static bool
unescape_text(char *s, Size *len)
{
	char	   *r = s;
	char	   *w = s;
	char	   *e = s + *len;
	bool		non_ascii = false;

	while (r < e)
	{
		char		c = *r++;

		if (c == '\\')
		{
			if (r >= e)
				break;
			c = *r++;
			switch (c)
			{
				case '0':
				case '1':
				case '2':
				case '3':
				case '4':
				case '5':
				case '6':
				case '7':
					{
						int			val = octal_value(c);

						if (r < e && is_octal(*r))
						{
							val = (val << 3) + octal_value(*r++);
							if (r < e && is_octal(*r))
								val = (val << 3) + octal_value(*r++);
						}
						c = val & 0377;
						if (c == '\0' || IS_HIGHBIT_SET(c))
							non_ascii = true;
					}
					break;
				case 'x':
					if (r < e && isxdigit((unsigned char) *r))
					{
						int			val = hex_value(*r++);

						if (r < e && isxdigit((unsigned char) *r))
							val = (val << 4) + hex_value(*r++);
						c = val & 0xff;
						if (c == '\0' || IS_HIGHBIT_SET(c))
							non_ascii = true;
					}
					break;
				case 'b':
					c = '\b';
					break;
				case 'f':
					c = '\f';
					break;
				case 'n':
					c = '\n';
					break;
				case 'r':
					c = '\r';
					break;
				case 't':
					c = '\t';
					break;
				case 'v':
					c = '\v';
					break;
			}
		}
		*w++ = c;
	}
	*w = '\0';
	*len = w - s;
	return !non_ascii || pg_verifymbstr(s, *len, true);
}

/*
 * De-quote a CSV field in place, as CopyReadAttributesCSV does; returns its
 * new length.
 */
static Size
unquote_csv(const DPRowFormer *rf, char *s, Size len)
{
	char	   *r = s;
	char	   *w = s;
	char	   *e = s + len;
	char		escape = rf->escape ? rf->escape : rf->quote;
	bool		in_quote = false;

	while (r < e)
	{
		char		c = *r++;

		if (!in_quote)
		{
			if (c == rf->quote)
				in_quote = true;
			else
				*w++ = c;
			continue;
		}
		if (c == escape && r < e && (*r == escape || *r == rf->quote))
		{
			*w++ = *r++;
			continue;
		}
		if (c == rf->quote)
			in_quote = false;
		else
			*w++ = c;
	}
	*w = '\0';
	return w - s;
}

/*
 * The record split into rf->fields, from 'start' to 'end': its fields'
 * strings (NULL for the NULL string) into strings[].  False when core must
 * read it.
 */
static bool
field_strings(DPRowFormer *rf, Size start, Size end, char **strings)
{
	Size		len = end - start;
	bool		copied = false;

	/* room for the terminator, and the fast parsers' slack after a field */
	if (len + DP_FASTIN_SLACK > rf->out_cap)
	{
		rf->out_cap = Max(len + DP_FASTIN_SLACK, 2 * rf->out_cap);
		pfree(rf->out);
		rf->out = MemoryContextAllocZero(rf->mcxt, rf->out_cap);
	}
	for (int i = 0; i < rf->ncolumns; i++)
	{
		DPField    *f = &rf->fields[i];
		Size		flen = f->end - f->start;
		char	   *s = rf->out + (f->start - start);

		if ((!rf->csv || !f->marked) && flen == rf->null_len &&
			(flen == 0 || rf->data[f->start] == rf->null_print[0]) &&
			memcmp(rf->data + f->start, rf->null_print, flen) == 0)
		{
			strings[i] = NULL;
			continue;
		}
		rf->lengths[i] = flen;
		rf->in_data[i] = !f->marked && rf->columns[i].bounded &&
			f->start + DP_FASTIN_SLACK <= rf->len;
		if (rf->in_data[i])
		{
			/* its parser reads it where it lies (form_values) */
			strings[i] = (char *) rf->data + f->start;
			continue;
		}
		if (!copied)
		{
			memcpy(rf->out, rf->data + start, len);
			copied = true;
		}
		strings[i] = s;
		if (!f->marked)
			s[flen] = '\0';
		else if (rf->csv)
			flen = unquote_csv(rf, s, flen);
		else if (!unescape_text(s, &flen))
			return false;
		rf->lengths[i] = flen;
	}
	return true;
}

/* The columns a COPY does not read are null, but for their defaults. */
static inline void
unread_columns(DPRowFormer *rf, Datum *values, bool *nulls)
{
	int			natts = RelationGetDescr(rf->cstate->rel)->natts;

	if (rf->ncolumns < natts)
	{
		memset(values, 0, natts * sizeof(Datum));
		memset(nulls, true, natts * sizeof(bool));
	}
}

/* NextCopyFrom's last step: the defaults of the columns not read. */
static void
fill_defaults(DPRowFormer *rf, ExprContext *econtext, Datum *values,
			  bool *nulls)
{
	CopyFromState cstate = rf->cstate;

	for (int i = 0; i < cstate->num_defaults; i++)
	{
		int			m = cstate->defmap[i];

		values[m] = ExecEvalExpr(DP_COPY_DEFEXPR(cstate, i), econtext,
								 &nulls[m]);
	}
}

/*
 * Field i of a plain record, bytes [start, end) of the chunk, by its
 * column's fast parser: where it lies for a bounded parser with its slack
 * in the chunk, else from a terminated copy in rf->out.  False for the NULL
 * string and for a field the parser does not take.
 */
static inline bool
plain_field(DPRowFormer *rf, int i, Size start, Size end, Datum *values,
			bool *nulls)
{
	DPColumn   *col = &rf->columns[i];
	const char *s = rf->data + start;
	Size		len = end - start;

	if (len == rf->null_len && (len == 0 || s[0] == rf->null_print[0]) &&
		memcmp(s, rf->null_print, len) == 0)
		return false;
	if (!col->bounded || start + DP_FASTIN_SLACK > rf->len)
	{
		char	   *t = rf->out + (start - rf->pos);

		memcpy(t, s, len);
		t[len] = '\0';
		s = t;
	}
	if (!dp_fastin_parse(col->fast, s, len, col->typmod, &values[col->m]))
		return false;
	nulls[col->m] = false;
	return true;
}

/*
 * Step 3 at once for a plain record that split_plain split, in a COPY whose
 * every column has a fast parser: each field straight to its parser,
 * without the strings, lengths and copies of the general path.  The
 * parsers raise no errors, so core's order of errors cannot change.  False,
 * with nothing counted, when a field is the NULL string or its parser
 * hands it on: then the record is formed the general way.
 */
static bool
form_plain(DPRowFormer *rf, Datum *values, bool *nulls)
{
	if (rf->fields[rf->ncolumns - 1].end - rf->pos + DP_FASTIN_SLACK > rf->out_cap)
		return false;
	unread_columns(rf, values, nulls);
	for (int i = 0; i < rf->ncolumns; i++)
		if (!plain_field(rf, i, rf->fields[i].start, rf->fields[i].end,
						 values, nulls))
			return false;
	return true;
}

/*
 * Count the rows formed since the last count (dp_input_count_rows), and the
 * fields of those form_plain made as taken by their parsers.
 */
static void
count_formed(DPRowFormer *rf)
{
	dp_input_count_rows(rf->formed_rows, 0);
	for (int i = 0; rf->plain_rows > 0 && i < rf->ncolumns; i++)
		dp_fastin_count(rf->columns[i].fast, rf->plain_rows);
	rf->formed_rows = rf->plain_rows = 0;
}

/* NextCopyFrom's work after its reader: input functions, then defaults. */
static void
form_values(DPRowFormer *rf, char **strings, ExprContext *econtext,
			Datum *values, bool *nulls)
{
	CopyFromState cstate = rf->cstate;

	unread_columns(rf, values, nulls);
	for (int i = 0; i < rf->ncolumns; i++)
	{
		DPColumn   *col = &rf->columns[i];

		if (strings[i] != NULL && col->fast != NULL &&
			dp_fastin_read(col->fast, strings[i], rf->lengths[i], col->typmod,
						   &values[col->m]))
		{
			nulls[col->m] = false;
			continue;
		}
		if (strings[i] != NULL && rf->in_data[i])
		{
			/* the input function's string: terminated, in rf->out */
			char	   *s = rf->out + (rf->fields[i].start - rf->line_start);

			memcpy(s, strings[i], rf->lengths[i]);
			s[rf->lengths[i]] = '\0';
			strings[i] = s;
		}
		cstate->cur_attname = (char *) col->name;
		cstate->cur_attval = strings[i];
		values[col->m] = InputFunctionCall(col->in, strings[i], col->ioparam,
										   col->typmod);
		nulls[col->m] = strings[i] == NULL;
	}
	cstate->cur_attname = NULL;
	cstate->cur_attval = NULL;
	fill_defaults(rf, econtext, values, nulls);
}

/* ---- binary tuples ---- */

/*
 * The binary tuple at rf->pos: its fields' offsets into rf->fields (end -
 * start their length; 'marked' for a NULL), *next the next tuple's start.
 * SPLIT_CORE for what core's reader must read: a field count other than
 * the column count (the trailer's -1 included), a length below -1, a
 * tuple cut short.
 */
static DPSplit
split_binary(DPRowFormer *rf, Size *next)
{
	const char *d = rf->data;
	Size		p = rf->pos;

	if (p >= rf->len)
		return SPLIT_END;
	if (rf->len - p < 2 || dp_get_net_int(d + p, 2) != rf->ncolumns)
		return SPLIT_CORE;
	p += 2;
	for (int i = 0; i < rf->ncolumns; i++)
	{
		int32		flen;

		if (rf->len - p < 4)
			return SPLIT_CORE;
		flen = dp_get_net_int(d + p, 4);
		p += 4;
		if (flen < -1 || (flen > 0 && rf->len - p < (Size) flen))
			return SPLIT_CORE;
		rf->fields[i].start = p;
		rf->fields[i].end = p + Max(flen, 0);
		rf->fields[i].marked = flen == -1;
		p += Max(flen, 0);
	}
	*next = p;
	return SPLIT_ROW;
}

/*
 * CopyFromBinaryOneRow's work on a split tuple: each field's value (the
 * fast binary input, or the receive function as CopyReadBinaryAttribute
 * calls it, with its check), then the defaults.
 */
static void
form_binary(DPRowFormer *rf, ExprContext *econtext, Datum *values,
			bool *nulls)
{
	CopyFromState cstate = rf->cstate;

	unread_columns(rf, values, nulls);
	for (int i = 0; i < rf->ncolumns; i++)
	{
		DPColumn   *col = &rf->columns[i];
		DPField    *f = &rf->fields[i];
		const char *s = rf->data + f->start;
		int			flen = f->end - f->start;

		cstate->cur_attname = (char *) col->name;
		if (f->marked)
		{
			values[col->m] = ReceiveFunctionCall(col->in, NULL, col->ioparam,
												 col->typmod);
			nulls[col->m] = true;
			continue;
		}
		nulls[col->m] = false;
		if (col->fast != NULL &&
			dp_fastin_read_binary(col->fast, s, flen, &values[col->m]))
			continue;
		if (col->fast != NULL)
			dp_fastin_count_fallback(col->fast);
		resetStringInfo(&rf->field);
		appendBinaryStringInfo(&rf->field, s, flen);
		values[col->m] = ReceiveFunctionCall(col->in, &rf->field, col->ioparam,
											 col->typmod);
		if (rf->field.cursor != rf->field.len)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("incorrect binary data format")));
	}
	cstate->cur_attname = NULL;
	fill_defaults(rf, econtext, values, nulls);
}

/* ---- core's reader for what the former does not take ---- */

/*
 * BeginCopyFrom and EndCopyFrom start and end the backend's COPY progress
 * row: keep it as it was around them.
 */
typedef struct DPProgress
{
	ProgressCommandType command;
	Oid			relid;
	int64		param[PGSTAT_NUM_PROGRESS_PARAM];
} DPProgress;

static void
progress_save(DPProgress *p)
{
	volatile PgBackendStatus *be = MyBEEntry;

	p->command = be ? be->st_progress_command : PROGRESS_COMMAND_INVALID;
	if (p->command == PROGRESS_COMMAND_INVALID)
		return;
	p->relid = be->st_progress_command_target;
	for (int i = 0; i < PGSTAT_NUM_PROGRESS_PARAM; i++)
		p->param[i] = be->st_progress_param[i];
}

static void
progress_restore(const DPProgress *p)
{
	static int	index[PGSTAT_NUM_PROGRESS_PARAM];

	if (p->command == PROGRESS_COMMAND_INVALID)
	{
		pgstat_progress_end_command();
		return;
	}
	for (int i = 0; i < PGSTAT_NUM_PROGRESS_PARAM; i++)
		index[i] = i;
	pgstat_progress_start_command(p->command, p->relid);
	pgstat_progress_update_multi_param(PGSTAT_NUM_PROGRESS_PARAM, index, p->param);
}

/* Core's reader over the chunk's bytes [rf->pos, to). */
static void
core_begin(DPRowFormer *rf, Size to, bool header)
{
	MemoryContext old = MemoryContextSwitchTo(rf->mcxt);
	DPProgress	progress;

	progress_save(&progress);
	if (rf->binary)
	{
		/* core's reader wants a file header before the tuples */
		rf->core_input = palloc(DP_BINARY_HEADER_LEN + to - rf->pos);
		memcpy(rf->core_input, dp_binary_header, DP_BINARY_HEADER_LEN);
		memcpy(rf->core_input + DP_BINARY_HEADER_LEN, rf->data + rf->pos,
			   to - rf->pos);
		rf->core = dp_copy_from_memory(rf->pstate, rf->cstate->rel,
									   rf->attlist, rf->options,
									   rf->core_input,
									   DP_BINARY_HEADER_LEN + to - rf->pos);
	}
	else
		rf->core = dp_copy_from_memory(rf->pstate, rf->cstate->rel,
									   rf->attlist, rf->options,
									   rf->data + rf->pos, to - rf->pos);
	rf->core->cur_lineno = rf->lineno;
	rf->core->eol_type = (EolType) rf->eol;
	rf->core_header = header;
	dp_fastin_install(rf->core);
	progress_restore(&progress);
	MemoryContextSwitchTo(old);
}

static void
core_end(DPRowFormer *rf)
{
	DPProgress	progress;

	progress_save(&progress);
	EndCopyFrom(rf->core);
	progress_restore(&progress);
	rf->core = NULL;
	if (rf->core_input)
		pfree(rf->core_input);
	rf->core_input = NULL;
}

/*
 * The next row of core's reader; false at the end of its bytes.  The
 * row's line and its text become the main reader's.
 */
static bool
core_next(DPRowFormer *rf, ExprContext *econtext, Datum *values, bool *nulls)
{
	CopyFromState cstate = rf->cstate;
	bool		more;

	rf->in_core = true;
	more = NextCopyFrom(rf->core, econtext, values, nulls);
	rf->in_core = false;
	if (!more)
		return false;
	cstate->cur_lineno = rf->core->cur_lineno;
	resetStringInfo(&cstate->line_buf);
	appendBinaryStringInfo(&cstate->line_buf, rf->core->line_buf.data,
						   rf->core->line_buf.len);
	cstate->line_buf_valid = rf->core->line_buf_valid;
	rf->line_pending = false;
	dp_input_count_rows(0, 1);
	return true;
}

/* Core's reader reads the rest of the chunk, from the record at rf->pos. */
static void
core_rest(DPRowFormer *rf)
{
	rf->line_pending = false;
	core_begin(rf, rf->len, false);
	rf->pos = rf->len;
}

/* Past the record: the next one's place, line count and line style. */
static void
advance(DPRowFormer *rf, Size next, int nl, int eol)
{
	rf->pos = next;
	rf->lineno += 1 + nl;
	rf->eol = eol;
}

/*
 * The place of the record at rf->pos, ending at 'end' after 'nl' quoted
 * newlines, for errors from here on: its line number and text.
 */
static inline void
row_place(DPRowFormer *rf, Size end, int nl)
{
	rf->cstate->cur_lineno = rf->lineno + 1 + nl;
	rf->cstate->line_buf_valid = true;
	rf->line_start = rf->pos;
	rf->line_len = end - rf->pos;
	rf->line_pending = true;
}

/*
 * The next text or CSV record's row, if the former can form it; the header
 * line is given to core's reader.
 */
static DPSplit
next_text(DPRowFormer *rf, ExprContext *econtext, Datum *values, bool *nulls)
{
	Size		end;
	Size		next;
	int			nl = 0;
	int			eol = EOL_NL;
	DPSplit		split = SPLIT_ROW;
	bool		plain;

	plain = split_plain(rf, &end, &next);
	if (plain && rf->all_fast && !rf->header_next &&
		form_plain(rf, values, nulls))
	{
		row_place(rf, end, 0);
		advance(rf, next, 0, EOL_NL);
		fill_defaults(rf, econtext, values, nulls);
		rf->plain_rows++;
		rf->formed_rows++;
		return SPLIT_ROW;
	}
	if (!plain)
		split = split_record(rf, &end, &next, &nl, &eol);
	if (split != SPLIT_ROW)
		return split;
	if (rf->header_next)
	{
		/* core reads (and with MATCH checks) the header line */
		rf->header_next = false;
		core_begin(rf, next, true);
		advance(rf, next, nl, eol);
		return SPLIT_HEADER;
	}

	row_place(rf, end, nl);
	if (!field_strings(rf, rf->pos, end, rf->strings))
		return SPLIT_CORE;
	advance(rf, next, nl, eol);
	form_values(rf, rf->strings, econtext, values, nulls);
	rf->formed_rows++;
	return SPLIT_ROW;
}

/* The next binary tuple's row, if the former can form it. */
static DPSplit
next_binary(DPRowFormer *rf, ExprContext *econtext, Datum *values,
			bool *nulls)
{
	Size		next;
	DPSplit		split = split_binary(rf, &next);

	if (split != SPLIT_ROW)
		return split;
	rf->cstate->cur_lineno = rf->lineno + 1;
	form_binary(rf, econtext, values, nulls);
	advance(rf, next, 0, rf->eol);
	rf->formed_rows++;
	return SPLIT_ROW;
}

/* ---- the interface ---- */

const char *
dp_rowform_refusal(CopyFromState cstate)
{
	ListCell   *lc;

	if (!cstate->opts.binary && cstate->need_transcoding)
		return "the input is converted from another encoding";
	if (dp_copy_skips_errors(cstate))
		return "it has ON_ERROR";
	if (DP_COPY_DEFAULT_PRINT(cstate) != NULL)
		return "it has DEFAULT";
	if (cstate->attnumlist == NIL)
		return "it reads no columns";
	if (cstate->convert_select_flags != NULL)
		return "it reads some columns only";
	if (cstate->opts.csv_mode)
		foreach(lc, cstate->attnumlist)
		{
			int			m = lfirst_int(lc) - 1;

			if (cstate->opts.force_notnull_flags[m] ||
				cstate->opts.force_null_flags[m])
				return "it has FORCE_NULL or FORCE_NOT_NULL";
		}
	return NULL;
}

/* The COPY's format: its delimiter, NULL string, quotes, special bytes. */
static void
set_format(DPRowFormer *rf, CopyFromState cstate)
{
	rf->delim = cstate->opts.delim[0];
	rf->null_print = cstate->opts.null_print;
	rf->null_len = cstate->opts.null_print_len;
	/* the delimiter first: scan.c marks it in a bitmap of its own too */
	rf->specials[rf->nspecials++] = rf->delim;
	rf->specials[rf->nspecials++] = '\n';
	rf->specials[rf->nspecials++] = '\r';
	if (rf->csv)
	{
		rf->quote = cstate->opts.quote[0];
		rf->escape = cstate->opts.escape[0];
		if (rf->escape == rf->quote)
			rf->escape = '\0';
		rf->specials[rf->nspecials++] = rf->quote;
		if (rf->escape != '\0')
			rf->specials[rf->nspecials++] = rf->escape;
	}
	else
		rf->specials[rf->nspecials++] = '\\';
}

DPRowFormer *
dp_rowform_begin(CopyFromState cstate, ParseState *pstate, List *attlist,
				 List *options)
{
	DPRowFormer *rf = palloc0(sizeof(DPRowFormer));
	TupleDesc	desc = RelationGetDescr(cstate->rel);
	ListCell   *lc;
	int			i = 0;

	rf->cstate = cstate;
	rf->mcxt = CurrentMemoryContext;
	rf->pstate = pstate;
	rf->attlist = attlist;
	rf->options = options;
	rf->csv = cstate->opts.csv_mode;
	rf->binary = cstate->opts.binary;
	if (rf->binary)
		initStringInfo(&rf->field);
	set_format(rf, cstate);

	rf->ncolumns = list_length(cstate->attnumlist);
	rf->columns = palloc(rf->ncolumns * sizeof(DPColumn));
	rf->fields = palloc((rf->ncolumns + 1) * sizeof(DPField));
	rf->strings = palloc(rf->ncolumns * sizeof(char *));
	rf->lengths = palloc(rf->ncolumns * sizeof(int));
	rf->in_data = palloc0(rf->ncolumns * sizeof(bool));
	foreach(lc, cstate->attnumlist)
	{
		DPColumn   *col = &rf->columns[i++];
		Form_pg_attribute att;

		col->m = lfirst_int(lc) - 1;
		att = TupleDescAttr(desc, col->m);
		col->in = &cstate->in_functions[col->m];
		col->ioparam = cstate->typioparams[col->m];
		col->typmod = att->atttypmod;
		col->fast = rf->binary ?
			dp_fastin_binary_of(col->in, att->atttypid, col->typmod) :
			dp_fastin_of(col->in, col->typmod);
		col->bounded = !rf->binary && col->fast != NULL &&
			dp_fastin_bounded(col->fast);
		col->name = NameStr(att->attname);
	}
	rf->all_fast = !rf->binary && rf->ncolumns > 0;
	for (i = 0; i < rf->ncolumns; i++)
		rf->all_fast &= rf->columns[i].fast != NULL;
	rf->out_cap = 1024;
	rf->out = palloc0(rf->out_cap);
	return rf;
}

void
dp_rowform_chunk(DPRowFormer *rf, const char *data, Size len,
				 const DPChunkHeader *where)
{
	rf->data = data;
	rf->len = len;
	rf->pos = 0;
	rf->lineno = where->lines_before;
	rf->eol = where->eol;
	rf->header_next = where->lines_before == 0 && rf->cstate->opts.header_line;
	rf->line_pending = false;
	if (rf->binary)
	{
		/* after the chunk's file header, which core's reader checked */
		rf->pos = DP_BINARY_HEADER_LEN;
		rf->header_next = false;
		return;
	}
	if (pg_encoding_verifymbstr(rf->cstate->file_encoding, data, len) != len)
	{
		/* core reads it, and reports the bad bytes on their line */
		core_begin(rf, len, false);
		return;
	}
	scan_chunk(rf);
}

bool
dp_rowform_next(DPRowFormer *rf, ExprContext *econtext, Datum *values,
				bool *nulls)
{
	for (;;)
	{
		DPSplit		split;

		if (rf->core != NULL)
		{
			if (core_next(rf, econtext, values, nulls))
				return true;
			core_end(rf);
			if (!rf->core_header)
				break;			/* it read the chunk's rest */
			continue;
		}
		split = rf->binary ? next_binary(rf, econtext, values, nulls) :
			next_text(rf, econtext, values, nulls);
		if (split == SPLIT_ROW)
			return true;
		if (split == SPLIT_END)
			break;
		if (split == SPLIT_CORE)
			core_rest(rf);
	}
	count_formed(rf);
	/* later errors name the line without its text, as core's at the end */
	rf->cstate->line_buf_valid = false;
	rf->line_pending = false;
	return false;
}

void
dp_rowform_error_callback(void *arg)
{
	DPRowFormer *rf = arg;
	CopyFromState cstate = rf->cstate;

	if (rf->in_core)
	{
		CopyFromErrorCallback(rf->core);
		return;
	}
	if (rf->line_pending && cstate->line_buf_valid &&
		cstate->cur_lineno == rf->lineno)
	{
		resetStringInfo(&cstate->line_buf);
		appendBinaryStringInfo(&cstate->line_buf, rf->data + rf->line_start,
							   rf->line_len);
		rf->line_pending = false;
	}
	CopyFromErrorCallback(cstate);
}
