/*-------------------------------------------------------------------------
 *
 * fault.c
 *	  Named fault points, for the crash and error tests.
 *
 * A test stops a load at an exact place by setting directpath.fault_point
 * to a point's name: the Nth hit (directpath.fault_hit) of that point in
 * the statement raises an ERROR, sleeps (the test then kills the backend or
 * the server), or sends a NOTICE naming the point.  The settings are
 * superuser-only.  Points, in the order a load passes them:
 *
 *	worker_chunk	a parallel COPY's worker, before it parses a chunk (its
 *					own count of hits)
 *	first_batch		before the first batch of pages is written
 *	batch_wal		after a batch's WAL, before its pages are written (inside
 *					the checkpoint-delay window)
 *	batch_written	after a batch's pages are written, before its rows'
 *					index entries and triggers
 *	batch_done		after a batch's deferred row work
 *	before_vm		before the visibility map of frozen pages is set
 *	finish			every row written and processed (for COPY, within its
 *					last line's error context), before the indexes of new
 *					storage are built and AFTER STATEMENT triggers fire
 *	before_index_rebuild, after_index_rebuild
 *					around the index builds of new storage
 *	fkey_sets_ahead	a parallel load's foreign key sets found by a worker
 *					beside the indexes (load/fkahead.c): the worker before
 *					its finds (its own count of hits; its snapshot taken),
 *					the leader after the indexes, before it takes the rows
 *	btree_leaves	a btree built from sorted entries has its leaf level
 *					written, not its upper levels nor its metapage
 *	btree_append_chunk
 *					a chunk of pages appended at an existing btree's right
 *					edge is WAL-logged, its pages' downlinks not yet added
 *	versions_page	ON CONFLICT DO UPDATE in bulk (load/versions.c): an old
 *					page's headers changed and logged, its rows' new
 *					versions written, their index entries not yet
 *	shard_prepared	at commit with directpath.shard_two_phase: every shard
 *					prepared, the local commit record not yet written
 *	shard_commit	after the local commit, before the shards' COMMIT PREPARED
 *
 * Invariant: with directpath.fault_point empty (the default) dp_fault()
 * returns at once and has no effect.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "common/fault.h"

#include "miscadmin.h"
#include "utils/guc.h"

enum
{
	DP_FAULT_ERROR,
	DP_FAULT_SLEEP,
	DP_FAULT_NOTICE,
};

static const struct config_enum_entry fault_actions[] = {
	{"error", DP_FAULT_ERROR, false},
	{"sleep", DP_FAULT_SLEEP, false},
	{"notice", DP_FAULT_NOTICE, false},
	{NULL, 0, false}
};

static char *fault_point = NULL;
static int	fault_action = DP_FAULT_ERROR;
static int	fault_hit = 1;
static int	fault_sleep_ms = 60000;
static int	fault_count = 0;	/* hits of fault_point in this statement */

void
dp_fault_init(void)
{
	DefineCustomStringVariable("directpath.fault_point",
							   "Test only: named point of the load at which to inject a fault.",
							   "Empty (the default) disables fault injection.",
							   &fault_point, "",
							   PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("directpath.fault_action",
							 "Test only: what happens at directpath.fault_point.",
							 NULL,
							 &fault_action, DP_FAULT_ERROR, fault_actions,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.fault_hit",
							"Test only: the fault fires at this hit of the point (1 = first).",
							NULL,
							&fault_hit, 1, 1, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("directpath.fault_sleep_ms",
							"Test only: how long fault_action = sleep sleeps.",
							NULL,
							&fault_sleep_ms, 60000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

void
dp_fault_reset(void)
{
	fault_count = 0;
}

void
dp_fault(const char *point)
{
	if (fault_point == NULL || fault_point[0] == '\0' ||
		strcmp(fault_point, point) != 0)
		return;
	if (++fault_count != fault_hit)
		return;
	switch (fault_action)
	{
		case DP_FAULT_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("directpath: injected fault at \"%s\"", point)));
			break;
		case DP_FAULT_SLEEP:
			ereport(LOG, (errmsg("directpath: sleeping at fault point \"%s\"", point)));
			for (int ms = 0; ms < fault_sleep_ms; ms += 10)
			{
				CHECK_FOR_INTERRUPTS();
				pg_usleep(10000L);
			}
			break;
		case DP_FAULT_NOTICE:
			ereport(NOTICE, (errmsg("directpath: fault point \"%s\"", point)));
			break;
	}
}
