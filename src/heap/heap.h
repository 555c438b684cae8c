/*-------------------------------------------------------------------------
 *
 * heap/heap.h
 *	  The heap stage: rows placed on private pages (pages.c), pages appended
 *	  crash-safely with their WAL (append.c, wal.c), tuple headers and
 *	  visibility-map bits (visibility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_HEAP_H
#define DP_HEAP_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

/*
 * Rows of logically logged relations whose TOAST chunks are in WAL while
 * the rows are not yet (append.c): shared by a statement's writers.
 */
typedef struct DPToastWait
{
	int			writers;		/* writers holding such rows */
	uint64		bytes;			/* their size before toasting, roughly */
} DPToastWait;

/* drain every writer's pages once this much waits (decoder memory) */
#define DP_TOAST_WAIT_MAX_BYTES (16 * 1024 * 1024)

typedef struct DPHeapBuilder DPHeapBuilder;
typedef struct DPAppend DPAppend;
typedef struct DPShared DPShared;

/* ---------- pages.c: the heap page builder ---------- */

/*
 * Begin building pages for 'rel' (caller holds ShareRowExclusiveLock);
 * tuple headers get xid/cid, frozen with 'freeze'.
 */
extern DPHeapBuilder *dp_heap_begin(Relation rel, bool freeze,
									TransactionId xid, CommandId cid,
									DPToastWait *toast_wait);

/*
 * The same for a load beside other writers (caller holds RowExclusiveLock
 * only): pages go through shared buffers (shared.c), never frozen, and the
 * TIDs handed out are provisional until dp_heap_resolve_tid.
 */
extern DPHeapBuilder *dp_heap_begin_shared(Relation rel, TransactionId xid,
										   CommandId cid);

/* A TID handed out by the builder, as placed once its page is written. */
extern void dp_heap_resolve_tid(DPHeapBuilder *b, ItemPointer tid);

/*
 * Place the slot's row; *tid gets its place; 'copy' a palloc'd copy.
 * Returns the builder's full pages then (dp_heap_full_pages).
 */
extern int	dp_heap_add_slot(DPHeapBuilder *b, TupleTableSlot *slot,
							 ItemPointer tid, HeapTuple *copy);

/* Place a formed tuple (t_self and *tid set); toasts it as needed. */
extern void dp_heap_add(DPHeapBuilder *b, HeapTuple tup, ItemPointer tid);

/*
 * The same for the new version of an updated row (HEAP_UPDATED, counted
 * as an update); not on frozen pages.  'old' is the version it replaces:
 * the TOAST values they share stay, the old version's others are deleted.
 */
extern void dp_heap_add_version(DPHeapBuilder *b, HeapTuple tup,
								HeapTuple old, ItemPointer tid);

/*
 * A parallel worker's builder: no append layer, its pages taken whole by
 * dp_heap_take_page (the first full one, or with 'include_partial' the
 * last too; NULL when none; the caller owns it), block numbers unknown.
 * It takes only rows formed in place (dp_heap_add_slot_in_place: false
 * when the row needs TOAST or has external values, which a worker cannot
 * store).
 */
extern DPHeapBuilder *dp_heap_begin_detached(Relation rel, bool freeze,
											 TransactionId xid, CommandId cid);
extern bool dp_heap_add_slot_in_place(DPHeapBuilder *b, TupleTableSlot *slot);
extern Page dp_heap_take_page(DPHeapBuilder *b, bool include_partial);

/*
 * A page built by a worker's builder (same freezing, same transaction):
 * placed as the next block, each tuple's t_ctid set to its place.
 * Returns its tuples; *placed and *blkno get the builder's copy (valid
 * until the next flush) and its block number.
 */
extern int	dp_heap_add_page(DPHeapBuilder *b, const char *image, Page *placed,
							 BlockNumber *blkno);

/* Full pages built and not yet written (the last may still fill). */
extern int	dp_heap_full_pages(DPHeapBuilder *b);

/* Write the full pages, or all with 'include_partial' (then readable). */
extern void dp_heap_flush(DPHeapBuilder *b, bool include_partial);

/* Write everything, set VM and FSM, count; returns the pages written. */
extern uint64 dp_heap_finish(DPHeapBuilder *b);

struct DPSample;				/* typedef'd in stats/stats.h */

/*
 * The block the builder's first page takes (0: the relation was empty
 * when it began), and a sample (stats/stats.h) that the rows of every page
 * it writes from now on are offered to; given before the first row.
 */
extern BlockNumber dp_heap_first_block(DPHeapBuilder *b);

/* Rows the builder placed so far. */
extern uint64 dp_heap_rows(DPHeapBuilder *b);
extern void dp_heap_sample(DPHeapBuilder *b, struct DPSample *sample);


/* ---------- append.c: crash-safe appends of built pages ---------- */

/*
 * Begin appending to 'rel''s main fork at its current size.  'heap_records'
 * allows heap multi-insert records as WAL (else images); 'toast_wait' is
 * the statement's TOAST barrier (heap only, else NULL).
 */
extern DPAppend *dp_append_begin(Relation rel, bool heap_records,
								 DPToastWait *toast_wait);
extern BlockNumber dp_append_first_block(DPAppend *a);

/*
 * Begin appending beside other writers (shared.c): pages numbered from 0
 * provisionally, each given its block as it is written.
 */
extern DPAppend *dp_append_begin_shared(Relation rel);

/* The block a page numbered 'blkno' took (unchanged unless shared). */
extern BlockNumber dp_append_resolve(DPAppend *a, BlockNumber blkno);

/* A page buffer to build into; hand it back through dp_append_write. */
extern Page dp_append_page(DPAppend *a);

/*
 * Append n pages as the next blocks; the pages become the append layer's.
 * With 'drain' everything is written when this returns; without, the
 * batch may wait in the pipeline until the next call.
 */
extern void dp_append_write(DPAppend *a, Page *pages, int n, bool drain);

/* A row on block 'blkno' has TOAST chunks in WAL already. */
extern void dp_append_toast_row(DPAppend *a, BlockNumber blkno, Size bytes);

/* Drain and release. */
extern void dp_append_finish(DPAppend *a);

/* ---------- shared.c: pages through shared buffers ---------- */

extern DPShared *dp_shared_begin(Relation rel);

/* Write n pages numbered from 'first' (the pages stay the caller's). */
extern void dp_shared_write(DPShared *s, Page *pages, int n,
							BlockNumber first);

/* The block a written page numbered 'provisional' took. */
extern BlockNumber dp_shared_resolve(DPShared *s, BlockNumber provisional);

/* ---------- wal.c ---------- */

/*
 * Log pages for blocks [first, first + npages); sets each page's LSN and
 * returns the end of the WAL.  'images' forces full-page images.
 */
extern XLogRecPtr dp_wal_log_pages(Relation rel, BlockNumber first,
								   int npages, Page *pages, bool images,
								   bool toast_pending);

/*
 * Log the page of 'buf' (locked exclusively, in the caller's critical
 * section) as a multi-insert record that initialises it; sets its LSN.
 */
extern void dp_wal_log_buffer(Relation rel, Buffer buf);

/* ---------- visibility.c ---------- */

/* Storage created or truncated in the current subtransaction / the xact? */
extern bool dp_storage_new_in_subxact(Relation rel);
extern bool dp_storage_new_in_xact(Relation rel);

/* An empty heap page; PD_ALL_VISIBLE when 'frozen'. */
extern void dp_page_init(Page page, bool frozen);

/* Set a new row's header as heap_insert would (frozen: xmin frozen). */
extern void dp_tuple_prepare(HeapTuple tup, Oid relid, TransactionId xid,
							 CommandId cid, bool frozen);

/*
 * Set a row's header as heap_lock_tuple does for a lock on a row no other
 * transaction holds: xmax 'xid', HEAP_XMAX_LOCK_ONLY | 'lockbits'
 * (HEAP_XMAX_KEYSHR_LOCK or HEAP_XMAX_EXCL_LOCK), HEAP_KEYS_UPDATED and
 * HEAP_HOT_UPDATED clear, t_ctid 'self' (no update chain).
 */
extern void dp_tuple_set_lock(HeapTupleHeader h, TransactionId xid,
							  uint16 lockbits, ItemPointer self);

/*
 * Clear the VM bits 'flags' (VISIBILITYMAP_VALID_BITS, or only
 * VISIBILITYMAP_ALL_FROZEN for a row lock) of heap blocks 'blocks'
 * (ascending), each VM page changed logged as an image, before those heap
 * pages change in place.
 */
extern void dp_vm_clear_logged(Relation rel, const BlockNumber *blocks, int n,
							   uint8 flags);

/* Mark heap blocks [start, end) all-visible and all-frozen in the VM. */
extern void dp_vm_set_frozen(Relation rel, BlockNumber start, BlockNumber end);

#endif							/* DP_HEAP_H */
