/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between PostgreSQL 15, 16, 17 and 18 that directpath
 *	  touches, in one place.  The rest of the code is written against the
 *	  names defined here and contains no PG_VERSION_NUM tests.
 *
 * What differs (see shared/design/postgres-internals.md, section 0):
 *	- 15 names relation files RelFileNode/rd_node, 16+ RelFileLocator/
 *	  rd_locator, and the relcache subtransaction ids follow that rename;
 *	- 16+ has I/O-aligned allocation; 15 only plain palloc;
 *	- ExecInsertIndexTuples gained "onlySummarizing" in 16;
 *	- 15 keeps the root-to-partition map in the ResultRelInfo, 16+ builds
 *	  it lazily through ExecGetRootToChildMap;
 *	- 18 moved EXPLAIN's output helpers to explain_format.h and gave
 *	  RETURNING access to OLD/NEW, which the projection must be told about;
 *	- log_newpages takes char ** before 18 and Page * in 18;
 *	- reindex_index takes the REINDEX statement first from 17 on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECTPATH_COMPAT_H
#define DIRECTPATH_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "directpath supports PostgreSQL 15, 16, 17 and 18"
#endif

#include "access/xloginsert.h"
#include "executor/executor.h"
#include "utils/rel.h"

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

/* Map that converts a routed row from root format to the partition's. */
#if PG_VERSION_NUM >= 160000
#define DP_ROOT_TO_CHILD_MAP(rri, estate)	ExecGetRootToChildMap((rri), (estate))
#else
#define DP_ROOT_TO_CHILD_MAP(rri, estate)	((rri)->ri_RootToPartitionMap)
#endif

/* Rebuild one index (core's REINDEX INDEX, with uniqueness checks). */
#if PG_VERSION_NUM >= 170000
#define DP_REINDEX_INDEX(indexId, persistence, params) \
	reindex_index(NULL, (indexId), false, (persistence), (params))
#else
#define DP_REINDEX_INDEX(indexId, persistence, params) \
	reindex_index((indexId), false, (persistence), (params))
#endif

/*
 * Prepare a RETURNING projection for a freshly inserted row: 18 lets
 * RETURNING name OLD and NEW, and the projection must be told that OLD
 * does not exist for an INSERT.
 */
static inline void
dp_returning_prepare(ProjectionInfo *proj, EState *estate,
					 ResultRelInfo *rri, TupleTableSlot *slot)
{
	ExprContext *econtext = proj->pi_exprContext;

	econtext->ecxt_scantuple = slot;
	econtext->ecxt_outertuple = NULL;
#if PG_VERSION_NUM >= 180000
	econtext->ecxt_newtuple = slot;
	if (proj->pi_state.flags & EEO_FLAG_HAS_OLD)
		econtext->ecxt_oldtuple = ExecGetAllNullSlot(estate, rri);
	else
		econtext->ecxt_oldtuple = NULL;
	proj->pi_state.flags |= EEO_FLAG_OLD_IS_NULL;
	proj->pi_state.flags &= ~EEO_FLAG_NEW_IS_NULL;
#endif
}

#endif							/* DIRECTPATH_COMPAT_H */
