/*-------------------------------------------------------------------------
 *
 * fdwconn.c
 *	  postgres_fdw's connections while COPY streams (shard.c) use them:
 *	  found, tracked, and settled at abort.
 *
 * Finding.  A stream uses the connection postgres_fdw opened for the
 * partition when routing began its insert (BeginForeignInsert: the user
 * mapping it chose, the remote transaction and the savepoints of our
 * subtransactions begun), so that commit, abort, savepoints,
 * parallel_commit and later queries through the same server behave as
 * with postgres_fdw's own inserts.  postgres_fdw exports no way to get it
 * on 16 and 17 (its symbols are hidden there), so it is read from the head
 * of the insert's state, postgres_fdw's PgFdwModifyState, mirrored below
 * (the same in 15-18) and trusted only when it names the partition.  The
 * wrapper is known by its handler, the C function postgres_fdw_handler.
 *
 * Tracking.  A connection is tracked, outside the query's memory, from
 * before a COPY is sent on it until its result is read; the tracked
 * stream is the connection's holder.
 *
 * Abort.  libpq reports nothing of a COPY in progress, and postgres_fdw's
 * abort cleanup would wait on one for ever.  Our transaction callbacks run
 * before postgres_fdw's (CallXactCallbacks runs the newest first, and ours
 * are registered after postgres_fdw registered its own on its first
 * connection) and settle each connection tracked in the aborted
 * (sub)transaction: a COPY ends with CopyFail, queued output is sent,
 * every result read, the remote statement cancelled if that takes more
 * than DP_FDWCONN_CANCEL_MS, and the connection made blocking again; so
 * postgres_fdw gets an idle connection to roll back.  A connection still
 * tracked at commit fails the commit.
 *
 * Invariant: a connection is non-blocking or in COPY only while tracked.
 *
 *-------------------------------------------------------------------------
 */
#include "remote/remote.h"

#include "admission/admission.h"

#include "access/xact.h"
#include "common/report.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#define DP_FDWCONN_CANCEL_MS	1000	/* abort: cancel the remote after this */
#define DP_FDWCONN_SETTLE_MS	30000	/* abort: give up on the connection */

/* The leading fields of postgres_fdw's PgFdwModifyState (15-18). */
typedef struct DPFdwModifyHead
{
	Relation	rel;			/* the foreign table */
	void	   *attinmeta;
	PGconn	   *conn;			/* the connection its inserts use */
} DPFdwModifyHead;

/* A connection between its COPY and its result. */
struct DPConnTrack
{
	PGconn	   *conn;
	SubTransactionId subid;		/* the subtransaction that began it */
	void	   *owner;			/* its stream; NULL once aborting */
	struct DPConnTrack *next;
};

static DPConnTrack *tracks = NULL;
static bool callbacks_registered = false;

/* ---------- finding ---------- */

/*
 * The connection of postgres_fdw's insert into the partition, if its
 * wrapper is postgres_fdw (its handler is the C function
 * postgres_fdw_handler) and the insert's state names the partition.
 */
PGconn *
dp_fdwconn_of(ResultRelInfo *rri, const char **why)
{
	Relation	rel = rri->ri_RelationDesc;
	DPFdwModifyHead *head = rri->ri_FdwState;

	if (!dp_is_postgres_fdw(rel))
	{
		ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
		ForeignServer *server = GetForeignServer(table->serverid);

		*why = dp_report_reason("its wrapper \"%s\" is not postgres_fdw",
								GetForeignDataWrapper(server->fdwid)->fdwname);
		return NULL;
	}
	if (head == NULL || head->rel != rel || head->conn == NULL ||
		PQstatus(head->conn) != CONNECTION_OK)
	{
		*why = "postgres_fdw's insert state is not the one directpath knows";
		return NULL;
	}
	return head->conn;
}

/* ---------- tracking ---------- */

DPConnTrack *
dp_fdwconn_track(PGconn *conn, void *owner)
{
	DPConnTrack *t = MemoryContextAllocZero(TopMemoryContext, sizeof(DPConnTrack));

	t->conn = conn;
	t->subid = GetCurrentSubTransactionId();
	t->owner = owner;
	t->next = tracks;
	tracks = t;
	return t;
}

void
dp_fdwconn_untrack(DPConnTrack *t)
{
	DPConnTrack **p;

	for (p = &tracks; *p; p = &(*p)->next)
		if (*p == t)
		{
			*p = t->next;
			break;
		}
	pfree(t);
}

void *
dp_fdwconn_holder(PGconn *conn, void *except)
{
	for (DPConnTrack *t = tracks; t; t = t->next)
		if (t->conn == conn && t->owner && t->owner != except)
			return t->owner;
	return NULL;
}

void
dp_fdwconn_foreach(void (*fn) (void *owner, void *arg), void *arg)
{
	for (DPConnTrack *t = tracks; t; t = t->next)
		if (t->owner)
			fn(t->owner, arg);
}

/* ---------- abort ---------- */

static void
cancel_remote(PGconn *conn)
{
	char		errbuf[256];
	PGcancel   *c = PQgetCancel(conn);

	if (c)
	{
		(void) PQcancel(c, errbuf, sizeof(errbuf));
		PQfreeCancel(c);
	}
}

/*
 * Bring a tracked connection back to idle: a COPY ends with CopyFail,
 * queued output is sent, every result read; the remote statement is
 * cancelled when that takes over DP_FDWCONN_CANCEL_MS.  False when it does
 * not settle within DP_FDWCONN_SETTLE_MS (postgres_fdw then gives up on the
 * connection, as it does on any it cannot clean up).
 */
static bool
settle(PGconn *conn)
{
	TimestampTz start = GetCurrentTimestamp();
	bool		cancelled = false;

	if (PQstatus(conn) != CONNECTION_OK)
		return false;
	for (;;)
	{
		int			pending = PQflush(conn);
		long		secs;
		int			usecs;
		long		elapsed;

		if (pending < 0)
			return false;
		if (pending == 0)
		{
			if (!PQconsumeInput(conn))
				return false;
			while (!PQisBusy(conn))
			{
				PGresult   *res = PQgetResult(conn);
				bool		copy_in;

				if (res == NULL)
					return true;
				copy_in = PQresultStatus(res) == PGRES_COPY_IN;
				PQclear(res);
				if (copy_in &&
					PQputCopyEnd(conn, "directpath: the load was aborted") <= 0)
					return false;
				if (copy_in)
					break;
			}
		}
		TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
		elapsed = secs * 1000 + usecs / 1000;
		if (elapsed >= DP_FDWCONN_SETTLE_MS)
			return false;
		if (!cancelled && elapsed >= DP_FDWCONN_CANCEL_MS)
		{
			cancel_remote(conn);
			cancelled = true;
		}
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_TIMEOUT |
								 (pending ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
								 PQsocket(conn), 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* Settle every connection tracked since subtransaction 'from'. */
static void
abandon_since(SubTransactionId from)
{
	DPConnTrack *t = tracks;

	while (t)
	{
		DPConnTrack *next = t->next;

		if (t->subid >= from)
		{
			t->owner = NULL;	/* the query's memory may be gone */
			if (settle(t->conn))
				(void) PQsetnonblocking(t->conn, 0);
			dp_fdwconn_untrack(t);
		}
		t = next;
	}
}

/*
 * A stream still open at commit would leave its shard's rows out while ours
 * commit: refuse to commit (the abort then settles it).
 */
static void
xact_callback(XactEvent event, void *arg)
{
	if (tracks == NULL)
		return;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		abandon_since(InvalidSubTransactionId);
	else if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("directpath: a COPY to a foreign partition is still open at commit")));
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (tracks != NULL && event == SUBXACT_EVENT_ABORT_SUB)
		abandon_since(mySubid);
}

void
dp_fdwconn_callbacks(void)
{
	if (callbacks_registered)
		return;
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	callbacks_registered = true;
}
