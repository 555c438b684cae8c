/*-------------------------------------------------------------------------
 *
 * shared.c
 *	  Built pages appended beside other writers: each one placed in a block
 *	  the relation is extended by at that moment, through shared buffers,
 *	  for a load that holds only RowExclusiveLock (a COPY or INSERT loading
 *	  beside other writers, admission.c).
 *
 * A load that holds ShareRowExclusiveLock appends outside shared buffers
 * (append.c): nobody else extends the relation, so its pages know their
 * blocks from the start.  A load beside other writers cannot know them:
 * other sessions extend the relation too, and a block reserved early
 * would sit empty and unlocked in the meantime, where VACUUM records a new
 * page's space in the free-space map (vacuumlazy.c,
 * lazy_scan_new_or_empty) and any inserter may then take it.  So the page
 * builder numbers its pages provisionally (0, 1, 2, ... in the order they
 * are written), and each page gets its real block only when it is written:
 *
 *	extend the relation by one block, its buffer returned zeroed and
 *	  locked exclusively (ExtendBufferedRel with EB_LOCK_FIRST, 16+;
 *	  ReadBuffer(P_NEW, RBM_ZERO_AND_LOCK) under the extension lock, 15):
 *	  nobody else has seen the block, and nobody can before we unlock it
 *	set each tuple's t_ctid to its real place
 *	in a critical section: copy the page into the buffer, mark it dirty,
 *	  log it as core's multi-insert record that initialises the page
 *	  (wal.c; a record whatever directpath.wal_format says), set its LSN
 *	unlock and release
 *
 * This is heap_multi_insert's protocol for a new page, so checkpoints,
 * torn pages, checksums and WAL-before-data are the buffer manager's, as
 * for any insert.  The real block of each provisional one is remembered
 * (dp_shared_resolve), for the row TIDs handed out at placement: every
 * user of a row's TID (index entries, trigger events, RETURNING) runs after
 * the row's page is written (queue.c), and translates it first.  Real
 * blocks grow with the provisional ones, so the translation keeps the
 * order of TIDs.
 *
 * Invariants: a page is visible to others only once it holds its rows and
 * its WAL; real[i] is valid for every provisional page i written so far.
 *
 *-------------------------------------------------------------------------
 */
#include "heap/heap.h"

#include "access/htup_details.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

struct DPShared
{
	Relation	rel;
	bool		use_wal;
	BlockNumber *real;			/* provisional page number -> block */
	BlockNumber nreal;
	BlockNumber maxreal;
};

DPShared *
dp_shared_begin(Relation rel)
{
	DPShared   *s = palloc0(sizeof(DPShared));

	s->rel = rel;
	s->use_wal = RelationNeedsWAL(rel);
	s->maxreal = 256;
	s->real = palloc(sizeof(BlockNumber) * s->maxreal);
	return s;
}

/* Each tuple's t_ctid names its place in block 'blkno'. */
static void
set_block(Page page, BlockNumber blkno)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		HeapTupleHeader htup = (HeapTupleHeader)
			PageGetItem(page, PageGetItemId(page, off));

		ItemPointerSet(&htup->t_ctid, blkno, off);
	}
}

/* One built page into a new block of its own; returns the block. */
static BlockNumber
write_one(DPShared *s, Page built)
{
	Buffer		buf = DP_EXTEND_LOCKED(s->rel);
	BlockNumber blkno = BufferGetBlockNumber(buf);
	Page		page = BufferGetPage(buf);

	if (!PageIsNew(page))
		elog(ERROR, "block %u of relation \"%s\" is not new after extension",
			 blkno, RelationGetRelationName(s->rel));
	set_block(built, blkno);
	START_CRIT_SECTION();
	memcpy(page, built, BLCKSZ);
	MarkBufferDirty(buf);
	if (s->use_wal)
		dp_wal_log_buffer(s->rel, buf);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
	return blkno;
}

void
dp_shared_write(DPShared *s, Page *pages, int n, BlockNumber first)
{
	Assert(first == s->nreal);
	if (s->nreal + n > s->maxreal)
	{
		s->maxreal = Max(s->maxreal * 2, s->nreal + n);
		s->real = repalloc(s->real, sizeof(BlockNumber) * s->maxreal);
	}
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		s->real[s->nreal++] = write_one(s, pages[i]);
	}
}

BlockNumber
dp_shared_resolve(DPShared *s, BlockNumber provisional)
{
	if (provisional >= s->nreal)
		elog(ERROR, "page %u of a load beside other writers is not written yet",
			 provisional);
	return s->real[provisional];
}
