/*-------------------------------------------------------------------------
 *
 * parcopy.c
 *	  COPY FROM a file, a program or the client (STDIN), its input split
 *	  into chunks of whole lines parsed by parallel workers and by the leader (parallel.c has
 *	  the rest of a parallel load: the context, the placers, the pages'
 *	  way to the leader).
 *
 * Asked for as a parallel INSERT is (/\*+ APPEND PARALLEL(n) *\/ before
 * COPY, or directpath.parallel_workers), for text, CSV and binary input
 * from a file, a program or the client, text and CSV in an ASCII-safe
 * encoding (not SJIS, BIG5, GBK, UHC or GB18030, whose second bytes can be
 * a backslash or a quote), into a target dp_parallel_target_refusal accepts, when
 * every column's input function, every default COPY evaluates and the
 * WHERE clause are parallel safe, there is no ON_ERROR other than stop and
 * no rejects table (copy.c), and a file is not smaller than
 * directpath.min_bytes.  Otherwise the COPY runs serially, and
 * last_statement().parallel says why.
 *
 * Algorithm.
 * 1. The leader has opened the input with core's BeginCopyFrom (its
 *	  errors, privileges and progress row are core's; for STDIN it has told
 *	  the client to start sending) and reads the raw bytes itself: from the
 *	  file or pipe core opened, or the client's CopyData messages, read as
 *	  core reads them (Flush and Sync ignored, CopyFail an error, CopyDone
 *	  the end).  The chunker
 *	  (DPChunker) scans them as core's CopyReadLineText does, byte by byte:
 *	  the end-of-line style fixed by the first line (\n, \r or \r\n), in
 *	  text format a backslash escaping the next byte, in CSV the quote and
 *	  escape state, so that a newline inside a quoted field does not end a
 *	  line.  It cuts a chunk at the first line end at least a chunk's size
 *	  past the chunk's start, and gives it the number of physical lines
 *	  before it (counted as core counts cur_lineno, quoted newlines
 *	  included) and the end-of-line style in force.  Binary input is cut
 *	  after whole tuples (a field count, then each field's length and
 *	  bytes), each chunk given a file header of its own; the input's own
 *	  header was read and checked by BeginCopyFrom, and what it read ahead
 *	  seeds the chunker.
 * 2. Chunks of DP_WORKER_CHUNK bytes go to the workers, each through its
 *	  own input queue, sent without waiting; whenever nothing else is to be
 *	  done the leader parses a smaller chunk itself (dp_parallel_receive's
 *	  'step').  At the end of the input the input queues are detached, so
 *	  each worker hands on its last partial page and ends.
 * 3. A chunk is parsed by core's own COPY reader: BeginCopyFrom with a
 *	  data_source_cb that returns the chunk's bytes, its line counter set
 *	  to the lines before the chunk and its end-of-line style to the one in
 *	  force, so a row's errors carry the file's line number ("COPY t, line
 *	  N"), and NextCopyFrom for every row; the WHERE clause filters, and a
 *	  placer (parallel.c) checks constraints and forms the row on a page.
 *	  Every parser reads the input in the encoding the leader's COPY chose
 *	  (make_payload), and binary input's text values in the leader's
 *	  client encoding (database_encoding_callback): a worker's own client
 *	  encoding is the database's.
 *
 * Invariants.
 * - Every byte of the input is in exactly one chunk, chunks are cut only
 *	 at line ends (never inside a quoted field or after an escaping
 *	 backslash), and a chunk's rows are parsed exactly as core would parse
 *	 them at that place of the input: same bytes, same line numbers, same
 *	 end-of-line rule, the header (if any) only in the first chunk, which
 *	 alone starts at line 0.
 * - Once a possible end-of-copy marker (\. where core looks for one; in
 *	 binary the trailer or a malformed length) is seen, the rest of the
 *	 input goes into one chunk, so what follows the
 *	 marker is handled exactly as core handles it, in every release.
 * - The leader never waits on an input queue: a chunk that does not fit
 *	 waits in the leader's memory (one per worker) and is sent later.
 *
 * What differs from a serial COPY: rows reach the table in another order;
 * when several rows are bad, the one reported is the first one a process
 * reaches, not necessarily the first in the file; pg_stat_progress_copy
 * counts bytes read and rows written, not rows excluded by WHERE.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel.h"

#include <sys/stat.h>

#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/progress.h"
#include "executor/executor.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "miscadmin.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* Bytes of a worker's chunk and of the leader's own. */
#define DP_WORKER_CHUNK		(128 * 1024)
#define DP_LEADER_CHUNK		(64 * 1024)

/* Bytes of each worker's input queue: two chunks. */
#define DP_IN_QUEUE_SIZE	(2 * DP_WORKER_CHUNK + 1024)

/* Bytes read from the input at a time. */
#define DP_READ_SIZE		(1024 * 1024)

/* What precedes a chunk's bytes in its message. */
typedef struct DPChunkHeader
{
	uint64		offset;			/* bytes of the input before it */
	uint64		lines_before;	/* physical lines of the input before it */
	int			eol;			/* EolType in force at its start */
} DPChunkHeader;

/* ---- the chunker (leader) ---- */

typedef struct DPChunker
{
	FILE	   *file;			/* core's, opened by BeginCopyFrom; NULL: the
								 * client's CopyData messages */
	StringInfoData msg;			/* the client's current message */
	bool		copy_done;		/* the client's CopyDone was read */
	bool		csv;
	bool		binary;			/* chunks of whole tuples, each chunk after
								 * a file header of its own */
	char		quotec;			/* CSV only */
	char		escapec;		/* CSV only; '\0' when it is quotec */
	char	   *buf;			/* input bytes [start, end) not yet cut */
	Size		cap;
	Size		start;
	Size		pos;			/* scanned up to here */
	Size		end;
	bool		eof;			/* nothing more to read */
	bool		whole;			/* possible end marker seen: rest is one chunk */
	bool		special[256];	/* bytes the scan must look at one by one */
	uint64		consumed;		/* bytes cut into chunks so far */
	/* the scan's state at 'pos', as CopyReadLineText keeps it */
	int			eol;
	bool		in_quote;
	bool		last_was_esc;
	bool		line_start;
	uint64		lines;			/* lines (binary: tuples) before 'pos' */
	/* the next chunk's start: its lines before and end-of-line style */
	uint64		start_lines;
	int			start_eol;
} DPChunker;

static void
chunker_init(DPChunker *ch, CopyFromState cstate)
{
	memset(ch, 0, sizeof(DPChunker));
	ch->file = cstate->copy_src == COPY_FILE ? cstate->copy_file : NULL;
	initStringInfo(&ch->msg);
	ch->csv = cstate->opts.csv_mode;
	if (ch->csv)
	{
		ch->quotec = cstate->opts.quote[0];
		ch->escapec = cstate->opts.escape[0];
		if (ch->escapec == ch->quotec)
			ch->escapec = '\0';
	}
	/* newlines, escapes and quotes; the others are skipped in a run */
	ch->special[(unsigned char) '\r'] = ch->special[(unsigned char) '\n'] = true;
	ch->special[(unsigned char) '\\'] = true;
	if (ch->csv)
		ch->special[(unsigned char) ch->quotec] =
			ch->special[(unsigned char) ch->escapec] = true;
	ch->binary = cstate->opts.binary;
	ch->cap = 2 * DP_READ_SIZE;
	ch->buf = palloc(ch->cap);
	ch->eol = ch->start_eol = EOL_UNKNOWN;
	ch->line_start = true;

	/*
	 * What BeginCopyFrom read ahead (a binary file's header is read there):
	 * the bytes buffered after it, the rest of the client's message, the
	 * end of the input if it was reached.
	 */
	ch->end = RAW_BUF_BYTES(cstate);
	memcpy(ch->buf, cstate->raw_buf + cstate->raw_buf_index, ch->end);
	if (ch->file == NULL && cstate->fe_msgbuf != NULL &&
		cstate->fe_msgbuf->cursor < cstate->fe_msgbuf->len)
		appendBinaryStringInfo(&ch->msg,
							   cstate->fe_msgbuf->data + cstate->fe_msgbuf->cursor,
							   cstate->fe_msgbuf->len - cstate->fe_msgbuf->cursor);
	ch->copy_done = ch->eof = cstate->raw_reached_eof;
}

/*
 * A byte's effect on the CSV quote state and on the line count (core
 * counts a newline inside quotes as a line).  Returns whether the byte
 * starts a possible end-of-copy marker.
 */
static bool
scan_csv_byte(DPChunker *ch, char c, char next)
{
	if (ch->line_start && c == '\\' && next == '.')
		return true;
	ch->line_start = false;
	if (ch->in_quote && c == ch->escapec)
		ch->last_was_esc = !ch->last_was_esc;
	if (c == ch->quotec && !ch->last_was_esc)
		ch->in_quote = !ch->in_quote;
	if (c != ch->escapec)
		ch->last_was_esc = false;
	if (ch->in_quote && c == (ch->eol == EOL_NL ? '\n' : '\r'))
		ch->lines++;
	return false;
}

/*
 * Does the byte 'c' (followed by 'next') end a line, outside quotes and
 * escapes?  Sets the end-of-line style on the first line, as core does;
 * *step gets the bytes the line end takes.  A newline byte that does not
 * match the style is left for the parser to report, on its line.
 */
static bool
is_line_end(DPChunker *ch, char c, char next, Size *step)
{
	if (c == '\r')
	{
		if (ch->eol == EOL_UNKNOWN || ch->eol == EOL_CRNL)
		{
			if (next == '\n')
			{
				*step = 2;
				ch->eol = EOL_CRNL;
				return true;
			}
			if (ch->eol == EOL_UNKNOWN)
			{
				ch->eol = EOL_CR;
				return true;
			}
			return false;
		}
		return ch->eol == EOL_CR;
	}
	if (c == '\n' && (ch->eol == EOL_UNKNOWN || ch->eol == EOL_NL))
	{
		ch->eol = EOL_NL;
		return true;
	}
	return false;
}

/*
 * Skip a run of bytes that are neither newlines, escapes nor quotes: all
 * they do to the scan's state is end a line's first byte and a CSV escape
 * (core: "if (c != escapec) last_was_esc = false").
 */
static void
skip_ordinary(DPChunker *ch)
{
	const char *p = ch->buf + ch->pos;
	const char *e = ch->buf + ch->end;

	while (p < e && !ch->special[(unsigned char) *p])
		p++;
	ch->pos = p - ch->buf;
	ch->line_start = false;
	ch->last_was_esc = false;
}

/*
 * Scan from 'pos' to the first line end at least 'target' bytes past
 * 'start'; true if found ('pos' is there).  False when the bytes read are
 * used up (a byte whose meaning depends on the next one stays unscanned
 * until that is read) or a possible end marker was seen ('whole').
 */
static bool
scan_lines(DPChunker *ch, Size target)
{
	while (ch->pos < ch->end)
	{
		char		c = ch->buf[ch->pos];
		bool		has_next;
		char		next;
		Size		step = 1;

		if (!ch->special[(unsigned char) c])
		{
			skip_ordinary(ch);
			continue;
		}
		has_next = ch->pos + 1 < ch->end;
		next = has_next ? ch->buf[ch->pos + 1] : '\0';
		if (!has_next && !ch->eof && (c == '\r' || c == '\\'))
			return false;
		if (ch->csv)
		{
			if (scan_csv_byte(ch, c, next))
			{
				ch->whole = true;
				return false;
			}
		}
		else if (c == '\\')
		{
			if (next == '.')
			{
				ch->whole = true;
				return false;
			}
			/* the escaped byte is data, a newline too */
			ch->pos += has_next ? 2 : 1;
			continue;
		}
		if (!ch->in_quote && is_line_end(ch, c, next, &step))
		{
			ch->pos += step;
			ch->lines++;
			ch->line_start = true;
			if (ch->pos - ch->start >= target)
				return true;
			continue;
		}
		ch->pos += step;
	}
	return false;
}

/*
 * The client's next CopyData message into ch->msg; false at CopyDone.  The
 * protocol as core's COPY FROM STDIN reads it: Flush and Sync are ignored,
 * CopyFail fails the statement, anything else is a protocol violation.
 */
static bool
next_copy_message(DPChunker *ch)
{
	for (;;)
	{
		int			mtype;

		HOLD_CANCEL_INTERRUPTS();
		pq_startmsgread();
		mtype = pq_getbyte();
		if (mtype == EOF)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("unexpected EOF on client connection with an open transaction")));
		if (mtype != 'd' && mtype != 'c' && mtype != 'f' && mtype != 'H' &&
			mtype != 'S')
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("unexpected message type 0x%02X during COPY from stdin",
							mtype)));
		if (pq_getmessage(&ch->msg, mtype == 'd' ? PQ_LARGE_MESSAGE_LIMIT :
						  PQ_SMALL_MESSAGE_LIMIT))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("unexpected EOF on client connection with an open transaction")));
		RESUME_CANCEL_INTERRUPTS();
		if (mtype == 'd')
			return true;
		if (mtype == 'c')
			return false;
		if (mtype == 'f')
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("COPY from stdin failed: %s",
							pq_getmsgstring(&ch->msg))));
		/* Flush, Sync: clients may send them without noticing the COPY */
	}
}

/* Up to 'max' bytes of the client's COPY data; 0 at its end. */
static size_t
read_frontend(DPChunker *ch, char *buf, size_t max)
{
	size_t		n = 0;

	while (n < max && !ch->copy_done)
	{
		int			avail;

		if (ch->msg.cursor >= ch->msg.len)
		{
			ch->copy_done = !next_copy_message(ch);
			continue;
		}
		avail = Min(ch->msg.len - ch->msg.cursor, (int) (max - n));
		pq_copymsgbytes(&ch->msg, buf + n, avail);
		n += avail;
	}
	return n;
}

/* A big-endian integer of 'n' bytes at 'p' (2 or 4). */
static int32
get_int(const char *p, int n)
{
	uint32		v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | (unsigned char) p[i];
	return n == 2 ? (int32) (int16) v : (int32) v;
}

/*
 * Binary format: scan whole tuples (a field count, then per field a
 * length and that many bytes, -1 for NULL) from 'pos' until at least
 * 'target' bytes past 'start'; true if there.  False when the bytes read
 * end inside a tuple, or at the trailer or a malformed length ('whole':
 * the rest of the input is one chunk, whose parser reports what core
 * reports).
 */
static bool
scan_tuples(DPChunker *ch, Size target)
{
	while (ch->end - ch->pos >= 2)
	{
		Size		p = ch->pos + 2;
		int32		nfields = get_int(ch->buf + ch->pos, 2);

		if (nfields < 0)
		{
			ch->whole = true;
			return false;
		}
		for (int i = 0; i < nfields; i++)
		{
			int32		len;

			if (ch->end - p < 4)
				return false;
			len = get_int(ch->buf + p, 4);
			p += 4;
			if (len < -1)
			{
				ch->whole = true;
				return false;
			}
			if (len > 0 && ch->end - p < (Size) len)
				return false;
			p += Max(len, 0);
		}
		ch->pos = p;
		ch->lines++;
		if (ch->pos - ch->start >= target)
			return true;
	}
	return false;
}

/* Read more input after what is there, keeping [start, end). */
static void
read_more(DPChunker *ch)
{
	size_t		n;

	if (ch->start > 0)
	{
		memmove(ch->buf, ch->buf + ch->start, ch->end - ch->start);
		ch->end -= ch->start;
		ch->pos -= ch->start;
		ch->start = 0;
	}
	if (ch->cap - ch->end < DP_READ_SIZE)
	{
		ch->cap *= 2;
		ch->buf = repalloc_huge(ch->buf, ch->cap);
	}
	if (ch->file == NULL)
		n = read_frontend(ch, ch->buf + ch->end, DP_READ_SIZE);
	else
		n = fread(ch->buf + ch->end, 1, ch->cap - ch->end, ch->file);
	if (n == 0)
	{
		if (ch->file != NULL && ferror(ch->file))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read from COPY file: %m")));
		ch->eof = true;
	}
	ch->end += n;
}

/*
 * A binary file's header for each chunk (core's reader expects one): the
 * signature, no flags, no extension.  The input's own was checked by the
 * leader's BeginCopyFrom.
 */
static const char binary_header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

/*
 * The message for the chunk [start, upto): its header, (binary: a file
 * header,) then its bytes.
 */
static char *
cut(DPChunker *ch, Size upto, Size *len)
{
	DPChunkHeader h = {ch->consumed, ch->start_lines, ch->start_eol};
	Size		prefix = ch->binary ? sizeof(binary_header) : 0;
	char	   *msg;

	*len = sizeof(h) + prefix + (upto - ch->start);
	msg = palloc(*len);
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), binary_header, prefix);
	memcpy(msg + sizeof(h) + prefix, ch->buf + ch->start, upto - ch->start);
	ch->consumed += upto - ch->start;
	ch->start = upto;
	ch->start_lines = ch->lines;
	ch->start_eol = ch->eol;
	return msg;
}

/*
 * The next chunk of whole lines, at least 'target' bytes unless it is the
 * last, as a message (palloc'd; *len its size); NULL at the end of the
 * input.
 */
static char *
next_chunk(DPChunker *ch, Size target, Size *len)
{
	for (;;)
	{
		if (!ch->whole &&
			(ch->binary ? scan_tuples(ch, target) : scan_lines(ch, target)))
			return cut(ch, ch->pos, len);
		if (ch->eof)
			return ch->end > ch->start ? cut(ch, ch->end, len) : NULL;
		CHECK_FOR_INTERRUPTS();
		read_more(ch);
	}
}

/* ---- parsing a chunk (workers and the leader) ---- */

/* The chunk being parsed: data_source_cb has no argument of its own. */
static const char *chunk_data;
static Size chunk_len;
static Size chunk_pos;

static int
read_chunk(void *outbuf, int minread, int maxread)
{
	Size		n = Min((Size) maxread, chunk_len - chunk_pos);

	memcpy(outbuf, chunk_data + chunk_pos, n);
	chunk_pos += n;
	return (int) n;
}

/* What a process needs to parse chunks and place their rows. */
typedef struct DPChunkParser
{
	Relation	target;
	ParseState *pstate;
	List	   *attlist;		/* the COPY's column list */
	List	   *options;		/* its options, core's only, ENCODING set */
	int			client_encoding;	/* the leader's, for binary input */
	ExprState  *qual;			/* its WHERE clause, or NULL */
	TupleTableSlot *slot;
	DPPlacer	placer;
	/* the leader's: put COPY's progress row back (BeginCopyFrom resets it) */
	void		(*restore_progress) (void *arg);
	void	   *progress_arg;
} DPChunkParser;

/*
 * The leader's payload for every parser: the WHERE clause, the column list,
 * the options and the leader's client encoding.
 *
 * Encodings.  A parallel worker's client encoding is the database's (core's
 * ParallelWorkerMain sets it so, since the messages a worker sends are read
 * by the leader as server text), so a worker's BeginCopyFrom would take the
 * client's bytes as database text.  Every parser is therefore given the
 * encoding the leader's BeginCopyFrom chose (the ENCODING option, else the
 * client encoding) as an explicit ENCODING option: core's reader then
 * converts and verifies each chunk exactly as it does serially.  Chunks are
 * cut at newline bytes, which in the encodings allowed here (not
 * PG_ENCODING_IS_CLIENT_ONLY) never occur inside a character, so no
 * character spans two chunks.  Binary input ignores ENCODING; there the
 * receive functions of text types convert from the session's client
 * encoding (pq_getmsgtext): see database_encoding_callback.
 */
static List *
make_payload(Node *where, List *attlist, List *options, CopyFromState cstate)
{
	List	   *opts = NIL;
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst_node(DefElem, lc);

		if (cstate->opts.binary || strcmp(d->defname, "encoding") != 0)
			opts = lappend(opts, d);
	}
	if (!cstate->opts.binary)
		opts = lappend(opts,
					   makeDefElem("encoding",
								   (Node *) makeString(pstrdup(pg_encoding_to_char(cstate->file_encoding))),
								   -1));
	return list_make4(where, attlist, opts,
					  makeInteger(pg_get_client_encoding()));
}

static void
parser_begin(DPChunkParser *p, Relation target, List *payload)
{
	p->target = target;
	p->pstate = make_parsestate(NULL);
	p->attlist = (List *) lsecond(payload);
	p->options = (List *) lthird(payload);
	p->client_encoding = intVal(lfourth(payload));
	if (p->client_encoding != pg_get_client_encoding() &&
		PrepareClientEncoding(p->client_encoding) < 0)
		elog(ERROR, "could not prepare client encoding %s",
			 pg_encoding_to_char(p->client_encoding));
	p->qual = linitial(payload) ? ExecInitQual((List *) linitial(payload), NULL) : NULL;
	p->slot = MakeSingleTupleTableSlot(RelationGetDescr(target), &TTSOpsVirtual);
	p->restore_progress = NULL;
}

static void
parser_end(DPChunkParser *p)
{
	dp_placer_end(&p->placer);
	ExecDropSingleTupleTableSlot(p->slot);
	free_parsestate(p->pstate);
}

/*
 * Binary input in a worker whose leader's client encoding is not the
 * database's: the receive functions of text types convert from the
 * session's client encoding (pq_getmsgtext), so the worker takes the
 * leader's while core's reader reads a row, and the database's again
 * after it.  A message raised meanwhile (any level) must still reach the
 * leader as server text: errfinish runs this error context callback before
 * the message is sent, and it puts the database's encoding back.
 */
static void
database_encoding_callback(void *arg)
{
	SetClientEncoding(GetDatabaseEncoding());
}

/*
 * Read the next row of the chunk into the slot; false at its end.
 * 'client_encoding': the encoding to read it in (database_encoding_callback),
 * or -1.
 */
static bool
parse_row(DPChunkParser *p, CopyFromState cstate, ExprContext *econtext,
		  int client_encoding)
{
	MemoryContext old;
	bool		more;

	ResetExprContext(econtext);
	ExecClearTuple(p->slot);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	if (client_encoding >= 0)
		SetClientEncoding(client_encoding);
	more = NextCopyFrom(cstate, econtext, p->slot->tts_values,
						p->slot->tts_isnull);
	if (client_encoding >= 0)
		SetClientEncoding(GetDatabaseEncoding());
	MemoryContextSwitchTo(old);
	if (more)
	{
		ExecStoreVirtualTuple(p->slot);
		p->slot->tts_tableOid = RelationGetRelid(p->target);
	}
	return more;
}

/* Parse one chunk message with core's COPY reader; place its rows. */
static void
parse_chunk(DPChunkParser *p, const char *msg, Size len)
{
	DPChunkHeader h;
	ExprContext *econtext = GetPerTupleExprContext(p->placer.estate);
	ErrorContextCallback errcallback;
	ErrorContextCallback enccallback;
	CopyFromState cstate;
	int			client_encoding = -1;

	memcpy(&h, msg, sizeof(h));
	chunk_data = msg + sizeof(h);
	chunk_len = len - sizeof(h);
	chunk_pos = 0;
	cstate = BeginCopyFrom(p->pstate, p->target, NULL, NULL, false,
						   read_chunk, p->attlist, p->options);
	/* the chunk's place in the input; only the first has the header */
	cstate->cur_lineno = h.lines_before;
	cstate->eol_type = (EolType) h.eol;
	cstate->bytes_processed = h.offset;
	if (p->restore_progress)
		p->restore_progress(p->progress_arg);

	errcallback.callback = CopyFromErrorCallback;
	errcallback.arg = (void *) cstate;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	if (cstate->opts.binary && p->client_encoding != pg_get_client_encoding())
	{
		client_encoding = p->client_encoding;
		enccallback.callback = database_encoding_callback;
		enccallback.arg = NULL;
		enccallback.previous = error_context_stack;
		error_context_stack = &enccallback;
	}
	while (parse_row(p, cstate, econtext, client_encoding))
	{
		CHECK_FOR_INTERRUPTS();
		econtext->ecxt_scantuple = p->slot;
		if (p->qual != NULL && !ExecQual(p->qual, econtext))
			continue;
		dp_placer_add(&p->placer, p->slot);
	}
	error_context_stack = errcallback.previous;
	EndCopyFrom(cstate);
	if (p->restore_progress)
		p->restore_progress(p->progress_arg);
}

/* A worker of a COPY: parse each chunk the leader sends, place its rows. */
void
dp_parcopy_main(dsm_segment *seg, shm_toc *toc)
{
	DPWorker	w;
	DPChunkParser p;

	dp_worker_begin(&w, seg, toc);
	dp_placer_begin_worker(&p.placer, &w);
	parser_begin(&p, w.target, (List *) stringToNode(w.payload));
	for (;;)
	{
		Size		len;
		void	   *data;

		if (shm_mq_receive(w.in, &len, &data, false) != SHM_MQ_SUCCESS)
			break;				/* detached: the input is done */
		parse_chunk(&p, data, len);
	}
	parser_end(&p);
	dp_worker_end(&w);
}

/* ---- the leader ---- */

/* The leader's COPY: its chunker, the chunks waiting to be sent, its own parser. */
typedef struct DPCopyFeed
{
	DPChunker	ch;
	bool		input_done;		/* every byte is in a chunk */
	bool		worker_lost;	/* a worker's input queue detached early */
	char	  **pending;		/* per worker: a chunk not sent yet, or NULL */
	Size	   *pending_len;
	DPChunkParser own;
	DPLoad	   *load;
	Oid			relid;
	int64		progress[5];	/* pg_stat_progress_copy's, to restore */
} DPCopyFeed;

static const int progress_index[5] = {
	PROGRESS_COPY_COMMAND, PROGRESS_COPY_TYPE, PROGRESS_COPY_BYTES_TOTAL,
	PROGRESS_COPY_BYTES_PROCESSED, PROGRESS_COPY_TUPLES_PROCESSED
};

/* Bytes read and rows loaded, in pg_stat_progress_copy. */
static void
update_progress(DPCopyFeed *f)
{
	f->progress[3] = f->ch.consumed;
	f->progress[4] = dp_load_report(f->load)->rows;
	pgstat_progress_update_multi_param(2, progress_index + 3, f->progress + 3);
}

/*
 * COPY's progress row again, after a chunk's BeginCopyFrom or EndCopyFrom
 * replaced or ended it.  While the leader parses a chunk, core's reader
 * updates the bytes read from the chunk's offset in the input.
 */
static void
restore_progress(void *arg)
{
	DPCopyFeed *f = arg;

	pgstat_progress_start_command(PROGRESS_COMMAND_COPY, f->relid);
	pgstat_progress_update_multi_param(3, progress_index, f->progress);
	update_progress(f);
}

/* Send worker i's waiting chunk, or cut one for it; true if one went. */
static bool
feed_one(DPCopyFeed *f, DPParallel *par, int i)
{
	shm_mq_handle *in = dp_parallel_input(par, i);
	shm_mq_result r;

	if (f->pending[i] == NULL && !f->input_done)
	{
		f->pending[i] = next_chunk(&f->ch, DP_WORKER_CHUNK, &f->pending_len[i]);
		f->input_done = f->pending[i] == NULL;
		update_progress(f);
	}
	if (f->pending[i] == NULL)
	{
		dp_parallel_input_done(par, i);
		return false;
	}
	r = shm_mq_send(in, f->pending_len[i], f->pending[i], true, true);
	if (r == SHM_MQ_WOULD_BLOCK)
		return false;
	if (r == SHM_MQ_DETACHED)
	{
		/* the worker is gone; finishing reports its error */
		f->worker_lost = true;
		f->input_done = true;
	}
	pfree(f->pending[i]);
	f->pending[i] = NULL;
	return true;
}

static bool
feed(void *arg, DPParallel *par)
{
	DPCopyFeed *f = arg;
	bool		moved = false;

	for (int i = 0; i < dp_parallel_workers_launched(par); i++)
		if (dp_parallel_input(par, i) != NULL && feed_one(f, par, i))
			moved = true;
	return moved;
}

/* The leader's own share: parse one small chunk. */
static bool
leader_step(void *arg)
{
	DPCopyFeed *f = arg;
	Size		len;
	char	   *msg;

	if (f->input_done)
		return false;
	msg = next_chunk(&f->ch, DP_LEADER_CHUNK, &len);
	if (msg == NULL)
	{
		f->input_done = true;
		return false;
	}
	parse_chunk(&f->own, msg, len);
	pfree(msg);
	return true;
}

/* Is the input a server file (not a program or the client)?  *st its stat. */
static bool
input_file(CopyFromState cstate, struct stat *st)
{
	return cstate->copy_src == COPY_FILE && !cstate->is_program &&
		fstat(fileno(cstate->copy_file), st) == 0;
}

/* Why this COPY's input or columns cannot be split, or NULL. */
static const char *
input_refusal(CopyFromState cstate, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ListCell   *lc;
	struct stat st;

	if (dp_copy_skips_errors(cstate))
		return "it has ON_ERROR";
	if (!cstate->opts.binary && PG_ENCODING_IS_CLIENT_ONLY(cstate->file_encoding))
		return psprintf("its encoding %s is not ASCII-safe (a character's second byte can be a backslash, quote or delimiter)",
						pg_encoding_to_char(cstate->file_encoding));
	foreach(lc, cstate->attnumlist)
	{
		Form_pg_attribute att = TupleDescAttr(desc, lfirst_int(lc) - 1);
		Oid			func;
		Oid			ioparam;

		if (get_typtype(att->atttypid) == TYPTYPE_DOMAIN)
			return "a column's type is a domain";
		getTypeInputInfo(att->atttypid, &func, &ioparam);
		if (func_parallel(func) != PROPARALLEL_SAFE)
			return "a column's input function is not parallel safe";
	}
	if (input_file(cstate, &st) && S_ISREG(st.st_mode) &&
		st.st_size < dp_min_bytes)
		return "the file is smaller than directpath.min_bytes";
	return NULL;
}

/* The leader's progress row as BeginCopyFrom set it. */
static void
save_progress(DPCopyFeed *f, CopyFromState cstate)
{
	struct stat st;

	f->progress[0] = PROGRESS_COPY_COMMAND_FROM;
	f->progress[1] = cstate->copy_src != COPY_FILE ? PROGRESS_COPY_TYPE_PIPE :
		cstate->is_program ? PROGRESS_COPY_TYPE_PROGRAM : PROGRESS_COPY_TYPE_FILE;
	f->progress[2] = input_file(cstate, &st) ? st.st_size : 0;
}

/* Steps 1 and 2: chunks to the workers and to the leader's own parser. */
static void
run(DPCopyFeed *f, DPParallel *par, DPParallelShared *sh, DPLoad *load,
	ResultRelInfo *rri, List *payload)
{
	int			n = dp_parallel_workers_launched(par);
	DPLeaderShare share = {feed, leader_step, f};

	f->pending = palloc0(sizeof(char *) * n);
	f->pending_len = palloc0(sizeof(Size) * n);
	dp_placer_begin_leader(&f->own.placer, sh, load, rri);
	parser_begin(&f->own, rri->ri_RelationDesc, payload);
	f->own.restore_progress = restore_progress;
	f->own.progress_arg = f;
	dp_parallel_receive(par, load, rri, &share);
	parser_end(&f->own);
}

bool
dp_parallel_copy(DPLoad *load, CopyFromState cstate, ModifyTableState *mt,
				 Node *where, List *attlist, List *options, int nworkers,
				 uint64 *processed)
{
	ResultRelInfo *rri = mt->resultRelInfo;
	const char *why = dp_parallel_target_refusal(mt);
	DPParallelShared sh = {0};
	DPCopyFeed	f = {0};
	List	   *payload = make_payload(where, attlist, options, cstate);
	DPParallel *par;
	int			launched;

	if (why == NULL)
		why = input_refusal(cstate, rri->ri_RelationDesc);
	if (why != NULL)
	{
		dp_load_note_parallel(load, 0, why);
		return false;
	}

	sh.target = RelationGetRelid(rri->ri_RelationDesc);
	sh.xid = GetCurrentTransactionId();
	sh.cid = GetCurrentCommandId(true);
	sh.frozen = dp_load_pages_begin(load, rri);
	sh.in_queue_size = DP_IN_QUEUE_SIZE;
	par = dp_parallel_launch(&sh, "dp_parcopy_main", nodeToString(payload),
							 NULL, nworkers);
	launched = dp_parallel_workers_launched(par);
	if (launched > 0)
	{
		chunker_init(&f.ch, cstate);
		f.load = load;
		f.relid = sh.target;
		save_progress(&f, cstate);
		run(&f, par, &sh, load, rri, payload);
	}
	dp_parallel_finish(par);
	if (launched == 0)
	{
		dp_load_note_parallel(load, 0, "no parallel worker could be started");
		return false;
	}
	if (f.worker_lost)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("directpath: a parallel worker ended before it had read its input")));
	dp_load_note_parallel(load, launched, NULL);
	*processed = dp_load_report(load)->rows;
	return true;
}
