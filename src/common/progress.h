/*-------------------------------------------------------------------------
 *
 * progress.h
 *	  The progress of the running direct statements, one row per process
 *	  in shared memory, read by directpath.progress (progress.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_PROGRESS_H
#define DP_PROGRESS_H

/* The pipeline's stages, as the view names them. */
typedef enum DPProgressPhase
{
	DP_PHASE_READING,			/* "reading input": rows placed on pages */
	DP_PHASE_WRITING,			/* "writing pages": a batch's WAL and writes */
	DP_PHASE_ENTRIES,			/* "index entries": a batch's after-insert
								 * work (entries, triggers, foreign keys) */
	DP_PHASE_BUILDING,			/* "building indexes" of new storage */
	DP_PHASE_MERGING,			/* "merging indexes": entries that waited */
	DP_PHASE_FKEYS,				/* "checking foreign keys" as a set */
	DP_PHASE_STATISTICS,		/* "statistics" stored */
	DP_PHASE_UPDATES,			/* "updating rows" after the load */
	DP_PHASE_FINISHING,			/* "finishing" */
} DPProgressPhase;

/* A load publishes its row count at least every this many rows. */
#define DP_PROGRESS_ROWS 8192

/*
 * What the stages below the load count as they go, between two
 * publications (pages.c: heap pages written; indexes.c: index entries
 * made or sorted for a build; a parallel leader's receiving loop: the rows
 * of its workers' pages).  Plain counters of this process.
 */
typedef struct DPProgressCounts
{
	uint64		pages;
	uint64		entries;
	uint64		worker_rows;
} DPProgressCounts;

extern DPProgressCounts dp_progress_counts;

static inline void
dp_progress_count_pages(int n)
{
	dp_progress_counts.pages += n;
}

static inline void
dp_progress_count_entries(uint64 n)
{
	dp_progress_counts.entries += n;
}

static inline void
dp_progress_count_worker_rows(int n)
{
	dp_progress_counts.worker_rows += n;
}

/* From _PG_init: shared memory when preloaded, the transaction callbacks. */
extern void dp_progress_init(void);

/*
 * A direct statement's load ('owner') begins writing 'relid' (kind:
 * "INSERT", "COPY", ...).  It owns this process's row unless another load
 * of this process has it already (one run by a trigger of the first); the
 * calls below do nothing for a load that does not.  The row is shown in
 * the view unless directpath.progress is off or the library was not
 * preloaded; its phases are timed either way.  It goes at the owner's
 * end, or at the end of its (sub)transaction.
 */
extern void dp_progress_begin(const void *owner, Oid relid, const char *kind);
extern void dp_progress_relation(const void *owner, Oid relid);

/* The planner's estimate of the rows the statement's input gives. */
extern void dp_progress_expect_rows(const void *owner, double rows);

/* The rows given to the load so far, and the phase it enters. */
extern void dp_progress_rows(const void *owner, uint64 rows);
extern void dp_progress_phase(const void *owner, DPProgressPhase phase,
							  uint64 rows);
extern void dp_progress_end(const void *owner);

/*
 * The time so far in each phase, as the log line says it ("reading input
 * 0.279 s, writing pages 0.039 s, ..."), into out[len]; for EXPLAIN
 * ANALYZE.  Any owner's phases are timed (a clock read per phase change).
 */
extern void dp_progress_describe_phases(const void *owner, char *out,
										size_t len);

/*
 * A parallel worker ('owner') of a leader whose load has a row: a row of
 * its own, as its leader's; each page it sends, with its rows.
 */
extern void dp_progress_begin_worker(const void *owner);

/* The leader's load ('owner') runs with this many workers. */
extern void dp_progress_parallel(const void *owner, int workers);
extern void dp_progress_page_sent(int rows);

#endif							/* DP_PROGRESS_H */
