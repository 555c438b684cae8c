/*-------------------------------------------------------------------------
 *
 * append.c
 *	  Append finished pages to a relation's main fork, crash-safely, outside
 *	  shared buffers: the storage half of a direct-path writer, in the manner
 *	  of core's bulk_write.c.  Whoever builds pages (pages.c for the heap)
 *	  asks for page buffers with dp_append_page(), fills them, and hands
 *	  consecutive batches to dp_append_write(); dp_append_finish() drains.
 *
 * The caller holds ShareRowExclusiveLock (or stronger) on the relation, so
 * nobody else extends the fork meanwhile: the pages take the blocks from
 * the fork's size at dp_append_begin() on, in order, without gaps, and a
 * written block is never revisited.  A load beside other writers
 * (dp_append_begin_shared) hands its pages to shared.c instead, which
 * gives each its block as it writes it, through shared buffers; the page
 * memory and the numbering stay this file's.
 *
 * Writing a batch, by storage kind:
 *
 *	WAL-logged (permanent, and wal_level >= replica or storage older than
 *	the transaction):
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
 *		checksum each page and append it (write_pages: vectored writes,
 *		  and smgrextend for each segment's last block in the batch,
 *		  whose write registers that segment for the next checkpoint's
 *		  fsync)
 *		clear DELAY_CHKPT_START (also on error)
 *	  A checkpoint whose redo pointer follows our WAL waits for the flag,
 *	  so the writes are registered before its sync phase; recovery from one
 *	  whose redo pointer precedes our WAL replays that WAL.  Either way
 *	  every page is durable after a crash without an end-of-load fsync, and
 *	  a torn write of an uncommitted load is repaired by replay.
 *
 *	WAL skipped (wal_level = minimal, storage new in this transaction):
 *		checksum and append without fsync registration; commit syncs the
 *		relation (smgrDoPendingSyncs), abort drops it.
 *
 *	Unlogged: checksum and append with fsync registration, so the
 *	shutdown checkpoint syncs the data.
 *
 * Pipelining (WAL-logged existing storage, batches written without
 * 'drain').  The XLogFlush above would put a WAL fsync on the critical path
 * of every batch.  Instead, a batch's WAL is inserted and the WAL writer
 * woken to flush it (XLogSetAsyncXactLSN, as an asynchronous commit does);
 * the batch's pages are written at a later write, inside that write's
 * checkpoint-delay window, after XLogFlush of their WAL: at the first
 * write that finds its WAL flushed (GetFlushRecPtr), so that the WAL
 * writer, not this backend, writes and syncs it, or when
 * DP_PIPELINE_DEPTH batches wait, the oldest then whatever its WAL's
 * state (a backend that flushed each batch's WAL at the next write waited
 * for WAL I/O a tenth of a bare COPY's time).  Batches are written oldest
 * first, so blocks still go out in order.  Because the WAL and the writes
 * now fall in different windows, a checkpoint can begin in between: it
 * would neither replay these pages (their WAL precedes its redo pointer)
 * nor know of their writes, and a write torn by an OS crash could not be
 * repaired.  So if the redo pointer moved since a batch's WAL was
 * inserted, the batch is logged again in the current window, as images,
 * before it is written.
 * A write with 'drain' (a partial page, the end of the statement, rows
 * waiting for index or trigger work) empties the pipeline.  Pages whose WAL
 * was inserted but that were never written (the statement failed in
 * between) are harmless: their tuples belong to an aborted transaction,
 * and whoever extends the relation next re-initialises those blocks, in
 * WAL too.
 *
 * The TOAST barrier (logically logged heaps, wal.c).  A toasted row's
 * chunks reach WAL when the row is placed, the row only when its page is
 * logged.  The builder reports such rows (dp_append_toast_row); while any
 * writer of the statement holds one on a page not yet logged
 * (DPToastWait), no record is flagged as the last of a multi-insert, so a
 * decoder keeps the chunks until their rows arrive.
 *
 * Invariants: blocks are written in ascending order without gaps; a page
 * is readable through the buffer manager only after the write (with
 * 'drain', after the call) that wrote it; page memory handed in is the
 * append layer's and is recycled by dp_append_page().
 *
 *-------------------------------------------------------------------------
 */
#include "heap/heap.h"

#include <fcntl.h>
#include "common/fault.h"

#include "access/xlog.h"
#include "catalog/catalog.h"
#include "common/file_perm.h"
#include "executor/instrument.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_iovec.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"
#include "storage/proc.h"
#include "storage/smgr.h"
#include "utils/memutils.h"

/* A batch whose WAL is inserted and whose pages are not written yet. */
typedef struct DPPipelined
{
	Page	   *pages;
	int			npages;
	BlockNumber first;			/* block of pages[0] */
	XLogRecPtr	end;			/* end of its WAL */
	XLogRecPtr	redo;			/* redo pointer when it was logged */
} DPPipelined;

/*
 * Logged batches kept unwritten at most: a batch is written once the WAL
 * writer has flushed its WAL, or when this many wait (then the backend
 * flushes the oldest's WAL itself).
 */
#define DP_PIPELINE_DEPTH 4

struct DPAppend
{
	Relation	rel;
	bool		use_wal;		/* RelationNeedsWAL */
	bool		new_storage;	/* relfilenode new in this transaction */
	bool		skip_fsync;		/* WAL skipped: commit syncs */
	bool		heap_records;	/* WAL as heap records where allowed */
	BlockNumber first_block;	/* the fork's size when we began */
	BlockNumber next_block;		/* block the next page handed in takes */
	DPPipelined pipelined[DP_PIPELINE_DEPTH];	/* oldest first */
	int			npipelined;
	Page	   *spare;			/* written pages, for reuse */
	int			nspare;
	int			maxspare;

	/* TOAST barrier: the highest block holding a toasted row, unlogged? */
	BlockNumber toast_block;
	bool		toast_unlogged;
	DPToastWait *toast_wait;	/* shared by the statement's writers, or
								 * NULL (no barrier) */

	DPShared   *shared;			/* beside other writers (shared.c), or NULL */

	MemoryContext cxt;			/* pages and arrays */
};

DPAppend *
dp_append_begin(Relation rel, bool heap_records, DPToastWait *toast_wait)
{
	DPAppend   *a = palloc0(sizeof(DPAppend));

	a->cxt = AllocSetContextCreate(CurrentMemoryContext, "directpath append",
								   ALLOCSET_DEFAULT_SIZES);
	a->rel = rel;
	a->use_wal = RelationNeedsWAL(rel);
	a->new_storage = dp_storage_new_in_xact(rel);
	a->skip_fsync = !a->use_wal &&
		rel->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;
	a->heap_records = heap_records;
	a->first_block = RelationGetNumberOfBlocks(rel);
	a->next_block = a->first_block;
	a->toast_block = InvalidBlockNumber;
	a->toast_wait = toast_wait;
	a->maxspare = 64;
	a->spare = MemoryContextAlloc(a->cxt, sizeof(Page) * a->maxspare);
	for (int i = 0; i < DP_PIPELINE_DEPTH; i++)
		a->pipelined[i].pages = MemoryContextAlloc(a->cxt,
												   sizeof(Page) * a->maxspare);
	return a;
}

DPAppend *
dp_append_begin_shared(Relation rel)
{
	DPAppend   *a = dp_append_begin(rel, true, NULL);

	/* outlives dp_append_finish: TIDs are resolved until the load ends */
	a->shared = dp_shared_begin(rel);
	a->first_block = 0;
	a->next_block = 0;
	return a;
}

BlockNumber
dp_append_first_block(DPAppend *a)
{
	return a->first_block;
}

BlockNumber
dp_append_resolve(DPAppend *a, BlockNumber blkno)
{
	return a->shared ? dp_shared_resolve(a->shared, blkno) : blkno;
}

Page
dp_append_page(DPAppend *a)
{
	MemoryContext old;
	Page		page;

	if (a->nspare > 0)
		return a->spare[--a->nspare];
	old = MemoryContextSwitchTo(a->cxt);
	page = DP_ALLOC_PAGE();
	MemoryContextSwitchTo(old);
	return page;
}

/* Keep written pages for reuse. */
static void
recycle(DPAppend *a, Page *pages, int n)
{
	if (a->nspare + n > a->maxspare)
	{
		a->maxspare = Max(a->maxspare * 2, a->nspare + n);
		a->spare = repalloc(a->spare, sizeof(Page) * a->maxspare);
	}
	memcpy(a->spare + a->nspare, pages, sizeof(Page) * n);
	a->nspare += n;
}

void
dp_append_toast_row(DPAppend *a, BlockNumber blkno, Size bytes)
{
	a->toast_block = blkno;
	a->toast_wait->bytes += bytes;
	if (!a->toast_unlogged)
	{
		a->toast_unlogged = true;
		a->toast_wait->writers++;
	}
}

/*
 * Open segment 'segno' of the relation's main fork as a transient file,
 * creating it if it does not exist yet, as mdextend would create it; *path
 * gets its palloc'd name.
 */
static int
open_segment(DPAppend *a, BlockNumber segno, char **path)
{
	char	   *main_path = DP_RELPATH_MAIN(a->rel);
	int			fd;

	*path = main_path;
	if (segno > 0)
	{
		*path = psprintf("%s.%u", main_path, segno);
		pfree(main_path);
	}
	fd = OpenTransientFilePerm(*path, O_RDWR | O_CREAT | PG_BINARY,
							   pg_file_create_mode);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", *path)));
	return fd;
}

/*
 * Reserve disk space for blocks [first, first + n) past the end of the
 * file, keeping its size (see the file header).  Where the filesystem
 * cannot do that, nothing is reserved.
 */
static void
reserve_space(DPAppend *a, BlockNumber first, int n)
{
#if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
	BlockNumber blk = first;
	BlockNumber end = first + n;

	while (blk < end)
	{
		BlockNumber segno = blk / RELSEG_SIZE;
		BlockNumber segend = Min(end, (segno + 1) * RELSEG_SIZE);
		char	   *segpath;
		int			fd = open_segment(a, segno, &segpath);
		int			rc;
		int			save_errno;

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
#endif
}

/*
 * Append blocks [first, first + n), all in one segment and not its last
 * block in the batch, with vectored writes to the segment's file
 * (open_segment).  The file grows as each page's bytes arrive, so a reader
 * never sees a block before its contents, as with smgrextend.
 */
static void
write_vectored(DPAppend *a, Page *pages, int n, BlockNumber first)
{
	off_t		offset = (off_t) (first % RELSEG_SIZE) * BLCKSZ;
	char	   *path;
	int			fd = open_segment(a, first / RELSEG_SIZE, &path);

	while (n > 0)
	{
		struct iovec iov[PG_IOV_MAX];
		int			k = Min(n, PG_IOV_MAX);
		ssize_t		done;

		for (int i = 0; i < k; i++)
		{
			iov[i].iov_base = pages[i];
			iov[i].iov_len = BLCKSZ;
		}
		pgstat_report_wait_start(WAIT_EVENT_DATA_FILE_EXTEND);
		done = pg_pwritev(fd, iov, k, offset);
		pgstat_report_wait_end();
		if (done < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not extend file \"%s\": %m", path),
					 errhint("Check free disk space.")));
		if (done != (ssize_t) k * BLCKSZ)
			ereport(ERROR,
					(errcode(ERRCODE_DISK_FULL),
					 errmsg("could not extend file \"%s\": wrote only %zd of %zd bytes at block %u",
							path, done, (ssize_t) k * BLCKSZ, first),
					 errhint("Check free disk space.")));
		pages += k;
		n -= k;
		first += k;
		offset += (off_t) k * BLCKSZ;
	}
	CloseTransientFile(fd);
	pfree(path);
}

/*
 * Checksum and append pages [0, n) of 'pages', starting at block 'first'.
 *
 * Per segment touched, every block but the last goes out in vectored
 * writes (write_vectored; one system call per PG_IOV_MAX pages, not one per
 * page, which halves the kernel's time for a load's pages); the last
 * through smgrextend, whose write also registers the segment for the next
 * checkpoint's fsync (a sync request names a whole segment).  Relations
 * in local buffers have every block written by smgrextend.
 */
static void
write_pages(DPAppend *a, Page *pages, int n, BlockNumber first)
{
	int			i = 0;
	DPIOStart	io_start = DP_IO_START();

	for (int j = 0; j < n; j++)
		PageSetChecksumInplace(pages[j], first + j);
	while (i < n)
	{
		BlockNumber blkno = first + i;
		BlockNumber segend = (blkno / RELSEG_SIZE + 1) * RELSEG_SIZE;

		/* the index of this segment's last page in the batch */
		int			last = i + (int) Min((BlockNumber) (n - i), segend - blkno) - 1;

		if (RelationUsesLocalBuffers(a->rel))
		{
			for (; i < last; i++)
				smgrextend(RelationGetSmgr(a->rel), MAIN_FORKNUM, first + i,
						   pages[i], true);
		}
		else if (i < last)
			write_vectored(a, pages + i, last - i, blkno);
		smgrextend(RelationGetSmgr(a->rel), MAIN_FORKNUM, first + last,
				   pages[last], a->skip_fsync);
		i = last + 1;
	}
	/* pg_stat_io's extends, as core counts a COPY's */
	DP_COUNT_IO_EXTENDS(io_start, n);
	/* and the statement's blocks written (EXPLAIN's, pg_stat_statements') */
	if (RelationUsesLocalBuffers(a->rel))
		pgBufferUsage.local_blks_written += n;
	else
		pgBufferUsage.shared_blks_written += n;
	/* start the kernel's writeback now, not at the checkpoint's or commit's fsync */
	smgrwriteback(RelationGetSmgr(a->rel), MAIN_FORKNUM, first, n);
	recycle(a, pages, n);
}

/*
 * WAL for a new batch, inside the checkpoint-delay window: space first,
 * then the TOAST barrier's state, then the records.  Returns the WAL's end.
 */
static XLogRecPtr
log_batch(DPAppend *a, Page *pages, int n, BlockNumber first)
{
	reserve_space(a, first, n);
	/* are rows with logged TOAST chunks left unlogged anywhere? */
	if (a->toast_unlogged && a->toast_block < first + n)
	{
		a->toast_unlogged = false;
		if (--a->toast_wait->writers == 0)
			a->toast_wait->bytes = 0;
	}
	return dp_wal_log_pages(a->rel, first, n, pages, !a->heap_records,
							a->toast_wait != NULL && a->toast_wait->writers > 0);
}

/*
 * Write a pipelined batch, whose WAL the WAL writer has been flushing.
 * If a checkpoint began since it was logged, log it again after the
 * checkpoint's redo, as images (wal.c: its rows must not be decoded twice).
 */
static void
write_pipelined(DPAppend *a, DPPipelined *p, XLogRecPtr redo)
{
	if (redo != p->redo)
		p->end = dp_wal_log_pages(a->rel, p->first, p->npages, p->pages,
								  true, false);
	XLogFlush(p->end);
	dp_fault("batch_wal");
	write_pages(a, p->pages, p->npages, p->first);
	p->npages = 0;
}

/*
 * Write the pipelined batches, oldest first: all of them ('all'), or those
 * whose WAL is flushed already, and the oldest when the pipeline is full.
 */
static void
write_pipeline(DPAppend *a, XLogRecPtr redo, bool all)
{
	XLogRecPtr	flushed = GetFlushRecPtr(NULL);
	DPPipelined written[DP_PIPELINE_DEPTH];
	int			k = 0;

	while (k < a->npipelined &&
		   (all || a->pipelined[k].end <= flushed ||
			(k == 0 && a->npipelined == DP_PIPELINE_DEPTH)))
		write_pipelined(a, &a->pipelined[k++], redo);
	if (k == 0)
		return;
	/* the rest move to the front; the written ones' page arrays go last */
	memcpy(written, a->pipelined, sizeof(DPPipelined) * k);
	memmove(a->pipelined, a->pipelined + k,
			sizeof(DPPipelined) * (a->npipelined - k));
	memcpy(a->pipelined + (a->npipelined - k), written,
		   sizeof(DPPipelined) * k);
	a->npipelined -= k;
}

/* Keep a logged batch to be written at a later call. */
static void
pipeline(DPAppend *a, Page *pages, int n, BlockNumber first,
		 XLogRecPtr end, XLogRecPtr redo)
{
	DPPipelined *p;

	Assert(a->npipelined < DP_PIPELINE_DEPTH);
	p = &a->pipelined[a->npipelined++];
	if (n > a->maxspare)
	{
		a->maxspare = n;
		a->spare = repalloc(a->spare, sizeof(Page) * a->maxspare);
	}
	p->pages = repalloc(p->pages, sizeof(Page) * Max(n, 1));
	memcpy(p->pages, pages, sizeof(Page) * n);
	p->npages = n;
	p->first = first;
	p->end = end;
	p->redo = redo;
	XLogSetAsyncXactLSN(end);
}

void
dp_append_write(DPAppend *a, Page *pages, int n, bool drain)
{
	BlockNumber first = a->next_block;
	bool		pipelined = a->use_wal && !a->new_storage && !drain;
	bool		delayed = false;

	if (n == 0 && a->npipelined == 0)
		return;
	a->next_block += n;
	if (a->shared)
	{
		dp_shared_write(a->shared, pages, n, first);
		recycle(a, pages, n);
		return;
	}

	PG_TRY();
	{
		XLogRecPtr	end = InvalidXLogRecPtr;
		XLogRecPtr	redo = InvalidXLogRecPtr;

		if (a->use_wal)
		{
			Assert((MyProc->delayChkptFlags & DELAY_CHKPT_START) == 0);
			MyProc->delayChkptFlags |= DELAY_CHKPT_START;
			delayed = true;
			redo = GetRedoRecPtr();
			if (n > 0)
				end = log_batch(a, pages, n, first);
		}
		write_pipeline(a, redo, !(n > 0 && pipelined));
		if (n > 0 && pipelined)
			pipeline(a, pages, n, first, end, redo);
		else if (n > 0)
		{
			if (a->use_wal && !a->new_storage)
				XLogFlush(end);
			if (a->use_wal)
				dp_fault("batch_wal");
			write_pages(a, pages, n, first);
		}
	}
	PG_FINALLY();
	{
		if (delayed)
			MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
	}
	PG_END_TRY();
}

void
dp_append_finish(DPAppend *a)
{
	dp_append_write(a, NULL, 0, true);
	MemoryContextDelete(a->cxt);
	a->spare = NULL;
}
