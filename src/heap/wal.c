/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  WAL records for pages the direct path appends.
 *
 * The append layer (append.c) calls one function, dp_wal_log_pages(),
 * with a batch of finished pages for consecutive blocks starting at
 * 'first'; it returns the end of the WAL it wrote and leaves each page's
 * LSN set, so that the checksum the append layer computes afterwards
 * covers the final page.  Two
 * formats (directpath.wal_format):
 *
 *	records	(the default) per page, core's own heap multi-insert record
 *			with the init-page flag (XLOG_HEAP2_MULTI_INSERT |
 *			XLOG_HEAP_INIT_PAGE, the record COPY emits when it starts a
 *			page): the tuples' headers (infomask2, infomask, hoff) and
 *			data, no line pointers, no page header.  Redo
 *			(heap_xlog_multi_insert) initialises the page and adds the
 *			tuples at offsets 1..n in order, which reproduces our page: the
 *			same line pointers and tuple placement, xmin from the record's
 *			XID (ours), ctid its own place, PD_ALL_VISIBLE when the record
 *			says ALL_FROZEN_SET.  The one field that can differ is the
 *			command id (redo writes FirstCommandId), which no other
 *			transaction ever looks at.  The layout is the same in 15-18.
 *
 *	image	full-page images, XLR_MAX_BLOCK_ID pages per record (core's
 *			log_newpages, as its bulk writer uses), standard page layout so
 *			the hole is not logged, wal_compression applied when enabled.
 *			Redo restores the images exactly.
 *
 * Logical decoding.  decode.c ignores page images, and reads a
 * multi-insert record's rows only when it says CONTAINS_NEW_TUPLE.  So a
 * relation that is logically logged (wal_level = logical, a permanent
 * user table) always gets records, whatever the setting, with that flag
 * and the replication origin, and every row decodes as an INSERT, in page
 * order.  Its TOAST chunks were logged by core's toaster (ordinary heap
 * inserts into the TOAST table) when the row was placed, i.e. before the
 * record that carries the row; the decoder keeps chunks until a record
 * flagged LAST_IN_MULTI, or any ordinary insert, has been applied.  A
 * batch's last record therefore carries that flag only when no toasted row
 * is waiting on a not yet logged page of any of the statement's writers
 * ('toast_pending', DPToastWait); otherwise the chunks of those rows would
 * be thrown away before their rows arrive.  For the same reason the load
 * holds back rejected rows while toasted rows wait (rejects.c), and it
 * writes the pages still filling once the waiting rows add up to
 * DP_TOAST_WAIT_MAX_BYTES, which bounds the chunks a decoder keeps in
 * memory.
 *
 * 'images' forces full-page images: for pages that are not heap pages, and
 * for a batch logged a second time.  A batch logged a second time (the append layer re-logs a pipelined batch when
 * a checkpoint began in between) is always logged as images: redo restores
 * them just the same, and decoding does not see its rows a second time.
 *
 * Every record carries the loading transaction's XID, so a standby tracks
 * it as running, recovery advances nextXid past it, and decoding assigns
 * the rows to the right (sub)transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "heap/heap.h"

#include "access/heapam_xlog.h"
#include "access/htup_details.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/catalog.h"
#include "common/relpath.h"
#include "common/settings.h"
#include "utils/rel.h"

/*
 * Log one page as a multi-insert record that initialises the page: the
 * page of 'buf' when that is valid (locked exclusively by the caller, in a
 * critical section), else 'page', written outside shared buffers as block
 * 'blkno'.
 */
static void
log_page_tuples(Relation rel, BlockNumber blkno, Page page, Buffer buf,
				uint8 flags, char *scratch)
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

	xlrec.flags = flags;
	if (PageIsAllVisible(page))
		xlrec.flags |= XLH_INSERT_ALL_FROZEN_SET;
	xlrec.ntuples = maxoff;

	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, SizeOfHeapMultiInsert);
	/* WILL_INIT: never a page image, so the tuples are always in the record */
	if (BufferIsValid(buf))
		XLogRegisterBuffer(0, buf, REGBUF_STANDARD | REGBUF_WILL_INIT);
	else
		XLogRegisterBlock(0, DP_REL_LOCATOR(rel), MAIN_FORKNUM, blkno,
						  (DPPageArg) page, REGBUF_STANDARD | REGBUF_WILL_INIT);
	XLogRegisterBufData(0, scratch, p - scratch);
	XLogSetRecordFlags(XLOG_INCLUDE_ORIGIN);
	recptr = XLogInsert(RM_HEAP2_ID, XLOG_HEAP2_MULTI_INSERT | XLOG_HEAP_INIT_PAGE);
	PageSetLSN(page, recptr);
}

XLogRecPtr
dp_wal_log_pages(Relation rel, BlockNumber first, int npages, Page *pages,
				 bool images, bool toast_pending)
{
	bool		logical = RelationIsLogicallyLogged(rel);

	if (npages <= 0)
		return InvalidXLogRecPtr;

	if (images || (dp_wal_format == DP_WAL_IMAGE && !logical))
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
		uint8		flags = logical ? XLH_INSERT_CONTAINS_NEW_TUPLE : 0;

		for (int i = 0; i < npages; i++)
		{
			bool		last = (i == npages - 1) && !toast_pending;

			log_page_tuples(rel, first + i, pages[i], InvalidBuffer,
							flags | (last ? XLH_INSERT_LAST_IN_MULTI : 0),
							scratch.data);
		}
	}
	return XactLastRecEnd;
}

void
dp_wal_log_buffer(Relation rel, Buffer buf)
{
	PGAlignedBlock scratch;

	log_page_tuples(rel, BufferGetBlockNumber(buf), BufferGetPage(buf), buf,
					XLH_INSERT_LAST_IN_MULTI, scratch.data);
}
