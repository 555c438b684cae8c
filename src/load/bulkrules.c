/*-------------------------------------------------------------------------
 *
 * bulkrules.c
 *	  Which statements may have their updates and deletes made in bulk
 *	  (versions.c), judged once the statement's ModifyTable node is
 *	  initialised; the reason, for the report, when not.
 *
 * The bulk path writes headers as heap_update, heap_lock_tuple and
 * heap_delete do, and nothing else: whatever core does per row beyond that
 * must be absent for the statement's kind of change - row triggers and
 * transition tables (foreign keys are triggers, on either side), row
 * security and a view's CHECK OPTION, stored generated columns an update
 * recomputes, RETURNING, SERIALIZABLE's predicate locks, logical decoding
 * (which reads changes from their own records), and, where new versions
 * get index entries, deferrable and exclusion indexes.  An UPDATE core
 * would make HOT is left to it too: on a table whose fillfactor keeps room
 * and whose SET assigns no column an index depends on, core writes no
 * index entry at all, which appending new versions cannot match.
 *
 * A plain UPDATE's or DELETE's AFTER ROW triggers, transition tables,
 * RETURNING, row security and view checks, and an UPDATE's stored
 * generated columns, are done per row instead (newvalues.c), unless a
 * RETURNING list, policy or check calls a volatile function (which could
 * read the rows changed so far); an upsert's and MERGE's are not.
 *
 * An UPDATE, a DELETE or a MERGE of a partitioned table or an inheritance
 * tree is judged leaf by leaf (each result relation the plan kept, each
 * with its own triggers, indexes, fillfactor and MERGE actions): one leaf
 * refused leaves the whole statement to core (which runs its plan as
 * its own).  An INSERT ... ON CONFLICT DO UPDATE and a MERGE keep their
 * rows to be updated after the load, and INSERT routes them, so their
 * leaves are judged each at its first kept row (dp_versions_leaf_refusal):
 * a leaf refused leaves only its own rows to core.  An upsert's or a
 * MERGE's leaf is refused when its update assigns a column its partition
 * constraint reads (the constraint covers every level above it): core
 * would move such a row, or fail it.
 *
 * Rules judged at plan time instead (existing.c): a unique key assigned,
 * an UPDATE's partition key assigned (a row could move to another
 * partition), a foreign leaf, data-modifying WITH.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "access/xact.h"
#include "catalog/catalog.h"
#include "commands/trigger.h"
#include "common/compat.h"
#include "common/settings.h"
#include "optimizer/optimizer.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

/* MERGE's own reasons (its actions), or NULL. */
static const char *
merge_refusal(ResultRelInfo *rri)
{
	ListCell   *lc;

	if (DP_MERGE_BY_SOURCE_ACTIONS(rri) != NIL)
		return "MERGE has WHEN NOT MATCHED BY SOURCE actions";
	foreach(lc, DP_MERGE_MATCHED_ACTIONS(rri))
		if (((MergeActionState *) lfirst(lc))->mas_action->commandType == CMD_DELETE)
			return "MERGE deletes matched rows";
	if (rri->ri_oldTupleSlot == NULL || rri->ri_RowIdAttNo == InvalidAttrNumber)
		return "MERGE has no matched action";
	return NULL;
}

/*
 * The row triggers (or transition tables) the statement's kind would fire
 * that the bulk path cannot: an UPDATE's or DELETE's AFTER ROW triggers and
 * transition tables are queued per row (newvalues.c), not its BEFORE ROW
 * triggers, which may change or skip a row and lock it first.
 */
static bool
has_row_triggers(TriggerDesc *trig, CmdType op)
{
	if (trig == NULL)
		return false;
	if (op == CMD_DELETE)
		return trig->trig_delete_before_row || trig->trig_delete_instead_row;
	if (op == CMD_UPDATE)
		return trig->trig_update_before_row || trig->trig_update_instead_row;
	if ((op == CMD_INSERT || op == CMD_MERGE) &&
		(trig->trig_insert_before_row || trig->trig_insert_after_row ||
		 trig->trig_insert_instead_row || trig->trig_insert_new_table))
		return true;
	return trig->trig_update_before_row || trig->trig_update_after_row ||
		trig->trig_update_instead_row || trig->trig_update_old_table ||
		trig->trig_update_new_table;
}

/*
 * An UPDATE that core would make HOT: the table keeps room on its pages
 * (fillfactor below 100) and SET assigns no column an index depends on.
 * Core then writes no index entry at all; the bulk path, which appends the
 * new versions, would write one per index.  'which' is the result
 * relation's place in the node (each has its own SET columns' numbers).
 */
static bool
hot_update_kept(ModifyTableState *mt, int which, Relation rel)
{
	List	   *colnos = DP_UPDATE_COLNOS(mt, which);
	Bitmapset  *indexed;
	ListCell   *lc;

	if (RelationGetFillFactor(rel, HEAP_DEFAULT_FILLFACTOR) >= 100)
		return false;
	indexed = RelationGetIndexAttrBitmap(rel, DP_INDEX_ATTR_BITMAP_HOT_BLOCKING);
	foreach(lc, colnos)
		if (bms_is_member(lfirst_int(lc) - FirstLowInvalidHeapAttributeNumber,
						  indexed))
			return false;
	return true;
}

/*
 * Does an upsert's or a MERGE's update of the leaf 'rri' assign a column
 * that its partition constraint reads?  'from' numbers the assigned
 * columns 'colnos' (DO UPDATE: the target's; MERGE: the leaf's own).  The
 * constraint reads every partition key of the levels above the leaf; a
 * whole-row expression among them counts as every column.
 */
static bool
assigns_partition_column(ResultRelInfo *rri, Relation from, List *colnos)
{
	Relation	rel = rri->ri_RelationDesc;
	Bitmapset  *read = NULL;
	ListCell   *lc;

	if (!rel->rd_rel->relispartition || colnos == NIL)
		return false;
	pull_varattnos((Node *) RelationGetPartitionQual(rel), 1, &read);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, read))
		return true;
	foreach(lc, colnos)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(from),
											  lfirst_int(lc) - 1);
		AttrNumber	attno = from == rel ? att->attnum :
			get_attnum(RelationGetRelid(rel), NameStr(att->attname));

		if (bms_is_member(attno - FirstLowInvalidHeapAttributeNumber, read))
			return true;
	}
	return false;
}

/* The columns an upsert's or a MERGE's update of 'rri' assigns, and whose. */
static List *
upsert_colnos(ModifyTableState *mt, ResultRelInfo *rri, Relation *from)
{
	List	   *colnos = NIL;
	ListCell   *lc;

	if (mt->operation == CMD_INSERT)
	{
		*from = mt->rootResultRelInfo->ri_RelationDesc;
		return ((ModifyTable *) mt->ps.plan)->onConflictCols;
	}
	*from = rri->ri_RelationDesc;
	foreach(lc, DP_MERGE_MATCHED_ACTIONS(rri))
	{
		MergeAction *action = ((MergeActionState *) lfirst(lc))->mas_action;

		if (action->commandType == CMD_UPDATE)
			colnos = list_concat(colnos, action->updateColnos);
	}
	return colnos;
}

/*
 * The reasons of one result relation: the target, or for an UPDATE, a
 * DELETE or a MERGE of a partitioned table or an inheritance tree, each
 * leaf the statement's plan kept (those pruned at plan time or at the
 * executor's start are not in the node), or for an upsert of a
 * partitioned table, each leaf a row is routed to.
 */
static const char *
relation_refusal(ModifyTableState *mt, ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;
	Relation	from;
	List	   *colnos;
	CmdType		op = mt->operation;
	bool		plain_dml = op == CMD_UPDATE || op == CMD_DELETE;
	bool		leaf = rel->rd_rel->relispartition || mt->mt_nrels != 1;
	const char *why;

	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		(rel->rd_rel->relkind != RELKIND_MATVIEW || leaf))
		return leaf ? "a partition or inheritance child is not a plain table" :
			"the target is not a plain table";
	if (op == CMD_MERGE && (why = merge_refusal(rri)) != NULL)
		return why;
	if (!plain_dml &&
		(colnos = upsert_colnos(mt, rri, &from)) != NIL &&
		assigns_partition_column(rri, from, colnos))
		return "the update assigns a column of a partition key (a row could move to another partition)";
	if (plain_dml && rri->ri_RowIdAttNo == InvalidAttrNumber)
		return "the statement has no row identity (ctid)";
	if (RelationIsLogicallyLogged(rel))
		return "the table is logically logged (logical decoding reads updates and deletes from their own records)";
	if (has_row_triggers(rel->trigdesc, op))
		return plain_dml ?
			"the table has BEFORE ROW triggers of the statement's kind" :
			"the table has row triggers (foreign keys included) or transition tables";
	if (!plain_dml &&
		(rel->rd_rel->relrowsecurity || rri->ri_WithCheckOptions != NIL))
		return "row security or a view's CHECK OPTION applies";
	if (contain_volatile_functions((Node *) rri->ri_WithCheckOptions))
		return "a row security policy or a view's CHECK OPTION calls a volatile function (it could read the rows changed so far)";
	if (!plain_dml &&
		rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		return "the table has stored generated columns";
	if (op == CMD_DELETE)
		return NULL;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];

		if (!idx->rd_index->indimmediate ||
			rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return "an index is deferrable or an exclusion constraint";
	}
	if (op == CMD_UPDATE && hot_update_kept(mt, rri - mt->resultRelInfo, rel))
		return "the table keeps room for HOT updates (fillfactor below 100) and SET assigns no indexed column";
	return NULL;
}

const char *
dp_versions_refusal(ModifyTableState *mt)
{
	ModifyTable *plan = (ModifyTable *) mt->ps.plan;
	CmdType		op = mt->operation;
	bool		plain_dml = op == CMD_UPDATE || op == CMD_DELETE;
	Relation	root = mt->rootResultRelInfo->ri_RelationDesc;
	const char *why;

	if (!dp_bulk_update)
		return "directpath.bulk_update is off";
	if (op == CMD_INSERT && mt->resultRelInfo->ri_onConflict == NULL)
		return "the statement has no DO UPDATE";
	if (!plain_dml && plan->returningLists != NIL)
		return "the statement has RETURNING";
	if (contain_volatile_functions((Node *) plan->returningLists))
		return "RETURNING calls a volatile function (it could read the rows changed so far)";
	if (IsolationIsSerializable())
		return "the transaction is SERIALIZABLE (its predicate locks are taken row by row)";
	/* a partitioned table's row triggers, transition tables, policies */
	if (!plain_dml && has_row_triggers(root->trigdesc, op))
		return "the table has row triggers (foreign keys included) or transition tables";
	if (!plain_dml && root->rd_rel->relrowsecurity)
		return "row security or a view's CHECK OPTION applies";
	/* an upsert's or a MERGE's leaves: each at its first row */
	if (dp_versions_leaves_late(mt))
		return NULL;
	for (int i = 0; i < mt->mt_nrels; i++)
		if ((why = relation_refusal(mt, &mt->resultRelInfo[i])) != NULL)
			return why;
	return NULL;
}

bool
dp_versions_leaves_late(ModifyTableState *mt)
{
	Relation	target = mt->resultRelInfo->ri_RelationDesc;

	return (mt->operation == CMD_INSERT &&
			target->rd_rel->relkind == RELKIND_PARTITIONED_TABLE) ||
		(mt->operation == CMD_MERGE && mt->mt_nrels > 1);
}

const char *
dp_versions_leaf_refusal(ModifyTableState *mt, ResultRelInfo *rri)
{
	return relation_refusal(mt, rri);
}

/*
 * May the plan give the target's rows in TID order?  A sequential, bitmap
 * or TID range scan of the target itself does (a synchronized sequential
 * scan starts mid-table and wraps around once: the stream then ends once,
 * and no page is visited twice), and an index scan of it does where the
 * index follows the table's order (a purge by a timestamp the rows were
 * appended in); where it does not, the stream ends at its first step back
 * and a page is visited at most twice, once streamed and once sorted.  A
 * join's order follows its outer side only while its hash table fits in
 * one batch, so a plan that is not a scan of the target is sorted:
 * streaming it could visit, and log, every page twice.  Under an Append (a
 * partitioned table's or an inheritance tree's leaves) the children run
 * one after another, so the scan of the leaf 'target' counts.
 */
static bool
scan_in_tid_order(PlanState *ps, Relation target)
{
	if (!IsA(ps, SeqScanState) && !IsA(ps, BitmapHeapScanState) &&
		!IsA(ps, TidRangeScanState) && !IsA(ps, IndexScanState))
		return false;
	return RelationGetRelid(((ScanState *) ps)->ss_currentRelation) ==
		RelationGetRelid(target);
}

bool
dp_versions_may_stream(PlanState *subplan, Relation target)
{
	if (IsA(subplan, AppendState))
	{
		AppendState *append = (AppendState *) subplan;

		for (int i = 0; i < append->as_nplans; i++)
			if (scan_in_tid_order(append->appendplans[i], target))
				return true;
		return false;
	}
	return scan_in_tid_order(subplan, target);
}
