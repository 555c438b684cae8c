/*-------------------------------------------------------------------------
 *
 * parcheck.c
 *	  Which targets a parallel load takes: the rules every input shares,
 *	  checked by the leader before anything is launched, and the leaf
 *	  table of a partitioned target.
 *
 * The target must be a plain heap, or a partitioned table whose every leaf
 * is one, without INSERT triggers other than foreign key checks that the
 * leader can check as a set at the end (load/fkeys.c), row security or
 * check options, stored generated columns (computed by the workers) or
 * CHECK constraints whose expressions are not parallel safe, outside serializable isolation and with parallel workers
 * to be had; a partition targeted itself needs a parallel-safe partition
 * constraint (its rows are checked against its bound), a partitioned
 * table in the target's tree a parallel-safe partition key (routing runs
 * in the workers).  dp_parallel_target_refusal says why not, for
 * dp_parallel_begin (parallel.c); the statement then runs serially, and
 * last_statement().parallel says why.
 *
 * A partitioned target's leaves are listed (list_leaves) into the leaf
 * table every process shares: each leaf a worker may route a row to,
 * sorted by relid (dp_parallel_leaf_cmp, placer.c).  When the input allows
 * it ('may_hold'), a leaf that fails the rules only by its own triggers,
 * foreign keys, unsafe generated columns or CHECK constraints, or by being a
 * foreign table, is held rather than refused: the workers route its rows
 * to the leader, which keeps them in the tuplestores set up here and loads
 * them as a serial load would once it has left parallel mode (their
 * triggers and foreign key checks may write, which parallel mode forbids).
 *
 * Invariants.
 * - Whatever a worker evaluates (quals, projections, defaults, stored
 *	 generated columns, CHECK constraints, partition keys and bounds) is
 *	 parallel safe by core's
 *	 own test (is_parallel_safe, through dp_expr_parallel_safe).
 * - Every relation of a partitioned target's tree is locked AccessShare
 *	 while it is listed, as the planner locks a read; a leaf is locked
 *	 ShareRowExclusive only once its first page arrives, as a serial load
 *	 locks it once its first row does.
 * - At least one leaf is not held: a load whose every leaf would be held
 *	 is refused, with the first held leaf's reason.
 *
 *-------------------------------------------------------------------------
 */
#include "parallel/parallel_private.h"

#include "admission/admission.h"
#include "load/load.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "optimizer/clauses.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/* ---- what a worker evaluates must be parallel safe ---- */

bool
dp_expr_parallel_safe(Node *expr)
{
	PlannerInfo *root = makeNode(PlannerInfo);

	/* is_parallel_safe searches only when the query was not all safe */
	root->glob = makeNode(PlannerGlobal);
	root->glob->maxParallelHazard = PROPARALLEL_RESTRICTED;
	return is_parallel_safe(root, expr);
}

/* Are the relation's CHECK constraints parallel safe? */
static bool
checks_parallel_safe(Relation rel)
{
	TupleConstr *constr = rel->rd_att->constr;

	for (int i = 0; constr != NULL && i < constr->num_check; i++)
		if (!dp_expr_parallel_safe(stringToNode(constr->check[i].ccbin)))
			return false;
	return true;
}

/*
 * The first stored generated column of 'rel' whose expression is not
 * parallel safe (a worker computes the columns of the rows it places, as
 * ExecInsert does before the constraints), or NULL.
 */
static const char *
generated_unsafe(Relation rel)
{
	TupleConstr *constr = rel->rd_att->constr;

	if (constr == NULL || !constr->has_generated_stored)
		return NULL;
	for (int i = 0; i < constr->num_defval; i++)
	{
		Form_pg_attribute att = TupleDescAttr(rel->rd_att,
											  constr->defval[i].adnum - 1);

		if (att->attgenerated == ATTRIBUTE_GENERATED_STORED &&
			!dp_expr_parallel_safe(stringToNode(constr->defval[i].adbin)))
			return NameStr(att->attname);
	}
	return NULL;
}

/*
 * Why the INSERT triggers of a relation keep a worker from placing its
 * rows, as a phrase ("has ..."), or NULL.  Statement triggers fire in the
 * leader before and after the load, as in a serial one.  A row's AFTER
 * ROW events and its place in a transition table are queued by the
 * leader when it takes the row's page, as a serial load queues them once
 * the row's page is written (load/queue.c), and they fire at the end of
 * the statement, as core's do: in the order the pages reached the
 * leader, which is one a serial load of the rows in that order gives.
 * The leader queues them in parallel mode, where an event's WHEN
 * condition is evaluated: it must be parallel safe.  A BEFORE ROW
 * trigger would have to run in the worker that forms the row.  (Foreign
 * key checks are dp_fkeys_parallel_refusal's.)
 */
static const char *
triggers_refusal(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return NULL;
	if (td->trig_insert_before_row || td->trig_insert_instead_row)
		return "has BEFORE ROW INSERT triggers";
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (TRIGGER_FOR_INSERT(t->tgtype) && TRIGGER_FOR_ROW(t->tgtype) &&
			t->tgqual != NULL && !dp_expr_parallel_safe(stringToNode(t->tgqual)))
			return psprintf("has trigger \"%s\", whose WHEN condition is not parallel safe",
							t->tgname);
	}
	return NULL;
}

/*
 * Why a worker cannot place the rows of a heap it would write (the target,
 * or a leaf of it), or NULL.  'what' names it in the reason.
 */
static const char *
heap_refusal(Relation rel, const char *what)
{
	const char *why;
	const char *col;

	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		return psprintf("%s is a foreign table", what);
	/* a materialized view's heap: CREATE MATERIALIZED VIEW fills it (15, 16) */
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_MATVIEW)
		return psprintf("%s is not a plain table", what);
	if ((why = triggers_refusal(rel)) != NULL ||
		(why = dp_fkeys_parallel_refusal(rel)) != NULL)
		return psprintf("%s %s", what, why);
	if ((col = generated_unsafe(rel)) != NULL)
		return psprintf("%s has stored generated column \"%s\", whose expression is not parallel safe",
						what, col);
	if (!checks_parallel_safe(rel))
		return psprintf("a CHECK constraint of %s is not parallel safe", what);
	/* a materialized view's heap was judged by born.c (heap, not temporary) */
	if (rel->rd_rel->relkind == RELKIND_MATVIEW)
		return NULL;
	return dp_partition_ineligible(rel);
}

/*
 * Would routing a row of a partitioned table (its key computed and
 * compared, by 'rel''s key) run only parallel-safe code?
 */
static bool
key_parallel_safe(Relation rel)
{
	PartitionKey key = RelationGetPartitionKey(rel);

	if (!dp_expr_parallel_safe((Node *) key->partexprs))
		return false;
	for (int i = 0; i < key->partnatts; i++)
		if (func_parallel(key->partsupfunc[i].fn_oid) != PROPARALLEL_SAFE)
			return false;
	return true;
}

/*
 * May a leaf a worker cannot place be held, its rows loaded by the leader
 * after the workers?  A heap the serial load takes, or a foreign table
 * (the serial load's wrapper or COPY stream takes its rows).
 */
static bool
may_be_held(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE ||
		(rel->rd_rel->relkind == RELKIND_RELATION &&
		 dp_partition_ineligible(rel) == NULL);
}

/*
 * A partitioned target's leaves, each one a worker could be routed to,
 * checked and locked AccessShare (the lock a read of the table would take;
 * a leaf is locked ShareRowExclusive once its first page arrives, as a
 * serial load locks it once its first row does).  Sorted by relid.
 */
static const char *
list_leaves(DPParallel *par, Relation root, bool may_hold)
{
	List	   *tree = find_all_inheritors(RelationGetRelid(root), AccessShareLock,
										   NULL);
	ListCell   *lc;

	const char *held_why = NULL;
	int			nheld = 0;

	par->leaves = palloc0(sizeof(DPParallelLeaf) * list_length(tree));
	foreach(lc, tree)
	{
		Relation	rel = relation_open(lfirst_oid(lc), NoLock);
		bool		leaf = rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE;
		const char *why = NULL;
		bool		held = false;

		if (leaf)
			why = heap_refusal(rel, psprintf("partition \"%s\"",
											 RelationGetRelationName(rel)));
		else if (!key_parallel_safe(rel))
			why = psprintf("the partition key of \"%s\" is not parallel safe",
						   RelationGetRelationName(rel));
		if (why != NULL && may_hold && leaf && may_be_held(rel))
		{
			held = true;
			if (nheld++ == 0)
				held_why = why;
			why = NULL;
		}
		relation_close(rel, NoLock);
		if (why != NULL)
			return why;
		if (leaf)
		{
			par->leaves[par->sh.nleaves].held = held;
			par->leaves[par->sh.nleaves++].relid = lfirst_oid(lc);
		}
	}
	if (nheld > 0 && nheld == par->sh.nleaves)
		return held_why;		/* nothing left for a worker */
	if (nheld > 0)
	{
		par->held = tuplestore_begin_heap(false, false, work_mem);
		par->held_lines = tuplestore_begin_heap(false, false, work_mem);
		par->line_desc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(par->line_desc, 1, "line", INT8OID, -1, 0);
		par->held_note = psprintf("the rows of %d partition%s loaded by the leader after the workers: %s%s",
								  nheld, nheld > 1 ? "s" : "", held_why,
								  nheld > 1 ? ", ..." : "");
	}
	qsort(par->leaves, par->sh.nleaves, sizeof(DPParallelLeaf),
		  dp_parallel_leaf_cmp);
	par->leaf_rri = palloc0(sizeof(ResultRelInfo *) * Max(par->sh.nleaves, 1));
	return NULL;
}

/* Why the target cannot take a parallel load, or NULL. */
const char *
dp_parallel_target_refusal(DPParallel *par, ModifyTableState *mt, bool may_hold)
{
	ResultRelInfo *rri = mt->resultRelInfo;
	Relation	rel = rri->ri_RelationDesc;
	const char *why;

	if (mt->operation == CMD_MERGE)
		return "the statement is a MERGE (the leader decides each row's action)";
	if (mt->mt_nrels != 1)
		return "the target is not a plain table";
	if (rri->ri_WithCheckOptions != NIL)
		return "the target has row security or check options";
	if (IsolationIsSerializable())
		return "the transaction is serializable";
	if (max_parallel_workers == 0)
		return "max_parallel_workers is 0";
	/* a partition targeted itself: its rows are checked against its bound */
	if (rel->rd_rel->relispartition &&
		!dp_expr_parallel_safe((Node *) RelationGetPartitionQual(rel)))
		return "the target's partition constraint is not parallel safe";
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return heap_refusal(rel, "the target");
	if ((why = triggers_refusal(rel)) != NULL ||
		(why = dp_fkeys_parallel_refusal(rel)) != NULL)
		return psprintf("the target %s", why);
	return list_leaves(par, rel, may_hold);
}
