/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  WAL records for pages the direct path appends.
 *
 * The page writer calls one function, dp_wal_log_pages(), with a batch of
 * finished pages for consecutive blocks starting at 'first'; it returns the end of the WAL
 * it wrote and leaves each page's LSN set, so that the checksum the writer
 * computes afterwards covers the final page.  Two formats
 * (directpath.wal_format):
 *
 *	image	full-page images, XLR_MAX_BLOCK_ID pages per record (core's
 *			log_newpages, as its bulk writer uses), standard page layout so
 *			the hole is not logged, wal_compression applied when enabled.
 *			Redo restores the images exactly.  Invisible to logical
 *			decoding.
 *
 *	records	per page, core's own heap multi-insert record with the
 *			init-page flag (XLOG_HEAP2_MULTI_INSERT | XLOG_HEAP_INIT_PAGE,
 *			the record COPY emits): the tuples' headers (infomask2,
 *			infomask, hoff) and data, no line pointers, no page header.
 *			Redo (heap_xlog_multi_insert) initialises the page and adds the
 *			tuples at offsets 1..n in order, which reproduces our page: the
 *			same line pointers and tuple placement, xmin from the record's
 *			XID (ours), ctid its own place, PD_ALL_VISIBLE when the record
 *			says ALL_FROZEN_SET.  The one field that can differ is the
 *			command id (redo writes FirstCommandId), which no other
 *			transaction ever looks at.  The layout of the record is the
 *			same in 15-18.
 *
 * Both formats carry the loading transaction's XID in every record, so a
 * standby tracks it as running and recovery advances nextXid past it.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/heapam_xlog.h"
#include "access/htup_details.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "common/relpath.h"

/* Log one page as a multi-insert record that initialises the page. */
static void
log_page_tuples(Relation rel, BlockNumber blkno, Page page, char *scratch)
{
	xl_heap_multi_insert xlrec;
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	char	   *p = scratch;
	XLogRecPtr	recptr;

	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		ItemId		lp = PageGetItemId(page, off);
		HeapTupleHeader htup = (HeapTupleHeader) PageGetItem(page, lp);
		xl_multi_insert_tuple *hdr = (xl_multi_insert_tuple *) SHORTALIGN(p);
		uint16		datalen = ItemIdGetLength(lp) - SizeofHeapTupleHeader;

		hdr->datalen = datalen;
		hdr->t_infomask2 = htup->t_infomask2;
		hdr->t_infomask = htup->t_infomask;
		hdr->t_hoff = htup->t_hoff;
		p = (char *) hdr + SizeOfMultiInsertTuple;
		memcpy(p, (char *) htup + SizeofHeapTupleHeader, datalen);
		p += datalen;
	}

	xlrec.flags = PageIsAllVisible(page) ? XLH_INSERT_ALL_FROZEN_SET : 0;
	xlrec.ntuples = maxoff;

	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, SizeOfHeapMultiInsert);
	XLogRegisterBlock(0, DP_REL_LOCATOR(rel), MAIN_FORKNUM, blkno,
					  (DPPageArg) page, REGBUF_STANDARD | REGBUF_WILL_INIT);
	XLogRegisterBufData(0, scratch, p - scratch);
	XLogSetRecordFlags(XLOG_INCLUDE_ORIGIN);
	recptr = XLogInsert(RM_HEAP2_ID, XLOG_HEAP2_MULTI_INSERT | XLOG_HEAP_INIT_PAGE);
	PageSetLSN(page, recptr);
}

XLogRecPtr
dp_wal_log_pages(Relation rel, BlockNumber first, int npages, Page *pages)
{
	if (npages <= 0)
		return InvalidXLogRecPtr;

	if (dp_wal_format == DP_WAL_IMAGE)
	{
		BlockNumber *blknos = palloc(sizeof(BlockNumber) * npages);

		for (int i = 0; i < npages; i++)
			blknos[i] = first + i;
		log_newpages(DP_REL_LOCATOR(rel), MAIN_FORKNUM, npages, blknos,
					 (DPPageArg *) pages, true);
		pfree(blknos);
	}
	else
	{
		/* the tuples of a page, with their WAL headers, fit in a block */
		PGAlignedBlock scratch;

		for (int i = 0; i < npages; i++)
			log_page_tuples(rel, first + i, pages[i], scratch.data);
	}
	return XactLastRecEnd;
}
