/*-------------------------------------------------------------------------
 *
 * shardcommit.c
 *	  Atomic commit across shards: with directpath.shard_two_phase on, the
 *	  remote transactions that COPY streams wrote (shard.c) are prepared
 *	  before the local commit and committed after it, and
 *	  directpath.resolve_shards() settles what a crash left in doubt.
 *
 * postgres_fdw commits each remote transaction in its pre-commit callback,
 * then the local transaction commits: a crash or a lost connection between
 * those steps leaves some shards committed and others not.  Two-phase
 * commit makes the local commit record the one decision:
 *
 * 1. Enlist (a stream opens on a postgres_fdw connection): the connection
 *	  and its foreign server are remembered for the transaction, and the
 *	  local transaction gets its transaction id now, so that its outcome is
 *	  in the commit log whatever else it writes.
 * 2. Prepare (XACT_EVENT_PRE_COMMIT; our callback runs before
 *	  postgres_fdw's, registered earlier): for each shard a connection of
 *	  our own is opened with the parameters of postgres_fdw's (PQconninfo),
 *	  because postgres_fdw may close its own at the end of the transaction;
 *	  then every shard's remote transaction is prepared, all at once, on
 *	  postgres_fdw's connection as "dp_<system id>_<database>_<full xid>_<n>",
 *	  and an empty remote transaction is begun there for postgres_fdw to
 *	  commit.  Any failure raises the error: the local transaction aborts
 *	  (step 4).  The local commit is made synchronous (ForceSyncCommit):
 *	  its record must be durable before any shard commits.
 * 3. Commit (XACT_EVENT_COMMIT, the local commit record flushed):
 *	  COMMIT PREPARED on every shard at once, over our connections.  Nothing
 *	  may fail any more: a shard that reports an error (also "does not
 *	  exist": another session settled it, or rolled it back by hand) or does
 *	  not answer within DP_SHARD_COMMIT_WAIT_MS gets a WARNING naming its
 *	  prepared transaction, left in doubt for step 5.
 * 4. Abort (XACT_EVENT_ABORT): ROLLBACK PREPARED on the shards prepared so
 *	  far, likewise; shards not prepared are postgres_fdw's to roll back.
 * 5. Resolve (directpath.resolve_shards(), after a crash or a lost shard):
 *	  on every postgres_fdw server the caller has a user mapping for, each
 *	  prepared transaction named with this cluster's system identifier and
 *	  this database is committed if its local transaction committed
 *	  (pg_xact_status), rolled back if it did not (aborted, or in progress
 *	  at a crash: recovery marks it aborted), and left alone while it is in
 *	  progress or too old for the commit log to tell.
 *
 * Invariant: a shard's prepared transaction is committed only once the
 * local commit record is durable, and rolled back only when the local
 * transaction cannot commit.
 *
 *-------------------------------------------------------------------------
 */
#include "remote/remote.h"

#include "admission/admission.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "common/fault.h"
#include "common/settings.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#define DP_SHARD_COMMIT_WAIT_MS 30000	/* step 3/4: wait per shard at most */

/* A shard of this transaction. */
typedef struct DPEnlisted
{
	PGconn	   *fdwconn;		/* postgres_fdw's: the remote transaction */
	PGconn	   *own;			/* ours: COMMIT / ROLLBACK PREPARED */
	Oid			serverid;
	char		gid[128];		/* its prepared transaction, once prepared */
	bool		prepared;
	struct DPEnlisted *next;
} DPEnlisted;

static DPEnlisted *enlisted = NULL; /* in TopMemoryContext */

/* ---------- talking to the shards ---------- */

/*
 * One statement sent to several shards at once: what each got and how it
 * answered.
 */
typedef struct DPRound
{
	int			n;
	DPEnlisted **shard;			/* whose */
	PGconn	  **conn;			/* on which connection (NULL: skipped) */
	char	  **sql;
	char	  **error;			/* the answer: NULL, or the error */
	char	  **code;			/* its SQLSTATE, if the server sent one */
	bool	   *done;
	const char *expect;			/* the command tag success must have, or
								 * NULL */
} DPRound;

/* A round with room for every shard of the transaction. */
static DPRound *
round_new(void)
{
	DPRound    *r = palloc0(sizeof(DPRound));
	int			n = 0;

	for (DPEnlisted *e = enlisted; e; e = e->next)
		n++;

	r->shard = palloc0(Max(n, 1) * sizeof(DPEnlisted *));
	r->conn = palloc0(Max(n, 1) * sizeof(PGconn *));
	r->sql = palloc0(Max(n, 1) * sizeof(char *));
	r->error = palloc0(Max(n, 1) * sizeof(char *));
	r->code = palloc0(Max(n, 1) * sizeof(char *));
	r->done = palloc0(Max(n, 1) * sizeof(bool));
	return r;
}

static void
round_add(DPRound *r, DPEnlisted *e, PGconn *conn, char *sql)
{
	r->shard[r->n] = e;
	r->conn[r->n] = conn;
	r->sql[r->n++] = sql;
}

/* Read what connection i has for us; true once its last result is in. */
static bool
round_read(DPRound *r, int i)
{
	if (!PQconsumeInput(r->conn[i]))
	{
		r->error[i] = pstrdup(PQerrorMessage(r->conn[i]));
		return true;
	}
	while (!PQisBusy(r->conn[i]))
	{
		PGresult   *res = PQgetResult(r->conn[i]);

		if (res == NULL)
			return true;
		if (PQresultStatus(res) != PGRES_COMMAND_OK && r->error[i] == NULL)
		{
			const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			r->error[i] = pstrdup(PQresultErrorMessage(res));
			r->code[i] = code ? pstrdup(code) : NULL;
		}
		else if (r->expect && r->error[i] == NULL &&
				 strcmp(PQcmdStatus(res), r->expect) != 0)
			r->error[i] = psprintf("the server answered %s", PQcmdStatus(res));
		PQclear(res);
	}
	return false;
}

/*
 * Send each statement, then read every answer: waiting at most 'wait_ms'
 * in all when 'wait_ms' > 0 (at commit and abort, where interrupts are
 * held), else serving interrupts.
 */
static void
round_run(DPRound *r, int wait_ms)
{
	TimestampTz start = GetCurrentTimestamp();
	int			left = 0;

	for (int i = 0; i < r->n; i++)
	{
		r->error[i] = r->code[i] = NULL;
		r->done[i] = r->conn[i] == NULL;
		if (!r->done[i] && !PQsendQuery(r->conn[i], r->sql[i]))
		{
			r->error[i] = pstrdup(PQerrorMessage(r->conn[i]));
			r->done[i] = true;
		}
		left += !r->done[i];
	}
	while (left > 0)
	{
		int			waiting = -1;
		long		secs;
		int			usecs;

		for (int i = 0; i < r->n; i++)
			if (!r->done[i] && (r->done[i] = round_read(r, i)))
				left--;
			else if (!r->done[i] && waiting < 0)
				waiting = i;
		if (left == 0)
			break;
		TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
		if (wait_ms > 0 && secs * 1000 + usecs / 1000 >= wait_ms)
		{
			for (int i = 0; i < r->n; i++)
				if (!r->done[i])
					r->error[i] = psprintf("no answer within %d ms", wait_ms);
			break;
		}
		if (wait_ms <= 0)
			CHECK_FOR_INTERRUPTS();
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								 WL_EXIT_ON_PM_DEATH,
								 PQsocket(r->conn[waiting]), 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

static int
round_errcode(DPRound *r, int i, int otherwise)
{
	const char *c = r->code[i];

	return c && strlen(c) == 5 ? MAKE_SQLSTATE(c[0], c[1], c[2], c[3], c[4]) : otherwise;
}

static const char *
server_name(Oid serverid)
{
	return GetForeignServer(serverid)->servername;
}

/* ---------- 1. enlist ---------- */

static void shardcommit_xact(XactEvent event, void *arg);

void
dp_shardcommit_enlist(struct pg_conn *conn, Oid serverid)
{
	static bool registered = false;
	DPEnlisted *e;

	if (!dp_shard_two_phase)
		return;
	for (e = enlisted; e; e = e->next)
		if (e->fdwconn == conn)
			return;
	(void) GetTopTransactionId();
	if (!registered)
	{
		/* after postgres_fdw's, which it registered when it connected */
		RegisterXactCallback(shardcommit_xact, NULL);
		registered = true;
	}
	e = MemoryContextAllocZero(TopMemoryContext, sizeof(DPEnlisted));
	e->fdwconn = conn;
	e->serverid = serverid;
	e->next = enlisted;
	enlisted = e;
}

/* ---------- 2. prepare ---------- */

/* A new connection with the parameters of an established one. */
static PGconn *
connect_like(PGconn *conn, Oid serverid)
{
	PQconninfoOption *opts = PQconninfo(conn);
	const char **keywords;
	const char **values;
	int			n = 0;
	PGconn	   *own;

	if (opts == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	for (PQconninfoOption *o = opts; o->keyword; o++)
		n++;
	keywords = palloc0((n + 1) * sizeof(char *));
	values = palloc0((n + 1) * sizeof(char *));
	n = 0;
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (o->val != NULL && o->val[0] != '\0')
		{
			keywords[n] = o->keyword;
			values[n++] = o->val;
		}
	own = PQconnectdbParams(keywords, values, false);
	PQconninfoFree(opts);
	pfree(keywords);
	pfree(values);
	if (own == NULL || PQstatus(own) != CONNECTION_OK)
	{
		char	   *msg = pstrdup(own ? PQerrorMessage(own) : "out of memory");

		PQfinish(own);
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("directpath: could not open the commit connection to server \"%s\"",
						server_name(serverid)),
				 errdetail_internal("%s", msg),
				 errhint("Two-phase commit across shards (directpath.shard_two_phase) opens a second connection to each shard with postgres_fdw's parameters.")));
	}
	return own;
}

static void
prepare_all(void)
{
	uint64		sysid = GetSystemIdentifier();
	FullTransactionId fxid = GetTopFullTransactionId();
	DPRound    *r = round_new();
	for (DPEnlisted *e = enlisted; e; e = e->next)
	{
		if (PQtransactionStatus(e->fdwconn) != PQTRANS_INTRANS)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("directpath: the remote transaction on server \"%s\" is not open at commit",
							server_name(e->serverid))));
		/* a shard we cannot reach now could not be committed in step 3 */
		if (e->own == NULL)
			e->own = connect_like(e->fdwconn, e->serverid);
		snprintf(e->gid, sizeof(e->gid), "dp_" UINT64_FORMAT "_%u_" UINT64_FORMAT "_%d",
				 sysid, MyDatabaseId, U64FromFullTransactionId(fxid), r->n + 1);
		round_add(r, e, e->fdwconn, psprintf("PREPARE TRANSACTION '%s'", e->gid));
	}
	/* a transaction in error "prepares" as ROLLBACK: not prepared */
	r->expect = "PREPARE TRANSACTION";
	round_run(r, 0);
	for (int i = 0; i < r->n; i++)
		r->shard[i]->prepared = r->error[i] == NULL;
	for (int i = 0; i < r->n; i++)
		if (r->error[i] != NULL)
			ereport(ERROR,
					(errcode(round_errcode(r, i, ERRCODE_CONNECTION_FAILURE)),
					 errmsg("directpath: could not prepare the transaction on server \"%s\" for two-phase commit",
							server_name(r->shard[i]->serverid)),
					 errdetail_internal("%s", r->error[i]),
					 r->code[i] && strcmp(r->code[i], "55000") == 0 ?
					 errhint("A shard needs max_prepared_transactions above 0 for directpath.shard_two_phase.") : 0));
	/* postgres_fdw commits what it believes is its transaction: an empty one */
	for (int i = 0; i < r->n; i++)
		r->sql[i] = "START TRANSACTION ISOLATION LEVEL REPEATABLE READ";
	r->expect = NULL;
	round_run(r, 0);
	for (int i = 0; i < r->n; i++)
		if (r->error[i] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("directpath: lost the connection to server \"%s\" after preparing its transaction",
							server_name(r->shard[i]->serverid)),
					 errdetail_internal("%s", r->error[i])));
	ForceSyncCommit();
	dp_fault("shard_prepared");
}

/* ---------- 3 and 4. commit or roll back the prepared ---------- */

static void
finish_all(bool commit)
{
	DPRound    *r = round_new();
	for (DPEnlisted *e = enlisted; e; e = e->next)
		if (e->prepared && e->own != NULL)
			round_add(r, e, e->own, psprintf("%s PREPARED '%s'",
											 commit ? "COMMIT" : "ROLLBACK", e->gid));
	if (commit)
		dp_fault("shard_commit");
	round_run(r, DP_SHARD_COMMIT_WAIT_MS);
	for (int i = 0; i < r->n; i++)
		if (r->error[i] != NULL)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("directpath: transaction \"%s\" on server \"%s\" was not %s",
							r->shard[i]->gid, server_name(r->shard[i]->serverid),
							commit ? "committed" : "rolled back"),
					 errdetail_internal("%s", r->error[i]),
					 errhint("Run SELECT * FROM directpath.resolve_shards() once the server is reachable.")));
}

static void
forget_all(void)
{
	while (enlisted)
	{
		DPEnlisted *e = enlisted;

		enlisted = e->next;
		if (e->own)
			PQfinish(e->own);
		pfree(e);
	}
}

static void
shardcommit_xact(XactEvent event, void *arg)
{
	if (enlisted == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			prepare_all();
			break;
		case XACT_EVENT_COMMIT:
			finish_all(true);
			forget_all();
			break;
		case XACT_EVENT_ABORT:
			finish_all(false);
			forget_all();
			break;
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("directpath: cannot PREPARE a transaction that loaded shards with directpath.shard_two_phase")));
			break;
		default:
			break;
	}
}

/* ---------- 5. resolve ---------- */

/* Server and user mapping options that libpq takes, plus our own. */
static PGconn *
connect_mapping(ForeignServer *server, UserMapping *um, char **error)
{
	PQconninfoOption *defs = PQconndefaults();
	List	   *opts = list_concat_copy(server->options, um->options);
	const char **keywords = palloc0((list_length(opts) + 3) * sizeof(char *));
	const char **values = palloc0((list_length(opts) + 3) * sizeof(char *));
	int			n = 0;
	ListCell   *lc;
	PGconn	   *conn;

	foreach(lc, opts)
	{
		DefElem    *def = lfirst(lc);

		for (PQconninfoOption *d = defs; d && d->keyword; d++)
			if (strcmp(d->keyword, def->defname) == 0 &&
				strchr(d->dispchar, 'D') == NULL)	/* not debug options */
			{
				keywords[n] = def->defname;
				values[n++] = defGetString(def);
				break;
			}
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "directpath";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	conn = PQconnectdbParams(keywords, values, false);
	PQconninfoFree(defs);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		*error = pstrdup(conn ? PQerrorMessage(conn) : "out of memory");
		PQfinish(conn);
		return NULL;
	}
	/* as postgres_fdw: a non-superuser's connection must use a password */
	if (!superuser_arg(um->userid) && !PQconnectionUsedPassword(conn))
	{
		bool		required = true;

		foreach(lc, um->options)
			if (strcmp(((DefElem *) lfirst(lc))->defname, "password_required") == 0)
				required = defGetBoolean(lfirst(lc));
		if (required)
		{
			*error = pstrdup("a non-superuser's connection must use a password");
			PQfinish(conn);
			return NULL;
		}
	}
	return conn;
}

/* The local outcome of full transaction id 'fxid': pg_xact_status's. */
static char *
local_status(uint64 fxid)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum((int64) fxid)};
	char	   *status = NULL;

	if (SPI_execute_with_args("SELECT pg_xact_status($1::text::xid8)", 1, argtypes,
							  args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "directpath: pg_xact_status failed");
	if (SPI_processed == 1)
		status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	return status;
}

/* A row of resolve_shards(): 'gid' NULL for a server not read. */
static void
put_row(Tuplestorestate *out, TupleDesc desc, ForeignServer *server,
		const char *gid, const char *outcome)
{
	Datum		values[3];
	bool		nulls[3] = {false, gid == NULL, false};

	values[0] = CStringGetTextDatum(server->servername);
	values[1] = gid ? CStringGetTextDatum(gid) : (Datum) 0;
	values[2] = CStringGetTextDatum(outcome);
	tuplestore_putvalues(out, desc, values, nulls);
}

/* Settle prepared transaction 'gid' of local full xid 'fxid'; the outcome. */
static const char *
resolve_one(PGconn *conn, const char *gid, uint64 fxid)
{
	char	   *status = local_status(fxid);
	const char *verb;
	PGresult   *r;
	const char *outcome;

	if (status == NULL)
		return "left: too old for the commit log to tell";
	if (strcmp(status, "committed") == 0)
		verb = "COMMIT";
	else if (strcmp(status, "aborted") == 0)
		verb = "ROLLBACK";
	else
		return "left: in progress here";
	r = PQexec(conn, psprintf("%s PREPARED '%s'", verb, gid));
	if (PQresultStatus(r) == PGRES_COMMAND_OK)
		outcome = strcmp(verb, "COMMIT") == 0 ? "committed" : "rolled back";
	else
		outcome = psprintf("failed: %s", PQresultErrorMessage(r));
	PQclear(r);
	return outcome;
}

static void
resolve_server(ForeignServer *server, UserMapping *um, Tuplestorestate *out,
			   TupleDesc desc)
{
	char	   *error = NULL;
	char	   *prefix = psprintf("dp_" UINT64_FORMAT "_%u_", GetSystemIdentifier(),
								  MyDatabaseId);
	PGconn	   *conn = connect_mapping(server, um, &error);
	PGresult   *res;
	const char *params[1] = {prefix};

	if (conn == NULL)
	{
		put_row(out, desc, server, NULL, psprintf("not reachable: %s", error));
		return;
	}
	res = PQexecParams(conn,
					   "SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, $1) ORDER BY gid",
					   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		put_row(out, desc, server, NULL,
				psprintf("not read: %s", PQresultErrorMessage(res)));
	else
		for (int i = 0; i < PQntuples(res); i++)
		{
			char	   *gid = pstrdup(PQgetvalue(res, i, 0));
			uint64		fxid;

			if (sscanf(gid + strlen(prefix), UINT64_FORMAT, &fxid) == 1)
				put_row(out, desc, server, gid, resolve_one(conn, gid, fxid));
		}
	PQclear(res);
	PQfinish(conn);
}

PG_FUNCTION_INFO_V1(dp_resolve_shards);

/*
 * directpath.resolve_shards(): step 5 on every postgres_fdw server the
 * caller has a user mapping for; a row per prepared transaction found (or
 * per server that could not be read).
 */
Datum
dp_resolve_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	servers;
	TableScanDesc scan;
	HeapTuple	tup;
	List	   *ids = NIL;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	servers = table_open(ForeignServerRelationId, AccessShareLock);
	scan = table_beginscan_catalog(servers, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		ids = lappend_oid(ids, ((Form_pg_foreign_server) GETSTRUCT(tup))->oid);
	table_endscan(scan);
	table_close(servers, AccessShareLock);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "directpath: SPI_connect failed");
	foreach(lc, ids)
	{
		ForeignServer *server = GetForeignServer(lfirst_oid(lc));
		UserMapping *um;

		if (!dp_server_is_postgres_fdw(server->serverid))
			continue;
		if (!SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(GetUserId()),
								   ObjectIdGetDatum(server->serverid)) &&
			!SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
								   ObjectIdGetDatum(server->serverid)))
			continue;
		um = GetUserMapping(GetUserId(), server->serverid);
		resolve_server(server, um, rsinfo->setResult, rsinfo->setDesc);
	}
	SPI_finish();
	return (Datum) 0;
}
