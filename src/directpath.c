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
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

int			dp_mode = DP_MODE_HINT;
int			dp_fallback_level = NOTICE;
int			dp_min_bytes = BLCKSZ;
int			dp_batch_pages = 512;
bool		dp_index_rebuild = true;

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
	MarkGUCPrefixReserved("directpath");

	dp_plan_init();
}

void
dp_set_last(bool direct, const char *reason, uint64 rows, uint64 pages,
			bool frozen, int relations, int indexes_rebuilt)
{
	dp_last.valid = true;
	dp_last.direct = direct;
	strlcpy(dp_last.reason, reason ? reason : "", sizeof(dp_last.reason));
	dp_last.rows = rows;
	dp_last.pages = pages;
	dp_last.frozen = frozen;
	dp_last.relations = relations;
	dp_last.indexes_rebuilt = indexes_rebuilt;
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
