/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The directpath.* settings every stage reads (defined in settings.c,
 *	  documented in docs/settings.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_SETTINGS_H
#define DP_SETTINGS_H

/* directpath.mode */
typedef enum DPMode
{
	DP_MODE_OFF,
	DP_MODE_HINT,
	DP_MODE_ALWAYS,
} DPMode;

/* directpath.wal_format */
typedef enum DPWalFormat
{
	DP_WAL_IMAGE,
	DP_WAL_RECORDS,
} DPWalFormat;

extern int	dp_mode;
extern int	dp_fallback_level;
extern int	dp_min_bytes;
extern int	dp_batch_pages;
extern bool dp_index_rebuild;
extern bool dp_index_sort;
extern bool dp_index_key_sort;
extern bool dp_bulk_update;
extern int	dp_bulk_dml_min_rows;
extern bool dp_index_append;
extern bool dp_index_runs;
extern bool dp_index_leaf_merge;
extern int	dp_parallel_workers;
extern bool dp_index_merge;
extern bool dp_brin_summarize;
extern bool dp_fkey_batches;
extern int	dp_fkey_set_rows;
extern bool dp_fkey_table_lock;
extern bool dp_fkey_sets_ahead;
extern bool dp_concurrent_loads;
extern bool dp_index_spool;
/* directpath.copy_fast_input (input/fastin.c) */
typedef enum DPFastInMode
{
	DP_FASTIN_OFF,
	DP_FASTIN_ON,
	DP_FASTIN_CHECK				/* both, failing on any difference */
} DPFastInMode;

extern int	dp_copy_fast_input;
extern bool dp_copy_row_former;	/* directpath.copy_row_former (input/rowform.c) */
extern bool dp_load_statistics;	/* directpath.load_statistics (stats/stats.c) */
extern bool dp_foreign_copy;	/* directpath.foreign_copy (remote/shard.c) */
extern bool dp_shard_two_phase; /* directpath.shard_two_phase
								 * (remote/shardcommit.c) */
extern bool dp_progress;		/* directpath.progress (common/progress.c) */
extern int	dp_log_min_rows;	/* directpath.log_min_rows (common/progress.c) */
extern int	dp_wal_format;

/* Define every setting above (from _PG_init). */
extern void dp_settings_init(void);

#endif							/* DP_SETTINGS_H */
