/*-------------------------------------------------------------------------
 *
 * pages.c
 *	  The heap page builder: places a leaf relation's rows onto private
 *	  pages in backend memory, and hands full pages to the append layer
 *	  (append.c), which writes them.
 *
 * One builder per leaf relation a statement writes directly.  Pages take
 * the relation's blocks in order, from its size when the builder began
 * (append.c), so a row's TID is known the moment it is placed.
 *
 * Placing a row: its header is set as heap_insert would (visibility.c),
 * it is toasted through core's toaster when it has external values or is
 * over TOAST_TUPLE_THRESHOLD, and it goes onto the current page if it fits
 * within the fillfactor reserve; a fresh page always takes at least one
 * row.  Its on-page t_ctid and the caller's TID are set to its place.  The
 * common case forms the tuple directly in its place on the page.  When
 * every column of the table is of fixed width or a varlena (none dropped),
 * rows take the layout: a header copied whole from one made once per
 * builder as the general path makes each (t_ctid aside: every row's header
 * is the same but for the bits and offset of its nulls), then each value
 * where heap_fill_tuple would put it (aligned as its column is, a varlena
 * of a 4-byte header that can be short stored short, a null's bit clear),
 * by one walk over a small array of the columns' widths and alignments
 * instead of heap_compute_data_size's and heap_fill_tuple's walks over the
 * tuple descriptor.  When every column has a fixed width, a row without
 * nulls has the same length as every other, computed once.
 *
 * Frozen builders (storage new in this subtransaction, admission allowed
 * it) mark every page PD_ALL_VISIBLE and every tuple frozen, and set the
 * visibility map for their blocks when they finish (visibility.c).  At the
 * end the last page, the only one that can have room left beyond the
 * fillfactor reserve, is recorded in the free-space map, and the inserts
 * are counted for pgstat so that insert-driven autovacuum sees them (new
 * versions of updated rows, dp_heap_add_version, as updates: their old
 * versions are dead once the transaction commits).
 *
 * A parallel load (parallel.c) uses the builder two more ways: a worker's
 * builder is detached (no append layer: its pages are taken away whole,
 * their block numbers unknown), and forms in place only the rows that need
 * no TOAST; the leader's builder takes the workers' finished pages as its
 * next blocks (dp_heap_add_page), setting each tuple's t_ctid then.
 *
 * A load beside other writers (dp_heap_begin_shared) numbers its pages
 * from 0 provisionally; each takes its real block when written (shared.c),
 * and the TIDs handed out are translated then (dp_heap_resolve_tid).
 *
 * A builder of a relation that was empty can be given a sample
 * (stats/stats.c): every page it hands to be written offers its rows to
 * it first, with their block numbers.
 *
 * Invariants: a TID handed out is readable through the buffer manager only
 * after the flush that wrote its page (the caller defers index and
 * trigger work until then, queue.c); pages[0..npages-1] are consecutive
 * blocks starting at next_block, and only the last may still take rows.
 *
 *-------------------------------------------------------------------------
 */
#include "heap/heap.h"

#include "stats/stats.h"

#include "access/heapam.h"
#include "catalog/catalog.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "common/fault.h"
#include "common/progress.h"
#include "pgstat.h"
#include "storage/freespace.h"
#include "storage/predicate.h"

/* A column of the layout: how heap_fill_tuple places its value. */
typedef struct DPLayoutColumn
{
	int16		len;			/* attlen: > 0, or -1 (a varlena) */
	uint8		align;			/* attalign, in bytes */
	bool		byval;
	bool		packable;		/* a varlena not of plain storage: a value
								 * of a 4-byte header goes in short */
} DPLayoutColumn;

struct DPHeapBuilder
{
	Relation	rel;
	bool		frozen;			/* pages and tuples go out frozen */
	bool		has_varlena;	/* any attlen -1 column? */
	DPLayoutColumn *layout;		/* the layout, or NULL */
	Size		fixed_len;		/* without varlenas, a row's length without
								 * nulls, header included; else 0 */
	Size		null_hoff;		/* t_hoff of a row with nulls */
	char		layout_header[MAXALIGN(SizeofHeapTupleHeader)];	/* a row's
																 * header
																 * without
																 * nulls but
																 * t_ctid */
	DPSample   *sample;			/* rows sampled for statistics, or NULL */
	TransactionId xid;			/* tuple header fields */
	CommandId	cid;
	Size		save_free;		/* fillfactor reserve */
	DPAppend   *append;			/* where finished pages go */
	BlockNumber next_block;		/* block number of pages[0] */
	Page	   *pages;			/* built, not yet handed to append */
	int			npages;
	int			maxpages;
	Size		last_free;		/* free space of the last page handed on */
	uint64		tuples;			/* rows placed */
	uint64		versions;		/* ... of which new versions of updated
								 * rows (dp_heap_add_version) */
};

/* An attalign in bytes, as att_align_nominal aligns. */
static uint8
align_bytes(char attalign)
{
	switch (attalign)
	{
		case TYPALIGN_CHAR:
			return 1;
		case TYPALIGN_SHORT:
			return ALIGNOF_SHORT;
		case TYPALIGN_INT:
			return ALIGNOF_INT;
		default:
			return ALIGNOF_DOUBLE;
	}
}

/*
 * The layout, when every column is of fixed width or a varlena and none is
 * dropped; without varlenas, the length of a row without nulls (no layout
 * when that needs TOAST).
 */
static void
rows_layout(DPHeapBuilder *b, TupleDesc desc)
{
	DPLayoutColumn *layout = palloc(sizeof(DPLayoutColumn) * Max(desc->natts, 1));
	Size		off = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if ((att->attlen <= 0 && att->attlen != -1) || att->attisdropped)
		{
			pfree(layout);
			return;
		}
		layout[i].len = att->attlen;
		layout[i].align = align_bytes(att->attalign);
		layout[i].byval = att->attbyval;
		layout[i].packable = att->attlen == -1 &&
			att->attstorage != TYPSTORAGE_PLAIN;
		off = TYPEALIGN(layout[i].align, off) + Max(att->attlen, 0);
	}
	if (!b->has_varlena)
	{
		b->fixed_len = MAXALIGN(SizeofHeapTupleHeader) + off;
		if (b->fixed_len > TOAST_TUPLE_THRESHOLD)
		{
			pfree(layout);
			return;
		}
	}
	b->null_hoff = MAXALIGN(SizeofHeapTupleHeader + BITMAPLEN(desc->natts));
	b->layout = layout;
}

/*
 * The header of every row of the layout without nulls, made as
 * form_in_place makes a row's header (heap_fill_tuple sets
 * HEAP_HASVARWIDTH when the row has a varlena, no other infomask bit for a
 * row without nulls), with the builder's transaction and command; each
 * row gets its own t_ctid when placed, a row with nulls its t_hoff, bits
 * and format bits (fill_layout).  (The length, type and typmod that
 * heap_form_tuple would set share their place with xmin, xmax and cmin,
 * set here.)
 */
static void
layout_header(DPHeapBuilder *b, TupleDesc desc)
{
	HeapTupleHeader td = (HeapTupleHeader) b->layout_header;
	HeapTupleData tup;

	memset(td, 0, sizeof(b->layout_header));
	HeapTupleHeaderSetNatts(td, desc->natts);
	td->t_hoff = MAXALIGN(SizeofHeapTupleHeader);
	if (b->has_varlena)
		td->t_infomask |= HEAP_HASVARWIDTH;
	tup.t_data = td;
	tup.t_len = sizeof(b->layout_header);
	dp_tuple_prepare(&tup, RelationGetRelid(b->rel), b->xid, b->cid, b->frozen);
}

DPHeapBuilder *
dp_heap_begin_detached(Relation rel, bool freeze, TransactionId xid,
					   CommandId cid)
{
	DPHeapBuilder *b = palloc0(sizeof(DPHeapBuilder));
	TupleDesc	desc = RelationGetDescr(rel);

	b->rel = rel;
	b->frozen = freeze;
	b->xid = xid;
	b->cid = cid;
	b->save_free = RelationGetTargetPageFreeSpace(rel, HEAP_DEFAULT_FILLFACTOR);
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attlen == -1)
			b->has_varlena = true;
	rows_layout(b, desc);
	if (b->layout)
		layout_header(b, desc);
	b->maxpages = 64;
	b->pages = palloc(sizeof(Page) * b->maxpages);
	return b;
}

DPHeapBuilder *
dp_heap_begin(Relation rel, bool freeze, TransactionId xid, CommandId cid,
			  DPToastWait *toast_wait)
{
	DPHeapBuilder *b = dp_heap_begin_detached(rel, freeze, xid, cid);

	b->append = dp_append_begin(rel, true, toast_wait);
	b->next_block = dp_append_first_block(b->append);

	/* As heap_multi_insert: a serializable reader of the table conflicts. */
	CheckForSerializableConflictIn(rel, NULL, InvalidBlockNumber);
	return b;
}

DPHeapBuilder *
dp_heap_begin_shared(Relation rel, TransactionId xid, CommandId cid)
{
	DPHeapBuilder *b = dp_heap_begin_detached(rel, false, xid, cid);

	b->append = dp_append_begin_shared(rel);
	b->next_block = dp_append_first_block(b->append);
	CheckForSerializableConflictIn(rel, NULL, InvalidBlockNumber);
	return b;
}

void
dp_heap_resolve_tid(DPHeapBuilder *b, ItemPointer tid)
{
	if (b->append == NULL)
		return;
	ItemPointerSetBlockNumber(tid,
							  dp_append_resolve(b->append,
												ItemPointerGetBlockNumber(tid)));
}

/* The next page's memory, at the end of b->pages, uninitialised. */
static Page
next_page(DPHeapBuilder *b)
{
	Page		page = b->append ? dp_append_page(b->append) : DP_ALLOC_PAGE();

	if (b->npages == b->maxpages)
	{
		b->maxpages *= 2;
		b->pages = repalloc(b->pages, sizeof(Page) * b->maxpages);
	}
	b->pages[b->npages++] = page;
	return page;
}

static Page
new_page(DPHeapBuilder *b)
{
	Page		page = next_page(b);

	dp_page_init(page, b->frozen);
	return page;
}

/*
 * PageGetHeapFreeSpace of a page the builder fills: its line pointers are
 * all in use, so the room is what lies between pd_lower and pd_upper,
 * less a line pointer, and none once MaxHeapTuplesPerPage are there.
 */
static inline Size
free_space(Page page)
{
	PageHeader	ph = (PageHeader) page;
	int			room = (int) ph->pd_upper - (int) ph->pd_lower;

	if (room < (int) sizeof(ItemIdData) ||
		PageGetMaxOffsetNumber(page) >= MaxHeapTuplesPerPage)
		return 0;
	return room - sizeof(ItemIdData);
}

/*
 * The page that takes a tuple of 'len' (MAXALIGNed) bytes: the current one
 * if it fits within the fillfactor reserve, else a fresh one (which always
 * takes at least one tuple).
 */
static inline Page
page_for(DPHeapBuilder *b, Size len)
{
	Page		page = b->npages > 0 ? b->pages[b->npages - 1] : NULL;

	if (page == NULL ||
		(PageGetMaxOffsetNumber(page) > 0 &&
		 free_space(page) < len + b->save_free) ||
		free_space(page) < len)
		page = new_page(b);
	return page;
}

/* Finish a tuple placed at 'off' on the last page: ctid and caller's TID. */
static inline void
placed(DPHeapBuilder *b, Page page, OffsetNumber off, ItemPointer tid)
{
	HeapTupleHeader onpage = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, off));

	/* each set on its own: no read back of what was just stored */
	ItemPointerSet(tid, b->next_block + b->npages - 1, off);
	ItemPointerSet(&onpage->t_ctid, b->next_block + b->npages - 1, off);
	b->tuples++;
}

/*
 * The length of a row of the layout after its header of 'hoff' bytes, as
 * heap_compute_data_size counts it; false if it has an external value
 * (the general path's: TOAST).
 */
static inline bool
layout_length(const DPHeapBuilder *b, int natts, const Datum *values,
			  const bool *isnull, Size hoff, Size *len)
{
	Size		off = 0;

	for (int i = 0; i < natts; i++)
	{
		const DPLayoutColumn *c = &b->layout[i];
		Pointer		p;

		if (isnull[i])
			continue;
		if (c->len > 0)
		{
			off = TYPEALIGN(c->align, off) + c->len;
			continue;
		}
		p = DatumGetPointer(values[i]);
		if (VARATT_IS_EXTERNAL(p))
			return false;
		if (VARATT_IS_SHORT(p))
			off += VARSIZE_SHORT(p);
		else if (c->packable && VARATT_CAN_MAKE_SHORT(p))
			off += VARATT_CONVERTED_SHORT_SIZE(p);
		else
			off = TYPEALIGN(c->align, off) + VARSIZE(p);
	}
	*len = hoff + off;
	return true;
}

/*
 * Can the row in the slot be formed in place?  Not if it has external
 * values or needs TOAST; else returns its header and total length.
 */
static bool
fits_in_place(DPHeapBuilder *b, TupleTableSlot *slot, Size *hoff, Size *len,
			  bool *hasnull)
{
	TupleDesc	desc = RelationGetDescr(b->rel);

	*hasnull = false;
	if (b->layout)
	{
		*hasnull = memchr(slot->tts_isnull, true, desc->natts) != NULL;
		*hoff = *hasnull ? b->null_hoff : MAXALIGN(SizeofHeapTupleHeader);
		if (!b->has_varlena && !*hasnull)
		{
			*len = b->fixed_len;
			return true;
		}
		return layout_length(b, desc->natts, slot->tts_values,
							 slot->tts_isnull, *hoff, len) &&
			*len <= TOAST_TUPLE_THRESHOLD;
	}
	for (int i = 0; i < desc->natts; i++)
	{
		if (slot->tts_isnull[i])
			*hasnull = true;
		else if (b->has_varlena && TupleDescAttr(desc, i)->attlen == -1 &&
				 VARATT_IS_EXTERNAL(DatumGetPointer(slot->tts_values[i])))
			return false;
	}
	*hoff = SizeofHeapTupleHeader;
	if (*hasnull)
		*hoff += BITMAPLEN(desc->natts);
	*hoff = MAXALIGN(*hoff);
	*len = *hoff + heap_compute_data_size(desc, slot->tts_values,
										  slot->tts_isnull);
	return *len <= TOAST_TUPLE_THRESHOLD;
}

/*
 * A row of the layout at td, its header 'hoff' bytes: the header made once
 * (layout_header), then each value as heap_fill_tuple's fill_val stores
 * it; with nulls, the header's offset and format bits as heap_fill_tuple
 * sets them (HEAP_HASVARWIDTH only when a varlena is not null) and a bit
 * for each value that is not null.  The page is zeroed (PageInit), so are
 * the null bitmap and the padding between values.
 */
static inline void
fill_layout(DPHeapBuilder *b, TupleDesc desc, HeapTupleHeader td,
			TupleTableSlot *slot, Size hoff, bool hasnull)
{
	char	   *data = (char *) td + hoff;
	Size		off = 0;
	bool		varwidth = false;

	memcpy(td, b->layout_header, sizeof(b->layout_header));
	for (int i = 0; i < desc->natts; i++)
	{
		const DPLayoutColumn *c = &b->layout[i];
		Pointer		p = DatumGetPointer(slot->tts_values[i]);
		Size		n;

		if (hasnull)
		{
			if (slot->tts_isnull[i])
				continue;
			td->t_bits[i >> 3] |= 1 << (i & 7);
		}
		if (c->len > 0)
		{
			off = TYPEALIGN(c->align, off);
			if (c->byval)
				store_att_byval(data + off, slot->tts_values[i], c->len);
			else
				memcpy(data + off, p, c->len);
			off += c->len;
			continue;
		}
		if (VARATT_IS_SHORT(p))
		{
			n = VARSIZE_SHORT(p);
			memcpy(data + off, p, n);
		}
		else if (c->packable && VARATT_CAN_MAKE_SHORT(p))
		{
			n = VARATT_CONVERTED_SHORT_SIZE(p);
			SET_VARSIZE_SHORT(data + off, n);
			memcpy(data + off + 1, VARDATA(p), n - 1);
		}
		else
		{
			off = TYPEALIGN(c->align, off);
			n = VARSIZE(p);
			memcpy(data + off, p, n);
		}
		off += n;
		varwidth = true;
	}
	if (hasnull)
	{
		td->t_hoff = hoff;
		td->t_infomask &= ~HEAP_HASVARWIDTH;
		td->t_infomask |= HEAP_HASNULL | (varwidth ? HEAP_HASVARWIDTH : 0);
	}
}

/* Any other row at td: its header, then heap_fill_tuple. */
static void
fill_general(DPHeapBuilder *b, TupleDesc desc, HeapTupleHeader td,
			 TupleTableSlot *slot, Size hoff, Size len, bool hasnull)
{
	HeapTupleData tup;

	if (hoff == MAXALIGN(SizeofHeapTupleHeader))
		memset(td, 0, MAXALIGN(SizeofHeapTupleHeader));	/* inlined */
	else
		memset(td, 0, hoff);
	HeapTupleHeaderSetDatumLength(td, len);
	HeapTupleHeaderSetTypeId(td, desc->tdtypeid);
	HeapTupleHeaderSetTypMod(td, desc->tdtypmod);
	HeapTupleHeaderSetNatts(td, desc->natts);
	td->t_hoff = hoff;
	heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull,
					(char *) td + hoff, len - hoff,
					&td->t_infomask, hasnull ? td->t_bits : NULL);
	tup.t_data = td;
	tup.t_len = len;
	dp_tuple_prepare(&tup, RelationGetRelid(b->rel), b->xid, b->cid,
					 b->frozen);
}

/* Form the slot's row directly on the page that takes it. */
static void
form_in_place(DPHeapBuilder *b, TupleTableSlot *slot, Size hoff, Size len,
			  bool hasnull, ItemPointer tid, HeapTuple *copy)
{
	TupleDesc	desc = RelationGetDescr(b->rel);
	Page		page = page_for(b, MAXALIGN(len));
	OffsetNumber off = OffsetNumberNext(PageGetMaxOffsetNumber(page));
	ItemId		lp;
	HeapTupleHeader td;
	HeapTupleData tup;

	/* reserve the space and the line pointer, then fill in place */
	((PageHeader) page)->pd_upper -= MAXALIGN(len);
	((PageHeader) page)->pd_lower += sizeof(ItemIdData);
	lp = PageGetItemId(page, off);
	ItemIdSetNormal(lp, ((PageHeader) page)->pd_upper, len);
	td = (HeapTupleHeader) PageGetItem(page, lp);
	if (b->layout)
		fill_layout(b, desc, td, slot, hoff, hasnull);
	else
		fill_general(b, desc, td, slot, hoff, len, hasnull);
	placed(b, page, off, tid);
	if (copy)
	{
		tup.t_data = td;
		tup.t_len = len;
		tup.t_self = *tid;
		tup.t_tableOid = RelationGetRelid(b->rel);
		*copy = heap_copytuple(&tup);
	}
}

/* Form the slot's row in place if it can be (fits_in_place). */
static bool
add_in_place(DPHeapBuilder *b, TupleTableSlot *slot, ItemPointer tid,
			 HeapTuple *copy)
{
	Size		hoff;
	Size		len;
	bool		hasnull;

	slot_getallattrs(slot);
	if (!fits_in_place(b, slot, &hoff, &len, &hasnull))
		return false;
	form_in_place(b, slot, hoff, len, hasnull, tid, copy);
	return true;
}

bool
dp_heap_add_slot_in_place(DPHeapBuilder *b, TupleTableSlot *slot)
{
	ItemPointerData tid;

	return add_in_place(b, slot, &tid, NULL);
}

void
dp_heap_sample(DPHeapBuilder *b, DPSample *sample)
{
	Assert(b->append != NULL && b->tuples == 0);
	b->sample = sample;
}

BlockNumber
dp_heap_first_block(DPHeapBuilder *b)
{
	return dp_append_first_block(b->append);
}

uint64
dp_heap_rows(DPHeapBuilder *b)
{
	return b->tuples;
}

Page
dp_heap_take_page(DPHeapBuilder *b, bool include_partial)
{
	Page		page;

	Assert(b->append == NULL);
	if (b->npages == 0 || (!include_partial && b->npages == 1))
		return NULL;
	page = b->pages[0];
	memmove(b->pages, b->pages + 1, sizeof(Page) * (b->npages - 1));
	b->npages--;
	return page;
}

int
dp_heap_add_page(DPHeapBuilder *b, const char *image, Page *placed,
				 BlockNumber *blknop)
{
	Page		page = next_page(b);
	BlockNumber blkno = b->next_block + b->npages - 1;
	OffsetNumber maxoff;

	memcpy(page, image, BLCKSZ);
	maxoff = PageGetMaxOffsetNumber(page);
	for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
	{
		HeapTupleHeader tup = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, off));

		ItemPointerSet(&tup->t_ctid, blkno, off);
	}
	b->tuples += maxoff;
	*placed = page;
	*blknop = blkno;
	return maxoff;
}

int
dp_heap_add_slot(DPHeapBuilder *b, TupleTableSlot *slot, ItemPointer tid,
				 HeapTuple *copy)
{
	bool		shouldFree;
	HeapTuple	htup;

	if (!add_in_place(b, slot, tid, copy))
	{
		htup = ExecFetchSlotHeapTuple(slot, true, &shouldFree);
		dp_heap_add(b, htup, tid);
		if (copy)
			*copy = heap_copytuple(htup);
		if (shouldFree)
			heap_freetuple(htup);
	}
	return dp_heap_full_pages(b);
}

/*
 * Place a row, toasting it first if it needs it; 'old' is the version an
 * update replaces, or NULL: TOAST values the row shares with it are kept,
 * the old version's others deleted (as heap_update toasts).
 */
static void
add_tuple(DPHeapBuilder *b, HeapTuple tup, HeapTuple old, ItemPointer tid)
{
	HeapTuple	heaptup = tup;
	Size		len;
	Page		page;
	OffsetNumber off;

	dp_tuple_prepare(tup, RelationGetRelid(b->rel), b->xid, b->cid, b->frozen);
	if (HeapTupleHasExternal(tup) || tup->t_len > TOAST_TUPLE_THRESHOLD ||
		(old != NULL && HeapTupleHasExternal(old)))
		heaptup = heap_toast_insert_or_update(b->rel, tup, old,
											  HEAP_INSERT_SKIP_FSM |
											  (b->frozen ? HEAP_INSERT_FROZEN : 0));

	len = MAXALIGN(heaptup->t_len);
	if (len > MaxHeapTupleSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("row is too big: size %zu, maximum size %zu",
						len, (Size) MaxHeapTupleSize)));

	page = page_for(b, len);
	off = PageAddItem(page, (Item) heaptup->t_data, heaptup->t_len,
					  InvalidOffsetNumber, false, true);
	if (off == InvalidOffsetNumber)
		elog(ERROR, "directpath: failed to add tuple to a fresh page");
	placed(b, page, off, tid);
	tup->t_self = *tid;
	if (heaptup != tup)
	{
		/* its chunks are logged now, the row only when its page is */
		if (HeapTupleHasExternal(heaptup) && RelationIsLogicallyLogged(b->rel))
			dp_append_toast_row(b->append, ItemPointerGetBlockNumber(tid),
								tup->t_len);
		heap_freetuple(heaptup);
	}
}

void
dp_heap_add(DPHeapBuilder *b, HeapTuple tup, ItemPointer tid)
{
	add_tuple(b, tup, NULL, tid);
}

void
dp_heap_add_version(DPHeapBuilder *b, HeapTuple tup, HeapTuple old,
					ItemPointer tid)
{
	Page		page;
	HeapTupleHeader onpage;

	Assert(!b->frozen);
	add_tuple(b, tup, old, tid);
	/* the row is on the last page, as heap_update marks a new version */
	page = b->pages[b->npages - 1];
	onpage = (HeapTupleHeader)
		PageGetItem(page, PageGetItemId(page, ItemPointerGetOffsetNumber(tid)));
	onpage->t_infomask |= HEAP_UPDATED;
	b->versions++;
}

int
dp_heap_full_pages(DPHeapBuilder *b)
{
	return b->npages > 0 ? b->npages - 1 : 0;
}

void
dp_heap_flush(DPHeapBuilder *b, bool include_partial)
{
	int			n = include_partial ? b->npages : dp_heap_full_pages(b);

	if (n > 0)
		b->last_free = PageGetHeapFreeSpace(b->pages[n - 1]);
	if (b->sample)
		for (int i = 0; i < n; i++)
			dp_sample_page(b->sample, b->pages[i], b->next_block + i);
	dp_append_write(b->append, b->pages, n, include_partial);
	dp_progress_count_pages(n);
	memmove(b->pages, b->pages + n, sizeof(Page) * (b->npages - n));
	b->npages -= n;
	b->next_block += n;
}

uint64
dp_heap_finish(DPHeapBuilder *b)
{
	BlockNumber first = dp_append_first_block(b->append);
	uint64		written;

	dp_heap_flush(b, true);
	dp_append_finish(b->append);
	written = b->next_block - first;
	if (written > 0)
	{
		BlockNumber last = dp_append_resolve(b->append, b->next_block - 1);

		if (b->frozen)
		{
			dp_fault("before_vm");
			dp_vm_set_frozen(b->rel, first, b->next_block);
		}
		/* the last page: written and WAL-covered, tell the FSM */
		if (b->last_free > b->save_free)
		{
			RecordPageWithFreeSpace(b->rel, last, b->last_free);
			FreeSpaceMapVacuumRange(b->rel, last, last + 1);
		}
	}
	pgstat_count_heap_insert(b->rel, b->tuples - b->versions);
	for (uint64 i = 0; i < b->versions; i++)
		DP_COUNT_HEAP_UPDATE(b->rel);
	pfree(b->pages);
	b->pages = NULL;
	return written;
}
