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
 * 2. Split (rowsplit.c).  From the bitmap, a record's fields (start, end,
 *	  whether escaped or quoted) and its end, by the rules of core's line
 *	  reader and field splitters.
 * 3. Values (rowvalues.c).  The record is copied once into a buffer where
 *	  each field is terminated (de-escaped or de-quoted in place when it has
 *	  to be), and each column's input function is called as NextCopyFrom
 *	  calls it (so fastin.c's exact fast input takes the common types);
 *	  then the defaults of the columns not read, as core.
 *
 * This file is the former's interface and its driver: the former set up
 * for a COPY (its format, its columns and their fast parsers), each chunk
 * taken in (scanned, or given to core whole), each record through steps 2
 * and 3 (next_text, next_binary), the former's place in the chunk (its
 * position, line count and line style) advanced past each, and what the
 * former does not take handed to core's reader.
 *
 * Plain records.  A record that ends with \n and holds no special byte but
 * delimiters (and, in text format, the backslashes of fields that are the
 * NULL string \N; in CSV, the quotes of fields that are each one quoted
 * run with nothing special inside, as TPC-H's comments) is split from the
 * delimiters' bitmap alone (dp_split_plain); if every column has a fast
 * parser, its fields go straight to their parsers (dp_form_plain), without
 * the strings, lengths and copies of step 3.  So does a record split the
 * long way with nothing to undo: a text record whose backslashes are those
 * of its NULLs where its first field is one.  The parsers raise no errors,
 * so a record dp_form_plain gives up on (a field to de-escape, one a
 * parser hands on) is formed again the general way with the same result
 * and errors; a record that is not plain (the wrong number of fields too)
 * is split by dp_split_record.
 *
 * Binary input.  A chunk of whole binary tuples (the chunker cuts them,
 * each chunk after a file header) is read tuple by tuple as
 * CopyFromBinaryOneRow reads it: the field count, then each field's length
 * and bytes (dp_split_binary); fields of the common fixed-width types are
 * converted by fastin.c's binary input, the others by their receive
 * function (dp_form_binary).  A tuple whose field count is not the column
 * count (the trailer included), a length below -1 or a tuple cut short
 * goes, with the rest of the chunk, to core's reader (given a file header
 * first).
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
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"

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

/* ---- record by record ---- */

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

	plain = dp_split_plain(rf, &end, &next);
	if (!plain)
		split = dp_split_record(rf, &end, &next, &nl, &eol);
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
	if (nl == 0 && rf->all_fast && dp_form_plain(rf, values, nulls, plain))
	{
		/* no field to undo: straight to the parsers */
		row_place(rf, end, 0);
		advance(rf, next, 0, eol);
		dp_fill_defaults(rf, econtext, values, nulls);
		rf->plain_rows++;
		rf->formed_rows++;
		return SPLIT_ROW;
	}

	row_place(rf, end, nl);
	if (!dp_field_strings(rf, rf->pos, end, rf->strings))
		return SPLIT_CORE;
	advance(rf, next, nl, eol);
	dp_form_values(rf, rf->strings, econtext, values, nulls);
	rf->formed_rows++;
	return SPLIT_ROW;
}

/* The next binary tuple's row, if the former can form it. */
static DPSplit
next_binary(DPRowFormer *rf, ExprContext *econtext, Datum *values,
			bool *nulls)
{
	Size		next;
	DPSplit		split = dp_split_binary(rf, &next);

	if (split != SPLIT_ROW)
		return split;
	rf->cstate->cur_lineno = rf->lineno + 1;
	dp_form_binary(rf, econtext, values, nulls);
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
	rf->null_escaped = !rf->csv && rf->null_len >= 2 &&
		rf->null_print[0] == '\\' && rf->null_print[1] != '.' &&
		strcspn(rf->null_print + 1, "\\\n\r") == rf->null_len - 1 &&
		memchr(rf->null_print, rf->delim, rf->null_len) == NULL;
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
	rf->columns = palloc0(rf->ncolumns * sizeof(DPColumn));
	rf->fields = palloc((rf->ncolumns + 1) * sizeof(DPField));
	rf->runs = palloc(rf->ncolumns * sizeof(DPField));
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
	rf->values.cap = 8192;
	rf->values.buf = palloc(rf->values.cap);
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
	dp_scan_chunk(rf);
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
	dp_count_formed(rf);
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
