/*-------------------------------------------------------------------------
 *
 * brin.c
 *	  BRIN indexes of a load: the new block ranges summarized once, at the
 *	  end of the statement, instead of an index call per row.
 *
 * Core's brininsert, for each row, finds the row's block range in the
 * index's range map: when the range has a summary it widens it to take the
 * row's values; when it has none it does nothing (an unsummarized range
 * matches every scan), except that with autosummarize it asks autovacuum to
 * summarize the range later.  The direct path writes rows only to new
 * blocks at the end of the heap, so for nearly all of them the call is a
 * range-map lookup that does nothing, and the new ranges stay unsummarized
 * (read by every BRIN scan) until a vacuum summarizes them.
 *
 * Instead, an index whose summaries may wait (dp_brin_can_defer) gets no
 * call per row.  At the end of the statement every range from the one that
 * holds the heap's first new block is summarized by core's
 * brin_summarize_range, as autovacuum's work item does it: as the table's
 * owner, security-restricted.  A range the load wrote into may already
 * have a summary made without the new rows: the first range may hold old
 * blocks; a build on an empty table leaves a summary of an empty range 0;
 * a vacuum that truncated the heap leaves the summaries of the ranges it
 * cut off.  Core would widen such a summary row by row; here each range is
 * desummarized first (core's brinRevmapDesummarizeRange, a range-map
 * lookup when there is nothing to remove) and summarized from scratch,
 * which for the first range reads its old blocks too.
 *
 * Summaries may wait only where nothing can scan the index between a row's
 * write and the end of the statement: no trigger of the leaf can read it
 * before the end (the caller's part, indexes.c's may_wait: foreign key
 * checks of another table are the only row triggers allowed), and its
 * other index work never reads a BRIN index.
 * Meanwhile the new rows sit in ranges without a summary, or in the one
 * range whose summary lacks them, which only this transaction can see
 * rows in.
 *
 * Invariant: when the statement ends, every range holding a row it wrote
 * has a summary that covers the row.  A summary that covers rows of a load
 * that then fails stays valid (a summary may cover more than the range
 * holds).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "access/brin.h"
#include "access/brin_revmap.h"
#include "catalog/pg_am.h"
#include "common/settings.h"
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/rel.h"

bool
dp_brin_can_defer(ResultRelInfo *rri, int i)
{
	Relation	idx = rri->ri_IndexRelationDescs[i];

	return dp_brin_summarize && idx->rd_rel->relam == BRIN_AM_OID;
}

/* Summarize the range holding 'blkno', as the table's owner. */
static void
summarize_range(Relation heap, Relation idx, BlockNumber blkno)
{
	Oid			save_userid;
	int			save_sec_context;

	/* core's function checks that its caller owns the index */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(heap->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	DirectFunctionCall2(brin_summarize_range,
						ObjectIdGetDatum(RelationGetRelid(idx)),
						Int64GetDatum((int64) blkno));
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

void
dp_brin_summarize_new(Relation heap, Relation idx, BlockNumber first_new)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(heap);
	BlockNumber per_range = BrinGetPagesPerRange(idx);
	BlockNumber start = first_new - first_new % per_range;

	if (first_new >= nblocks)
		return;
	for (BlockNumber blk = start; blk < nblocks; blk += per_range)
	{
		CHECK_FOR_INTERRUPTS();
		/* a summary made without the new rows goes first (see above) */
		while (!brinRevmapDesummarizeRange(idx, blk))
			;
		summarize_range(heap, idx, blk);
	}
}
