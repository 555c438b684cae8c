/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  Every directpath.* setting: its variable and its definition, in the
 *	  order of docs/settings.md's table (the one place that documents them).
 *
 * The settings are defined once, by _PG_init (directpath.c), before any
 * hook is installed, and reserved as a prefix so that a misspelt
 * directpath.* name is an error.  Every stage reads the variables directly
 * (common/settings.h); none writes them.  The fault-injection settings
 * belong to fault.c, which defines them itself (dp_fault_init), last.
 *
 * Groups, as the table orders them: the statement's path (when a statement
 * is direct, how its batches are written and logged, its workers); index
 * maintenance; COPY's input, statistics, remote shards, updates in bulk,
 * foreign keys and progress.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "common/settings.h"

#include "utils/guc.h"

int			dp_mode = DP_MODE_HINT;
int			dp_fallback_level = NOTICE;
int			dp_min_bytes = BLCKSZ;
int			dp_batch_pages = 512;
bool		dp_index_rebuild = true;
bool		dp_index_sort = true;
bool		dp_index_key_sort = true;
bool		dp_bulk_update = true;
int			dp_bulk_dml_min_rows = 100000;
bool		dp_index_append = true;
bool		dp_index_merge = true;
bool		dp_brin_summarize = true;
bool		dp_index_runs = true;
bool		dp_index_leaf_merge = true;
int			dp_parallel_workers = 0;
bool		dp_fkey_batches = true;
int			dp_fkey_set_rows = 100000;
bool		dp_fkey_table_lock = false;
bool		dp_fkey_sets_ahead = true;
bool		dp_concurrent_loads = true;
bool		dp_index_spool = true;
int			dp_wal_format = DP_WAL_RECORDS;
int			dp_copy_fast_input = DP_FASTIN_ON;
bool		dp_copy_row_former = true;
bool		dp_load_statistics = true;
bool		dp_foreign_copy = true;
bool		dp_shard_two_phase = false;
bool		dp_progress = true;
int			dp_log_min_rows = -1;

static const struct config_enum_entry fast_input_options[] = {
	{"on", DP_FASTIN_ON, false},
	{"off", DP_FASTIN_OFF, false},
	{"check", DP_FASTIN_CHECK, false},
	{NULL, 0, false}
};

static const struct config_enum_entry wal_formats[] = {
	{"image", DP_WAL_IMAGE, false},
	{"records", DP_WAL_RECORDS, false},
	{NULL, 0, false}
};

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

/* When a statement is direct, how its batches are written, its workers. */
static void
define_statement_settings(void)
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
	DefineCustomEnumVariable("directpath.wal_format",
							 "How appended pages are WAL-logged.",
							 "image: full-page images; records: heap multi-insert records that initialise the page.",
							 &dp_wal_format, DP_WAL_RECORDS, wal_formats,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.parallel_workers",
							"Parallel workers that build the pages of an eligible INSERT ... SELECT or COPY FROM a file or program.",
							"0: none unless the hint asks with PARALLEL(n); capped by max_parallel_workers.",
							&dp_parallel_workers, 0, 0, 64,
							PGC_USERSET, 0, NULL, NULL, NULL);
}

/* Index maintenance. */
static void
define_index_settings(void)
{
	DefineCustomBoolVariable("directpath.index_sort",
							 "Inserts a batch's btree index entries in key order.",
							 "Off: row by row, in input order.",
							 &dp_index_sort, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_key_sort",
							 "Sorts btree entries whose key columns are all integers, dates or timestamps by their integer keys.",
							 "Off: core's btree tuplesort for every index.",
							 &dp_index_key_sort, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_append",
							 "Appends a batch's sorted btree entries at the index's right edge when they all sort after its entries.",
							 "Off: they are inserted one by one, in key order.",
							 &dp_index_append, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_runs",
							 "Writes a batch's sorted btree entries that follow the last item of a leaf as new leaf pages there.",
							 "Off: entries that cannot be appended at the right edge are inserted one by one, in key order.",
							 &dp_index_runs, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_leaf_merge",
							 "Merges a batch's sorted btree entries that fall among a leaf's items into that leaf, dropping the entries of aborted rows whose keys they repeat.",
							 "Off: such entries are inserted one by one, in key order.",
							 &dp_index_leaf_merge, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_merge",
							 "Lets a large load rewrite an existing non-unique btree with its entries merged in.",
							 "Off: the entries are inserted after each batch.",
							 &dp_index_merge, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_rebuild",
							 "Rebuild the indexes of storage created in this transaction once, after the load.",
							 NULL,
							 &dp_index_rebuild, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.index_spool",
							 "Builds the btree indexes of storage new in the transaction from entries sorted during the load.",
							 "Off: they are rebuilt by REINDEX after the load, which reads the heap again.",
							 &dp_index_spool, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.brin_summarize",
							 "Summarizes the block ranges a load wrote in its BRIN indexes once, at the end of the statement.",
							 "Off: an index call per row, and the new ranges stay unsummarized until a vacuum.",
							 &dp_brin_summarize, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}

/* COPY's input, statistics, shards, updates in bulk, foreign keys, progress. */
static void
define_other_settings(void)
{
	DefineCustomEnumVariable("directpath.copy_fast_input",
							 "Whether a direct COPY parses common types' text itself.",
							 "on: exact fast parsers for int2, int4, int8, bool, date, timestamp, timestamptz and uuid in their plain forms, short float4 and float8 decimals, and text, varchar and character within their limits, the type's input function for everything else; off: the input functions only; check: both, failing on any difference.",
							 &dp_copy_fast_input, DP_FASTIN_ON, fast_input_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.copy_row_former",
							 "Whether a direct text or CSV COPY forms its rows itself.",
							 "on: directpath's reader splits the input into rows and fields in one pass and hands what it does not reproduce to core's; off: core's reader.",
							 &dp_copy_row_former, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.load_statistics",
							 "Whether a direct load into an empty table gathers its statistics.",
							 "on: a load that fills a table (or partition) from empty samples its rows as it writes them and stores the column statistics, size and analyze time that ANALYZE would; off: they are left to ANALYZE.",
							 &dp_load_statistics, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.shard_two_phase",
							 "Whether the shards a load streamed to commit in two phases with the local transaction.",
							 "on: their remote transactions are prepared before the local commit and committed after it (directpath.resolve_shards() settles what a crash left in doubt); off: postgres_fdw commits them before the local commit.",
							 &dp_shard_two_phase, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.foreign_copy",
							 "Whether a direct load streams the rows of postgres_fdw partitions as COPY.",
							 "on: each postgres_fdw partition's rows go to its server as one COPY over postgres_fdw's connection, all servers at once; off: the wrapper's batched INSERTs.",
							 &dp_foreign_copy, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.bulk_dml_min_rows",
							"Under directpath.mode = always, an UPDATE or DELETE the planner expects to change fewer rows stays on the normal path.",
							"A hinted statement is taken whatever its size; -1 leaves every unhinted UPDATE and DELETE to the normal path.",
							&dp_bulk_dml_min_rows, 100000, -1, INT_MAX,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.bulk_update",
							 "Makes the updates of a direct ON CONFLICT DO UPDATE or MERGE, and a direct UPDATE's or DELETE's changes, in bulk: new versions on appended pages, old pages changed once.",
							 "Off: core's executor changes each row.",
							 &dp_bulk_update, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.fkey_batches",
							 "Checks the foreign keys of directly written rows once per batch.",
							 "Off: core's per-row trigger events.",
							 &dp_fkey_batches, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.fkey_set_rows",
							"Rows of a load after which a foreign key's keys are checked as one set at its end.",
							"The distinct keys of the later rows are sorted and checked in large chunks after the last row; 0 keeps the checks per batch.",
							&dp_fkey_set_rows, 100000, 0, INT_MAX,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.fkey_table_lock",
							 "Locks each table a direct load's foreign keys reference in SHARE mode instead of locking each referenced row.",
							 "Others cannot insert, update or delete in the referenced tables until the transaction ends; the rows are not locked one by one (no WAL record, page image or dirty page each).",
							 &dp_fkey_table_lock, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.fkey_sets_ahead",
							 "Lets a parallel load's foreign key sets be found by a parallel worker while the leader makes the indexes.",
							 "The worker only reads the referenced tables; the leader locks the rows it found, or checks again what changed since. Off: the leader finds them after the indexes.",
							 &dp_fkey_sets_ahead, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.concurrent_loads",
							 "Lets a COPY or INSERT that directpath.mode = always sends to the direct path load beside the table's other writers when its lock is taken, instead of waiting.",
							 "Such a load holds RowExclusiveLock, as the plain statement, and writes its pages through shared buffers and its index entries by core's insertion. Off: it waits for ShareRowExclusiveLock.",
							 &dp_concurrent_loads, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.log_min_rows",
							"Logs one line at the end of a direct statement of at least this many rows: rows, pages, index entries, WAL, time per phase.",
							"-1 (the default) logs none; 0 logs every direct statement.",
							&dp_log_min_rows, -1, -1, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("directpath.progress",
							 "Shows a direct statement's progress in directpath.progress while it runs.",
							 "Needs shared_preload_libraries; off: the statement has no row there.",
							 &dp_progress, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}

void
dp_settings_init(void)
{
	define_statement_settings();
	define_index_settings();
	define_other_settings();
}
