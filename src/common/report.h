/*-------------------------------------------------------------------------
 *
 * report.h
 *	  What a statement did and why: last_statement(), EXPLAIN's lines and
 *	  the "uses the normal path" messages (report.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_REPORT_H
#define DP_REPORT_H

#include "common/compat.h"

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
	char		phases[DP_REASON_LEN];	/* time per phase (progress.c), for
										 * EXPLAIN ANALYZE; "" if none */
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
 * 'sets' (names and key counts) then checked as a set at the end of the
 * load, 'rowwise' (names and reasons) per row; any may be "".
 */
extern void dp_report_foreign_keys(DPReport *r, const char *batched,
								   const char *sets, const char *rowwise);

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

#endif							/* DP_REPORT_H */
