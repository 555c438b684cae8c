/*-------------------------------------------------------------------------
 *
 * parorder.c
 *	  A parallel COPY's or scan's pages taken into the load in the order of
 *	  the input, so that the table holds its rows in the order of the file
 *	  or of the scanned blocks, as a serial load leaves them.
 *
 * The input comes in numbered chunks.  A COPY's chunker numbers them as it
 * cuts them (DPChunkHeader.seq), for a worker or for the leader's own
 * share; an INSERT ... SELECT's scans are cut into block ranges, numbered
 * over the sources in turn, which the processes claim one at a time from
 * a shared counter (parscan.c).  Each process takes its chunks in the
 * order of their numbers.  The order lets a page into the load only once
 * every page of every earlier chunk is in; the first chunk not yet
 * complete is the head:
 *
 *	assign	a chunk cut for worker i (a range worker i says it claimed,
 *			DP_MSG_CLAIM) joins the end of the worker's list;
 *	admit	a page (or a row that needs TOAST) from worker i belongs to the
 *			first chunk of its list, the leader's to the chunk it parses.
 *			One of the head chunk, when nothing of that chunk is kept,
 *			goes to the load at once; any other is copied and kept with
 *			its chunk (dp_order_admit false);
 *	done	a worker says when it has handed on the last page of a chunk
 *			(parmsg.c's DP_MSG_DONE), the leader when it has parsed one of
 *			its own; the chunk leaves its worker's list and is marked
 *			done;
 *	release	what may go to the load now, in the order it came: the head's
 *			kept messages, then, once the head is done and empty, the next
 *			chunk's (dp_order_release, until NULL).
 *
 * A page may hold rows of two chunks: a worker that parses two adjacent
 * chunks (k, then k + 1) goes on filling the page it had and says that k
 * is done only as it starts k + 1, so the page is counted as k + 1's,
 * which comes right after k.  Before a chunk that is not the next one it
 * hands on its unfinished page, then says the earlier chunk is done.  The
 * leader hands on its unfinished page after each chunk of its own and says
 * it is done at once (the head must not wait for its next step).  So the
 * pages that are partly empty are one or two for each chunk the leader
 * takes among the workers' chunks, and the last of each worker.
 *
 * Memory bound: the messages kept for chunks after the head.  Past
 * DP_ORDER_KEPT_PAGES of them (dp_order_full) the leader parses no more
 * chunks of its own and receives only from the head chunk's worker; the
 * other workers wait on their full queues.  The head's worker never waits
 * for them: its chunk is in its input queue, or next to be sent by the
 * leader's feed, which goes on.  A scan's head range may have been
 * claimed by a worker whose DP_MSG_CLAIM the leader has not read yet (no
 * worker is known to have it): then the leader receives from every
 * worker, and that claim is the first message of its worker's queue (the
 * worker's earlier range is done, or the head would be that one).  The
 * leader's own chunk is never the head between its steps: it is parsed
 * or scanned whole in one step and said done at once.
 *
 * Invariants: every page of chunk k goes to the load before any page of
 * chunk k + 1, and a process's pages of one chunk keep their order; at the
 * end of the input nothing is kept (dp_order_end).
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

/* Kept pages past which the leader waits for the head chunk. */
#define DP_ORDER_KEPT_PAGES 2048

/* A chunk not yet taken into the load whole. */
typedef struct DPOrderChunk
{
	uint64		seq;			/* the hash key */
	int			worker;			/* whose (-1: the leader's) */
	bool		done;			/* its last message has come */
	DPOrderMsg *first;			/* messages kept, in the order they came */
	DPOrderMsg *last;
} DPOrderChunk;

/* A worker's chunks, in the order they were cut: a ring of seqs. */
typedef struct DPOrderList
{
	uint64	   *seq;
	int			first;
	int			len;
	int			cap;
} DPOrderList;

struct DPOrder
{
	MemoryContext cxt;			/* the kept messages and the lists */
	HTAB	   *chunks;			/* DPOrderChunk by seq */
	uint64		head;			/* the first chunk not yet taken whole */
	uint64		own;			/* the chunk the leader parses */
	DPOrderList *lists;			/* per worker */
	int64		kept;			/* messages kept */
};

DPOrder *
dp_order_begin(int nworkers)
{
	DPOrder    *o = palloc0(sizeof(DPOrder));
	HASHCTL		ctl;

	o->cxt = AllocSetContextCreate(CurrentMemoryContext, "directpath order",
								   ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(DPOrderChunk);
	ctl.hcxt = o->cxt;
	o->chunks = hash_create("directpath chunks", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	o->lists = MemoryContextAllocZero(o->cxt,
									  sizeof(DPOrderList) * Max(nworkers, 1));
	return o;
}

/* The chunk 'seq', made on first mention. */
static DPOrderChunk *
chunk(DPOrder *o, uint64 seq, int worker)
{
	bool		found;
	DPOrderChunk *c;

	if (seq < o->head)
		elog(ERROR, "directpath: a message of chunk " UINT64_FORMAT
			 ", already taken whole", seq);
	c = hash_search(o->chunks, &seq, HASH_ENTER, &found);
	if (!found)
	{
		c->worker = worker;
		c->done = false;
		c->first = c->last = NULL;
	}
	return c;
}

void
dp_order_assign(DPOrder *o, int worker, uint64 seq)
{
	DPOrderList *l = &o->lists[worker];

	if (l->len == l->cap)
	{
		int			cap = Max(16, 2 * l->cap);
		uint64	   *seqs = MemoryContextAlloc(o->cxt, sizeof(uint64) * cap);

		for (int i = 0; i < l->len; i++)
			seqs[i] = l->seq[(l->first + i) % l->cap];
		if (l->seq)
			pfree(l->seq);
		l->seq = seqs;
		l->first = 0;
		l->cap = cap;
	}
	l->seq[(l->first + l->len++) % l->cap] = seq;
	(void) chunk(o, seq, worker);
}

void
dp_order_own(DPOrder *o, uint64 seq)
{
	o->own = seq;
	(void) chunk(o, seq, -1);
}

/* The chunk worker 'worker' (-1: the leader) hands on messages of. */
static uint64
current(DPOrder *o, int worker)
{
	DPOrderList *l;

	if (worker < 0)
		return o->own;
	l = &o->lists[worker];
	if (l->len == 0)
		elog(ERROR, "directpath: a message from parallel worker %d, which has no chunk",
			 worker);
	return l->seq[l->first];
}

/* May a message of 'worker' go to the load now?  Else its kept message. */
static DPOrderMsg *
keep(DPOrder *o, int worker, char kind, int leaf, Size len)
{
	uint64		seq = current(o, worker);
	DPOrderChunk *c = chunk(o, seq, worker);
	DPOrderMsg *m;

	if (seq == o->head && c->first == NULL)
		return NULL;
	m = MemoryContextAlloc(o->cxt, offsetof(DPOrderMsg, data) + len);
	m->next = NULL;
	m->kind = kind;
	m->leaf = leaf;
	m->page = NULL;
	m->len = len;
	if (c->last)
		c->last->next = m;
	else
		c->first = m;
	c->last = m;
	if (++o->kept == DP_ORDER_KEPT_PAGES)
		elog(DEBUG1, "directpath: %d pages kept for later chunks: the leader waits for chunk " UINT64_FORMAT,
			 DP_ORDER_KEPT_PAGES, o->head);
	return m;
}

bool
dp_order_admit(DPOrder *o, int worker, char kind, int leaf,
			   const char *data, Size len)
{
	DPOrderMsg *m = keep(o, worker, kind, leaf, len);

	if (m == NULL)
		return true;
	memcpy(m->data, data, len);
	return false;
}

bool
dp_order_admit_own_page(DPOrder *o, char kind, int leaf, Page page)
{
	DPOrderMsg *m = keep(o, -1, kind, leaf, 0);

	if (m == NULL)
		return true;
	m->page = page;
	return false;
}

void
dp_order_done(DPOrder *o, int worker, uint64 seq)
{
	if (worker >= 0)
	{
		DPOrderList *l = &o->lists[worker];

		if (l->len == 0 || l->seq[l->first] != seq)
			elog(ERROR, "directpath: parallel worker %d ended chunk " UINT64_FORMAT
				 " out of turn", worker, seq);
		l->first = (l->first + 1) % l->cap;
		l->len--;
	}
	chunk(o, seq, worker)->done = true;
}

DPOrderMsg *
dp_order_release(DPOrder *o)
{
	for (;;)
	{
		DPOrderChunk *c = hash_search(o->chunks, &o->head, HASH_FIND, NULL);

		if (c == NULL)
			return NULL;		/* not cut yet */
		if (c->first != NULL)
		{
			DPOrderMsg *m = c->first;

			c->first = m->next;
			if (c->first == NULL)
				c->last = NULL;
			o->kept--;
			return m;
		}
		if (!c->done)
			return NULL;
		hash_search(o->chunks, &o->head, HASH_REMOVE, NULL);
		o->head++;
	}
}

bool
dp_order_full(DPOrder *o)
{
	return o->kept >= DP_ORDER_KEPT_PAGES;
}

int
dp_order_head_worker(DPOrder *o)
{
	DPOrderChunk *c = hash_search(o->chunks, &o->head, HASH_FIND, NULL);

	return c ? c->worker : -1;
}

void
dp_order_end(DPOrder *o)
{
	if (o->kept > 0)
		elog(ERROR, "directpath: " INT64_FORMAT " pages of a parallel load were never loaded",
			 o->kept);
	MemoryContextDelete(o->cxt);
	pfree(o);
}
