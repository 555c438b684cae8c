/*-------------------------------------------------------------------------
 *
 * parcopy.c
 *	  COPY FROM a file, a program or the client (STDIN), cut into chunks
 *	  of whole lines parsed by workers and the leader (parallel.c has the
 *	  load's context, parmsg.c the pages' way to the leader).
 *
 * Asked for as a parallel INSERT is (/\*+ APPEND PARALLEL(n) *\/ before
 * COPY, or directpath.parallel_workers), for text, CSV and binary input
 * from a file, a program or the client, text and CSV in an ASCII-safe
 * encoding (not SJIS, BIG5, GBK, UHC or GB18030, whose second bytes can be
 * a backslash or a quote), into a target dp_parallel_begin accepts, when
 * every column's input function, every default COPY evaluates and the
 * WHERE clause are parallel safe, there is no ON_ERROR other than stop and
 * no rejects table (copy.c), and a file is not smaller than
 * directpath.min_bytes.  Otherwise the COPY runs serially, and
 * last_statement().parallel says why.
 *
 * Algorithm.
 * 1. The leader has opened the input with core's BeginCopyFrom (its
 *	  errors, privileges and progress row are core's; for STDIN it has told
 *	  the client to start sending); the chunker (chunker.c) reads the rest
 *	  and cuts it into chunks of whole lines (binary: whole tuples), each
 *	  with the number of lines before it and the end-of-line style in force.
 * 2. Chunks of DP_WORKER_CHUNK bytes go to the workers, each through its
 *	  own input queue, sent without waiting; whenever nothing else is to be
 *	  done the leader parses a smaller chunk itself (dp_parallel_receive's
 *	  'step').  At the end of the input the input queues are detached, so
 *	  each worker hands on its last partial page and ends.
 * 3. A chunk is read by the row former (input/rowform.c), given the
 *	  lines (binary: tuples) before the chunk and the end-of-line style in
 *	  force; a chunk of a COPY the former does not take, by core's own
 *	  reader over the chunk's bytes (dp_copy_from_memory), its line counter
 *	  and end-of-line style set the same way.  Either way a row's
 *	  errors carry the file's line number ("COPY t, line N"); the WHERE
 *	  clause filters, and a placer (placer.c) checks constraints and
 *	  forms the row on a page.
 *	  Every parser reads the input in the encoding the leader's COPY chose
 *	  (make_payload), and binary input's text values in the leader's
 *	  client encoding (database_encoding_callback): a worker's own client
 *	  encoding is the database's.
 * 4. A row routed to a held partition (parcheck.c: its triggers, foreign
 *	  keys or constraints need the leader) goes to the leader with its
 *	  input line; once the workers are done and parallel mode is left, the
 *	  leader loads those rows as a serial COPY does, each naming its line
 *	  in its errors (held_error_callback), and so do the checks left
 *	  for the end of the load.
 *
 * Invariants.
 * - A chunk's rows are parsed exactly as core would parse them at that
 *	 place of the input (chunker.c's invariants say why its cuts allow
 *	 that): same bytes, same line numbers, same end-of-line rule, the
 *	 header (if any) only in the first chunk, which alone starts at line 0.
 * - The leader never waits on an input queue: a chunk that does not fit
 *	 waits in the leader's memory (one per worker) and is sent later.
 *
 * What differs from a serial COPY: rows reach the table in another order;
 * when several rows are bad, the one reported is the first one a process
 * reaches, not necessarily the first in the file; pg_stat_progress_copy
 * counts bytes read to within a chunk.  Rows excluded by WHERE are counted
 * by each process per chunk in the shared state, which the leader reads
 * into the progress row.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "input/input.h"
#include "load/load.h"

#include <sys/stat.h>
#include "common/fault.h"
#include "common/settings.h"

#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/progress.h"
#include "executor/executor.h"
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

/*
 * The leader's own chunk of an in-order COPY: each ends the leader's page
 * partly empty and a worker's run of adjacent chunks (parorder.c), so
 * fewer, larger ones (eight times under ON CONFLICT: denser probes).
 */
#define DP_LEADER_ORDERED_CHUNK (256 * 1024)

/*
 * Bytes of each worker's input queue: 32 chunks shared among the workers,
 * at least eight each, so that a worker has input while the leader writes
 * a batch or parses.
 */
#define DP_IN_QUEUE_CHUNKS(nworkers) Max(8, 32 / Max((nworkers), 1))
#define DP_IN_QUEUE_SIZE(nworkers) \
	((Size) DP_IN_QUEUE_CHUNKS(nworkers) * DP_WORKER_CHUNK + 1024)

/* ---- parsing a chunk (workers and the leader) ---- */

/* What a process needs to parse chunks and place their rows. */
typedef struct DPChunkParser
{
	Relation	target;
	ParseState *pstate;
	List	   *attlist;		/* the COPY's column list */
	List	   *options;		/* its options, core's only, ENCODING set */
	int			client_encoding;	/* the leader's, for binary input */
	ExprState  *qual;			/* its WHERE clause, or NULL */
	pg_atomic_uint64 *excluded; /* the shared count of rows it excluded */
	TupleTableSlot *slot;
	DPPlacer	placer;
	/* text and CSV: the row former and the COPY state it forms rows for */
	CopyFromState rows_cstate;
	DPRowFormer *rf;
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

/* FORMAT binary among the options (BeginCopyFrom reads a header). */
static bool
binary_format(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst_node(DefElem, lc);

		if (strcmp(d->defname, "format") == 0 &&
			strcmp(defGetString(d), "binary") == 0)
			return true;
	}
	return false;
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
	p->rows_cstate = NULL;
	p->rf = NULL;
	if (dp_copy_row_former)
	{
		bool		binary = binary_format(p->options);

		/* core's state for the COPY's columns and options, reading nothing */
		p->rows_cstate = dp_copy_from_memory(p->pstate, target, p->attlist,
											 p->options,
											 binary ? dp_binary_header : NULL,
											 binary ? DP_BINARY_HEADER_LEN : 0);
		if (dp_rowform_refusal(p->rows_cstate) == NULL)
		{
			dp_fastin_install(p->rows_cstate);
			p->rf = dp_rowform_begin(p->rows_cstate, p->pstate, p->attlist,
									 p->options);
		}
	}
}

static void
parser_end(DPChunkParser *p)
{
	if (p->rows_cstate)
	{
		EndCopyFrom(p->rows_cstate);
		if (p->restore_progress)
			p->restore_progress(p->progress_arg);
	}
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

/*
 * The client encoding to read a chunk's rows in, or -1: binary input's
 * text values are in the leader's; then 'cb' goes on the error context
 * stack, to give errors the worker's own back.
 */
static int
chunk_encoding(DPChunkParser *p, bool binary, ErrorContextCallback *cb)
{
	if (!binary || p->client_encoding == pg_get_client_encoding())
		return -1;
	cb->callback = database_encoding_callback;
	cb->arg = NULL;
	cb->previous = error_context_stack;
	error_context_stack = cb;
	return p->client_encoding;
}

/* Form the rows of a chunk with the row former; place them. */
static void
form_chunk(DPChunkParser *p, const DPChunkHeader *h, const char *data,
		   Size len)
{
	ExprContext *econtext = GetPerTupleExprContext(p->placer.estate);
	ErrorContextCallback errcallback;
	ErrorContextCallback enccallback;
	int			client_encoding;
	uint64		excluded = 0;

	errcallback.callback = dp_rowform_error_callback;
	errcallback.arg = (void *) p->rf;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	client_encoding = chunk_encoding(p, p->rows_cstate->opts.binary,
									 &enccallback);
	dp_rowform_chunk(p->rf, data, len, h);
	p->placer.lineno = &p->rows_cstate->cur_lineno;
	for (;;)
	{
		MemoryContext old;
		bool		more;

		CHECK_FOR_INTERRUPTS();
		ResetExprContext(econtext);
		ExecClearTuple(p->slot);
		old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
		if (client_encoding >= 0)
			SetClientEncoding(client_encoding);
		more = dp_rowform_next(p->rf, econtext, p->slot->tts_values,
							   p->slot->tts_isnull);
		if (client_encoding >= 0)
			SetClientEncoding(GetDatabaseEncoding());
		MemoryContextSwitchTo(old);
		if (!more)
			break;
		ExecStoreVirtualTuple(p->slot);
		p->slot->tts_tableOid = RelationGetRelid(p->target);
		econtext->ecxt_scantuple = p->slot;
		if (p->qual != NULL && !ExecQual(p->qual, econtext))
		{
			excluded++;
			continue;
		}
		dp_placer_add(&p->placer, p->slot);
	}
	error_context_stack = errcallback.previous;
	if (excluded > 0)
		pg_atomic_fetch_add_u64(p->excluded, excluded);
}

/*
 * Parse one chunk message, with the row former or core's COPY reader;
 * place its rows.
 */
static void
parse_chunk(DPChunkParser *p, const char *msg, Size len)
{
	DPChunkHeader h;
	ExprContext *econtext = GetPerTupleExprContext(p->placer.estate);
	ErrorContextCallback errcallback;
	ErrorContextCallback enccallback;
	CopyFromState cstate;
	int			client_encoding;
	uint64		excluded = 0;

	memcpy(&h, msg, sizeof(h));
	if (p->rf)
	{
		form_chunk(p, &h, msg + sizeof(h), len - sizeof(h));
		return;
	}
	cstate = dp_copy_from_memory(p->pstate, p->target, p->attlist,
								 p->options, msg + sizeof(h), len - sizeof(h));
	/* the chunk's place in the input; only the first has the header */
	cstate->cur_lineno = h.lines_before;
	cstate->eol_type = (EolType) h.eol;
	cstate->bytes_processed = h.offset;
	dp_fastin_install(cstate);
	if (p->restore_progress)
		p->restore_progress(p->progress_arg);

	errcallback.callback = CopyFromErrorCallback;
	errcallback.arg = (void *) cstate;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	client_encoding = chunk_encoding(p, cstate->opts.binary, &enccallback);
	p->placer.lineno = &cstate->cur_lineno;
	while (parse_row(p, cstate, econtext, client_encoding))
	{
		CHECK_FOR_INTERRUPTS();
		econtext->ecxt_scantuple = p->slot;
		if (p->qual != NULL && !ExecQual(p->qual, econtext))
		{
			excluded++;
			continue;
		}
		dp_placer_add(&p->placer, p->slot);
	}
	error_context_stack = errcallback.previous;
	if (excluded > 0)
		pg_atomic_fetch_add_u64(p->excluded, excluded);
	p->placer.lineno = NULL;
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
	bool		parsed = false; /* a chunk, 'last', was parsed */
	uint64		last = 0;

	dp_worker_begin(&w, seg, toc);
	dp_placer_begin_worker(&p.placer, &w);
	parser_begin(&p, w.target, (List *) stringToNode(w.payload));
	p.excluded = &w.sh->rows_excluded;
	for (;;)
	{
		Size		len;
		void	   *data;
		DPChunkHeader h;

		if (shm_mq_receive(w.in, &len, &data, false) != SHM_MQ_SUCCESS)
			break;				/* detached: the input is done */
		memcpy(&h, data, sizeof(h));
		if (w.sh->in_order && parsed)
		{
			/* a page goes on across adjacent chunks only (parorder.c) */
			if (h.seq != last + 1)
				dp_placer_flush(&p.placer);
			dp_worker_chunk_done(&w, last);
		}
		dp_fault("worker_chunk");
		parse_chunk(&p, data, len);
		last = h.seq;
		parsed = true;
	}
	parser_end(&p);
	if (w.sh->in_order && parsed)
		dp_worker_chunk_done(&w, last);
	dp_worker_end(&w);
}

/* ---- the leader ---- */

/* The leader's COPY: its chunker, the chunks waiting to be sent, its own parser. */
typedef struct DPCopyFeed
{
	DPChunker  *ch;
	bool		input_done;		/* every byte is in a chunk */
	bool		worker_lost;	/* a worker's input queue detached early */
	char	  **pending;		/* per worker: a chunk not sent yet, or NULL */
	Size	   *pending_len;
	DPChunkParser own;
	DPLoad	   *load;
	DPParallel *par;
	/*
	 * In-order COPY with several workers: chunks are cut for one worker at
	 * a time, 'run' adjacent ones in a row (half of its input queue), so
	 * that its pages go on across them (parorder.c).
	 */
	int			run;			/* 1: one chunk a worker in turn */
	int			turn;			/* the worker whose run is being cut */
	int			in_run;			/* chunks of the run cut so far */
	Oid			relid;
	int64		progress[6];	/* pg_stat_progress_copy's, to restore */
} DPCopyFeed;

static const int progress_index[6] = {
	PROGRESS_COPY_COMMAND, PROGRESS_COPY_TYPE, PROGRESS_COPY_BYTES_TOTAL,
	PROGRESS_COPY_BYTES_PROCESSED, PROGRESS_COPY_TUPLES_PROCESSED,
	PROGRESS_COPY_TUPLES_EXCLUDED
};

/* Bytes read, rows loaded and rows excluded, in pg_stat_progress_copy. */
static void
update_progress(DPCopyFeed *f)
{
	f->progress[3] = dp_chunker_consumed(f->ch);
	f->progress[4] = dp_load_report(f->load)->rows;
	f->progress[5] = (int64) pg_atomic_read_u64(f->own.excluded);
	pgstat_progress_update_multi_param(3, progress_index + 3, f->progress + 3);
}

/* A page went into the load: the progress row counts its rows. */
static void
rows_loaded(void *arg)
{
	update_progress((DPCopyFeed *) arg);
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
		f->pending[i] = dp_chunker_next(f->ch, DP_WORKER_CHUNK, &f->pending_len[i]);
		f->input_done = f->pending[i] == NULL;
		if (f->pending[i] != NULL && par->order != NULL)
		{
			DPChunkHeader h;

			memcpy(&h, f->pending[i], sizeof(h));
			dp_order_assign(par->order, i, h.seq);
			if (++f->in_run >= f->run)
			{
				f->in_run = 0;
				f->turn = (i + 1) % dp_parallel_workers_launched(par);
			}
		}
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
	{
		if (dp_parallel_input(par, i) == NULL)
			continue;
		/* a run being cut for another worker: send only what waits */
		if (f->run > 1 && i != f->turn && f->pending[i] == NULL &&
			!f->input_done)
			continue;
		if (feed_one(f, par, i))
			moved = true;
	}
	return moved;
}

/* The leader's own share: parse one small chunk. */
static bool
leader_step(void *arg)
{
	DPCopyFeed *f = arg;
	Size		len;
	char	   *msg;
	DPChunkHeader h;

	if (f->input_done)
		return false;
	msg = dp_chunker_next(f->ch, !f->par->order ? DP_LEADER_CHUNK :
						  f->par->conflicts ? 8 * DP_LEADER_ORDERED_CHUNK :
						  DP_LEADER_ORDERED_CHUNK, &len);
	if (msg == NULL)
	{
		f->input_done = true;
		return false;
	}
	memcpy(&h, msg, sizeof(h));
	if (f->par->order)
		dp_order_own(f->par->order, h.seq);
	parse_chunk(&f->own, msg, len);
	if (f->par->order)
	{
		/* its last page now: the head must not wait for the next step */
		dp_placer_flush(&f->own.placer);
		dp_parallel_own_chunk_done(f->par, h.seq);
	}
	pfree(msg);
	update_progress(f);
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
run(DPCopyFeed *f, DPParallel *par, Relation target, List *payload)
{
	int			n = dp_parallel_workers_launched(par);
	DPLeaderShare share = {feed, leader_step, f, rows_loaded};

	f->pending = palloc0(sizeof(char *) * n);
	f->pending_len = palloc0(sizeof(Size) * n);
	dp_placer_begin_leader(&f->own.placer, par);
	parser_begin(&f->own, target, payload);
	f->own.excluded = &((DPParallelShared *)
						shm_toc_lookup(dp_parallel_toc(par), DP_KEY_SHARED,
									   false))->rows_excluded;
	f->own.restore_progress = restore_progress;
	f->own.progress_arg = f;
	restore_progress(f);		/* parser_begin's BeginCopyFrom reset it */
	dp_parallel_receive(par, &share);
	update_progress(f);			/* every chunk parsed: all rows excluded */
	parser_end(&f->own);
	if (par->order)
	{
		dp_order_end(par->order);
		par->order = NULL;
	}
}

/* What held_error_callback reads. */
typedef struct DPHeldContext
{
	CopyFromState cstate;
	DPLoad	   *load;
} DPHeldContext;

/*
 * The leader's error context while it loads held rows and ends the load:
 * "COPY t, line N" for the row whose deferred work runs (the load's error
 * line) or for a held row being loaded (cstate->cur_lineno); none for the
 * other rows, whose lines are in chunks long gone (0).
 */
static void
held_error_callback(void *arg)
{
	DPHeldContext *c = arg;

	dp_load_error_context(c->load, c->cstate->cur_relname,
						  c->cstate->cur_lineno);
}

/* A held row's input line, for its errors and its deferred work's. */
static void
held_line(void *arg, uint64 lineno)
{
	CopyFromState cstate = arg;

	cstate->cur_lineno = lineno;
	cstate->line_buf_valid = false;
}

/*
 * Step 4: the rows of held partitions, loaded as a serial COPY loads them,
 * then the work left of every row; errors of a held row name its line.
 */
static void
load_held_and_end(DPParallel *par, DPLoad *load, CopyFromState cstate)
{
	DPHeldContext context = {cstate, load};
	ErrorContextCallback errcallback;

	errcallback.callback = held_error_callback;
	errcallback.arg = (void *) &context;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	dp_parallel_load_held(par, held_line, cstate);
	/* the rows' deferred work names its own lines (the load's) */
	cstate->cur_lineno = 0;
	dp_load_end_rows(load);
	error_context_stack = errcallback.previous;
}

bool
dp_parallel_copy(DPLoad *load, CopyFromState cstate, ModifyTableState *mt,
				 Node *where, List *attlist, List *options, int nworkers,
				 uint64 *processed)
{
	Relation	target = mt->resultRelInfo->ri_RelationDesc;
	const char *why;
	DPParallel *par = dp_parallel_begin(load, mt, true, &why);
	DPCopyFeed	f = {0};
	List	   *payload;
	int			launched;

	if (par == NULL)
		return false;
	/* a plain target's rows keep the input's order (parorder.c) */
	par->sh.in_order = par->sh.nleaves == 0;
	why = input_refusal(cstate, target);
	if (why == NULL)
		why = dp_parallel_conflicts_setup(par);
	if (why != NULL)
	{
		dp_load_note_parallel(load, 0, why);
		return false;
	}

	payload = make_payload(where, attlist, options, cstate);
	launched = dp_parallel_launch(par, "dp_parcopy_main", nodeToString(payload),
								  NIL, DP_IN_QUEUE_SIZE(nworkers), nworkers);
	if (launched > 0)
	{
		if (par->sh.in_order)
			par->order = dp_order_begin(launched);
		f.ch = dp_chunker_begin(cstate);
		f.load = load;
		f.par = par;
		f.run = par->order && launched > 1 ?
			Max(1, DP_IN_QUEUE_CHUNKS(nworkers) / 2) : 1;
		f.relid = RelationGetRelid(target);
		save_progress(&f, cstate);
		run(&f, par, target, payload);
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
	load_held_and_end(par, load, cstate);
	dp_load_note_parallel(load, launched, dp_parallel_note(par));
	/* ON_CONFLICT 'update': the rows kept for the update count too */
	*processed = dp_load_report(load)->rows + dp_load_kept(load);
	/* the last rows, held or on the last pages, counted as core counts them */
	f.progress[4] = (int64) *processed;
	pgstat_progress_update_multi_param(2, progress_index + 4, f.progress + 4);
	return true;
}
