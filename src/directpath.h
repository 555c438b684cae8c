/*-------------------------------------------------------------------------
 *
 * directpath.h
 *	  What every stage of directpath uses: the settings, the report of a
 *	  statement (report.c) and the fault points (fault.c).
 *
 * The source tree is the pipeline; a statement flows one way through its
 * stages, each a folder with one header that exposes what the stages above
 * it call (no stage calls one above it, except through the hooks that
 * directpath.c installs; scripts/callgraph.py checks this):
 *
 *	directpath.c	settings; installs the statement stage's hooks
 *	statement/		the statements taken over: plan.c (parse-analysis and
 *					planner hooks), exec.c (the DirectPath node that drives
 *					an INSERT's rows into a load), copy.c (COPY FROM)
 *	parallel/		a parallel load: parallel.c (workers build pages, the
 *					leader writes them), parcopy.c (COPY's chunks parsed by
 *					workers and the leader)
 *	admission/		direct or not, and why: admission.c (the decision, the
 *					early lock, the freezing rule), hint.c, eligibility.c
 *	load/			the row loop: load.c (row checks, the flush rule),
 *					leaf.c (per relation written), queue.c (after-insert
 *					work), foreign.c, fkeys.c, rejects.c
 *	index/			index maintenance: indexes.c (every strategy),
 *					btree.c (the btree page builder), btappend.c, btmerge.c,
 *					brin.c
 *	input/			how a direct COPY's bytes become rows: chunker.c (the
 *					input cut into chunks of whole lines), rowform.c (a
 *					chunk's rows formed in one pass), scan.c (its special
 *					bytes found by a vectorized scan), fastin.c (exact fast
 *					input of common types)
 *	heap/			heap pages: pages.c (the page builder), append.c
 *					(crash-safe appends), wal.c, visibility.c
 *	stats/			statistics at load time: stats.c (a sample of the
 *					rows as pages are written, then what ANALYZE stores)
 *	report.c		last_statement(), EXPLAIN lines, fallback messages
 *	fault.c			named fault points for the crash tests
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECTPATH_H
#define DIRECTPATH_H

#include "compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

/* ---------- settings (directpath.c) ---------- */

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
extern bool dp_index_append;
extern bool dp_index_runs;
extern bool dp_index_leaf_merge;
extern int	dp_parallel_workers;
extern bool dp_index_merge;
extern bool dp_brin_summarize;
extern bool dp_fkey_batches;
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
extern bool dp_foreign_copy;	/* directpath.foreign_copy (load/shard.c) */
extern bool dp_shard_two_phase; /* directpath.shard_two_phase
								 * (load/shardcommit.c) */
extern int	dp_wal_format;


/* ---------- fault.c ---------- */

/* Define the fault-injection settings. */
extern void dp_fault_init(void);

/* A statement begins: count fault-point hits from zero. */
extern void dp_fault_reset(void);

/* Pass the named point; may raise, sleep or notify (see fault.c). */
extern void dp_fault(const char *point);

/* ---------- report.c ---------- */

#define DP_REASON_LEN 256

/* What one INSERT or COPY did, as last_statement() and EXPLAIN say it. */
typedef struct DPReport
{
	bool		direct;			/* rows went to the direct path */
	char		reason[DP_REASON_LEN];	/* why not, or "" */
	uint64		rows;			/* rows inserted (the command tag's count) */
	uint64		pages;			/* heap pages written directly */
	bool		frozen;			/* some pages went out frozen */
	int			relations;		/* leaf relations written */
	int			indexes_rebuilt;	/* indexes built or rebuilt at the end */
	uint32		index_strategies;	/* bit (1 << DPIndexStrategy) per one used */
	char		foreign_keys[DP_REASON_LEN];	/* how they were checked, or
												 * "" */
	int			parallel_workers;	/* workers that built pages (parallel.c) */
	char		parallel[DP_REASON_LEN];	/* asked for parallel: why not,
											 * or "" */
	char		foreign_partitions[DP_REASON_LEN];	/* each one's path, or "" */
	char		statistics[DP_REASON_LEN];	/* gathered at load time, or why
											 * not; "" when not considered */
	char		updates[DP_REASON_LEN]; /* DO UPDATE's updates: how many in
										 * bulk, how many by core and why;
										 * "" when none */
} DPReport;

/* Empty report: normal path, no reason, nothing written. */
extern void dp_report_init(DPReport *r);

/* A reason, formatted into memory of the current context. */
extern const char *dp_report_reason(const char *fmt,...) pg_attribute_printf(1, 2);

/*
 * The statement uses the normal path because of 'why': copy the reason into
 * the report and tell the user, at directpath.fallback_message_level with
 * 'notify' (a hinted statement refused for a reason other than its size),
 * else at DEBUG1.  'kind' is "INSERT", "COPY" or "MERGE".
 */
extern void dp_report_normal(DPReport *r, bool notify, const char *kind,
							 const char *why);

/*
 * The foreign keys of a direct load: 'batched' (names) checked per batch,
 * 'rowwise' (names and reasons) per row; either may be "".
 */
extern void dp_report_foreign_keys(DPReport *r, const char *batched,
								   const char *rowwise);

/* The report last_statement() returns, copied into *out; false if none. */
extern bool dp_report_last(DPReport *out);

/* Make the report last_statement()'s (copied); returns its id. */
extern uint64 dp_report_publish(const DPReport *r);

/* Fill in the row count of the report published as 'id', if still last. */
extern void dp_report_rows(uint64 id, uint64 rows);

/* EXPLAIN's lines for the report; 'ran' when the load ran (ANALYZE). */
extern void dp_report_explain(const DPReport *r, bool ran, ExplainState *es);

/*
 * Planner: the statement at [location, location + len) of 'source' keeps
 * core's plan because of 'why'.  Executor start: publish that reason if
 * the statement's text was noted; returns the report id or 0.
 */
extern void dp_report_note_plan(const char *source, int location, int len,
								const char *why);
extern uint64 dp_report_plan_start(const char *source, int location, int len);

#endif							/* DIRECTPATH_H */
