/*-------------------------------------------------------------------------
 *
 * writer.c
 *	  Build heap pages in backend memory and append them to a relation.
 *
 * One writer per leaf relation a statement writes.  Tuples are placed into
 * private pages in block order, starting at the relation's size when the
 * writer began (the caller holds ShareRowExclusiveLock, so nobody else
 * extends the main fork meanwhile).  A written block is never revisited.
 *
 * Placing a tuple: its header is set as heap_insert would (visibility.c),
 * it is toasted through core's toaster when it has external values or is
 * over TOAST_TUPLE_THRESHOLD, and it goes onto the current page if it fits
 * within the fillfactor reserve; a fresh page always takes at least one
 * tuple.  Its on-page t_ctid and the caller's TID are set to its place.
 *
 * Flushing a batch of pages (dp_writer_flush), by storage kind:
 *
 *	WAL-logged (permanent, wal_level >= replica or storage older than the
 *	transaction):
 *		set DELAY_CHKPT_START
 *		reserve disk space for the batch's blocks without changing the
 *		  file's size (fallocate with FALLOC_FL_KEEP_SIZE), so that running
 *		  out of space fails before any WAL names those blocks and redo
 *		  never has to create a block the primary could not.  The file is
 *		  not zero-extended: a concurrent reader could then cache an empty
 *		  page in shared buffers that our direct write would never update
 *		write the WAL (wal.c), which sets each page's LSN
 *		existing storage only: XLogFlush to the batch's end (WAL before
 *		  data, and our XID durable before any of our tuples is)
 *		checksum each page, smgrextend; the write of each segment's last
 *		  block in the batch registers that segment for the next
 *		  checkpoint's fsync
 *		clear DELAY_CHKPT_START (also on error)
 *	  A checkpoint whose redo pointer follows our WAL waits for the flag,
 *	  so the writes are registered before its sync phase; recovery from one
 *	  whose redo pointer precedes our WAL replays that WAL.  Either way every page is
 *	  durable after a crash without an end-of-load fsync, and a torn write
 *	  of an uncommitted load is repaired by replay.
 *
 *	WAL skipped (wal_level = minimal, storage new in this transaction):
 *		checksum, smgrextend without fsync registration; commit syncs the
 *		relation (smgrDoPendingSyncs), abort drops it.
 *
 *	Unlogged: checksum, smgrextend with fsync registration, so the
 *	shutdown checkpoint syncs the data.
 *
 * Pipelining (existing storage, full pages only).  The XLogFlush above
 * would put a WAL fsync on the critical path of every batch.  Instead, a
 * batch's WAL is inserted and the WAL writer woken to flush it
 * (XLogSetAsyncXactLSN, as an asynchronous commit does); the batch's
 * pages are written at the next flush, inside that flush's
 * checkpoint-delay window, after XLogFlush of their WAL, which by then is
 * normally durable already.  Because the WAL and the writes now fall in
 * different windows, a checkpoint can begin in between: it would neither
 * replay these pages (their WAL precedes its redo pointer) nor know of
 * their writes, and a write torn by an OS crash could not be repaired.
 * So if the redo pointer moved since the batch's WAL was inserted, the
 * batch is logged again in the current window, as images, before it is
 * written.  A flush that must make everything readable (a partial page,
 * the end of the statement, rows waiting for index or trigger work)
 * drains the pipeline.
 * Pages whose WAL was inserted but that were never written (the statement
 * failed in between) are harmless: their tuples belong to an aborted
 * transaction, and whoever extends the relation next re-initialises those
 * blocks, in WAL too.
 *
 * At the end, the VM bits of frozen pages are set (visibility.c) and the
 * last page, the only one that can have room left beyond the fillfactor
 * reserve, is recorded in the free-space map.
 *
 * Invariants: pages are written in ascending block order without gaps; a
 * TID handed out is readable through the buffer manager only after the
 * flush that wrote its page, so callers do index and trigger work for a
 * tuple only after that (exec.c).  Memory for pages comes from the
 * writer's context and is reused across flushes.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include <fcntl.h>

#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/catalog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "common/file_perm.h"
#include "storage/bufmgr.h"
#include "storage/freespace.h"
#include "storage/predicate.h"
#include "storage/proc.h"
#include "storage/fd.h"
#include "storage/smgr.h"
#include "utils/memutils.h"

struct DPWriter
{
	Relation	rel;
	Oid			relid;
	bool		use_wal;		/* RelationNeedsWAL */
	bool		new_storage;	/* relfilenode new in this transaction */
	bool		skip_fsync;		/* WAL skipped: commit syncs */
	bool		frozen;
	bool		has_varlena;	/* any attlen -1 column? */
	TransactionId xid;
	CommandId	cid;
	Size		save_free;		/* fillfactor reserve */
	int			toast_options;

	BlockNumber first_block;	/* relation size when we began */
	BlockNumber next_block;		/* block number of pages[0] */
	Page	   *pages;			/* pages[0..npages-1]: built, not written */
	int			npages;			/* the last one may still be filling */
	int			maxpages;
	Page	   *spare;			/* written pages kept for reuse */
	int			nspare;
	int			maxspare;

	/* pipelined batch: WAL inserted, pages not yet written */
	Page	   *logged;
	int			nlogged;
	BlockNumber logged_first;
	XLogRecPtr	logged_end;		/* end of its WAL */
	XLogRecPtr	logged_redo;	/* redo pointer when it was logged */

	/*
	 * Logically logged relations (wal.c): the highest block holding a row
	 * whose TOAST chunks are in WAL, whether that block is not logged yet,
	 * and what the statement's writers hold of such rows together.
	 */
	BlockNumber toast_block;
	bool		toast_unlogged;
	DPToastWait *toast_wait;

	BlockNumber last_block;		/* last block written, and its free space */
	Size		last_free;

	uint64		tuples;
	uint64		pages_written;
	MemoryContext cxt;
};

DPWriter *
dp_writer_begin(Relation rel, bool freeze, TransactionId xid, CommandId cid,
				DPToastWait *toast_wait)
{
	DPWriter   *w = palloc0(sizeof(DPWriter));

	w->cxt = AllocSetContextCreate(CurrentMemoryContext, "directpath writer",
								   ALLOCSET_DEFAULT_SIZES);
	w->rel = rel;
	w->relid = RelationGetRelid(rel);
	w->use_wal = RelationNeedsWAL(rel);
	w->new_storage = dp_storage_new_in_xact(rel);
	w->skip_fsync = !w->use_wal &&
		rel->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;
	w->frozen = freeze;
	w->xid = xid;
	w->cid = cid;
	w->save_free = RelationGetTargetPageFreeSpace(rel, HEAP_DEFAULT_FILLFACTOR);
	w->toast_options = HEAP_INSERT_SKIP_FSM | (freeze ? HEAP_INSERT_FROZEN : 0);
	w->first_block = RelationGetNumberOfBlocks(rel);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
		if (TupleDescAttr(RelationGetDescr(rel), i)->attlen == -1)
			w->has_varlena = true;
	w->next_block = w->first_block;
	w->toast_block = InvalidBlockNumber;
	w->toast_wait = toast_wait;
	w->maxpages = 64;
	w->pages = MemoryContextAlloc(w->cxt, sizeof(Page) * w->maxpages);
	w->maxspare = w->maxpages;
	w->spare = MemoryContextAlloc(w->cxt, sizeof(Page) * w->maxspare);
	w->logged = MemoryContextAlloc(w->cxt, sizeof(Page) * w->maxpages);

	/* As heap_multi_insert: a serializable reader of the table conflicts. */
	CheckForSerializableConflictIn(rel, NULL, InvalidBlockNumber);
	return w;
}

static Page
new_page(DPWriter *w)
{
	Page		page;

	if (w->npages == w->maxpages)
	{
		w->maxpages *= 2;
		w->pages = repalloc(w->pages, sizeof(Page) * w->maxpages);
		w->logged = repalloc(w->logged, sizeof(Page) * w->maxpages);
	}
	if (w->nspare > 0)
		page = w->spare[--w->nspare];
	else
	{
		MemoryContext old = MemoryContextSwitchTo(w->cxt);

		page = DP_ALLOC_PAGE();
		MemoryContextSwitchTo(old);
	}
	dp_page_init(page, w->frozen);
	w->pages[w->npages++] = page;
	return page;
}

/*
 * The page that takes a tuple of 'len' (MAXALIGNed) bytes: the current one
 * if it fits within the fillfactor reserve, else a fresh one (which always
 * takes at least one tuple).
 */
static inline Page
page_for(DPWriter *w, Size len)
{
	Page		page = w->npages > 0 ? w->pages[w->npages - 1] : NULL;

	if (page == NULL ||
		(PageGetMaxOffsetNumber(page) > 0 &&
		 PageGetHeapFreeSpace(page) < len + w->save_free) ||
		PageGetHeapFreeSpace(page) < len)
		page = new_page(w);
	return page;
}

/* Finish a tuple placed at 'off' on the last page: ctid and caller's TID. */
static inline void
placed(DPWriter *w, Page page, OffsetNumber off, ItemPointer tid)
{
	HeapTupleHeader onpage = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, off));

	ItemPointerSet(tid, w->next_block + w->npages - 1, off);
	onpage->t_ctid = *tid;
	w->tuples++;
}

/*
 * Place the row held in 'slot'.  The common case forms the tuple directly
 * in its place on the page (no palloc, no copy); rows that need TOAST take
 * the general path through a formed HeapTuple.  With 'copy', a palloc'd
 * copy of the placed tuple (t_self set) is returned, for deferred work.
 */
void
dp_writer_add_slot(DPWriter *w, TupleTableSlot *slot, ItemPointer tid,
				   HeapTuple *copy)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	int			natts = desc->natts;
	Datum	   *values;
	bool	   *isnull;
	bool		hasnull = false;
	Size		hoff;
	Size		data_len;
	Size		len;
	Page		page;
	OffsetNumber off;
	ItemId		lp;
	HeapTupleHeader td;
	HeapTupleData tup;

	slot_getallattrs(slot);
	values = slot->tts_values;
	isnull = slot->tts_isnull;
	for (int i = 0; i < natts; i++)
	{
		if (isnull[i])
			hasnull = true;
		else if (w->has_varlena && TupleDescAttr(desc, i)->attlen == -1 &&
				 VARATT_IS_EXTERNAL(DatumGetPointer(values[i])))
			goto general;
	}
	hoff = SizeofHeapTupleHeader;
	if (hasnull)
		hoff += BITMAPLEN(natts);
	hoff = MAXALIGN(hoff);
	data_len = heap_compute_data_size(desc, values, isnull);
	len = hoff + data_len;
	if (len > TOAST_TUPLE_THRESHOLD)
		goto general;

	/* reserve the space and the line pointer, then fill in place */
	page = page_for(w, MAXALIGN(len));
	off = OffsetNumberNext(PageGetMaxOffsetNumber(page));
	((PageHeader) page)->pd_upper -= MAXALIGN(len);
	((PageHeader) page)->pd_lower += sizeof(ItemIdData);
	lp = PageGetItemId(page, off);
	ItemIdSetNormal(lp, ((PageHeader) page)->pd_upper, len);
	td = (HeapTupleHeader) PageGetItem(page, lp);
	memset(td, 0, hoff);
	HeapTupleHeaderSetDatumLength(td, len);
	HeapTupleHeaderSetTypeId(td, desc->tdtypeid);
	HeapTupleHeaderSetTypMod(td, desc->tdtypmod);
	HeapTupleHeaderSetNatts(td, natts);
	td->t_hoff = hoff;
	heap_fill_tuple(desc, values, isnull, (char *) td + hoff, data_len,
					&td->t_infomask, hasnull ? td->t_bits : NULL);

	tup.t_data = td;
	tup.t_len = len;
	dp_tuple_prepare(&tup, w->relid, w->xid, w->cid, w->frozen);
	placed(w, page, off, tid);
	if (copy)
	{
		tup.t_self = *tid;
		tup.t_tableOid = w->relid;
		*copy = heap_copytuple(&tup);
	}
	return;

general:
	{
		bool		shouldFree;
		HeapTuple	htup = ExecFetchSlotHeapTuple(slot, true, &shouldFree);

		dp_writer_add(w, htup, tid);
		if (copy)
			*copy = heap_copytuple(htup);
		if (shouldFree)
			heap_freetuple(htup);
	}
}

void
dp_writer_add(DPWriter *w, HeapTuple tup, ItemPointer tid)
{
	HeapTuple	heaptup = tup;
	Size		len;
	Page		page;
	OffsetNumber off;

	dp_tuple_prepare(tup, w->relid, w->xid, w->cid, w->frozen);

	if (HeapTupleHasExternal(tup) || tup->t_len > TOAST_TUPLE_THRESHOLD)
		heaptup = heap_toast_insert_or_update(w->rel, tup, NULL, w->toast_options);

	len = MAXALIGN(heaptup->t_len);
	if (len > MaxHeapTupleSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("row is too big: size %zu, maximum size %zu",
						len, (Size) MaxHeapTupleSize)));

	page = page_for(w, len);
	off = PageAddItem(page, (Item) heaptup->t_data, heaptup->t_len,
					  InvalidOffsetNumber, false, true);
	if (off == InvalidOffsetNumber)
		elog(ERROR, "directpath: failed to add tuple to a fresh page");
	placed(w, page, off, tid);
	tup->t_self = *tid;
	if (heaptup != tup)
	{
		/* its chunks are logged now, the row only when its page is */
		if (HeapTupleHasExternal(heaptup) && RelationIsLogicallyLogged(w->rel))
		{
			w->toast_block = ItemPointerGetBlockNumber(tid);
			w->toast_wait->bytes += tup->t_len;
			if (!w->toast_unlogged)
			{
				w->toast_unlogged = true;
				w->toast_wait->writers++;
			}
		}
		heap_freetuple(heaptup);
	}
}

/* Full pages waiting to be written (the last page may still take rows). */
int
dp_writer_full_pages(DPWriter *w)
{
	return w->npages > 0 ? w->npages - 1 : 0;
}

/*
 * Reserve disk space for blocks [first, first + n) past the end of the
 * file, keeping its size (see the file header).  Where the filesystem
 * cannot do that, nothing is reserved.
 */
static void
reserve_space(DPWriter *w, BlockNumber first, int n)
{
#if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
	char	   *path = DP_RELPATH_MAIN(w->rel);
	BlockNumber blk = first;
	BlockNumber end = first + n;

	while (blk < end)
	{
		BlockNumber segno = blk / RELSEG_SIZE;
		BlockNumber segend = Min(end, (segno + 1) * RELSEG_SIZE);
		char	   *segpath = segno == 0 ? pstrdup(path) : psprintf("%s.%u", path, segno);
		int			fd;
		int			rc;
		int			save_errno;

		/* a new segment is created here, as mdextend would create it */
		fd = OpenTransientFilePerm(segpath, O_RDWR | O_CREAT | PG_BINARY, pg_file_create_mode);
		if (fd < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open file \"%s\": %m", segpath)));
		rc = fallocate(fd, FALLOC_FL_KEEP_SIZE,
					   (off_t) (blk % RELSEG_SIZE) * BLCKSZ,
					   (off_t) (segend - blk) * BLCKSZ);
		save_errno = errno;
		CloseTransientFile(fd);
		if (rc != 0 && save_errno != EOPNOTSUPP && save_errno != ENOSYS)
		{
			errno = save_errno;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not reserve space for blocks %u to %u of file \"%s\": %m",
							blk, segend - 1, segpath),
					 errhint("Free some disk space, then retry the load.")));
		}
		pfree(segpath);
		blk = segend;
	}
	pfree(path);
#endif
}

/* Checksum and append pages [0, n) of 'pages', starting at block 'first'. */
static void
write_pages(DPWriter *w, Page *pages, int n, BlockNumber first)
{
	for (int i = 0; i < n; i++)
	{
		BlockNumber blkno = first + i;

		/*
		 * A sync request names a whole segment, so one per segment touched
		 * is enough: the write of its last block in this call.
		 */
		bool		last_in_segment = (i == n - 1) ||
			(blkno / RELSEG_SIZE != (blkno + 1) / RELSEG_SIZE);

		PageSetChecksumInplace(pages[i], blkno);
		smgrextend(RelationGetSmgr(w->rel), MAIN_FORKNUM, blkno,
				   pages[i], w->skip_fsync || !last_in_segment);
	}
	w->last_block = first + n - 1;
	w->last_free = PageGetHeapFreeSpace(pages[n - 1]);
	w->pages_written += n;
}

/* Take the first n built pages off the list, their blocks assigned. */
static void
take_pages(DPWriter *w, int n, Page *dest)
{
	memcpy(dest, w->pages, sizeof(Page) * n);
	memmove(w->pages, w->pages + n, sizeof(Page) * (w->npages - n));
	w->npages -= n;
	w->next_block += n;
}

static void
recycle(DPWriter *w, Page *pages, int n)
{
	if (w->nspare + n > w->maxspare)
	{
		w->maxspare = Max(w->maxspare * 2, w->nspare + n);
		w->spare = repalloc(w->spare, sizeof(Page) * w->maxspare);
	}
	memcpy(w->spare + w->nspare, pages, sizeof(Page) * n);
	w->nspare += n;
}

/*
 * Write the built pages: all of them with include_partial, else all but
 * the one still filling.  Without include_partial, WAL-logged pages of
 * existing storage are pipelined (see the file header); include_partial
 * drains the pipeline, so everything is readable afterwards.
 */
void
dp_writer_flush(DPWriter *w, bool include_partial)
{
	int			n = include_partial ? w->npages : dp_writer_full_pages(w);
	bool		pipeline = w->use_wal && !w->new_storage && !include_partial;
	BlockNumber first = w->next_block;
	Page	   *batch;
	bool		delayed = false;

	if (n == 0 && w->nlogged == 0)
		return;

	batch = palloc(sizeof(Page) * Max(n, 1));
	take_pages(w, n, batch);

	PG_TRY();
	{
		XLogRecPtr	end = InvalidXLogRecPtr;
		XLogRecPtr	redo = InvalidXLogRecPtr;

		if (w->use_wal)
		{
			Assert((MyProc->delayChkptFlags & DELAY_CHKPT_START) == 0);
			MyProc->delayChkptFlags |= DELAY_CHKPT_START;
			delayed = true;
			redo = GetRedoRecPtr();
			if (n > 0)
			{
				reserve_space(w, first, n);
				/* are rows with logged TOAST chunks left unlogged anywhere? */
				if (w->toast_unlogged && w->toast_block < first + n)
				{
					w->toast_unlogged = false;
					if (--w->toast_wait->writers == 0)
						w->toast_wait->bytes = 0;
				}
				end = dp_wal_log_pages(w->rel, first, n, batch, false,
									   w->toast_wait->writers > 0);
			}
		}

		/* the previous batch, whose WAL the WAL writer has been flushing */
		if (w->nlogged > 0)
		{
			/*
			 * A checkpoint began since: log it again, after its redo, as
			 * images (wal.c: its rows must not be decoded twice).
			 */
			if (redo != w->logged_redo)
				w->logged_end = dp_wal_log_pages(w->rel, w->logged_first,
												 w->nlogged, w->logged,
												 true, false);
			XLogFlush(w->logged_end);
			dp_fault("batch_wal");
			write_pages(w, w->logged, w->nlogged, w->logged_first);
			recycle(w, w->logged, w->nlogged);
			w->nlogged = 0;
		}

		if (n > 0 && pipeline)
		{
			memcpy(w->logged, batch, sizeof(Page) * n);
			w->nlogged = n;
			w->logged_first = first;
			w->logged_end = end;
			w->logged_redo = redo;
			XLogSetAsyncXactLSN(end);
		}
		else if (n > 0)
		{
			if (w->use_wal && !w->new_storage)
				XLogFlush(end);
			if (w->use_wal)
				dp_fault("batch_wal");
			write_pages(w, batch, n, first);
			recycle(w, batch, n);
		}
	}
	PG_FINALLY();
	{
		if (delayed)
			MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
	}
	PG_END_TRY();

	pfree(batch);
}

/*
 * Everything is written; set the visibility map for frozen pages and count
 * the inserts so that insert-driven autovacuum sees them.
 */
void
dp_writer_finish(DPWriter *w)
{
	dp_writer_flush(w, true);
	if (w->next_block > w->first_block)
	{
		if (w->frozen)
			dp_vm_set_frozen(w->rel, w->first_block, w->next_block);

		/*
		 * Only the last page can have room beyond the fillfactor reserve;
		 * tell the FSM about it, now that it is written and WAL-covered.
		 */
		if (w->last_free > w->save_free)
		{
			RecordPageWithFreeSpace(w->rel, w->last_block, w->last_free);
			FreeSpaceMapVacuumRange(w->rel, w->last_block, w->last_block + 1);
		}
	}
	pgstat_count_heap_insert(w->rel, w->tuples);
	MemoryContextDelete(w->cxt);
	w->pages = w->spare = NULL;
}

uint64
dp_writer_pages_written(DPWriter *w)
{
	return w->pages_written;
}

bool
dp_writer_frozen(DPWriter *w)
{
	return w->frozen;
}
