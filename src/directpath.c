/*-------------------------------------------------------------------------
 *
 * directpath.c
 *	  Module entry point: settings, hooks, and directpath.last_statement().
 *
 * The library must be loaded before the statements it should handle are
 * parsed: shared_preload_libraries, session_preload_libraries or LOAD.
 * Settings (documented in README.md):
 *
 *	directpath.mode				hint | always | off
 *	directpath.fallback_message_level	level of "uses the normal path"
 *	directpath.min_bytes		statements producing less use the normal path
 *	directpath.batch_pages		pages built in memory before a flush
 *	directpath.index_rebuild	rebuild indexes of new storage at the end
 *	directpath.index_sort		insert a batch's btree entries in key order
 *	directpath.wal_format		image | records (wal.c)
 *	directpath.fault_point, fault_action, fault_hit, fault_sleep_ms
 *								fault injection for the crash tests (superuser)
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "miscadmin.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

int			dp_mode = DP_MODE_HINT;
int			dp_fallback_level = NOTICE;
int			dp_min_bytes = BLCKSZ;
int			dp_batch_pages = 512;
bool		dp_index_rebuild = true;
bool		dp_index_sort = true;
int			dp_wal_format = DP_WAL_RECORDS;

static const struct config_enum_entry wal_formats[] = {
	{"image", DP_WAL_IMAGE, false},
	{"records", DP_WAL_RECORDS, false},
	{NULL, 0, false}
};

/* Fault injection (dp_fault) */
static char *dp_fault_point = NULL;
static int	dp_fault_action = 0;
static int	dp_fault_hit = 1;
static int	dp_fault_sleep_ms = 60000;
static int	dp_fault_count = 0;

enum
{
	DP_FAULT_ERROR,
	DP_FAULT_SLEEP,
	DP_FAULT_NOTICE,
};

static const struct config_enum_entry fault_actions[] = {
	{"error", DP_FAULT_ERROR, false},
	{"sleep", DP_FAULT_SLEEP, false},
	{"notice", DP_FAULT_NOTICE, false},
	{NULL, 0, false}
};

DPLastStatement dp_last;

static const struct config_enum_entry mode_options[] = {
	{"off", DP_MODE_OFF, false},
	{"hint", DP_MODE_HINT, false},
	{"always", DP_MODE_ALWAYS, false},
	{NULL, 0, false}
};

static const struct config_enum_entry level_options[] = {
	{"debug", DEBUG1, false},
	{"log", LOG, false},
	{"info", INFO, false},
	{"notice", NOTICE, false},
	{"warning", WARNING, false},
	{NULL, 0, false}
};

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomEnumVariable("directpath.mode",
							 "When INSERT takes the direct path.",
							 "hint: statements with /*+ APPEND */; always: every eligible INSERT; off: never.",
							 &dp_mode, DP_MODE_HINT, mode_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("directpath.fallback_message_level",
							 "Message level for reporting that a hinted statement used the normal path.",
							 NULL,
							 &dp_fallback_level, NOTICE, level_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.min_bytes",
							"Statements that produce less than this many bytes of rows use the normal path.",
							"0 sends every eligible statement to the direct path.",
							&dp_min_bytes, BLCKSZ, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.batch_pages",
							"Pages built in memory before they are written in one batch.",
							NULL,
							&dp_batch_pages, 512, 1, 131072,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_rebuild",
							 "Rebuild the indexes of storage created in this transaction once, after the load.",
							 NULL,
							 &dp_index_rebuild, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("directpath.fault_point",
							   "Test only: named point of the load at which to inject a fault.",
							   "Empty (the default) disables fault injection.",
							   &dp_fault_point, "",
							   PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("directpath.fault_action",
							 "Test only: what happens at directpath.fault_point.",
							 NULL,
							 &dp_fault_action, DP_FAULT_ERROR, fault_actions,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.fault_hit",
							"Test only: the fault fires at this hit of the point (1 = first).",
							NULL,
							&dp_fault_hit, 1, 1, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.fault_sleep_ms",
							"Test only: how long fault_action = sleep sleeps.",
							NULL,
							&dp_fault_sleep_ms, 60000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_sort",
							 "Inserts a batch's btree index entries in key order.",
							 "Off: row by row, in input order.",
							 &dp_index_sort, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("directpath.wal_format",
							 "How appended pages are WAL-logged.",
							 "image: full-page images; records: heap multi-insert records that initialise the page.",
							 &dp_wal_format, DP_WAL_RECORDS, wal_formats,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("directpath");

	dp_plan_init();
}

/* A statement begins: count fault-point hits from zero. */
void
dp_fault_reset(void)
{
	dp_fault_count = 0;
}

/*
 * A named point of the load.  Crash tests stop a load at an exact place by
 * setting directpath.fault_point to its name: the Nth hit (fault_hit) of
 * the point in the statement raises an ERROR, sleeps (the test then kills the
 * backend or the server), or sends a NOTICE naming the point.  Points:
 *
 *	first_batch		before the first batch of pages is written
 *	batch_wal		after a batch's WAL, before its pages are written (inside
 *					the checkpoint-delay window)
 *	batch_written	after a batch's pages are written, before its rows'
 *					index entries and triggers
 *	batch_done		after a batch's deferred row work
 *	before_vm		before the visibility map of frozen pages is set
 *	before_index_rebuild, after_index_rebuild
 *	finish			after everything, before AFTER STATEMENT triggers
 */
void
dp_fault(const char *point)
{
	if (dp_fault_point == NULL || dp_fault_point[0] == '\0' ||
		strcmp(dp_fault_point, point) != 0)
		return;
	if (++dp_fault_count != dp_fault_hit)
		return;
	switch (dp_fault_action)
	{
		case DP_FAULT_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: injected fault at \"%s\"", point)));
			break;
		case DP_FAULT_SLEEP:
			ereport(LOG, (errmsg("directpath: sleeping at fault point \"%s\"", point)));
			for (int ms = 0; ms < dp_fault_sleep_ms; ms += 10)
			{
				CHECK_FOR_INTERRUPTS();
				pg_usleep(10000L);
			}
			break;
		case DP_FAULT_NOTICE:
			ereport(NOTICE, (errmsg("directpath: fault point \"%s\"", point)));
			break;
	}
}

/*
 * Record what the last INSERT or COPY did; returns an id by which a
 * statement that learns its row count only later (one left to the normal
 * path at plan time) can fill it in, unless another statement, say one run
 * by a trigger, has recorded itself since.
 */
uint64
dp_set_last(bool direct, const char *reason, uint64 rows, uint64 pages,
			bool frozen, int relations, int indexes_rebuilt)
{
	static uint64 last_id = 0;

	dp_last.id = ++last_id;
	dp_last.valid = true;
	dp_last.direct = direct;
	strlcpy(dp_last.reason, reason ? reason : "", sizeof(dp_last.reason));
	dp_last.rows = rows;
	dp_last.pages = pages;
	dp_last.frozen = frozen;
	dp_last.relations = relations;
	dp_last.indexes_rebuilt = indexes_rebuilt;
	return dp_last.id;
}

void
dp_set_last_rows(uint64 id, uint64 rows)
{
	if (dp_last.valid && dp_last.id == id)
		dp_last.rows = rows;
}

PG_FUNCTION_INFO_V1(directpath_last_statement);

Datum
directpath_last_statement(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (!dp_last.valid)
		PG_RETURN_NULL();

	values[0] = CStringGetTextDatum(dp_last.direct ? "direct" : "normal");
	if (dp_last.reason[0])
		values[1] = CStringGetTextDatum(dp_last.reason);
	else
		nulls[1] = true;
	values[2] = Int64GetDatum((int64) dp_last.rows);
	values[3] = Int64GetDatum((int64) dp_last.pages);
	values[4] = BoolGetDatum(dp_last.frozen);
	values[5] = Int32GetDatum(dp_last.relations);
	values[6] = Int32GetDatum(dp_last.indexes_rebuilt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
