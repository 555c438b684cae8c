/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  The rows of a postgres_fdw foreign partition, streamed to its server
 *	  as COPY ... FROM STDIN, every shard at once.
 *
 * postgres_fdw inserts routed rows with a prepared INSERT, batch_size rows
 * per round trip, and waits for each batch before the next row of any
 * partition is routed.  Here a postgres_fdw partition's rows become COPY
 * data instead, sent without waiting: the remote server parses and writes
 * them while this backend routes, forms and writes the next rows, and
 * every shard does so at the same time.
 *
 * Opening.  The stream runs on postgres_fdw's own connection for the
 * partition, in its remote transaction (fdwconn.c).  The remote catalog is
 * asked first: COPY applies no rules and writes only tables, so a remote
 * object that is not a table, or has rules, keeps the wrapper's INSERTs;
 * and the remote column types decide the format (copyenc.c: binary where
 * the remote server runs the same major and every column has the local
 * built-in type there, text otherwise).  The remote statement is
 *
 *	/\*+ APPEND *\/ COPY schema.table (columns) FROM STDIN [WITH (FORMAT binary)]
 *
 * with the names postgres_fdw would use (schema_name, table_name and
 * column_name options): a shard with directpath loads it directly, a
 * shard without takes it as a plain COPY.
 *
 * Flow.  Encoded rows collect in the stream's buffer; at DP_SHARD_CHUNK
 * bytes it goes to libpq, whose connection is non-blocking while the
 * stream is open.  A shard whose socket is full keeps collecting until
 * DP_SHARD_MAX_BUFFER bytes wait, and only then does the load wait for it,
 * flushing the other shards' output meanwhile.
 *
 * Sharing.  Partitions on one server share postgres_fdw's connection (one
 * per user mapping), which carries one COPY at a time.  The partition
 * whose COPY holds it streams; the others collect up to
 * DP_SHARD_MAX_BUFFER bytes, then take it over: the holder's COPY is ended
 * and its result read, and theirs begins (acquire).  So each server gets
 * one stream, switching tables at most once per DP_SHARD_MAX_BUFFER bytes
 * of a partition.  A partition of the same server whose rows go through
 * the wrapper's INSERTs (foreign.c) frees the connection before each batch
 * the same way (dp_shard_free_connection).
 *
 * Errors.  A server in COPY sends nothing until it fails, but for notices
 * (a remote trigger's, say), and libpq holds a COPY's error back until the
 * COPY ends.  So when a shard's socket turns readable the stream is ended
 * there and its result read: an error is raised at once, a success (it
 * was a notice) counted and a new COPY begun for the rows that follow.
 * Otherwise errors come with the results at the end: every stream is
 * ended first (dp_shard_end_input), then every result read
 * (dp_shard_collect), so the shards finish in parallel.  An error is
 * raised with the remote's SQLSTATE, message, detail, hint and context
 * (its "COPY ..., line n" counts the rows sent to that shard).  An error
 * or a cancel of ours is fdwconn.c's to clean up.
 *
 * Invariants: rows reach a shard in routing order; the rows a shard did
 * not insert (a remote BEFORE ROW trigger returned NULL) are the rows sent
 * minus its COPYs' counts.
 *
 *-------------------------------------------------------------------------
 */
#include "remote/remote.h"

#include <poll.h>
#include "common/report.h"

#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

#define DP_SHARD_CHUNK		(64 * 1024)	/* bytes handed to libpq at once */
#define DP_SHARD_MAX_BUFFER (1024 * 1024)	/* collected before waiting */
#define DP_SHARD_LINES		(1 << 18)	/* input lines of the last rows sent */

struct DPShard
{
	Relation	rel;			/* the foreign partition */
	PGconn	   *conn;			/* postgres_fdw's */
	DPConnTrack *track;			/* from COPY sent to result read */
	char	   *sql;			/* the remote COPY */
	const char *nspname;		/* the remote table */
	const char *relname;
	DPCopyEncoder *enc;			/* rows to COPY data */
	bool		binary;			/* in COPY's binary format */
	StringInfoData buf;			/* rows not yet handed to libpq */
	bool		backlog;		/* libpq holds output it could not send */
	bool		ending;			/* COPY ended, result not read yet */
	uint64		sent;			/* rows sent */
	uint64		copied;			/* rows the remote COPYs inserted */
	/* COPY's input lines, to name a row the shard refused */
	uint64	   *lines;			/* lines[i % DP_SHARD_LINES]: row i's line */
	uint64		copy_first;		/* the current COPY's first row */
	uint64		next_first;		/* the next COPY's */
};


static void begin_copy(DPShard *sh);
static void end_copy(DPShard *sh);
static void raise_remote(DPShard *sh, PGresult *res);

/* The shard, other than 'except', whose COPY holds 'conn', or NULL. */
static inline DPShard *
holder_of(PGconn *conn, DPShard *except)
{
	return (DPShard *) dp_fdwconn_holder(conn, except);
}

/* ---------- the connection ---------- */

static void
conn_error(DPShard *sh, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("directpath: could not %s the server of foreign partition \"%s\": %s",
					what, RelationGetRelationName(sh->rel),
					pchomp(PQerrorMessage(sh->conn)))));
}

/* Wait for the socket (or the latch, or 'timeout' ms); interruptible. */
static void
wait_socket(PGconn *conn, int events, long timeout)
{
	int			rc;

	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events |
						   (timeout >= 0 ? WL_TIMEOUT : 0),
						   PQsocket(conn), timeout, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* The next result of the command sent, waiting for it. */
static PGresult *
next_result(DPShard *sh)
{
	while (PQisBusy(sh->conn))
	{
		wait_socket(sh->conn, WL_SOCKET_READABLE, -1);
		if (!PQconsumeInput(sh->conn))
			conn_error(sh, "read from");
	}
	return PQgetResult(sh->conn);
}

/* ---------- opening a stream ---------- */

/* The remote table, as postgres_fdw names it. */
static void
remote_name(DPShard *sh)
{
	Relation	rel = sh->rel;
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ListCell   *lc;

	foreach(lc, table->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "schema_name") == 0)
			sh->nspname = defGetString(def);
		else if (strcmp(def->defname, "table_name") == 0)
			sh->relname = defGetString(def);
	}
	if (sh->nspname == NULL)
		sh->nspname = get_namespace_name(RelationGetNamespace(rel));
	if (sh->relname == NULL)
		sh->relname = RelationGetRelationName(rel);
}

/* The remote COPY statement, once the format is chosen. */
static void
plan_copy(DPShard *sh, bool binary)
{
	StringInfoData sql;
	const char **names;
	int			n = dp_copyenc_columns(sh->enc, &names);

	initStringInfo(&sql);
	appendStringInfo(&sql, "/*+ APPEND */ COPY %s.%s (",
					 quote_identifier(sh->nspname), quote_identifier(sh->relname));
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", quote_identifier(names[i]));
	appendStringInfo(&sql, ") FROM STDIN%s", binary ? " WITH (FORMAT binary)" : "");
	sh->sql = sql.data;
}

/*
 * Ask the remote catalog about the table: why it cannot take a COPY in
 * place of INSERT (NULL if it can), and each column's type there, for
 * copyenc.c's choice of format.  The connection must not carry a COPY: a
 * holder's ends first.
 */
static const char *
remote_check(DPShard *sh)
{
	const char *params[2] = {sh->nspname, sh->relname};
	const char *why = NULL;
	DPShard    *holder = holder_of(sh->conn, NULL);
	const char **names;
	int			ncols = dp_copyenc_columns(sh->enc, &names);
	Oid		   *types = palloc0(sizeof(Oid) * ncols);
	PGresult   *res;
	PGresult   *more;

	if (holder)
		end_copy(holder);
	if (!PQsendQueryParams(sh->conn,
						   "SELECT c.relkind, c.relhasrules, a.attname, a.atttypid::pg_catalog.int8 "
						   "FROM pg_catalog.pg_class c "
						   "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
						   "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
						   "AND a.attnum > 0 AND NOT a.attisdropped "
						   "WHERE n.nspname = $1 AND c.relname = $2",
						   2, NULL, params, NULL, NULL, 0))
		conn_error(sh, "query");
	res = next_result(sh);
	while ((more = next_result(sh)) != NULL)
		PQclear(more);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		raise_remote(sh, res);
	/* no such table: COPY fails as the INSERT would */
	if (PQntuples(res) > 0)
	{
		char		kind = PQgetvalue(res, 0, 0)[0];

		if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
			why = dp_report_reason("the remote object %s.%s is not a table",
								   sh->nspname, sh->relname);
		else if (strcmp(PQgetvalue(res, 0, 1), "t") == 0)
			why = dp_report_reason("the remote table %s.%s has rules, which COPY does not apply",
								   sh->nspname, sh->relname);
	}
	for (int r = 0; r < PQntuples(res); r++)
		for (int i = 0; i < ncols; i++)
			if (!PQgetisnull(res, r, 2) &&
				strcmp(PQgetvalue(res, r, 2), names[i]) == 0)
				types[i] = (Oid) strtoul(PQgetvalue(res, r, 3), NULL, 10);
	PQclear(res);
	if (why == NULL)
	{
		sh->binary = dp_copyenc_choose(sh->enc,
									   PQserverVersion(sh->conn) / 10000 ==
									   PG_VERSION_NUM / 10000,
									   types);
		plan_copy(sh, sh->binary);
	}
	return why;
}

DPShard *
dp_shard_open(ResultRelInfo *rri, EState *estate, const char **why)
{
	PGconn	   *conn = dp_fdwconn_of(rri, why);
	MemoryContext old;
	DPShard    *sh;
	const char **names;

	if (conn == NULL)
		return NULL;

	old = MemoryContextSwitchTo(estate->es_query_cxt);
	sh = palloc0(sizeof(DPShard));
	sh->rel = rri->ri_RelationDesc;
	sh->conn = conn;
	remote_name(sh);
	sh->enc = dp_copyenc_begin(sh->rel);
	initStringInfo(&sh->buf);
	MemoryContextSwitchTo(old);
	if (dp_copyenc_columns(sh->enc, &names) == 0)
	{
		*why = "it has no column that COPY could send";
		return NULL;
	}

	/*
	 * after postgres_fdw's own (registered when it first connected), so that
	 * ours run first (fdwconn.c)
	 */
	dp_fdwconn_callbacks();
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	*why = remote_check(sh);
	MemoryContextSwitchTo(old);
	if (*why != NULL)
		return NULL;
	dp_shardcommit_enlist(conn, GetForeignTable(RelationGetRelid(sh->rel))->serverid);
	begin_copy(sh);
	return sh;
}

/* Send the COPY and make the connection non-blocking for the stream. */
static void
begin_copy(DPShard *sh)
{
	PGresult   *res;
	StringInfoData header;

	sh->track = dp_fdwconn_track(sh->conn, sh);
	sh->copy_first = sh->next_first;
	if (!PQsendQuery(sh->conn, sh->sql))
		conn_error(sh, "send COPY to");
	res = next_result(sh);
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		PGresult   *more;

		while ((more = next_result(sh)) != NULL)
			PQclear(more);
		dp_fdwconn_untrack(sh->track);
		sh->track = NULL;
		raise_remote(sh, res);
	}
	PQclear(res);
	if (PQsetnonblocking(sh->conn, 1) != 0)
		conn_error(sh, "stream to");
	/* a binary COPY's header, ahead of any row collected already */
	initStringInfo(&header);
	dp_copyenc_header(sh->enc, &header);
	if (header.len > 0 &&
		PQputCopyData(sh->conn, header.data, header.len) != 1)
		conn_error(sh, "send data to");
	pfree(header.data);
}

void
dp_shard_free_connection(PGconn *conn)
{
	DPShard    *holder = holder_of(conn, NULL);

	if (holder)
		end_copy(holder);
}

/* ---------- rows ---------- */

/* Try to send what libpq holds for every other stream. */
static void
flush_one(void *owner, void *arg)
{
	DPShard    *other = owner;
	int			r;

	if (other == arg || !other->backlog)
		return;
	r = PQflush(other->conn);
	if (r < 0)
		conn_error(other, "send data to");
	other->backlog = r == 1;
}

static void
flush_others(DPShard *sh)
{
	dp_fdwconn_foreach(flush_one, sh);
}

/* Wait until libpq has sent all of this stream's output. */
static void
wait_sent(DPShard *sh)
{
	for (;;)
	{
		int			r = PQflush(sh->conn);

		if (r < 0)
			conn_error(sh, "send data to");
		sh->backlog = r == 1;
		if (!sh->backlog)
			return;
		flush_others(sh);
		wait_socket(sh->conn, WL_SOCKET_WRITEABLE, 100);
	}
}

/* Read a COPY's result: count its rows, or raise its error. */
static void
finish_copy(DPShard *sh)
{
	PGresult   *res = next_result(sh);
	PGresult   *more;

	while ((more = next_result(sh)) != NULL)
		PQclear(more);
	if (PQsetnonblocking(sh->conn, 0) != 0)
		conn_error(sh, "stream to");
	dp_fdwconn_untrack(sh->track);
	sh->track = NULL;
	sh->ending = false;
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		raise_remote(sh, res);
	sh->copied += strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
}

/*
 * Has the shard failed?  If its socket brought anything, end the stream
 * and read its result: raised if an error, else a new COPY begins.
 */
static void
check_remote(DPShard *sh)
{
	struct pollfd p = {.fd = PQsocket(sh->conn),.events = POLLIN};

	if (poll(&p, 1, 0) <= 0)
		return;
	end_copy(sh);
	begin_copy(sh);
}

/* Hand the buffer to libpq, whatever it holds already. */
static void
put_buffer(DPShard *sh)
{
	int			r;

	if (sh->buf.len == 0)
		return;
	if (PQputCopyData(sh->conn, sh->buf.data, sh->buf.len) != 1)
		conn_error(sh, "send data to");
	resetStringInfo(&sh->buf);
	r = PQflush(sh->conn);
	if (r < 0)
		conn_error(sh, "send data to");
	sh->backlog = r == 1;
}

/*
 * The rest of the shard's rows (a binary trailer after them), then the end
 * of its COPY.
 */
static void
finish_input(DPShard *sh)
{
	dp_copyenc_trailer(sh->enc, &sh->buf);
	put_buffer(sh);
	/* rows still waiting in the encoder go to the next COPY */
	sh->next_first = sh->sent - dp_copyenc_waiting(sh->enc);
	if (PQputCopyEnd(sh->conn, NULL) <= 0)
		conn_error(sh, "end COPY on");
	sh->ending = true;
}

/* End the shard's COPY and read its result. */
static void
end_copy(DPShard *sh)
{
	if (!sh->ending)
		finish_input(sh);
	wait_sent(sh);
	finish_copy(sh);
}

/* Make the connection carry this shard's COPY (see Flow). */
static void
acquire(DPShard *sh)
{
	DPShard    *holder;

	if (sh->track)
		return;
	if ((holder = holder_of(sh->conn, sh)) != NULL)
		end_copy(holder);
	begin_copy(sh);
}

/* Hand the buffer to libpq ('wait': even if the socket is full). */
static void
push(DPShard *sh, bool wait)
{
	acquire(sh);
	if (sh->backlog)
	{
		int			r = PQflush(sh->conn);

		if (r < 0)
			conn_error(sh, "send data to");
		sh->backlog = r == 1;
		if (sh->backlog && !wait && sh->buf.len < DP_SHARD_MAX_BUFFER)
			return;				/* keep collecting */
		if (sh->backlog)
			wait_sent(sh);
	}
	put_buffer(sh);
	flush_others(sh);
	check_remote(sh);
}

void
dp_shard_row(DPShard *sh, TupleTableSlot *slot, uint64 lineno)
{
	if (lineno > 0)
	{
		if (sh->lines == NULL)
			sh->lines = MemoryContextAllocHuge(GetMemoryChunkContext(sh),
											   sizeof(uint64) * DP_SHARD_LINES);
		sh->lines[sh->sent % DP_SHARD_LINES] = lineno;
	}
	dp_copyenc_row(sh->enc, slot, &sh->buf);
	sh->sent++;
	/* a shard waiting for its server's connection collects more first */
	if (sh->buf.len >= DP_SHARD_CHUNK &&
		(sh->track || sh->buf.len >= DP_SHARD_MAX_BUFFER ||
		 holder_of(sh->conn, sh) == NULL))
		push(sh, false);
}

void
dp_shard_end_input(DPShard *sh)
{
	dp_copyenc_flush(sh->enc, &sh->buf);
	if (sh->track == NULL && sh->buf.len == 0)
		return;					/* nothing left to send */
	acquire(sh);
	finish_input(sh);
	if (PQflush(sh->conn) < 0)
		conn_error(sh, "send data to");
}

uint64
dp_shard_collect(DPShard *sh)
{
	if (sh->track)
	{
		wait_sent(sh);
		finish_copy(sh);
	}
	return sh->sent - sh->copied;
}

bool
dp_shard_binary(DPShard *sh)
{
	return sh->binary;
}

void
dp_shard_close(DPShard *sh)
{
	dp_copyenc_end(sh->enc);
}

/* ---------- remote errors ---------- */

static char *
field(PGresult *res, int code)
{
	char	   *s = PQresultErrorField(res, code);

	return s ? pstrdup(s) : NULL;
}

/*
 * The input line of the row a remote COPY error names ("COPY t, line n",
 * the n-th row of that COPY, in the remote server's English messages), or
 * 0 when unknown.
 */
static uint64
input_line(DPShard *sh, const char *context)
{
	const char *at = context ? strstr(context, ", line ") : NULL;
	uint64		n;
	uint64		row;

	if (sh->lines == NULL || at == NULL)
		return 0;
	n = strtoull(at + strlen(", line "), NULL, 10);
	row = sh->copy_first + n - 1;
	if (n == 0 || row >= sh->sent || sh->sent - row > DP_SHARD_LINES)
		return 0;
	return sh->lines[row % DP_SHARD_LINES];
}

/*
 * Raise the shard's error as postgres_fdw reports a remote one, naming the
 * input line of the row where it can be known (COPY).
 */
static void
raise_remote(DPShard *sh, PGresult *res)
{
	char	   *state = field(res, PG_DIAG_SQLSTATE);
	char	   *message = field(res, PG_DIAG_MESSAGE_PRIMARY);
	char	   *detail = field(res, PG_DIAG_MESSAGE_DETAIL);
	char	   *hint = field(res, PG_DIAG_MESSAGE_HINT);
	char	   *context = field(res, PG_DIAG_CONTEXT);
	int			code = ERRCODE_CONNECTION_FAILURE;
	uint64		line = input_line(sh, context);

	if (state && strlen(state) == 5)
		code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
	if (message == NULL)
		message = pchomp(PQerrorMessage(sh->conn));
	PQclear(res);
	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", message),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 context ? errcontext("%s", context) : 0,
			 errcontext("remote COPY into foreign partition \"%s\": %s",
						RelationGetRelationName(sh->rel), sh->sql),
			 line ? errcontext("the row of input line %llu",
							   (unsigned long long) line) : 0));
}
