/*-------------------------------------------------------------------------
 *
 * placer.c
 *	  Placing a parallel load's rows: each row routed to its leaf, checked
 *	  and formed in place on that leaf's page, finished pages handed on.
 *	  The same in a worker (pages to the leader's queue) and in the leader
 *	  (pages straight to its load).
 *
 * A placer takes rows in the target's format, one at a time:
 *
 *	route	a partitioned target's row goes to its leaf by core's own tuple
 *			routing (ExecFindPartition on the placer's private executor
 *			state: partition bounds, default partitions, the root's own
 *			partition constraint and "no partition ... found for row" are
 *			core's), and is converted to the leaf's format;
 *	check	the leaf's stored generated columns computed, then its NOT NULL
 *			and CHECK constraints checked, as ExecInsert does for a routed
 *			row (ExecComputeStoredGenerated, ExecConstraints; the leader's
 *			check made both parallel safe); a target that is itself a
 *			partition (not routed) also its partition constraint, as
 *			ExecInsert checks a row inserted into a partition directly
 *			(routing checks a partitioned target's own);
 *	form	the row in place on the leaf's detached builder (pages.c), its
 *			header carrying the leader's transaction and command, frozen
 *			when the leader decided so for that leaf;
 *	hand on	each finished page, with its leaf's index in the leaf table;
 *			a row that needs TOAST goes on as a row, in the target's
 *			format (a worker cannot insert TOAST; the leader routes and
 *			loads it as a serial load would); under RETURNING
 *			(toast_in_order) its leaf's unfinished page goes on before
 *			it, so that the leader takes the rows, not only the pages, in
 *			the input's order and returns them so (parscan.c).
 *
 * Under ON CONFLICT DO NOTHING (a plain target) a checked row waits for
 * its batch's decisions (parconflict.c) and is formed once accepted; the
 * keys of each page, or row needing TOAST, are handed on just before it.
 *
 * The leaf table (DPParallelLeaf, sorted by relid) is the leader's list of
 * the leaves a row may be routed to, each checked by the leader before
 * launch (parcheck.c): a row routed to a leaf not in it (a partition
 * attached to a sub-partitioned table since) fails the statement.  A row
 * routed to a held leaf (one whose rows need what a worker cannot do) is
 * neither checked nor formed: it goes on as it came, in the target's
 * format, for the leader to load after the workers; a held foreign leaf
 * is routed to without its wrapper (result_rels).  Before its
 * first page of a leaf the placer hands on one row routed there, so that
 * the leader routes it too and knows the leaf's result relation: the
 * leader's load owns every leaf, whoever built its pages.
 *
 * Memory bound: each leaf holds at most one unfinished page, and at most
 * DP_PLACER_OPEN_PAGES leaves hold one at a time.  A row for another leaf
 * at the bound first hands on the unfinished page of the leaf least
 * recently given a row: it is written as it is, partly filled.  So a
 * placer holds at most DP_PLACER_OPEN_PAGES pages (1 MB) whatever the
 * number of leaves; only loads that spread rows over more leaves than that
 * leave pages partly empty.
 *
 * Invariant: a page is handed on only after the row announcing its leaf;
 * every row placed is on exactly one page handed on by dp_placer_end.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "heap/heap.h"
#include "load/load.h"

#include "access/table.h"
#include "executor/execPartition.h"
#include "foreign/fdwapi.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "utils/rel.h"

/* One leaf's state in a placer. */
struct DPPlacedLeaf
{
	int			leaf;			/* index into the leaf table, or -1 */
	ResultRelInfo *rri;			/* its result relation (routing's) */
	DPHeapBuilder *builder;		/* NULL for a held leaf */
	bool		has_page;		/* holds an unfinished page */
	uint64		used;			/* the placer's clock at its last row */
};

/*
 * The target's result relation and, after it in one array, one for each
 * held foreign leaf, whose wrapper routing must not start: a copy of its
 * FdwRoutine without BeginForeignInsert, EndForeignInsert and batching.
 * The placer's ModifyTableState lists them all, so that ExecFindPartition
 * borrows a foreign leaf's instead of making one (ExecInitPartitionInfo
 * would call BeginForeignInsert: a connection, in a worker, in parallel
 * mode).  Its rows go to the leader as rows; the leader's load writes
 * them through the wrapper or a COPY stream after the workers.
 */
static void
result_rels(DPPlacer *pl, const DPParallelLeaf *leaves, Relation target)
{
	List	   *foreign = NIL;
	ListCell   *lc;
	int			i = 1;

	for (int l = 0; l < pl->sh->nleaves; l++)
	{
		Relation	rel;

		if (!leaves[l].held)
			continue;
		/* the leader's lock (AccessShare, list_leaves): a lock group's */
		rel = table_open(leaves[l].relid, AccessShareLock);
		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
			foreign = lappend(foreign, rel);
		else
			table_close(rel, AccessShareLock);
	}
	pl->nforeign = list_length(foreign);
	pl->rri = palloc0(sizeof(ResultRelInfo) * (1 + pl->nforeign));
	InitResultRelInfo(pl->rri, target, 0, NULL, 0);
	pl->foreign = pl->rri + 1;
	foreach(lc, foreign)
	{
		ResultRelInfo *rri = &pl->rri[i++];
		FdwRoutine *stub = palloc(sizeof(FdwRoutine));

		InitResultRelInfo(rri, lfirst(lc), 0, pl->rri, 0);
		*stub = *rri->ri_FdwRoutine;
		stub->BeginForeignInsert = NULL;
		stub->EndForeignInsert = NULL;
		stub->GetForeignModifyBatchSize = NULL;
		stub->ExecForeignBatchInsert = NULL;
		rri->ri_FdwRoutine = stub;
	}
}

void
dp_placer_begin(DPPlacer *pl, const DPParallelShared *sh,
				const DPParallelLeaf *leaves, Relation target,
				const DPPlacerSinks *sinks)
{
	pl->estate = CreateExecutorState();
	pl->sh = sh;
	result_rels(pl, leaves, target);
	pl->leaves = leaves;
	pl->sinks = *sinks;
	pl->lineno = NULL;
	pl->open = 0;
	pl->clock = 0;
	pl->last = NULL;
	pl->mt = NULL;
	pl->conflicts = NULL;
	if (target->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		MemoryContext old = MemoryContextSwitchTo(pl->estate->es_query_cxt);

		pl->mt = dp_insert_state(pl->estate, pl->rri);
		pl->mt->mt_nrels = 1 + pl->nforeign;
		pl->mt->mt_partition_tuple_routing =
			ExecSetupPartitionTupleRouting(pl->estate, target);
		pl->placed = palloc0(sizeof(DPPlacedLeaf *) * Max(sh->nleaves, 1));
		MemoryContextSwitchTo(old);
	}
	else
	{
		DPPlacedLeaf *p = palloc0(sizeof(DPPlacedLeaf));

		p->leaf = -1;
		p->rri = pl->rri;
		p->builder = dp_heap_begin_detached(target, sh->frozen, sh->xid, sh->cid);
		pl->placed = palloc(sizeof(DPPlacedLeaf *));
		pl->placed[0] = p;
		pl->last = p;
	}
}

/* Hand on the leaf's full pages (with 'partial', its unfinished one too). */
static bool
hand_on_pages(DPPlacer *pl, DPPlacedLeaf *p, bool partial)
{
	Page		page;
	bool		handed = false;

	while ((page = dp_heap_take_page(p->builder, partial)) != NULL)
	{
		if (pl->conflicts)
			dp_place_conflicts_page(pl->conflicts, page);
		if (!pl->sinks.page(pl->sinks.arg, p->leaf, page))
			pfree(page);
		handed = true;
	}
	if (partial && p->has_page)
	{
		p->has_page = false;
		pl->open--;
	}
	return handed;
}

int
dp_parallel_leaf_cmp(const void *a, const void *b)
{
	Oid			x = ((const DPParallelLeaf *) a)->relid;
	Oid			y = ((const DPParallelLeaf *) b)->relid;

	return (x > y) - (x < y);
}

/* The bound reached: hand on the least recently used unfinished page. */
static void
close_least_recent(DPPlacer *pl)
{
	DPPlacedLeaf *victim = NULL;

	for (int i = 0; i < pl->sh->nleaves; i++)
	{
		DPPlacedLeaf *p = pl->placed[i];

		if (p && p->has_page && (victim == NULL || p->used < victim->used))
			victim = p;
	}
	if (victim)
		hand_on_pages(pl, victim, true);
}

/*
 * Form the checked row 'leafrow' (of 'row', the target's) on its leaf's
 * page; true if a page was handed on.
 */
static bool
form(DPPlacer *pl, DPPlacedLeaf *p, TupleTableSlot *leafrow,
	 TupleTableSlot *row)
{
	bool		handed = false;

	if (!p->has_page)
	{
		if (pl->open == DP_PLACER_OPEN_PAGES)
			close_least_recent(pl);
		p->has_page = true;
		pl->open++;
	}
	p->used = ++pl->clock;
	if (!dp_heap_add_slot_in_place(p->builder, leafrow))
	{
		/* RETURNING: the rows placed before it go first, on their page */
		if (pl->sh->toast_in_order)
			handed = hand_on_pages(pl, p, true);
		if (pl->conflicts)
			dp_place_conflicts_unplaced(pl->conflicts);
		pl->sinks.toast_row(pl->sinks.arg, row);
	}
	return hand_on_pages(pl, p, false) || handed;
}

/* The placer's state of the leaf routing chose; set up on first use. */
static DPPlacedLeaf *
placed_leaf(DPPlacer *pl, ResultRelInfo *rri, TupleTableSlot *row)
{
	DPParallelLeaf key;
	const DPParallelLeaf *found;
	DPPlacedLeaf *p;
	Relation	rel = rri->ri_RelationDesc;
	MemoryContext old;

	if (pl->last && pl->last->rri == rri)
		return pl->last;
	key.relid = RelationGetRelid(rel);
	found = bsearch(&key, pl->leaves, pl->sh->nleaves, sizeof(DPParallelLeaf),
					dp_parallel_leaf_cmp);
	if (found == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("directpath: partition \"%s\" was not a partition of the target when the parallel load began",
						RelationGetRelationName(rel)),
				 errhint("Retry the statement.")));
	p = pl->placed[found - pl->leaves];
	if (p == NULL)
	{
		old = MemoryContextSwitchTo(pl->estate->es_query_cxt);
		p = palloc0(sizeof(DPPlacedLeaf));
		p->leaf = found - pl->leaves;
		p->rri = rri;
		pl->placed[p->leaf] = p;
		if (!found->held)
			p->builder = dp_heap_begin_detached(rel, found->frozen,
												pl->sh->xid, pl->sh->cid);
		MemoryContextSwitchTo(old);
		/* the leader learns the leaf before its first page */
		if (!found->held)
			pl->sinks.new_leaf(pl->sinks.arg, p->leaf, row);
	}
	return pl->last = p;
}

bool
dp_placer_add(DPPlacer *pl, TupleTableSlot *row)
{
	DPPlacedLeaf *p = pl->last;
	TupleTableSlot *leafrow = row;
	Relation	rel;

	if (pl->mt != NULL)
	{
		ResultRelInfo *rri;
		TupleConversionMap *map;

		rri = ExecFindPartition(pl->mt, pl->rri, pl->mt->mt_partition_tuple_routing,
								row, pl->estate);
		map = DP_ROOT_TO_CHILD_MAP(rri, pl->estate);
		if (map != NULL)
			leafrow = execute_attr_map_slot(map->attrMap, row,
											rri->ri_PartitionTupleSlot);
		p = placed_leaf(pl, rri, row);
		if (p->builder == NULL)
		{
			pl->sinks.held_row(pl->sinks.arg, row, pl->lineno ? *pl->lineno : 0);
			return false;
		}
	}
	rel = p->rri->ri_RelationDesc;
	/* ExecInsert's order: the leaf's generated columns, then constraints */
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(p->rri, pl->estate, leafrow, CMD_INSERT);
	if (dp_constraints_may_fail(rel, leafrow))
		ExecConstraints(p->rri, leafrow, pl->estate);
	if (pl->mt == NULL && rel->rd_rel->relispartition)
		ExecPartitionCheck(p->rri, leafrow, pl->estate, true);
	/* ON CONFLICT (a plain target): formed once decided */
	if (pl->conflicts)
		return dp_place_conflicts_add(pl->conflicts, leafrow);
	return form(pl, p, leafrow, row);
}

/* A decided row of a plain target (parconflict.c's DPFormRow). */
static bool
form_decided(DPPlacer *pl, TupleTableSlot *row)
{
	return form(pl, pl->placed[0], row, row);
}

void
dp_placer_conflicts(DPPlacer *pl, DPParallelShared *live)
{
	Assert(pl->mt == NULL);
	pl->conflicts = dp_place_conflicts_begin(pl, live, form_decided);
}

void
dp_placer_flush(DPPlacer *pl)
{
	Assert(pl->mt == NULL);
	if (pl->conflicts)
		dp_place_conflicts_decide(pl->conflicts);
	hand_on_pages(pl, pl->placed[0], true);
	if (pl->conflicts)
		dp_place_conflicts_rest(pl->conflicts);
}

void
dp_placer_end(DPPlacer *pl)
{
	int			n = pl->mt ? pl->sh->nleaves : 1;

	if (pl->conflicts)
		dp_place_conflicts_decide(pl->conflicts);
	for (int i = 0; i < n; i++)
		if (pl->placed[i] != NULL && pl->placed[i]->builder != NULL)
			hand_on_pages(pl, pl->placed[i], true);
	if (pl->conflicts)
	{
		dp_place_conflicts_rest(pl->conflicts);
		dp_place_conflicts_end(pl->conflicts);
	}
	if (pl->mt)
		ExecCleanupTupleRouting(pl->mt, pl->mt->mt_partition_tuple_routing);
	for (int i = 0; i < pl->nforeign; i++)
		table_close(pl->foreign[i].ri_RelationDesc, AccessShareLock);
	/* routing's slots (a leaf of another column order has one) */
	ExecResetTupleTable(pl->estate->es_tupleTable, false);
	FreeExecutorState(pl->estate);
}
