/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  The progress of every running direct statement: a row per process in
 *	  shared memory, written by the load as it goes, read by
 *	  directpath.get_progress() (the view directpath.progress).
 *
 * Shared memory.  When the library is in shared_preload_libraries, _PG_init
 * asks for one slot per backend (MaxBackends: client backends, autovacuum,
 * background and parallel workers, WAL senders), indexed by the process's
 * number (compat.h: DP_MY_PROC_INDEX).  Loaded later, the library has no
 * slots: nothing is written and the view is empty.
 *
 * Writing.  Only the process a slot belongs to writes it, and only the
 * load that began it (the owner: one per process, the outermost; a load
 * run by a trigger of another is not shown).  The load keeps its row in
 * local memory and copies it into the slot at a few points: its start,
 * every DP_PROGRESS_ROWS rows, each phase of each batch (writing pages,
 * index entries, reading input again) and each phase of its end; a
 * parallel worker at each page it sends.  Never per row.  The stages below
 * the load count pages and index entries in plain local counters
 * (dp_progress_counts) that the next copy takes along.  A COPY's input
 * bytes and its file's size are read from this process's own
 * pg_stat_progress_copy entry, which core and the direct COPY keep.
 *
 * The copy is made under a change count, as core's backend status entries
 * are (st_changecount): odd while a write is in progress.  A reader copies
 * the slot and retries until the count was even and unchanged around its
 * copy, so it never sees a torn row; the writer cannot fail in between (a
 * critical section around plain stores).
 *
 * The row goes when its load ends (dp_progress_end), and, should the load
 * fail, at the end of the (sub)transaction it began in (the callbacks
 * below), so the view never shows a statement that is over.
 *
 * Reading.  A row's numbers are shown to roles that have the privileges of
 * the row's session user, and to members of pg_read_all_stats; others see
 * its pid and NULLs, as pg_stat_activity does.  The elapsed time is the
 * reader's clock against the load's start; the ETA is the time left at the
 * rate so far, while rows are read and only where a total is known and
 * not yet reached.  A parallel leader's slot (dp_progress_parallel: it has
 * workers) gives two rows: its own part ("leader": the rows of its
 * workers' pages, which it counts as it takes them, taken off) and the
 * statement's ("total": the slot as it is); a worker's slot is a "worker"
 * row, any other a "statement" row.  A caller with get_progress()'s
 * signature before 0.9 (no 'process') gets a row per slot.
 *
 * Phases timed.  The same calls time each phase of the owner's load (a
 * clock read at a change of phase only) and note the WAL this process
 * wrote, whether or not the library has shared memory or the view is on:
 * EXPLAIN ANALYZE names the times (dp_progress_describe_phases), and with
 * directpath.log_min_rows set a load that ends (not one that fails) with
 * at least that many rows logs one line, as autovacuum does: its rows,
 * pages, index entries, WAL and time per phase.
 *
 * Invariant: a slot with pid 0 is free; a process owns at most one row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/compat.h"
#include "common/progress.h"
#include "common/settings.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "executor/instrument.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#define DP_PROGRESS_KIND_LEN 32

/* What a total counts. */
typedef enum DPTotalUnit
{
	DP_TOTAL_NONE,
	DP_TOTAL_ROWS,
	DP_TOTAL_BYTES,
} DPTotalUnit;

/* One process's row. */
typedef struct DPProgressRow
{
	int			pid;			/* 0: the slot is free */
	int			leader_pid;		/* a parallel worker's leader, else 0 */
	Oid			datid;
	Oid			userid;			/* the session's user */
	Oid			relid;
	char		kind[DP_PROGRESS_KIND_LEN];
	DPProgressPhase phase;
	bool		copy;			/* bytes from pg_stat_progress_copy */
	DPTotalUnit total_unit;
	bool		estimate;		/* the total is the planner's estimate */
	TimestampTz started;
	int64		rows;
	int64		bytes;			/* COPY's input bytes read, or -1 */
	int64		pages;
	int64		entries;
	int64		total;
	int			workers;		/* a parallel leader's, else 0 */
	int64		worker_rows;	/* a leader: the rows of its workers' pages */
} DPProgressRow;

typedef struct DPProgressSlot
{
	uint32		changecount;	/* odd while written */
	DPProgressRow row;
} DPProgressSlot;

static const char *const phase_names[] = {
	[DP_PHASE_READING] = "reading input",
	[DP_PHASE_WRITING] = "writing pages",
	[DP_PHASE_ENTRIES] = "index entries",
	[DP_PHASE_BUILDING] = "building indexes",
	[DP_PHASE_MERGING] = "merging indexes",
	[DP_PHASE_FKEYS] = "checking foreign keys",
	[DP_PHASE_STATISTICS] = "statistics",
	[DP_PHASE_UPDATES] = "updating rows",
	[DP_PHASE_FINISHING] = "finishing",
};

DPProgressCounts dp_progress_counts;

static shmem_request_hook_type prev_shmem_request = NULL;
static shmem_startup_hook_type prev_shmem_startup = NULL;

static DPProgressSlot *slots = NULL;	/* NULL when not preloaded */
static int	nslots = 0;

/* This process's row: its slot, owner, local copy, nesting level. */
static volatile DPProgressSlot *my_slot = NULL;
static const void *owner = NULL;
static int	owner_level = 0;
static bool owner_is_worker = false;
static DPProgressRow mine;

/* The log line's figures (directpath.log_min_rows): time per phase, WAL. */
static bool logging = false;
static TimestampTz phase_since;
static int64 phase_us[DP_PHASE_FINISHING + 1];
static uint64 wal_at_start;

static Size
progress_shmem_size(void)
{
	return mul_size(MaxBackends, sizeof(DPProgressSlot));
}

static void
progress_shmem_request(void)
{
	if (prev_shmem_request)
		prev_shmem_request();
	RequestAddinShmemSpace(progress_shmem_size());
}

static void
progress_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup)
		prev_shmem_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	slots = ShmemInitStruct("directpath progress", progress_shmem_size(),
							&found);
	if (!found)
		memset(slots, 0, progress_shmem_size());
	nslots = MaxBackends;
	LWLockRelease(AddinShmemInitLock);
}

/* Copy the local row into the slot (see the file header). */
static void
publish(void)
{
	volatile DPProgressSlot *slot = my_slot;

	if (mine.copy && MyBEEntry != NULL &&
		MyBEEntry->st_progress_command == PROGRESS_COMMAND_COPY)
	{
		int64		total = MyBEEntry->st_progress_param[PROGRESS_COPY_BYTES_TOTAL];

		mine.bytes = MyBEEntry->st_progress_param[PROGRESS_COPY_BYTES_PROCESSED];
		if (total > 0)
		{
			mine.total = total;
			mine.total_unit = DP_TOTAL_BYTES;
			mine.estimate = false;
		}
	}
	mine.pages = dp_progress_counts.pages;
	mine.entries = dp_progress_counts.entries;
	mine.worker_rows = dp_progress_counts.worker_rows;
	if (slot == NULL)
		return;

	START_CRIT_SECTION();
	slot->changecount++;
	pg_write_barrier();
	memcpy(unvolatize(DPProgressRow *, &slot->row), &mine, sizeof(mine));
	pg_write_barrier();
	slot->changecount++;
	END_CRIT_SECTION();
}

/* The row goes: the slot is free again, no load owns it. */
static void
clear(void)
{
	memset(&mine, 0, sizeof(mine));
	memset(&dp_progress_counts, 0, sizeof(dp_progress_counts));
	publish();
	owner = NULL;
	owner_is_worker = false;
	logging = false;
	my_slot = NULL;
}

/* A (sub)transaction that ends takes the row of a load begun in it. */
static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (owner == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			clear();
			break;
		default:
			break;
	}
}

static void
progress_subxact_callback(SubXactEvent event, SubTransactionId sub,
						  SubTransactionId parent, void *arg)
{
	if (owner != NULL && event == SUBXACT_EVENT_ABORT_SUB &&
		owner_level >= GetCurrentTransactionNestLevel())
		clear();
}

void
dp_progress_init(void)
{
	/* a row's owner (shown, or only logged) goes with its transaction */
	RegisterXactCallback(progress_xact_callback, NULL);
	RegisterSubXactCallback(progress_subxact_callback, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request = shmem_request_hook;
	shmem_request_hook = progress_shmem_request;
	prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = progress_shmem_startup;
}

/* A consistent copy of slot i (see the file header). */
static void
read_slot(int i, DPProgressRow *row)
{
	volatile DPProgressSlot *slot = &slots[i];

	for (;;)
	{
		uint32		before = slot->changecount;

		pg_read_barrier();
		memcpy(row, unvolatize(DPProgressRow *, &slot->row), sizeof(*row));
		pg_read_barrier();
		if (before == slot->changecount && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Take this process's row for 'who': its slot, when the row is shown, and
 * its phases' times; false if another load of this process has it.
 */
static bool
take_slot(const void *who)
{
	int			i = DP_MY_PROC_INDEX();
	bool		show = slots != NULL && dp_progress && i >= 0 && i < nslots;

	if (owner != NULL)
		return false;
	owner = who;
	owner_level = GetCurrentTransactionNestLevel();
	my_slot = show ? &slots[i] : NULL;
	logging = dp_log_min_rows >= 0;
	memset(phase_us, 0, sizeof(phase_us));
	wal_at_start = pgWalUsage.wal_bytes;
	memset(&mine, 0, sizeof(mine));
	memset(&dp_progress_counts, 0, sizeof(dp_progress_counts));
	mine.pid = MyProcPid;
	mine.datid = MyDatabaseId;
	mine.userid = GetSessionUserId();
	mine.bytes = -1;
	mine.started = GetCurrentTimestamp();
	phase_since = mine.started;
	return true;
}

void
dp_progress_begin(const void *who, Oid relid, const char *kind)
{
	if (!take_slot(who))
		return;
	mine.relid = relid;
	strlcpy(mine.kind, kind, sizeof(mine.kind));
	mine.copy = strcmp(kind, "COPY") == 0;
	mine.phase = DP_PHASE_READING;
	publish();
}

void
dp_progress_relation(const void *who, Oid relid)
{
	if (who != owner || owner == NULL)
		return;
	mine.relid = relid;
	publish();
}

void
dp_progress_expect_rows(const void *who, double rows)
{
	if (who != owner || owner == NULL || rows < 0)
		return;
	mine.total = rows >= (double) PG_INT64_MAX ? PG_INT64_MAX : (int64) rows;
	mine.total_unit = DP_TOTAL_ROWS;
	mine.estimate = true;
	publish();
}

void
dp_progress_phase(const void *who, DPProgressPhase phase, uint64 rows)
{
	if (who != owner || owner == NULL)
		return;
	if (phase != mine.phase)
	{
		TimestampTz now = GetCurrentTimestamp();

		phase_us[mine.phase] += now - phase_since;
		phase_since = now;
	}
	mine.phase = phase;
	mine.rows = rows;
	publish();
}

void
dp_progress_rows(const void *who, uint64 rows)
{
	dp_progress_phase(who, mine.phase, rows);
}

/*
 * The log line: directpath: KIND "schema.table": N rows, ..., T s: phase
 * t s, ... (the phases in the pipeline's order, those that took time).
 */
static void
phase_times(TimestampTz now, StringInfo buf)
{
	for (int p = 0; p <= DP_PHASE_FINISHING; p++)
	{
		int64		us = phase_us[p] + (p == (int) mine.phase ? now - phase_since : 0);

		if (us > 0)
			appendStringInfo(buf, "%s%s %.3f s", buf->len > 0 ? ", " : "",
							 phase_names[p], us / 1000000.0);
	}
}

void
dp_progress_describe_phases(const void *who, char *out, size_t len)
{
	StringInfoData buf;

	if (who != owner || owner == NULL)
		return;
	initStringInfo(&buf);
	phase_times(GetCurrentTimestamp(), &buf);
	strlcpy(out, buf.data, len);
	pfree(buf.data);
}

static void
log_load(void)
{
	TimestampTz now = GetCurrentTimestamp();
	char	   *rel = OidIsValid(mine.relid) ? get_rel_name(mine.relid) : NULL;
	char	   *nsp = rel ? get_namespace_name(get_rel_namespace(mine.relid)) : NULL;
	StringInfoData buf;

	initStringInfo(&buf);
	phase_times(now, &buf);
	ereport(LOG,
			(errmsg("directpath: %s \"%s.%s\": %lld rows, %lld pages written, %lld index entries, WAL %llu bytes, %.3f s: %s",
					mine.kind, nsp ? nsp : "?", rel ? rel : "?",
					(long long) mine.rows, (long long) mine.pages,
					(long long) mine.entries,
					(unsigned long long) (pgWalUsage.wal_bytes - wal_at_start),
					(now - mine.started) / 1000000.0, buf.data),
			 errhidestmt(true)));
}

void
dp_progress_end(const void *who)
{
	if (who != owner || owner == NULL)
		return;
	mine.pages = dp_progress_counts.pages;
	mine.entries = dp_progress_counts.entries;
	if (logging && !owner_is_worker && mine.rows >= dp_log_min_rows)
		log_load();
	clear();
}

/*
 * A parallel worker's row: its leader's statement, relation and role,
 * while the leader's load has a row (the leader's slot is read as any
 * reader reads it).
 */
void
dp_progress_begin_worker(const void *who)
{
	int			leader = DP_LEADER_PROC_INDEX();
	DPProgressRow row;

	if (slots == NULL || leader < 0 || leader >= nslots)
		return;
	read_slot(leader, &row);
	if (row.pid == 0 || !take_slot(who))
		return;
	owner_is_worker = true;
	mine.leader_pid = row.pid;
	mine.relid = row.relid;
	strlcpy(mine.kind, row.kind, sizeof(mine.kind));
	mine.phase = DP_PHASE_READING;
	publish();
}

void
dp_progress_parallel(const void *who, int workers)
{
	if (who != owner || owner == NULL)
		return;
	mine.workers = workers;
	publish();
}

void
dp_progress_page_sent(int rows)
{
	if (!owner_is_worker)
		return;
	mine.rows += rows;
	dp_progress_counts.pages++;
	publish();
}

/* ---- directpath.get_progress() ---- */

static Datum
interval_datum(int64 usecs)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = usecs;
	return IntervalPGetDatum(iv);
}

/* The time left at the rate so far, while rows are read; -1 if unknown. */
static int64
eta(const DPProgressRow *row, int64 elapsed)
{
	int64		done = row->total_unit == DP_TOTAL_BYTES ? row->bytes : row->rows;

	if (row->total_unit == DP_TOTAL_NONE || row->phase > DP_PHASE_ENTRIES ||
		done <= 0 || done >= row->total)
		return -1;
	return (int64) ((double) elapsed * (double) (row->total - done) / (double) done);
}

#define DP_PROGRESS_COLS 18

/* One visible row's values (pid and leader set by the caller). */
static void
row_values(const DPProgressRow *row, TimestampTz now, Datum *values,
		   bool *nulls)
{
	int64		elapsed = Max(now - row->started, 0);
	int64		left = eta(row, elapsed);

	values[2] = ObjectIdGetDatum(row->datid);
	values[3] = ObjectIdGetDatum(row->relid);
	values[4] = ObjectIdGetDatum(row->relid);
	nulls[4] = row->datid != MyDatabaseId;
	values[5] = CStringGetTextDatum(row->kind);
	values[6] = CStringGetTextDatum(phase_names[row->phase]);
	values[7] = Int64GetDatum(row->rows);
	values[8] = Int64GetDatum(row->bytes);
	nulls[8] = row->bytes < 0;
	values[9] = Int64GetDatum(row->pages);
	values[10] = Int64GetDatum(row->entries);
	values[11] = Int64GetDatum(row->total);
	values[12] = CStringGetTextDatum(row->total_unit == DP_TOTAL_BYTES ?
									 "bytes" : "rows");
	values[13] = BoolGetDatum(row->estimate);
	nulls[11] = nulls[12] = nulls[13] = row->total_unit == DP_TOTAL_NONE;
	values[14] = TimestampTzGetDatum(row->started);
	values[15] = interval_datum(elapsed);
	values[16] = interval_datum(left);
	nulls[16] = left < 0;
}

/* The rows of the view: which process a row describes, by its name. */
typedef enum DPProcessRow
{
	DP_ROW_STATEMENT,			/* a serial statement */
	DP_ROW_WORKER,				/* a parallel worker */
	DP_ROW_LEADER,				/* a parallel leader's own share */
	DP_ROW_TOTAL				/* a parallel statement's whole */
} DPProcessRow;

static const char *const process_names[] = {
	[DP_ROW_STATEMENT] = "statement",
	[DP_ROW_WORKER] = "worker",
	[DP_ROW_LEADER] = "leader",
	[DP_ROW_TOTAL] = "total",
};

/*
 * Put one row of the view: slot 'row' as process 'process'; numbers only
 * for a reader entitled to them.  A parallel leader's own row ("leader")
 * counts the rows it placed itself (those of its workers' pages taken off)
 * and has no total; its "total" row counts the statement.
 */
static void
put_row(ReturnSetInfo *rsinfo, const DPProgressRow *row, DPProcessRow process,
		bool entitled, TimestampTz now)
{
	Datum		values[DP_PROGRESS_COLS];
	bool		nulls[DP_PROGRESS_COLS];

	memset(nulls, true, sizeof(nulls));
	values[0] = Int32GetDatum(row->pid);
	nulls[0] = false;
	values[17] = CStringGetTextDatum(process_names[process]);
	nulls[17] = false;
	if (entitled)
	{
		memset(nulls, false, sizeof(nulls));
		values[1] = Int32GetDatum(row->leader_pid);
		nulls[1] = row->leader_pid == 0;
		row_values(row, now, values, nulls);
		if (process == DP_ROW_LEADER)
		{
			values[7] = Int64GetDatum(Max(row->rows - row->worker_rows, 0));
			nulls[11] = nulls[12] = nulls[13] = nulls[16] = true;
		}
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(dp_get_progress);

Datum
dp_get_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	TimestampTz now = GetCurrentTimestamp();
	bool		processes;

	InitMaterializedSRF(fcinfo, 0);
	/* before 0.9 the function had no 'process': a row per process */
	processes = rsinfo->setDesc->natts >= DP_PROGRESS_COLS;
	for (int i = 0; i < nslots; i++)
	{
		DPProgressRow row;
		bool		entitled;

		read_slot(i, &row);
		if (row.pid == 0)
			continue;
		entitled = all || has_privs_of_role(GetUserId(), row.userid);
		if (row.leader_pid != 0)
			put_row(rsinfo, &row, DP_ROW_WORKER, entitled, now);
		else if (row.workers == 0 || !processes)
			put_row(rsinfo, &row, DP_ROW_STATEMENT, entitled, now);
		else
		{
			put_row(rsinfo, &row, DP_ROW_LEADER, entitled, now);
			put_row(rsinfo, &row, DP_ROW_TOTAL, entitled, now);
		}
	}
	return (Datum) 0;
}
