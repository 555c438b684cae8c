/*-------------------------------------------------------------------------
 *
 * fkahead.c
 *	  The foreign key sets checked at the end of a load, and a parallel
 *	  load's finds of them run by a worker while the leader makes the
 *	  indexes.
 *
 * The check (dp_fkeys_check_sets, from finish.c).  Each constraint's set
 * (fkset.c) is read back in chunks of distinct, sorted keys, each key with
 * the first ordinal of its rows.  A chunk is found by one scan and its
 * rows locked page by page (fkfind.c, fklock.c), or checked by the check
 * query, which names the keys not found (fkeys.c); the first missing key
 * in input order becomes the load's violation.
 *
 * Ahead (dp_fkahead_begin, dp_fkahead_end).  At the end of a parallel load
 * the workers have finished, and the leader alone makes the indexes (a
 * build or a merge: 1.3 s of TPC-H's lineitem) and then finds and locks
 * the sets' keys (1.5 s), while the other cores idle.  The finds only read
 * (the referenced index scanned with a chunk's keys, each row's TID and
 * xmin returned, nothing locked), so they can run beside the index work.
 * Before it, the leader reads the sets' first chunks back (up to
 * maintenance_work_mem of keys and rows in all), copies those a scan in C
 * can find (dp_fkfind_ahead) into a dynamic shared memory segment, and
 * starts one parallel worker of its own context, which runs the scans
 * (dp_fkfind_scan) with a snapshot the leader took for it and writes their
 * rows back.  The leader makes the indexes meanwhile, in parallel mode,
 * then waits for the worker (dp_fkahead_end) and checks the sets, those
 * chunks first: a chunk whose every key was found has its rows locked as
 * its own find's would be; any other goes the way a serial load's goes.
 *
 * Why rows found earlier are as good as rows found now: fklock.c locks a
 * row only if it is still the version the find saw (a normal line
 * pointer, the same xmin) and no transaction has set an update, a delete
 * or a live lock on it since; the referenced key is unique, so that row is
 * the one a fresh snapshot would find.  Otherwise the chunk goes to the
 * check query with a fresh snapshot, as a serial load's chunk does when
 * its rows changed between its find and its lock.  A key the worker did
 * not find (committed after its snapshot) sends its chunk there too.  The
 * worker's snapshot is taken as a serial find's is, after a command
 * counter increment, so it sees the load's rows and earlier commands'.
 *
 * Invariants: the leader is in parallel mode from the worker's start to
 * its end and does nothing there that parallel mode forbids (finish.c
 * starts no worker where core's reindex_index, which writes the catalog,
 * rebuilds a leaf's indexes); no chunk found ahead references a leaf of
 * the load, whose indexes the leader writes meanwhile; the leader holds a
 * lock on every referenced table found ahead until its transaction ends,
 * as a serial find does; an error in the worker fails the statement, as
 * in a parallel load.
 *
 *-------------------------------------------------------------------------
 */
#include "load/fkeys_private.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "common/fault.h"
#include "common/settings.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

extern PGDLLEXPORT void dp_fkahead_main(dsm_segment *seg, shm_toc *toc);

/* A chunk's find not run ahead (its found, until the worker's answer). */
#define DP_AHEAD_NONE (-3)

/* The segment's entries. */
#define DP_AHEAD_KEY_SHARED 1
#define DP_AHEAD_KEY_JOBS	2
#define DP_AHEAD_KEY_DATA	3

/* A chunk of a set's keys read back, with what a find ahead made of it. */
struct DPFkeyChunk
{
	int			n;				/* keys */
	Datum		arrays[INDEX_MAX_KEYS]; /* the keys, an array a column */
	uint64	   *ordinals;		/* each key's first row in input order */
	const DPFkeyScan *scan;		/* its find ahead, or NULL */
	bool		wide;			/* ... how to run it (dp_fkfind_ahead) */
	uint64		limit;
	int64		found;			/* its rows found ahead, or DP_AHEAD_NONE */
	DPFkeyRow  *rows;			/* ... those rows */
	DPFkeyChunk *next;
};

/* A find the worker runs: a chunk's keys in, its rows out. */
typedef struct DPAheadJob
{
	DPFkeyScan	scan;
	int			n;
	bool		wide;
	uint64		limit;
	Size		arrays[INDEX_MAX_KEYS]; /* the key columns' arrays: offsets
										 * in the data */
	Size		rows;			/* room for n rows: an offset in the data */
	int64		found;			/* the worker's answer */
} DPAheadJob;

/* The segment's header. */
typedef struct DPAheadShared
{
	int			njobs;
} DPAheadShared;

struct DPFkeyAhead
{
	MemoryContext cxt;			/* the chunks and their rows */
	ParallelContext *pcxt;		/* the worker's, or NULL */
	DPFkeyChunk **jobs;			/* the chunks to find ahead, by job */
	int			njobs;
	int			maxjobs;
	Size		data;			/* bytes of the segment's data */
};

/* Is 'relid' a leaf of the load? */
static bool
is_leaf(DPLoad *s, Oid relid)
{
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		if (RelationGetRelid(leaf->rri->ri_RelationDesc) == relid)
			return true;
	return false;
}

/* Bytes of the segment's data for chunk 'ch' of a constraint of 'nkeys'. */
static Size
job_data(DPFkeyChunk *ch, int nkeys)
{
	Size		size = MAXALIGN(sizeof(DPFkeyRow) * ch->n);

	for (int i = 0; i < nkeys; i++)
		size += MAXALIGN(VARSIZE(DatumGetPointer(ch->arrays[i])));
	return size;
}

/*
 * Read 'fk''s set ahead, chunk by chunk, as its table's owner, while
 * *budget lasts: each chunk into fk->ahead, a job where a scan in C finds
 * it.  Stops after a chunk no such scan finds: the leader finds the rest.
 */
static void
read_ahead(DPFkeyAhead *a, DPForeignKey *fk, Size *budget)
{
	DPFkeyChunk **tail = &fk->ahead;
	MemoryContext read = AllocSetContextCreate(CurrentMemoryContext,
											   "directpath foreign key set read",
											   ALLOCSET_DEFAULT_SIZES);
	Oid			save_userid;
	int			save_sec_context;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(dp_fkeys_owner(fk->pkrel),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	while (*budget > 0)
	{
		DPFkeyChunk *ch = palloc0(sizeof(DPFkeyChunk));
		Datum	   *values[INDEX_MAX_KEYS];
		Size		size;
		MemoryContext old;

		ch->ordinals = palloc(sizeof(uint64) * DP_FKSET_CHUNK);
		old = MemoryContextSwitchTo(read);
		ch->n = dp_fkset_next(fk->set, DP_FKSET_CHUNK, values, ch->ordinals);
		MemoryContextSwitchTo(old);
		if (ch->n == 0)
			break;
		dp_fkeys_chunk_arrays(fk, values, ch->n, ch->arrays);
		MemoryContextReset(read);
		ch->found = DP_AHEAD_NONE;
		*tail = ch;
		tail = &ch->next;
		ch->scan = dp_fkfind_ahead(fk->find, ch->arrays, ch->n, &ch->wide,
								   &ch->limit);
		if (ch->scan == NULL)
			break;
		size = job_data(ch, fk->nkeys);
		*budget -= Min(*budget, size + sizeof(uint64) * ch->n);
		a->data += size;
		if (a->njobs == a->maxjobs)
		{
			a->maxjobs *= 2;
			a->jobs = repalloc(a->jobs, sizeof(DPFkeyChunk *) * a->maxjobs);
		}
		a->jobs[a->njobs++] = ch;
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);
	MemoryContextDelete(read);
}

/* The jobs and their keys into the worker's segment. */
static void
fill_segment(DPFkeyAhead *a)
{
	shm_toc    *toc = a->pcxt->toc;
	DPAheadShared *sh = shm_toc_allocate(toc, sizeof(DPAheadShared));
	DPAheadJob *jobs = shm_toc_allocate(toc, sizeof(DPAheadJob) * a->njobs);
	char	   *data = shm_toc_allocate(toc, a->data);
	Size		off = 0;

	sh->njobs = a->njobs;
	for (int j = 0; j < a->njobs; j++)
	{
		DPFkeyChunk *ch = a->jobs[j];
		DPAheadJob *job = &jobs[j];

		job->scan = *ch->scan;
		job->n = ch->n;
		job->wide = ch->wide;
		job->limit = ch->limit;
		job->found = DP_AHEAD_NONE;
		for (int i = 0; i < ch->scan->nkeys; i++)
		{
			Size		len = VARSIZE(DatumGetPointer(ch->arrays[i]));

			memcpy(data + off, DatumGetPointer(ch->arrays[i]), len);
			job->arrays[i] = off;
			off += MAXALIGN(len);
		}
		job->rows = off;
		off += MAXALIGN(sizeof(DPFkeyRow) * ch->n);
	}
	Assert(off == a->data);
	shm_toc_insert(toc, DP_AHEAD_KEY_SHARED, sh);
	shm_toc_insert(toc, DP_AHEAD_KEY_JOBS, jobs);
	shm_toc_insert(toc, DP_AHEAD_KEY_DATA, data);
}

/*
 * Start the worker: in parallel mode, with a fresh snapshot taken as a
 * serial find takes it (after a command counter increment), which the
 * segment gives the worker as its active snapshot.
 */
static void
start_worker(DPFkeyAhead *a)
{
	ParallelContext *pcxt;

	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	EnterParallelMode();
	pcxt = CreateParallelContext("directpath", "dp_fkahead_main", 1);
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(DPAheadShared));
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(DPAheadJob) * a->njobs);
	shm_toc_estimate_chunk(&pcxt->estimator, a->data);
	shm_toc_estimate_keys(&pcxt->estimator, 3);
	InitializeParallelDSM(pcxt);
	a->pcxt = pcxt;
	if (pcxt->seg != NULL)
	{
		fill_segment(a);
		LaunchParallelWorkers(pcxt);
	}
	PopActiveSnapshot();
	elog(DEBUG1, "directpath: %d chunks of foreign key sets found by %d worker%s while the indexes are made",
		 a->njobs, pcxt->nworkers_launched,
		 pcxt->nworkers_launched == 1 ? "" : "s");
}

DPFkeyAhead *
dp_fkahead_begin(DPLoad *s)
{
	DPFkeyAhead *a = palloc0(sizeof(DPFkeyAhead));
	Size		budget = (Size) maintenance_work_mem * 1024;
	MemoryContext old;

	a->cxt = AllocSetContextCreate(CurrentMemoryContext,
								   "directpath foreign key sets ahead",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(a->cxt);
	a->maxjobs = 16;
	a->jobs = palloc(sizeof(DPFkeyChunk *) * a->maxjobs);
	for (DPLeaf *leaf = s->leaves.list; leaf; leaf = leaf->next)
		for (int k = 0; leaf->fkeys && k < leaf->fkeys->nkeys; k++)
		{
			DPForeignKey *fk = &leaf->fkeys->keys[k];

			/* a worker cannot read the leader's temporary tables */
			if (fk->set == NULL || fk->find == NULL || is_leaf(s, fk->pkrel) ||
				get_rel_persistence(fk->pkrel) == RELPERSISTENCE_TEMP)
				continue;
			/* held until the transaction ends, as a serial find holds it */
			LockRelationOid(fk->pkrel, AccessShareLock);
			read_ahead(a, fk, &budget);
		}
	MemoryContextSwitchTo(old);
	if (a->njobs > 0)
		start_worker(a);
	return a;
}

void
dp_fkahead_end(DPFkeyAhead *a)
{
	DPAheadJob *jobs;
	char	   *data;

	if (a == NULL || a->pcxt == NULL)
		return;
	dp_fault("fkey_sets_ahead");
	WaitForParallelWorkersToFinish(a->pcxt);
	if (a->pcxt->seg != NULL && a->pcxt->nworkers_launched > 0)
	{
		jobs = shm_toc_lookup(a->pcxt->toc, DP_AHEAD_KEY_JOBS, false);
		data = shm_toc_lookup(a->pcxt->toc, DP_AHEAD_KEY_DATA, false);
		for (int j = 0; j < a->njobs; j++)
		{
			DPFkeyChunk *ch = a->jobs[j];

			ch->found = jobs[j].found;
			if (ch->found != ch->n)
				continue;
			ch->rows = MemoryContextAlloc(a->cxt, sizeof(DPFkeyRow) * ch->n);
			memcpy(ch->rows, data + jobs[j].rows, sizeof(DPFkeyRow) * ch->n);
		}
	}
	DestroyParallelContext(a->pcxt);
	a->pcxt = NULL;
	ExitParallelMode();
}

void
dp_fkahead_free(DPFkeyAhead *a)
{
	if (a != NULL)
		MemoryContextDelete(a->cxt);
}

/*
 * The worker: each job's scan with the leader's snapshot, its rows and
 * their count written back.
 */
void
dp_fkahead_main(dsm_segment *seg, shm_toc *toc)
{
	DPAheadShared *sh = shm_toc_lookup(toc, DP_AHEAD_KEY_SHARED, false);
	DPAheadJob *jobs = shm_toc_lookup(toc, DP_AHEAD_KEY_JOBS, false);
	char	   *data = shm_toc_lookup(toc, DP_AHEAD_KEY_DATA, false);
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath foreign key find",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);

	dp_fault("fkey_sets_ahead");
	for (int j = 0; j < sh->njobs; j++)
	{
		DPAheadJob *job = &jobs[j];
		Datum		arrays[INDEX_MAX_KEYS];
		uint64		nread;

		for (int i = 0; i < job->scan.nkeys; i++)
			arrays[i] = PointerGetDatum(data + job->arrays[i]);
		job->found = dp_fkfind_scan(&job->scan, arrays, job->n, job->wide,
									job->limit, (DPFkeyRow *) (data + job->rows),
									&nread);
		MemoryContextReset(cxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* Lock a chunk's rows found ahead as its own find would: false if not all. */
static bool
lock_found(DPForeignKey *fk, DPFkeyChunk *ch)
{
	Oid			save_userid;
	int			save_sec_context;
	bool		locked;

	if (dp_fkey_table_lock)
		return true;			/* the table is locked SHARE: no row locks */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(dp_fkeys_owner(fk->pkrel),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	locked = dp_fklock_rows(fk->pkrel, ch->rows, ch->n);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return locked;
}

/*
 * A chunk of constraint 'k' checked; its first missing key in input order,
 * if it comes before *best, becomes *best (ordinal, constraint, key).
 */
static void
check_chunk(DPForeignKeys *f, int k, DPFkeyChunk *ch, int *missing,
			DPFkeyFound *best, MemoryContext keep)
{
	DPForeignKey *fk = &f->keys[k];
	bool		all_found;
	int			nmissing = 0;

	/* found ahead, all (locked here); or not ahead: found here, all */
	if (ch->found == ch->n)
	{
		all_found = lock_found(fk, ch);
		fk->ahead_keys += all_found ? ch->n : 0;
	}
	else if (ch->found == DP_AHEAD_NONE || ch->found == -2)
		all_found = fk->find != NULL &&
			dp_fkeys_run_check(fk, NULL, ch->arrays, true, NULL) == ch->n;
	else
		all_found = false;		/* a key missing, or met twice */
	/* else the check query names the keys not found */
	if (!all_found)
		nmissing = dp_fkeys_run_check(fk, fk->plan, ch->arrays, true, missing);
	fk->set_keys += ch->n;
	for (int j = 0; j < nmissing; j++)
	{
		uint64		ord = ch->ordinals[missing[j]];
		MemoryContext old;

		if (best->found && (ord > best->ordinal ||
							(ord == best->ordinal && k >= best->key)))
			continue;
		best->found = true;
		best->ordinal = ord;
		best->key = k;
		best->f = f;
		old = MemoryContextSwitchTo(keep);
		for (int i = 0; i < fk->nkeys; i++)
		{
			Datum	   *elems;
			int			nelems;

			deconstruct_array(DatumGetArrayTypeP(ch->arrays[i]), fk->fktypes[i],
							  fk->typlen[i], fk->typbyval[i], fk->typalign[i],
							  &elems, NULL, &nelems);
			best->values[i] = datumCopy(elems[missing[j]], fk->typbyval[i],
										fk->typlen[i]);
			best->isnull[i] = false;
		}
		MemoryContextSwitchTo(old);
	}
}

/*
 * Constraint 'k''s set checked: the chunks read ahead, then the rest of
 * the set; *best's key is kept in the caller's memory.
 */
static void
check_set(DPForeignKeys *f, int k, DPFkeyFound *best)
{
	DPForeignKey *fk = &f->keys[k];
	int		   *missing = palloc(sizeof(int) * DP_FKSET_CHUNK);
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath foreign key chunk",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	DPFkeyChunk here;

	for (DPFkeyChunk *ch = fk->ahead; ch; ch = ch->next)
	{
		check_chunk(f, k, ch, missing, best, old);
		MemoryContextReset(cxt);
	}
	fk->ahead = NULL;
	memset(&here, 0, sizeof(here));
	here.ordinals = MemoryContextAlloc(old, sizeof(uint64) * DP_FKSET_CHUNK);
	here.found = DP_AHEAD_NONE;
	for (;;)
	{
		Datum	   *values[INDEX_MAX_KEYS];

		here.n = dp_fkset_next(fk->set, DP_FKSET_CHUNK, values, here.ordinals);
		if (here.n == 0)
			break;
		dp_fkeys_chunk_arrays(fk, values, here.n, here.arrays);
		check_chunk(f, k, &here, missing, best, old);
		MemoryContextReset(cxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	pfree(here.ordinals);
	pfree(missing);
	dp_fkset_end(fk->set);
	fk->set = NULL;
}

void
dp_fkeys_check_sets(DPForeignKeys *f, DPFkeyFound *best, StringInfo names)
{
	for (int k = 0; k < f->nkeys; k++)
	{
		DPForeignKey *fk = &f->keys[k];

		if (fk->set == NULL)
			continue;
		CHECK_FOR_INTERRUPTS();
		check_set(f, k, best);
		if (fk->ahead_keys > 0)
			dp_fkeys_note(names, psprintf("%s (%llu keys, %llu found by a worker beside the indexes)",
										  fk->conname,
										  (unsigned long long) fk->set_keys,
										  (unsigned long long) fk->ahead_keys));
		else
			dp_fkeys_note(names, psprintf("%s (%llu keys)", fk->conname,
										  (unsigned long long) fk->set_keys));
	}
}
