/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between PostgreSQL 15, 16, 17 and 18 that directpath
 *	  touches, in one place.  The rest of the code is written against the
 *	  names defined here and contains no PG_VERSION_NUM tests.
 *
 * What differs (see docs/internals.md, "API drift between majors"):
 *	- 15 names relation files RelFileNode/rd_node, 16+ RelFileLocator/
 *	  rd_locator, and the relcache subtransaction ids follow that rename;
 *	- 16+ has I/O-aligned allocation; 15 only plain palloc;
 *	- ExecInsertIndexTuples gained "onlySummarizing" in 16, and
 *	  pgstat_count_heap_update "newpage";
 *	- 15 keeps the root-to-partition map in the ResultRelInfo, 16+ builds
 *	  it lazily through ExecGetRootToChildMap;
 *	- 18 moved EXPLAIN's output helpers to explain_format.h and gave
 *	  RETURNING access to OLD/NEW, which the projection must be told about;
 *	- log_newpages takes char ** before 18 and Page * in 18;
 *	- reindex_index takes the REINDEX statement first from 17 on;
 *	- 16 moved permission data from range-table entries to RTEPermissionInfo
 *	  (ExecCheckRTPerms became ExecCheckPermissions, ExecInitRangeTable
 *	  takes the list), 18 adds the unpruned relids; CheckValidResultRel
 *	  gains arguments in 17 and 18;
 *	- COPY FROM's ON_ERROR and LOG_VERBOSITY come in 17, REJECT_LIMIT and
 *	  LOG_VERBOSITY silent in 18;
 *	- BTMaxItemSize takes the page before 18;
 *	- btree internals gained the heap relation in 16 (and _bt_allocbuf
 *	  split from _bt_getbuf), lost the snapshot in 17; extending a
 *	  relation by a buffer became ExtendBufferedRel in 16;
 *	- RelationSetNewRelfilenode became RelationSetNewRelfilenumber in 16;
 *	- 17 split MERGE's actions into three lists (NOT MATCHED BY SOURCE);
 *	- ExecutorRun lost "execute_once" in 18;
 *	- the private receivers of CREATE TABLE AS and REFRESH MATERIALIZED
 *	  VIEW are read through mirrors of their leading fields (the same in
 *	  15-18).
 *	- 17 numbers backends by ProcNumber (MyProcNumber, from 0), 15 and 16
 *	  by BackendId (MyBackendId, from 1).
 *	- pg_stat_io is 16's; its counting functions take the I/O timing
 *	  setting from 17 and the bytes from 18.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECTPATH_COMPAT_H
#define DIRECTPATH_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "directpath supports PostgreSQL 15, 16, 17 and 18"
#endif

#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "executor/executor.h"
#include "common/relpath.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/smgr.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "commands/copyfrom_internal.h"
#include "commands/progress.h"
#include "pgstat.h"
#include "utils/backend_progress.h"

#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#else
#include "commands/explain.h"
#endif

/* Relation file identity and "storage new in this transaction" markers. */
#if PG_VERSION_NUM >= 160000
#define DP_REL_LOCATOR(rel)			(&(rel)->rd_locator)
#define DP_REL_FIRST_SUBID(rel)		((rel)->rd_firstRelfilelocatorSubid)
#define DP_REL_NEW_SUBID(rel)		((rel)->rd_newRelfilelocatorSubid)
#else
#define DP_REL_LOCATOR(rel)			(&(rel)->rd_node)
#define DP_REL_FIRST_SUBID(rel)		((rel)->rd_firstRelfilenodeSubid)
#define DP_REL_NEW_SUBID(rel)		((rel)->rd_newRelfilenodeSubid)
#endif

/* Page buffers handed to smgrextend: I/O aligned where the server has it. */
#if PG_VERSION_NUM >= 160000
#define DP_ALLOC_PAGE()		((Page) palloc_aligned(BLCKSZ, PG_IO_ALIGN_SIZE, 0))
#else
#define DP_ALLOC_PAGE()		((Page) palloc(BLCKSZ))
#endif

/*
 * pg_stat_io (16+): 'n' pages the direct path appended, counted as
 * extends of a relation in the bulkwrite context, as core counts a COPY's
 * extends through its bulk-write ring: one extend a page before 18; from
 * 18, as ExtendBufferedRelBy counts, one extend a call, with its bytes.
 * DP_IO_START before the writes, for their time.
 */
#if PG_VERSION_NUM >= 180000
#define DP_IO_START()		pgstat_prepare_io_time(track_io_timing)
#define DP_COUNT_IO_EXTENDS(start, n) \
	pgstat_count_io_op_time(IOOBJECT_RELATION, IOCONTEXT_BULKWRITE, IOOP_EXTEND, \
							(start), 1, (uint64) (n) * BLCKSZ)
#elif PG_VERSION_NUM >= 170000
#define DP_IO_START()		pgstat_prepare_io_time(track_io_timing)
#define DP_COUNT_IO_EXTENDS(start, n) \
	pgstat_count_io_op_time(IOOBJECT_RELATION, IOCONTEXT_BULKWRITE, IOOP_EXTEND, \
							(start), (n))
#elif PG_VERSION_NUM >= 160000
#define DP_IO_START()		pgstat_prepare_io_time()
#define DP_COUNT_IO_EXTENDS(start, n) \
	pgstat_count_io_op_time(IOOBJECT_RELATION, IOCONTEXT_BULKWRITE, IOOP_EXTEND, \
							(start), (n))
#else
#define DP_IO_START()		0
#define DP_COUNT_IO_EXTENDS(start, n) ((void) (start))
#endif
#if PG_VERSION_NUM >= 160000
typedef instr_time DPIOStart;
#else
typedef int DPIOStart;
#endif

/*
 * A new block at the relation's end, its buffer zeroed and locked
 * exclusively before anyone else can see it (shared.c): 16+ extends
 * through the buffer manager; 15 reads P_NEW under the extension lock, as
 * its hio.c does.
 */
#if PG_VERSION_NUM >= 160000
#define DP_EXTEND_LOCKED(rel) \
	ExtendBufferedRel(BMR_REL(rel), MAIN_FORKNUM, NULL, EB_LOCK_FIRST)
#else
static inline Buffer
DP_EXTEND_LOCKED(Relation rel)
{
	Buffer		buf;

	LockRelationForExtension(rel, ExclusiveLock);
	buf = ReadBufferExtended(rel, MAIN_FORKNUM, P_NEW, RBM_ZERO_AND_LOCK, NULL);
	UnlockRelationForExtension(rel, ExclusiveLock);
	return buf;
}
#endif

/* log_newpages' array of page pointers. */
#if PG_VERSION_NUM >= 180000
typedef Page DPPageArg;
#else
typedef char *DPPageArg;
#endif

/* Index insertion for a freshly inserted (not updated) row. */
#if PG_VERSION_NUM >= 160000
#define DP_INSERT_INDEX_TUPLES(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define DP_INSERT_INDEX_TUPLES(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/* pgstat: one update whose new version went to another page (not HOT). */
#if PG_VERSION_NUM >= 160000
#define DP_COUNT_HEAP_UPDATE(rel)	pgstat_count_heap_update((rel), false, true)
#else
#define DP_COUNT_HEAP_UPDATE(rel)	pgstat_count_heap_update((rel), false)
#endif

/*
 * The columns whose indexes keep an update from being HOT: 16 leaves out
 * summarizing indexes (BRIN); 15 has only "every indexed column".
 */
#if PG_VERSION_NUM >= 160000
#define DP_INDEX_ATTR_BITMAP_HOT_BLOCKING	INDEX_ATTR_BITMAP_HOT_BLOCKING
#else
#define DP_INDEX_ATTR_BITMAP_HOT_BLOCKING	INDEX_ATTR_BITMAP_ALL
#endif

/* The next Datum of a datum sort, forward (16 added 'copy'). */
#if PG_VERSION_NUM >= 160000
#define DP_TUPLESORT_GETDATUM(state, val, isnull) \
	tuplesort_getdatum((state), true, false, (val), (isnull), NULL)
#else
#define DP_TUPLESORT_GETDATUM(state, val, isnull) \
	tuplesort_getdatum((state), true, (val), (isnull), NULL)
#endif

/* Map that converts a routed row from root format to the partition's. */
#if PG_VERSION_NUM >= 160000
#define DP_ROOT_TO_CHILD_MAP(rri, estate)	ExecGetRootToChildMap((rri), (estate))
#else
#define DP_ROOT_TO_CHILD_MAP(rri, estate)	((rri)->ri_RootToPartitionMap)
#endif

/* Does an Append prune its children at run time? */
#if PG_VERSION_NUM >= 180000
#define DP_APPEND_PRUNES(append)	((append)->part_prune_index >= 0)
#else
#define DP_APPEND_PRUNES(append)	((append)->part_prune_info != NULL)
#endif

/* Rebuild one index (core's REINDEX INDEX, with uniqueness checks). */
#if PG_VERSION_NUM >= 170000
#define DP_REINDEX_INDEX(indexId, persistence, params) \
	reindex_index(NULL, (indexId), false, (persistence), (params))
#else
#define DP_REINDEX_INDEX(indexId, persistence, params) \
	reindex_index((indexId), false, (persistence), (params))
#endif

/* The wait event of a receive from a shared message queue (renamed in 17). */
#if PG_VERSION_NUM >= 170000
#define DP_WAIT_EVENT_MQ_RECEIVE	WAIT_EVENT_MESSAGE_QUEUE_RECEIVE
#else
#define DP_WAIT_EVENT_MQ_RECEIVE	WAIT_EVENT_MQ_RECEIVE
#endif

/*
 * Prepare a RETURNING projection as core's ExecProcessReturning does: the
 * scan tuple is the new row (INSERT, UPDATE) or the old one (DELETE), the
 * outer tuple the plan's row (other tables' columns); 18 lets RETURNING
 * name OLD and NEW, and the projection must be told which of them exist.
 */
static inline void
dp_returning_prepare(ProjectionInfo *proj, EState *estate,
					 ResultRelInfo *rri, TupleTableSlot *oldslot,
					 TupleTableSlot *newslot, TupleTableSlot *planslot)
{
	ExprContext *econtext = proj->pi_exprContext;

	econtext->ecxt_scantuple = newslot ? newslot : oldslot;
	econtext->ecxt_outertuple = planslot;
#if PG_VERSION_NUM >= 180000
	econtext->ecxt_oldtuple = oldslot ? oldslot :
		(proj->pi_state.flags & EEO_FLAG_HAS_OLD) ?
		ExecGetAllNullSlot(estate, rri) : NULL;
	econtext->ecxt_newtuple = newslot ? newslot :
		(proj->pi_state.flags & EEO_FLAG_HAS_NEW) ?
		ExecGetAllNullSlot(estate, rri) : NULL;
	if (oldslot == NULL)
		proj->pi_state.flags |= EEO_FLAG_OLD_IS_NULL;
	else
		proj->pi_state.flags &= ~EEO_FLAG_OLD_IS_NULL;
	if (newslot == NULL)
		proj->pi_state.flags |= EEO_FLAG_NEW_IS_NULL;
	else
		proj->pi_state.flags &= ~EEO_FLAG_NEW_IS_NULL;
#endif
}

/*
 * A CHECK constraint as the executor evaluates it: 18 skips NOT ENFORCED
 * constraints and expands virtual generated columns first.
 */
#if PG_VERSION_NUM >= 180000
#include "rewrite/rewriteHandler.h"
#define DP_CHECK_ENFORCED(check)	((check)->ccenforced)
#define DP_CHECK_EXPR(expr, rel) \
	((Expr *) expand_generated_columns_in_expr((Node *) (expr), (rel), 1))
#else
#define DP_CHECK_ENFORCED(check)	true
#define DP_CHECK_EXPR(expr, rel)	((Expr *) (expr))
#endif

/* Path of a permanent relation's main fork (segment 0), palloc'd. */
#if PG_VERSION_NUM >= 180000
#define DP_RELPATH_MAIN(rel) \
	pstrdup(relpathperm(*DP_REL_LOCATOR(rel), MAIN_FORKNUM).str)
#else
#define DP_RELPATH_MAIN(rel)	relpathperm(*DP_REL_LOCATOR(rel), MAIN_FORKNUM)
#endif

/* The executor's cached CHECK expressions of a result relation. */
#if PG_VERSION_NUM >= 180000
#define DP_RI_CHECK_EXPRS(rri)	((rri)->ri_CheckConstraintExprs)
#else
#define DP_RI_CHECK_EXPRS(rri)	((rri)->ri_ConstraintExprs)
#endif

/* A possibly qualified name typed by the user, as a name list. */
#if PG_VERSION_NUM >= 160000
#define DP_QUALIFIED_NAME_LIST(str)	stringToQualifiedNameList((str), NULL)
#else
#define DP_QUALIFIED_NAME_LIST(str)	stringToQualifiedNameList(str)
#endif

/* Index insertion that reports, rather than raises, unique conflicts. */
#if PG_VERSION_NUM >= 160000
#define DP_INSERT_INDEX_TUPLES_NODUP(rri, slot, estate, conflict) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), NIL, false)
#else
#define DP_INSERT_INDEX_TUPLES_NODUP(rri, slot, estate, conflict) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), NIL)
#endif

/* Permission data of a relation's range-table entry, and checking it. */
#if PG_VERSION_NUM >= 160000
typedef RTEPermissionInfo DPPermInfo;
#define DP_NSITEM_PERMS(nsitem)		((nsitem)->p_perminfo)
#define DP_CHECK_PERMISSIONS(pstate, perminfo) \
	ExecCheckPermissions((pstate)->p_rtable, list_make1(perminfo), true)
#else
typedef RangeTblEntry DPPermInfo;
#define DP_NSITEM_PERMS(nsitem)		((nsitem)->p_rte)
#define DP_CHECK_PERMISSIONS(pstate, perminfo) \
	ExecCheckRTPerms((pstate)->p_rtable, true)
#endif

/*
 * A one-entry range table into an executor state: 16 added the permission
 * infos (COPY's, or NIL for a relation the statement created), 18 the
 * unpruned relids.
 */
#if PG_VERSION_NUM >= 180000
#define DP_INIT_RANGE_TABLE(estate, rtable, perminfos) \
	ExecInitRangeTable((estate), (rtable), (perminfos), bms_make_singleton(1))
#elif PG_VERSION_NUM >= 160000
#define DP_INIT_RANGE_TABLE(estate, rtable, perminfos) \
	ExecInitRangeTable((estate), (rtable), (perminfos))
#else
#define DP_INIT_RANGE_TABLE(estate, rtable, perminfos) \
	ExecInitRangeTable((estate), (rtable))
#endif

/* COPY FROM's range table into an executor state. */
#if PG_VERSION_NUM >= 160000
#define DP_INIT_COPY_RANGE_TABLE(estate, cstate) \
	DP_INIT_RANGE_TABLE((estate), (cstate)->range_table, (cstate)->rteperminfos)
#else
#define DP_INIT_COPY_RANGE_TABLE(estate, cstate) \
	DP_INIT_RANGE_TABLE((estate), (cstate)->range_table, NIL)
#endif

#if PG_VERSION_NUM >= 180000
#define DP_CHECK_VALID_INSERT_REL(rri) \
	CheckValidResultRel((rri), CMD_INSERT, ONCONFLICT_NONE, NIL)
#elif PG_VERSION_NUM >= 170000
#define DP_CHECK_VALID_INSERT_REL(rri)	CheckValidResultRel((rri), CMD_INSERT, NIL)
#else
#define DP_CHECK_VALID_INSERT_REL(rri)	CheckValidResultRel((rri), CMD_INSERT)
#endif

/*
 * COPY FROM ... ON_ERROR ignore (17+): NextCopyFrom trapped a conversion
 * error in this row.  Counts it as core's CopyFrom does and says whether
 * to skip the row; enforces REJECT_LIMIT (18).
 */
static inline bool
dp_copy_row_skipped(CopyFromState cstate)
{
#if PG_VERSION_NUM >= 170000
	if (cstate->opts.on_error != COPY_ON_ERROR_STOP &&
		cstate->escontext->error_occurred)
	{
		cstate->escontext->error_occurred = false;
		pgstat_progress_update_param(PROGRESS_COPY_TUPLES_SKIPPED,
									 cstate->num_errors);
#if PG_VERSION_NUM >= 180000
		if (cstate->opts.reject_limit > 0 &&
			cstate->num_errors > cstate->opts.reject_limit)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("skipped more than REJECT_LIMIT (%" PRId64 ") rows due to data type incompatibility",
							cstate->opts.reject_limit)));
#endif
		return true;
	}
#endif
	return false;
}

/* The largest btree item that fits on 'page' (18 made it a constant). */
#if PG_VERSION_NUM >= 180000
#define DP_BT_MAX_ITEM_SIZE(page)	BTMaxItemSize
#else
#define DP_BT_MAX_ITEM_SIZE(page)	BTMaxItemSize(page)
#endif

/* A temporal foreign key (PERIOD), from 18 on. */
#if PG_VERSION_NUM >= 180000
#define DP_CONSTRAINT_HAS_PERIOD(con)	((con)->conperiod)
#else
#define DP_CONSTRAINT_HAS_PERIOD(con)	false
#endif

/* The identity of a relation's storage, and new storage for a relation. */
#if PG_VERSION_NUM >= 160000
typedef RelFileLocator DPRelLocator;
#define DP_SET_NEW_STORAGE(rel) \
	RelationSetNewRelfilenumber((rel), (rel)->rd_rel->relpersistence)
#else
typedef RelFileNode DPRelLocator;
#define DP_SET_NEW_STORAGE(rel) \
	RelationSetNewRelfilenode((rel), (rel)->rd_rel->relpersistence)
#endif

/* A new block at the end of the relation's main fork, pinned, unlocked. */
static inline Buffer
dp_extend_by_one(Relation rel)
{
#if PG_VERSION_NUM >= 160000
	return ExtendBufferedRel(BMR_REL(rel), MAIN_FORKNUM, NULL, 0);
#else
	Buffer		buf;

	LockRelationForExtension(rel, ExclusiveLock);
	buf = ReadBuffer(rel, P_NEW);
	UnlockRelationForExtension(rel, ExclusiveLock);
	return buf;
#endif
}
#define DP_EXTEND_BY_ONE(rel)	dp_extend_by_one(rel)

/*
 * Up to 'n' new blocks at the end of the relation's main fork at once,
 * pinned, unlocked, zeroed, into bufs; how many (the buffer manager may
 * give fewer, to keep pins within the backend's share).  16+ extends by
 * many blocks in one call (the file system allocates them without writing
 * zeros, past eight); 15 has no such call: 0, and the caller takes its
 * blocks one by one.
 */
static inline int
dp_extend_by(Relation rel, int n, Buffer *bufs)
{
#if PG_VERSION_NUM >= 160000
	uint32		got = 0;

	ExtendBufferedRelBy(BMR_REL(rel), MAIN_FORKNUM, NULL, 0, n, bufs, &got);
	return (int) got;
#else
	return 0;
#endif
}

/*
 * btree internals the right-edge append uses: a new page (write-locked,
 * initialized; 16 split it from _bt_getbuf and added the heap relation),
 * completing a split, the first or last page of a level and a descent (17
 * dropped their snapshot).
 */
#if PG_VERSION_NUM >= 160000
#define DP_BT_NEW_BUFFER(rel, heap)		_bt_allocbuf((rel), (heap))
#define DP_BT_FINISH_SPLIT(rel, heap, lbuf, stack) \
	_bt_finish_split((rel), (heap), (lbuf), (stack))
#else
#define DP_BT_NEW_BUFFER(rel, heap)		_bt_getbuf((rel), P_NEW, BT_WRITE)
#define DP_BT_FINISH_SPLIT(rel, heap, lbuf, stack) \
	_bt_finish_split((rel), (lbuf), (stack))
#endif
#if PG_VERSION_NUM >= 170000
#define DP_BT_GET_ENDPOINT(rel, level, rightmost) \
	_bt_get_endpoint((rel), (level), (rightmost))
#define DP_BT_SEARCH(rel, heap, key, bufp, access) \
	_bt_search((rel), (heap), (key), (bufp), (access))
#else
#define DP_BT_GET_ENDPOINT(rel, level, rightmost) \
	_bt_get_endpoint((rel), (level), (rightmost), NULL)
#if PG_VERSION_NUM >= 160000
#define DP_BT_SEARCH(rel, heap, key, bufp, access) \
	_bt_search((rel), (heap), (key), (bufp), (access), NULL)
#else
#define DP_BT_SEARCH(rel, heap, key, bufp, access) \
	_bt_search((rel), (key), (bufp), (access), NULL)
#endif
#endif

/* The NOTICE core's COPY gives at the end when rows were skipped. */
static inline void
dp_copy_report_skipped(CopyFromState cstate)
{
#if PG_VERSION_NUM >= 170000
	if (cstate->opts.on_error != COPY_ON_ERROR_STOP &&
		cstate->num_errors > 0
#if PG_VERSION_NUM >= 180000
		&& cstate->opts.log_verbosity >= COPY_LOG_VERBOSITY_DEFAULT
#endif
		)
		ereport(NOTICE,
				errmsg_plural("%llu row was skipped due to data type incompatibility",
							  "%llu rows were skipped due to data type incompatibility",
							  (unsigned long long) cstate->num_errors,
							  (unsigned long long) cstate->num_errors));
#endif
}

/*
 * The backend's protocol reader (libpq/libpq.h), for COPY FROM STDIN read
 * by parcopy.c.  That header includes libpq-be.h, which needs the GSSAPI
 * headers of the build host; a server-headers-only install (the wheels,
 * a distro's server-dev package without libkrb5-dev) lacks them.  These
 * signatures are the same in 15-18.
 */
#ifndef LIBPQ_H
#define PQ_SMALL_MESSAGE_LIMIT	10000
#define PQ_LARGE_MESSAGE_LIMIT	(MaxAllocSize - 1)
extern void pq_startmsgread(void);
extern int	pq_getbyte(void);
extern int	pq_getmessage(StringInfo s, int maxlen);
#endif

/*
 * COPY FROM's DEFAULT marker (16+), and the default expression of the i-th
 * column COPY fills by default: 16 indexes defexprs by attribute.  16 also
 * has COPY's error context name only the relation while it evaluates a
 * default (relname_only).
 */
#if PG_VERSION_NUM >= 160000
#define DP_COPY_DEFAULT_PRINT(cstate)	((cstate)->opts.default_print)
#define DP_COPY_DEFEXPR(cstate, i)	((cstate)->defexprs[(cstate)->defmap[i]])
#define DP_COPY_RELNAME_ONLY(cstate)	((cstate)->relname_only)
#else
#define DP_COPY_DEFAULT_PRINT(cstate)	((char *) NULL)
#define DP_COPY_DEFEXPR(cstate, i)	((cstate)->defexprs[i])
#define DP_COPY_RELNAME_ONLY(cstate)	false
#endif

/* COPY FROM ... ON_ERROR other than stop (17+): rows may be skipped. */
static inline bool
dp_copy_skips_errors(CopyFromState cstate)
{
#if PG_VERSION_NUM >= 170000
	return cstate->opts.on_error != COPY_ON_ERROR_STOP;
#else
	return false;
#endif
}

/* An index scan (18 added its instrumentation argument). */
#if PG_VERSION_NUM >= 180000
#define DP_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define DP_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/* Sort support in an index's order (18 takes "reverse", not a strategy). */
#if PG_VERSION_NUM >= 180000
#define DP_SORT_SUPPORT_FROM_INDEX(index, ssup) \
	PrepareSortSupportFromIndexRel((index), false, (ssup))
#else
#define DP_SORT_SUPPORT_FROM_INDEX(index, ssup) \
	PrepareSortSupportFromIndexRel((index), BTLessStrategyNumber, (ssup))
#endif

/*
 * An UPDATE's SET column numbers of result relation 'which' of a
 * ModifyTable node (a leaf's own numbers).  18 prunes result relations at
 * the executor's start and keeps the lists of those left in the node's
 * state; before, the plan's lists match the node's result relations.
 */
#if PG_VERSION_NUM >= 180000
#define DP_UPDATE_COLNOS(mt, which) \
	((List *) list_nth((mt)->mt_updateColnosLists, (which)))
#else
#define DP_UPDATE_COLNOS(mt, which) \
	((List *) list_nth(((ModifyTable *) (mt)->ps.plan)->updateColnosLists, \
					   (which)))
#endif

/*
 * MERGE's WHEN NOT MATCHED [BY TARGET], WHEN MATCHED and (17+) WHEN NOT
 * MATCHED BY SOURCE action states (17 keeps three lists).
 */
#if PG_VERSION_NUM >= 170000
#define DP_MERGE_NOT_MATCHED_ACTIONS(rri) \
	((rri)->ri_MergeActions[MERGE_WHEN_NOT_MATCHED_BY_TARGET])
#define DP_MERGE_MATCHED_ACTIONS(rri) \
	((rri)->ri_MergeActions[MERGE_WHEN_MATCHED])
#define DP_MERGE_BY_SOURCE_ACTIONS(rri) \
	((rri)->ri_MergeActions[MERGE_WHEN_NOT_MATCHED_BY_SOURCE])
#else
#define DP_MERGE_NOT_MATCHED_ACTIONS(rri) ((rri)->ri_notMatchedMergeAction)
#define DP_MERGE_MATCHED_ACTIONS(rri) ((rri)->ri_matchedMergeAction)
#define DP_MERGE_BY_SOURCE_ACTIONS(rri) ((List *) NIL)
#endif

/*
 * Statistics stored at load time (stats.c), as ANALYZE stores them: a
 * column's statistics target (a fixed pg_attribute field before 17, a
 * nullable one from 17), how VacAttrStats carries it to the type's analyze
 * function (a copy of the pg_attribute row before 17), 18's virtual
 * generated columns (never analyzed), who may ANALYZE a table (its owner,
 * or the database's owner, before 17; MAINTAIN from 17), and
 * vac_update_relstats and pgstat_report_analyze (18 adds all-frozen pages,
 * kept in pg_class, and the start time).
 */
#if PG_VERSION_NUM >= 170000
#include "catalog/pg_attribute.h"
#include "utils/syscache.h"

static inline int
dp_attstattarget(Relation rel, int attnum)
{
	HeapTuple	tup = SearchSysCache2(ATTNUM,
									  ObjectIdGetDatum(RelationGetRelid(rel)),
									  Int16GetDatum(attnum));
	bool		isnull;
	Datum		d;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for attribute %d of relation %u",
			 attnum, RelationGetRelid(rel));
	d = SysCacheGetAttr(ATTNUM, tup, Anum_pg_attribute_attstattarget, &isnull);
	ReleaseSysCache(tup);
	return isnull ? -1 : DatumGetInt16(d);
}
#define DP_VACATTR_SET_TARGET(stats, att, target) \
	((stats)->attstattarget = (target))
#define DP_MAY_ANALYZE(rel) \
	(pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_MAINTAIN) == ACLCHECK_OK)
#else
#define dp_attstattarget(rel, attnum) \
	(TupleDescAttr((rel)->rd_att, (attnum) - 1)->attstattarget)
#define DP_VACATTR_SET_TARGET(stats, att, target) \
	((stats)->attr = (Form_pg_attribute) memcpy(palloc(ATTRIBUTE_FIXED_PART_SIZE), \
												(att), ATTRIBUTE_FIXED_PART_SIZE))
#if PG_VERSION_NUM >= 160000
#define DP_MAY_ANALYZE(rel) \
	(object_ownercheck(RelationRelationId, RelationGetRelid(rel), GetUserId()) || \
	 (object_ownercheck(DatabaseRelationId, MyDatabaseId, GetUserId()) && \
	  !(rel)->rd_rel->relisshared))
#else
#define DP_MAY_ANALYZE(rel) \
	(pg_class_ownercheck(RelationGetRelid(rel), GetUserId()) || \
	 (pg_database_ownercheck(MyDatabaseId, GetUserId()) && \
	  !(rel)->rd_rel->relisshared))
#endif
#endif

#if PG_VERSION_NUM >= 180000
#define DP_ATT_IS_VIRTUAL(att)	((att)->attgenerated == ATTRIBUTE_GENERATED_VIRTUAL)
#define DP_HAS_VIRTUAL(constr)	((constr)->has_generated_virtual)
#define DP_REL_ALLFROZEN(rel)	((rel)->rd_rel->relallfrozen)
#define DP_UPDATE_RELSTATS(rel, pages, tuples, allvisible, allfrozen) \
	vac_update_relstats((rel), (pages), (tuples), (allvisible), (allfrozen), \
						(rel)->rd_rel->relhasindex, InvalidTransactionId, \
						InvalidMultiXactId, NULL, NULL, true)
#define DP_REPORT_ANALYZE(rel, live) \
	pgstat_report_analyze((rel), (live), 0, true, GetCurrentTimestamp())
#else
#define DP_ATT_IS_VIRTUAL(att)	false
#define DP_HAS_VIRTUAL(constr)	false
#define DP_REL_ALLFROZEN(rel)	((BlockNumber) 0)	/* not kept before 18 */
#define DP_UPDATE_RELSTATS(rel, pages, tuples, allvisible, allfrozen) \
	vac_update_relstats((rel), (pages), (tuples), (allvisible), \
						(rel)->rd_rel->relhasindex, InvalidTransactionId, \
						InvalidMultiXactId, NULL, NULL, true)
#define DP_REPORT_ANALYZE(rel, live) \
	pgstat_report_analyze((rel), (live), 0, true)
#endif

/* A relation's pending "changed tuples" counter was t_-prefixed in 15. */
#if PG_VERSION_NUM >= 160000
#define DP_PENDING_CHANGED(tabstat)	((tabstat)->counts.changed_tuples)
#else
#define DP_PENDING_CHANGED(tabstat)	((tabstat)->t_counts.t_changed_tuples)
#endif

/* ExecutorRun lost its "execute_once" argument in 18. */
#if PG_VERSION_NUM >= 180000
#define DP_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define DP_EXECUTOR_RUN_ARGS	queryDesc, direction, count
#else
#define DP_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, bool execute_once
#define DP_EXECUTOR_RUN_ARGS	queryDesc, direction, count, execute_once
#endif

/* Run a query to its end, once. */
#if PG_VERSION_NUM >= 180000
#define DP_EXECUTOR_RUN_ALL(qd)	ExecutorRun((qd), ForwardScanDirection, 0)
#else
#define DP_EXECUTOR_RUN_ALL(qd)	ExecutorRun((qd), ForwardScanDirection, 0, true)
#endif

/*
 * The relation a CREATE TABLE AS / materialized view receiver
 * (createas.c's DR_intorel) or a REFRESH receiver (matview.c's
 * DR_transientrel) writes, once its rStartup ran.  Both structs are
 * private to core; their leading fields, mirrored here, are the same in
 * 15 to 18.
 */
typedef struct DPIntoRelDest
{
	DestReceiver pub;
	void	   *into;
	Relation	rel;
} DPIntoRelDest;

typedef struct DPTransientRelDest
{
	DestReceiver pub;
	Oid			transientoid;
	Relation	transientrel;
} DPTransientRelDest;

static inline Relation
dp_dest_relation(DestReceiver *dest)
{
	if (dest->mydest == DestIntoRel)
		return ((DPIntoRelDest *) dest)->rel;
	return ((DPTransientRelDest *) dest)->transientrel;
}

/*
 * A backend's number among MaxBackends, from 0 (progress.c's slots), and
 * its parallel leader's: ProcNumber from 17, BackendId (from 1) before.
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define DP_MY_PROC_INDEX()		((int) MyProcNumber)
#define DP_LEADER_PROC_INDEX()	((int) ParallelLeaderProcNumber)
#else
#include "storage/backendid.h"
#define DP_MY_PROC_INDEX()		((int) MyBackendId - 1)
#define DP_LEADER_PROC_INDEX()	((int) ParallelLeaderBackendId - 1)
#endif

#endif							/* DIRECTPATH_COMPAT_H */
