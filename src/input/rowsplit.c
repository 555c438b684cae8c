/*-------------------------------------------------------------------------
 *
 * rowsplit.c
 *	  The row former's split: a chunk's records into fields, from the
 *	  bitmap of its special bytes, as core's line reader and field
 *	  splitters split them (steps 1 and 2 of rowform.c).
 *
 * dp_scan_chunk marks the chunk's special bytes (the delimiter, \n, \r,
 * and the backslash in text format or the quote and escape in CSV) in a
 * bitmap, one bit per byte, and its delimiters in a second one, by one
 * vectorized pass (scan.c).  The split walks the set bits only
 * (next_marked), so an ordinary byte is looked at once, by the scan.
 *
 * A record's fields (start, end, whether escaped or quoted) and its end
 * follow the rules of core's line reader (CopyReadLineText: the
 * end-of-line style fixed by the first line, a backslash taking the next
 * byte in text, quotes and escapes in CSV, a newline inside quotes counted
 * as a line) and its field splitters (CopyReadAttributesText /
 * CopyReadAttributesCSV).  A plain record, one that ends with \n and holds
 * no special byte but delimiters (in text format, a field that is the NULL
 * string \N aside: pg_dump's NULLs; in CSV, the quotes of a field that is
 * one quoted run, "...", with nothing special inside but delimiters), is
 * split from the delimiters' bitmap alone, the delimiters inside such a
 * run masked out (dp_split_plain), without reading its bytes but those
 * beside its quotes; any other record by dp_split_record's walk over its
 * special bytes, which gives a plain one the same fields.  A field of one
 * quoted run is told apart (dp_simply_quoted), so that its record can
 * still go straight to the parsers.  A binary tuple is split by its field
 * count and lengths (dp_split_binary), as CopyFromBinaryOneRow reads them.
 *
 * NULL fields in text format.  Where the NULL string is two bytes, a
 * backslash and a byte that is not special (\N), dp_scan_chunk also marks,
 * in rf->nulls, each backslash that starts the pair and has a special byte
 * that is not such a backslash just before it and two bytes after it:
 * keep_null_fields, from the pairs' bitmap (dp_scan_pairs) and the special
 * bytes', a word at a time.  Such a field is \N alone whenever its record
 * can be plain: a neighbour that is not a delimiter or \n (a \r, another
 * backslash) is itself a special byte the plain record's walk stops at and
 * refuses.  So dp_split_plain's walk passes over the marked backslashes as
 * over delimiters, and a NULL-heavy pg_dump file is split without a stop
 * per NULL.  The general walk (dp_split_record) ignores rf->nulls.
 *
 * The split reads the chunk and writes only rf->fields (offsets into the
 * chunk; the former's place in it is rowform.c's to advance).  It raises
 * no error: what it does not reproduce (a record with another number of
 * fields than columns, a line end that is not the line style's, an
 * unterminated quote, what core may take for an end-of-copy marker, a
 * binary tuple cut short or not of as many fields as columns) is
 * SPLIT_CORE, for core's reader and its errors.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "port/pg_bitutils.h"

/* ---- the bitmap of the chunk's special bytes ---- */

/*
 * Of the pairs' backslashes in rf->nulls, keep those with a special byte
 * other than a pair's backslash just before and two bytes after (the
 * header comment's rule), each word's neighbours from the words beside.
 */
static void
keep_null_fields(DPRowFormer *rf)
{
	uint64		t_prev = 0;
	uint64		t_cur;

	if (rf->nwords == 0)
		return;
	t_cur = rf->bits[0] & ~rf->nulls[0];
	for (Size w = 0; w < rf->nwords; w++)
	{
		uint64		t_next = w + 1 < rf->nwords ?
			rf->bits[w + 1] & ~rf->nulls[w + 1] : 0;

		rf->nulls[w] &= ((t_cur << 1) | (t_prev >> 63)) &
			((t_cur >> 2) | (t_next << 62));
		t_prev = t_cur;
		t_cur = t_next;
	}
}

/* Mark the chunk's special bytes: rf->bits, one bit per byte. */
void
dp_scan_chunk(DPRowFormer *rf)
{
	/* text with a NULL string of two bytes: its fields marked too */
	bool		nulls = rf->null_escaped && rf->null_len == 2;

	rf->nwords = (rf->len + 63) / 64;
	if (rf->nwords > rf->bits_cap)
	{
		rf->bits_cap = Max(rf->nwords, 2 * rf->bits_cap);
		if (rf->bits)
		{
			pfree(rf->bits);
			pfree(rf->delims);
			if (rf->nulls)
				pfree(rf->nulls);
		}
		rf->bits = MemoryContextAlloc(rf->mcxt, rf->bits_cap * sizeof(uint64));
		rf->delims = MemoryContextAlloc(rf->mcxt, rf->bits_cap * sizeof(uint64));
		if (nulls)
			rf->nulls = MemoryContextAlloc(rf->mcxt, rf->bits_cap * sizeof(uint64));
	}
	dp_scan_specials(rf->specials, rf->nspecials, rf->data, rf->len, rf->bits,
					 rf->delims);
	if (nulls)
	{
		dp_scan_pairs(rf->data, rf->len, '\\', rf->null_print[1], rf->nulls);
		keep_null_fields(rf);
	}
}

/*
 * The special bytes of word w; with 'others', those that are neither a
 * delimiter nor a marked NULL field's backslash.
 */
static inline uint64
marked_word(const DPRowFormer *rf, Size w, bool others)
{
	if (!others)
		return rf->bits[w];
	if (rf->nulls)
		return rf->bits[w] & ~(rf->delims[w] | rf->nulls[w]);
	return rf->bits[w] & ~rf->delims[w];
}

/*
 * The first special byte at or after 'from' (with 'others', the first
 * that is neither a delimiter nor a marked NULL field's backslash); the
 * chunk's length if none.
 */
static inline Size
next_marked(const DPRowFormer *rf, Size from, bool others)
{
	Size		w = from >> 6;
	uint64		m;

	if (from >= rf->len)
		return rf->len;
	m = marked_word(rf, w, others) & (~UINT64CONST(0) << (from & 63));
	while (m == 0)
	{
		if (++w >= rf->nwords)
			return rf->len;
		m = marked_word(rf, w, others);
	}
	return (w << 6) + pg_rightmost_one_pos64(m);
}

/* ---- a record's fields and end ---- */

/*
 * Is the backslash at q, in a text record starting at p, a whole field
 * that is the NULL string (\N, rf->null_escaped), as core's splitter reads
 * it raw?  Then it is the field's only special byte.
 */
static inline bool
null_field_at(const DPRowFormer *rf, Size p, Size q)
{
	const char *d = rf->data;
	Size		after = q + rf->null_len;

	return rf->null_escaped && (q == p || d[q - 1] == rf->delim) &&
		after < rf->len && (d[after] == rf->delim || d[after] == '\n') &&
		dp_null_string(rf, d + q, rf->null_len);
}

/*
 * Does a field that is one quoted run, "...", with no special byte inside
 * but delimiters, start at q (a quote that starts a field of the record at
 * p)?  Its closing quote, then followed by a delimiter or \n, in *close.
 * A doubled quote, an escape or a line end inside is not such a run.
 */
static inline bool
quoted_run_at(const DPRowFormer *rf, Size p, Size q, Size *close)
{
	const char *d = rf->data;
	Size		c;

	if (!rf->csv || d[q] != rf->quote || (q != p && d[q - 1] != rf->delim))
		return false;
	c = next_marked(rf, q + 1, true);
	if (c + 1 >= rf->len || d[c] != rf->quote ||
		(d[c + 1] != rf->delim && d[c + 1] != '\n'))
		return false;
	*close = c;
	return true;
}

/* The bits of word w for the bytes strictly between a run's quotes. */
static inline uint64
inside_run(Size w, const DPField *run)
{
	Size		lo = Max(run->start + 1, w << 6);
	Size		hi = Min(run->end, (w + 1) << 6);
	uint64		b;

	if (lo >= hi)
		return 0;
	b = ~UINT64CONST(0) << (lo & 63);
	if (hi < ((w + 1) << 6))
		b &= ~(~UINT64CONST(0) << (hi & 63));
	return b;
}

/*
 * A plain record at rf->pos: one that ends with \n under the \n line style
 * (or the first line's), with no other special byte than delimiters (no
 * backslash, carriage return, quote or escape) but for, in text format,
 * the backslash of a field that is the NULL string \N and, in CSV, the
 * quotes of a field that is one quoted run with nothing special inside but
 * delimiters (quoted_run_at: any CSV writer's quoted text), and with as
 * many fields as columns.  Its fields are the gaps between the delimiters'
 * bits, those inside a quoted run masked out; a quoted run's field is
 * marked, as dp_split_record marks it.  No byte of the record is read but
 * a \N's and those beside a quote.  False for any other record, which
 * dp_split_record reads (with the same result for a plain one).
 */
bool
dp_split_plain(DPRowFormer *rf, Size *end, Size *next)
{
	const char *d = rf->data;
	Size		p = rf->pos;
	Size		e;
	Size		w;
	int			nf = 0;
	DPField    *fields = rf->fields;
	DPField    *runs = rf->runs;	/* each quoted run's quotes */
	int			nruns = 0;
	int			masked = 0;		/* runs before it end in earlier words */
	int			opened = 0;		/* runs before it have their field */
	Size		next_open;		/* where run 'opened' opens */

	/* a backslash first may be an end-of-copy marker, in CSV too */
	if (p >= rf->len || d[p] == '\\' || rf->eol == EOL_CR ||
		rf->eol == EOL_CRNL)
		return false;
	for (e = next_marked(rf, p, true); e < rf->len && d[e] != '\n';)
	{
		Size		close;

		if (d[e] == '\\' && null_field_at(rf, p, e))
			e = next_marked(rf, e + rf->null_len, true);
		else if (nruns < rf->ncolumns && quoted_run_at(rf, p, e, &close))
		{
			runs[nruns].start = e;
			runs[nruns++].end = close;
			e = next_marked(rf, close + 1, true);
		}
		else
			return false;
	}
	if (e >= rf->len)
		return false;

	fields[0].start = p;
	fields[0].marked = nruns > 0 && runs[0].start == p;
	opened = fields[0].marked;
	next_open = opened < nruns ? runs[opened].start : rf->len;
	for (w = p >> 6; (w << 6) < e; w++)
	{
		uint64		m = rf->delims[w];

		if ((w << 6) < p)
			m &= ~UINT64CONST(0) << (p & 63);
		if (((w + 1) << 6) > e)
			m &= ~(~UINT64CONST(0) << (e & 63));
		for (int k = masked; k < nruns && runs[k].start < ((w + 1) << 6); k++)
			m &= ~inside_run(w, &runs[k]);
		while (masked < nruns && runs[masked].end < ((w + 1) << 6))
			masked++;
		while (m != 0)
		{
			Size		q = (w << 6) + pg_rightmost_one_pos64(m);

			m &= m - 1;
			if (++nf >= rf->ncolumns)
				return false;
			fields[nf - 1].end = q;
			fields[nf].start = q + 1;
			fields[nf].marked = false;
			if (unlikely(q + 1 == next_open))
			{
				fields[nf].marked = true;
				opened++;
				next_open = opened < nruns ? runs[opened].start : rf->len;
			}
		}
	}
	if (nf + 1 != rf->ncolumns)
		return false;
	fields[nf].end = e;
	*end = e;
	*next = e + 1;
	return true;
}

/*
 * Is field i of a split CSV record one quoted run, "...", with no special
 * byte inside but delimiters (no quote, escape or line end)?  Its value is
 * then the bytes between the quotes, as CopyReadAttributesCSV makes it,
 * and it is never the NULL string (a quoted field is not NULL).
 */
bool
dp_simply_quoted(const DPRowFormer *rf, int i)
{
	const DPField *f = &rf->fields[i];

	return rf->csv && f->end - f->start >= 2 &&
		rf->data[f->start] == rf->quote && rf->data[f->end - 1] == rf->quote &&
		next_marked(rf, f->start + 1, true) == f->end - 1;
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
DPSplit
dp_split_record(DPRowFormer *rf, Size *end, Size *next, int *nl, int *eol)
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

/* ---- binary tuples ---- */

/*
 * The binary tuple at rf->pos: its fields' offsets into rf->fields (end -
 * start their length; 'marked' for a NULL), *next the next tuple's start.
 * SPLIT_CORE for what core's reader must read: a field count other than
 * the column count (the trailer's -1 included), a length below -1, a
 * tuple cut short.
 */
DPSplit
dp_split_binary(DPRowFormer *rf, Size *next)
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
