/*-------------------------------------------------------------------------
 *
 * chunker.c
 *	  A parallel COPY's input cut into chunks that core's COPY reader can
 *	  parse independently (parcopy.c hands them to workers and the leader).
 *
 * Algorithm.  The leader has opened the input with core's BeginCopyFrom;
 * the chunker reads the raw bytes itself: from the file or pipe core
 * opened, or the client's CopyData messages, read as core reads them
 * (Flush and Sync ignored, CopyFail an error, CopyDone the end).  It scans
 * them as core's CopyReadLineText does: the end-of-line style fixed by the
 * first line (\n, \r or \r\n), in text format a backslash escaping the
 * next byte, in CSV the quote and escape state, so that a newline inside a
 * quoted field does not end a line; runs of other bytes are skipped by a
 * vectorized search for the special ones (scan.c).  A chunk is cut at the first line end at
 * least the asked size past its start, and carries (DPChunkHeader) the
 * bytes and physical lines before it (counted as core counts cur_lineno,
 * quoted newlines included) and the end-of-line style in force.  Binary
 * input is cut after whole tuples (a field count, then each field's length
 * and bytes), each chunk given a file header of its own; the input's own
 * header was read and checked by BeginCopyFrom, and what it read ahead
 * seeds the chunker.
 *
 * Invariants.
 * - Every byte of the input is in exactly one chunk, in input order, and
 *	 chunks are cut only at line ends (never inside a quoted field or after
 *	 an escaping backslash) or tuple ends.
 * - A cut is a newline byte, which in the encodings a parallel COPY
 *	 accepts (ASCII-safe ones) never occurs inside a character: no
 *	 character spans two chunks.
 * - Once a possible end-of-copy marker (\. where core looks for one; in
 *	 binary the trailer or a malformed length) is seen, the rest of the
 *	 input goes into one chunk, so what follows the marker is handled
 *	 exactly as core handles it, in every release.
 * - A byte whose meaning depends on the next one (\r, a backslash) is not
 *	 scanned until the next one is read.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"

/* Bytes read from the input at a time. */
#define DP_READ_SIZE		(1024 * 1024)

struct DPChunker
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
	char		specials[DP_SCAN_MAX_SPECIALS]; /* the same, listed */
	int			nspecials;
	char		block[DP_BLOCK_BYTES];	/* count_lines' bitmaps: \n, \\, \r,
										 * the quote (text: the dot), the
										 * escape */
	Size		no_count_until; /* pos before which counting failed */
	uint64		consumed;		/* bytes cut into chunks so far */
	uint64		chunks;			/* chunks cut so far */
	/* the scan's state at 'pos', as CopyReadLineText keeps it */
	int			eol;
	bool		in_quote;
	bool		last_was_esc;
	bool		line_start;
	uint64		lines;			/* lines (binary: tuples) before 'pos' */
	/* the next chunk's start: its lines before and end-of-line style */
	uint64		start_lines;
	int			start_eol;
};

/*
 * The chunker of the input that the leader's BeginCopyFrom opened, seeded
 * with what that read ahead.
 */
DPChunker *
dp_chunker_begin(CopyFromState cstate)
{
	DPChunker  *ch = palloc0(sizeof(DPChunker));

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
	for (int c = 0; c < 256; c++)
		if (ch->special[c])
			ch->specials[ch->nspecials++] = (char) c;
	/*
	 * the quote's map holds the dots in text (an escaped one may be an end
	 * marker); for an absent escape, \r stands in: never counted
	 */
	ch->block[0] = '\n';
	ch->block[1] = '\\';
	ch->block[2] = ch->block[4] = '\r';
	ch->block[3] = ch->csv ? ch->quotec : '.';
	if (ch->csv && ch->escapec != '\0')
		ch->block[4] = ch->escapec;
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
	return ch;
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

	p = dp_scan_next(ch->specials, ch->nspecials, p, e);
	ch->pos = p - ch->buf;
	ch->line_start = false;
	ch->last_was_esc = false;
}

/*
 * A CSV block's lines, when nothing in it needs the byte-by-byte scan: the
 * quotes toggle the quote state (the escape is the quote, or absent from
 * the block), so a newline is inside quotes when an odd number of quotes
 * precede it - the block's prefix parity, flipped when a quote was open
 * before it; core counts every newline as a line, quoted ones too.  A
 * backslash at a line's start could begin an end marker: byte by byte.
 */
static bool
csv_block(DPChunker *ch, const uint64 *m)
{
	uint64		inq = m[3];
	uint64		ends;

	for (int shift = 1; shift < 64; shift <<= 1)
		inq ^= inq << shift;
	if (ch->in_quote)
		inq = ~inq;
	ends = m[0] & ~inq;
	if (m[1] & ((ends << 1) | (ch->line_start ? 1 : 0)))
		return false;
	ch->lines += pg_popcount64(m[0]);
	ch->in_quote = (inq >> 63) != 0;
	ch->line_start = (ends >> 63) != 0;
	return true;
}

/*
 * A text block's lines: a backslash makes the next byte data (an escaped
 * newline ends no line), so runs of backslashes, a backslash whose byte is
 * in the next block, and a possible end marker (\.) take the byte-by-byte
 * scan.
 */
static bool
text_block(DPChunker *ch, const uint64 *m)
{
	uint64		escaped = m[1] << 1;
	uint64		ends;

	if (m[1] & ((m[1] << 1) | (UINT64CONST(1) << 63)))
		return false;
	/* an escaped dot (m[3] holds the dots in text) */
	if (escaped & m[3])
		return false;
	ends = m[0] & ~escaped;
	ch->lines += pg_popcount64(ends);
	ch->line_start = (ends >> 63) != 0;
	return true;
}

/*
 * Pass over whole 64-byte blocks that cannot hold the cut, counting their
 * lines from their bitmaps (dp_scan_block), while the line style is \n and
 * the blocks hold no carriage return and no CSV escape other than the
 * quote; csv_block and text_block take quotes and backslashes.  A cut
 * comes only after 'target' bytes past 'start', so only blocks ending
 * before that are passed over.  False if none was.
 */
static bool
count_lines(DPChunker *ch, Size target)
{
	Size		from = ch->pos;

	if (ch->eol != EOL_NL || ch->last_was_esc || ch->pos < ch->no_count_until ||
		ch->pos + 64 > ch->end || ch->pos + 64 - ch->start >= target)
		return false;
	while (ch->pos + 64 <= ch->end && ch->pos + 64 - ch->start < target)
	{
		const char *p = ch->buf + ch->pos;
		uint64		m[DP_BLOCK_BYTES];

		dp_scan_block(p, ch->block, m);
		if ((m[2] | m[4]) != 0 ||
			!(ch->csv ? csv_block(ch, m) : text_block(ch, m)))
			break;
		ch->pos += 64;
	}
	if (ch->pos == from)
	{
		/* the block needs the byte-by-byte scan */
		ch->no_count_until = ch->pos + 64;
		return false;
	}
	return true;
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

		if (count_lines(ch, target))
			continue;
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
		int32		nfields = dp_get_net_int(ch->buf + ch->pos, 2);

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
			len = dp_get_net_int(ch->buf + p, 4);
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
		ch->no_count_until -= Min(ch->no_count_until, ch->start);
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
const char	dp_binary_header[DP_BINARY_HEADER_LEN] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

/*
 * The message for the chunk [start, upto): its header, (binary: a file
 * header,) then its bytes.
 */
static char *
cut(DPChunker *ch, Size upto, Size *len)
{
	DPChunkHeader h = {ch->consumed, ch->start_lines, ch->start_eol,
	ch->chunks};
	Size		prefix = ch->binary ? DP_BINARY_HEADER_LEN : 0;
	char	   *msg;

	ch->chunks++;

	*len = sizeof(h) + prefix + (upto - ch->start);
	msg = palloc(*len);
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), dp_binary_header, prefix);
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
char *
dp_chunker_next(DPChunker *ch, Size target, Size *len)
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

/* Bytes of the input cut into chunks so far. */
uint64
dp_chunker_consumed(DPChunker *ch)
{
	return ch->consumed;
}

/*
 * Core's COPY reader over bytes in memory: a chunk (parcopy.c), or the rest
 * of one that the row former hands on (rowform.c).  BeginCopyFrom's
 * data_source_cb has no argument, so the bytes are in static variables:
 * only the reader begun last may read, which holds because each is read to
 * its end (or its error) before the next one begins; one begun over no
 * bytes, for its column and option state only, never reads (a text or CSV
 * BeginCopyFrom reads nothing).
 */
static const char *memory_data;
static Size memory_len;
static Size memory_pos;

static int
read_memory(void *outbuf, int minread, int maxread)
{
	Size		n = Min((Size) maxread, memory_len - memory_pos);

	memcpy(outbuf, memory_data + memory_pos, n);
	memory_pos += n;
	return (int) n;
}

CopyFromState
dp_copy_from_memory(ParseState *pstate, Relation rel, List *attlist,
					List *options, const char *data, Size len)
{
	memory_data = data;
	memory_len = len;
	memory_pos = 0;
	return BeginCopyFrom(pstate, rel, NULL, NULL, false, read_memory,
						 attlist, options);
}
