/*-------------------------------------------------------------------------
 *
 * rowvalues.c
 *	  The row former's values: a split record's fields to the row's values
 *	  and nulls, as NextCopyFrom and CopyFromBinaryOneRow make them (step 3
 *	  of rowform.c).
 *
 * A text or CSV record is copied once into rf->out, where each field is
 * terminated, and de-escaped (CopyReadAttributesText's escapes) or
 * de-quoted (CopyReadAttributesCSV's quotes) in place when it has to be;
 * the NULL string is compared with the raw field, unquoted in CSV, as
 * core's field splitters compare it (dp_field_strings).  A field whose
 * fast parser reads only its bytes (dp_fastin_bounded) is parsed where it
 * lies in the chunk, copied only if the parser hands it on.  Then each
 * column's input function is called as NextCopyFrom calls it
 * (cstate->in_functions, so fastin.c's exact fast input takes the common
 * types), with cur_attname and cur_attval set for the error context
 * (dp_form_values), and last the defaults of the columns not read
 * (dp_fill_defaults), as core.
 *
 * A plain record (rowsplit.c's dp_split_plain), or a CSV record whose
 * quoted fields are each one quoted run, in a COPY whose every column has
 * a fast parser goes straight to the parsers (dp_form_plain), without the
 * strings, lengths and copies; the NULL string is NULL there, as
 * InputFunctionCall makes it for the strict input functions that have
 * fast parsers.  The parsers raise no errors, so when dp_form_plain gives
 * up (a field to de-escape, one a parser hands on) nothing visible has
 * happened, and the record is formed again the general way with the same
 * result and errors.
 *
 * A binary tuple's fields (dp_form_binary) are converted by fastin.c's
 * binary input, or by their receive function with core's check that it
 * read the whole field; NULLs go to the receive function as core calls it
 * (a domain's checks its constraints).
 *
 * The chunk's bytes are never written.  Errors come only from the input
 * and receive functions and the defaults, in core's order; an escape that
 * makes a byte the encoding rejects is not one: dp_field_strings returns
 * false, and core's reader reads the record.  The rows formed are counted
 * for the input stage's counts at the chunk's end (dp_count_formed).
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "mb/pg_wchar.h"
#include "utils/memutils.h"

/* ---- text and CSV fields ---- */

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
bool
dp_field_strings(DPRowFormer *rf, Size start, Size end, char **strings)
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

		if ((!rf->csv || !f->marked) &&
			dp_null_string(rf, rf->data + f->start, flen))
		{
			strings[i] = NULL;
			continue;
		}
		rf->lengths[i] = flen;
		rf->in_data[i] = !f->marked && rf->columns[i].bounded &&
			f->start + DP_FASTIN_SLACK <= rf->len;
		if (rf->in_data[i])
		{
			/* its parser reads it where it lies (dp_form_values) */
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

/*
 * Empty vs for the next record's values, after growing it (up to
 * DP_VALUE_SPACE_MAX) when the last record's did not fit.
 */
void
dp_values_reset(DPValueSpace *vs, MemoryContext mcxt)
{
	if (vs->short_by > 0 && vs->cap < DP_VALUE_SPACE_MAX)
	{
		Size		want = Max(2 * vs->cap, vs->used + vs->short_by);

		pfree(vs->buf);
		vs->cap = Min(want, DP_VALUE_SPACE_MAX);
		vs->buf = MemoryContextAlloc(mcxt, vs->cap);
	}
	vs->used = 0;
	vs->short_by = 0;
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
void
dp_fill_defaults(DPRowFormer *rf, ExprContext *econtext, Datum *values,
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

/* What plain_field made of a field. */
typedef enum DPPlainField
{
	PLAIN_VALUE,				/* its parser's value */
	PLAIN_NULL,					/* the NULL string: NULL */
	PLAIN_REFUSED				/* the general way must form the record */
} DPPlainField;

/*
 * Field i of a plain record, bytes [start, end) of the chunk, by its
 * column's fast parser: where it lies for a bounded parser with its slack
 * in the chunk, else from a terminated copy in rf->out.  The NULL string
 * (never a quoted field) is NULL without a call, as InputFunctionCall
 * makes it for the strict input functions that have fast parsers.
 */
static inline DPPlainField
plain_field(DPRowFormer *rf, int i, Size start, Size end, bool quoted,
			Datum *values, bool *nulls)
{
	DPColumn   *col = &rf->columns[i];
	const char *s = rf->data + start;
	Size		len = end - start;

	if (!quoted && dp_null_string(rf, s, len))
	{
		values[col->m] = (Datum) 0;
		nulls[col->m] = true;
		return PLAIN_NULL;
	}
	if (!col->bounded || start + DP_FASTIN_SLACK > rf->len)
	{
		char	   *t = rf->out + (start - rf->pos);

		memcpy(t, s, len);
		t[len] = '\0';
		s = t;
	}
	if (!dp_fastin_parse(col->fast, s, len, col->typmod, &rf->values,
						 &values[col->m]))
		return PLAIN_REFUSED;
	nulls[col->m] = false;
	return PLAIN_VALUE;
}

/*
 * Step 3 at once for a record split into fields that need no de-escaping,
 * in a COPY whose every column has a fast parser: a plain record
 * (dp_split_plain), a CSV record whose quoted fields are each one quoted
 * run (dp_simply_quoted: TPC-H's comments, any CSV writer's quoted text),
 * read between their quotes, or a text record whose only backslashes are
 * in NULL strings (\N: pg_dump's NULLs), which core compares before
 * de-escaping.  'split_plain': the record came from dp_split_plain, whose
 * marked CSV fields are each such a run already (quoted_run_at), so they
 * are not checked again.  Each field goes straight to its parser, without
 * the strings, lengths and copies of the general path; the NULL string is
 * NULL.  The parsers raise no errors, so core's order of errors cannot
 * change.  False, with nothing counted, when a field needs de-escaping or
 * its parser hands it on: then the record is formed the general way.  A
 * row's NULLs are counted apart, since the rows made here count as fields
 * taken by their parsers (dp_count_formed).
 */
bool
dp_form_plain(DPRowFormer *rf, Datum *values, bool *nulls, bool split_plain)
{
	int			nnull = 0;

	if (rf->fields[rf->ncolumns - 1].end - rf->pos + DP_FASTIN_SLACK > rf->out_cap)
		return false;
	unread_columns(rf, values, nulls);
	dp_values_reset(&rf->values, rf->mcxt);
	for (int i = 0; i < rf->ncolumns; i++)
	{
		DPField    *f = &rf->fields[i];
		DPPlainField got;

		if (!f->marked)
			got = plain_field(rf, i, f->start, f->end, false, values, nulls);
		else if (rf->csv && (split_plain || dp_simply_quoted(rf, i)))
			got = plain_field(rf, i, f->start + 1, f->end - 1, true, values,
							  nulls);
		else if (!rf->csv && dp_null_string(rf, rf->data + f->start,
										 f->end - f->start))
			got = plain_field(rf, i, f->start, f->end, false, values, nulls);
		else
			got = PLAIN_REFUSED;
		if (got == PLAIN_REFUSED)
			return false;
		nnull += (got == PLAIN_NULL);
	}
	for (int i = 0; nnull > 0 && i < rf->ncolumns; i++)
		rf->columns[i].plain_nulls += nulls[rf->columns[i].m];
	return true;
}

/*
 * Count the rows formed since the last count (dp_input_count_rows), and the
 * fields of those dp_form_plain made as taken by their parsers.
 */
void
dp_count_formed(DPRowFormer *rf)
{
	dp_input_count_rows(rf->formed_rows, 0);
	for (int i = 0; rf->plain_rows > 0 && i < rf->ncolumns; i++)
	{
		dp_fastin_count(rf->columns[i].fast,
						rf->plain_rows - rf->columns[i].plain_nulls);
		rf->columns[i].plain_nulls = 0;
	}
	rf->formed_rows = rf->plain_rows = 0;
}

/* NextCopyFrom's work after its reader: input functions, then defaults. */
void
dp_form_values(DPRowFormer *rf, char **strings, ExprContext *econtext,
			   Datum *values, bool *nulls)
{
	CopyFromState cstate = rf->cstate;

	unread_columns(rf, values, nulls);
	dp_values_reset(&rf->values, rf->mcxt);
	for (int i = 0; i < rf->ncolumns; i++)
	{
		DPColumn   *col = &rf->columns[i];

		if (strings[i] != NULL && col->fast != NULL &&
			dp_fastin_read(col->fast, strings[i], rf->lengths[i], col->typmod,
						   &rf->values, &values[col->m]))
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
	dp_fill_defaults(rf, econtext, values, nulls);
}

/* ---- binary tuples ---- */

/*
 * CopyFromBinaryOneRow's work on a split tuple: each field's value (the
 * fast binary input, or the receive function as CopyReadBinaryAttribute
 * calls it, with its check), then the defaults.
 */
void
dp_form_binary(DPRowFormer *rf, ExprContext *econtext, Datum *values,
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
	dp_fill_defaults(rf, econtext, values, nulls);
}
