/*-------------------------------------------------------------------------
 *
 * directpath.h
 *	  Declarations shared by the files of the directpath extension.
 *
 * Data flows one way through these modules:
 *
 *	hint.c			finds /\*+ APPEND *\/ in the statement text
 *	eligibility.c	decides "direct path or not, and why not"
 *	plan.c			hooks parse analysis (early lock) and the planner (wraps
 *					the INSERT's ModifyTable in a DirectPath CustomScan)
 *	exec.c			the DirectPath CustomScan: drives an INSERT's input
 *					through the load
 *	copy.c			COPY FROM through the load
 *	rejects.c		COPY's rejected rows: soft constraint checks, duplicates
 *	load.c			the row pipeline: row semantics, writers, per-batch
 *					index maintenance, AFTER ROW triggers and RETURNING
 *	writer.c		builds heap pages in backend memory and appends them
 *	wal.c			WAL for appended pages (one small interface)
 *	visibility.c	freeze decisions and visibility-map bits
 *	indexes.c		bulk index maintenance
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECTPATH_H
#define DIRECTPATH_H

#include "compat.h"

#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

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

/* GUCs (directpath.c) */
extern int	dp_mode;
extern int	dp_fallback_level;
extern int	dp_min_bytes;
extern int	dp_batch_pages;
extern bool dp_index_rebuild;
extern bool dp_index_sort;
extern int	dp_wal_format;

extern void dp_fault(const char *point);
extern void dp_fault_reset(void);

/* hint.c */
typedef enum DPHint
{
	DP_HINT_NONE,
	DP_HINT_APPEND,
	DP_HINT_NOAPPEND,
} DPHint;

extern DPHint dp_find_hint(const char *source, int location, int len);

/* eligibility.c */
extern const char *dp_relation_ineligible(Relation rel, bool recurse);
extern const char *dp_partition_ineligible(Relation rel);
extern const char *dp_statement_ineligible(Query *parse, PlannedStmt *stmt,
										   bool hinted);
extern bool dp_statement_freeze_safe(Query *parse, PlannedStmt *stmt,
									 Oid target);
extern bool dp_query_is_single_row(Query *parse);
extern const char *dp_expr_ineligible(Node *expr);
extern bool dp_expr_has_user_function(Node *expr);

/* copy.c */
extern bool dp_copy_utility(uint64 *fallback_id, PlannedStmt *pstmt,
							const char *queryString,
							QueryEnvironment *queryEnv, QueryCompletion *qc);

/* plan.c */
extern void dp_plan_init(void);
extern bool dp_prior_snapshots_clear;
extern bool dp_may_insert(Oid relid);

/* foreign.c */
typedef struct DPForeign DPForeign;
typedef void (*DPForeignDone) (void *arg, TupleTableSlot *slot);

extern DPForeign *dp_foreign_begin(ResultRelInfo *rri, EState *estate);
extern uint64 dp_foreign_insert(DPForeign *f, EState *estate,
								TupleTableSlot *slot, DPForeignDone done,
								void *arg);
extern uint64 dp_foreign_flush(DPForeign *f, EState *estate,
							   DPForeignDone done, void *arg);
extern bool dp_foreign_batched(DPForeign *f);
extern void dp_foreign_end(DPForeign *f);

/* rejects.c */
typedef struct DPRejects DPRejects;

extern DPRejects *dp_rejects_open(const char *name, int64 limit, Relation target);
extern void dp_rejects_add(DPRejects *r, uint64 lineno, const char *raw,
						   int sqlerrcode, const char *message,
						   const char *detail);
extern uint64 dp_rejects_count(DPRejects *r);
extern void dp_rejects_hold_while(DPRejects *r, int *hold);
extern void dp_rejects_write_queued(DPRejects *r);
extern int	dp_rejects_queued(DPRejects *r);

#define DP_REJECTS_QUEUE_MAX 1000
extern bool dp_rejects_error_ok(int sqlerrcode);
extern bool dp_soft_constraints(ResultRelInfo *rri, TupleTableSlot *slot,
								EState *estate, int *sqlerrcode,
								char **message, char **detail);
extern void dp_describe_duplicate(ResultRelInfo *rri, List *conflicts,
								  TupleTableSlot *slot, EState *estate,
								  char **message, char **detail);

/* load.c */
typedef struct DPLoad DPLoad;

extern DPLoad *dp_load_begin(const char *kind, EState *estate,
							 ModifyTableState *mtstate, bool hinted,
							 bool freeze_allowed,
							 Tuplestorestate *retstore, uint64 *lineno,
							 bool *line_valid);
extern bool dp_load_row(DPLoad *load, TupleTableSlot *slot);
extern void dp_load_finish(DPLoad *load);
extern void dp_report_fallback(bool hinted, const char *kind, const char *why);
extern void dp_load_set_rejects(DPLoad *load, DPRejects *rejects,
								StringInfo raw_line, bool *raw_valid);
extern bool dp_load_went_direct(DPLoad *load);
extern uint64 dp_load_deleted(DPLoad *load);
extern uint64 dp_load_pages(DPLoad *load);
extern bool dp_load_frozen(DPLoad *load);
extern int	dp_load_indexes_rebuilt(DPLoad *load);

/* exec.c */
extern Node *dp_create_scan_state(CustomScan *cscan);
extern bool dp_is_directpath_state(PlanState *ps);

/* Statistics of the last statement, for directpath.last_statement(). */
typedef struct DPLastStatement
{
	bool		valid;
	bool		direct;
	char		reason[256];
	uint64		rows;
	uint64		pages;
	bool		frozen;
	int			relations;
	int			indexes_rebuilt;
	uint64		id;				/* dp_set_last's return value */
} DPLastStatement;

extern DPLastStatement dp_last;
extern uint64 dp_set_last(bool direct, const char *reason, uint64 rows,
						  uint64 pages, bool frozen, int relations,
						  int indexes_rebuilt);
extern void dp_set_last_rows(uint64 id, uint64 rows);

/* writer.c */
typedef struct DPWriter DPWriter;

/*
 * Rows of logically logged relations whose TOAST chunks are in WAL while
 * the rows are not yet (wal.c): shared by a statement's writers.
 */
typedef struct DPToastWait
{
	int			writers;		/* writers holding such rows */
	uint64		bytes;			/* their size before toasting, roughly */
} DPToastWait;

/* drain every writer's pages once this much waits (decoder memory) */
#define DP_TOAST_WAIT_MAX_BYTES (16 * 1024 * 1024)

extern DPWriter *dp_writer_begin(Relation rel, bool freeze,
								 TransactionId xid, CommandId cid,
								 DPToastWait *toast_wait);
extern void dp_writer_add(DPWriter *w, HeapTuple tup, ItemPointer tid);
extern void dp_writer_add_slot(DPWriter *w, TupleTableSlot *slot,
							   ItemPointer tid, HeapTuple *copy);
extern int	dp_writer_full_pages(DPWriter *w);
extern void dp_writer_flush(DPWriter *w, bool include_partial);
extern void dp_writer_finish(DPWriter *w);
extern uint64 dp_writer_pages_written(DPWriter *w);
extern bool dp_writer_frozen(DPWriter *w);

/* wal.c */
extern XLogRecPtr dp_wal_log_pages(Relation rel, BlockNumber first,
								   int npages, Page *pages, bool relog,
								   bool toast_pending);

/* visibility.c */
extern bool dp_storage_new_in_subxact(Relation rel);
extern bool dp_storage_new_in_xact(Relation rel);
extern bool dp_no_prior_activity(void);
extern void dp_page_init(Page page, bool frozen);
extern void dp_tuple_prepare(HeapTuple tup, Oid relid, TransactionId xid,
							 CommandId cid, bool frozen);
extern void dp_vm_set_frozen(Relation rel, BlockNumber start, BlockNumber end);

/* indexes.c */
extern bool dp_can_defer_indexes(ResultRelInfo *rri);
extern int	dp_rebuild_indexes(ResultRelInfo *rri);
extern bool dp_can_sort_indexes(ResultRelInfo *rri);

/* called with each entry's heap TID just before it is inserted */
typedef void (*DPIndexEntryHook) (void *arg, ItemPointer tid);
extern void dp_insert_indexes_sorted(ResultRelInfo *rri, EState *estate,
									 TupleTableSlot *slot, HeapTuple *tuples,
									 int ntuples, bool *sort,
									 DPIndexEntryHook hook, void *arg);

#endif							/* DIRECTPATH_H */
