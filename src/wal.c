/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  WAL records for pages the direct path appends.
 *
 * The page writer calls one function, dp_wal_log_pages(), with a batch of
 * finished pages in ascending block order; it must return the end of the
 * WAL it wrote, and leave each page's LSN set so that the checksum the
 * writer computes afterwards covers the final page.
 *
 * Format used here: full-page images, XLR_MAX_BLOCK_ID pages per record
 * (core's log_newpages, as its bulk writer uses), with the standard page
 * layout so the hole between line pointers and tuples is not logged, and
 * wal_compression applied when enabled.  Redo restores the images exactly,
 * flags (PD_ALL_VISIBLE) and frozen tuples included.  Images are invisible
 * to logical decoding, which is why logically logged tables do not take
 * the direct path (see eligibility.c).
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "common/relpath.h"

XLogRecPtr
dp_wal_log_pages(Relation rel, int npages, BlockNumber *blknos, Page *pages)
{
	if (npages <= 0)
		return InvalidXLogRecPtr;

	log_newpages(DP_REL_LOCATOR(rel), MAIN_FORKNUM, npages, blknos,
				 (DPPageArg *) pages, true);
	return XactLastRecEnd;
}
