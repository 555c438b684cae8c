/*-------------------------------------------------------------------------
 *
 * newvalues.c
 *	  The new version of a row changed in bulk (versions.c), by core's own
 *	  expressions of the statement's ModifyTable node: ON CONFLICT DO
 *	  UPDATE's WHERE clause and SET projection, MERGE's WHEN MATCHED
 *	  actions, an UPDATE's new-tuple projection; and a changed row's
 *	  trigger events and RETURNING row.
 *
 * The old version is stored in the node's slot for it (DO UPDATE's
 * oc_Existing, MERGE's and UPDATE's ri_oldTupleSlot) from the pinned page;
 * the kept row is the proposed row (EXCLUDED) or the subplan's row.  The
 * expressions are the ones core compiled with the node as their parent, so
 * they run exactly as in ExecOnConflictUpdate, ExecMergeMatched and
 * ExecModifyTable, with the same counters (EXPLAIN ANALYZE's).  An UPDATE's
 * projection is built here the way core builds it for its first row, and
 * marked valid, so that core's executor uses the same one for the rows it
 * takes afterwards.
 *
 * A new version is checked as ExecUpdate checks it (dp_check_new_version):
 * an UPDATE's stored generated columns computed, its row security WITH
 * CHECK policies, then the table's NOT NULL and CHECK constraints.
 *
 * An UPDATE's or a DELETE's row changed in bulk (dp_changed_row), right
 * after its new version is placed or its deletion noted, while its old page
 * is still pinned: its AFTER ROW trigger events and transition table rows
 * queued as core's ExecUpdateEpilogue and ExecDeleteEpilogue queue them
 * (the events name the old and new versions by TID; they fire at the
 * statement's end, when every page is written), a view's CHECK OPTION on
 * the new version, and its RETURNING row
 * projected as ExecProcessReturning projects it, copied into the
 * statement's tuplestore, the projection's memory reset per row as
 * ExecModifyTable resets it.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "access/tableam.h"
#include "commands/trigger.h"
#include "common/compat.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/nodeModifyTable.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

void
dp_update_projection(ModifyTableState *mt, ResultRelInfo *rri)
{
	ModifyTable *plan = (ModifyTable *) mt->ps.plan;
	EState	   *estate = mt->ps.state;
	Relation	rel = rri->ri_RelationDesc;
	MemoryContext old;

	if (rri->ri_projectNewInfoValid)
		return;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	rri->ri_oldTupleSlot = table_slot_create(rel, &estate->es_tupleTable);
	rri->ri_newTupleSlot = table_slot_create(rel, &estate->es_tupleTable);
	if (mt->ps.ps_ExprContext == NULL)
		ExecAssignExprContext(estate, &mt->ps);
	/* the SET's columns of this result relation (a leaf's own numbers) */
	rri->ri_projectNew =
		ExecBuildUpdateProjection(outerPlan(plan)->targetlist, false,
								  DP_UPDATE_COLNOS(mt, rri - mt->resultRelInfo),
								  RelationGetDescr(rel), mt->ps.ps_ExprContext,
								  rri->ri_newTupleSlot, &mt->ps);
	rri->ri_projectNewInfoValid = true;
	MemoryContextSwitchTo(old);
}

/*
 * DO UPDATE's expressions, as ExecOnConflictUpdate runs them once the row
 * is locked: the new version's values, or NULL when the WHERE clause is
 * false (the row stays locked, *lock).
 */
static TupleTableSlot *
on_conflict(ModifyTableState *mt, ResultRelInfo *rri, ExprContext *econtext,
			bool *lock)
{
	OnConflictSetState *oc = rri->ri_onConflict;

	InstrCountTuples2(&mt->ps, 1);
	if (!ExecQual(oc->oc_WhereClause, econtext))
	{
		InstrCountFiltered1(&mt->ps, 1);
		*lock = true;
		return NULL;
	}
	return ExecProject(oc->oc_ProjInfo);
}

/*
 * MERGE's WHEN MATCHED actions, as ExecMergeMatched picks one: the first
 * whose condition holds; its UPDATE's new values, or NULL (DO NOTHING, or
 * no action; neither locks the row).
 */
static TupleTableSlot *
merge_matched(ModifyTableState *mt, ResultRelInfo *rri, ExprContext *econtext)
{
	ListCell   *lc;

	foreach(lc, DP_MERGE_MATCHED_ACTIONS(rri))
	{
		MergeActionState *action = lfirst(lc);

		if (!ExecQual(action->mas_whenqual, econtext))
			continue;
		if (action->mas_action->commandType != CMD_UPDATE)
			return NULL;
		mt->mt_merge_updated += 1;
		return ExecProject(action->mas_proj);
	}
	return NULL;
}

void
dp_affected_twice(CmdType op)
{
	bool		merge = op == CMD_MERGE;

	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
	/* translator: %s is a SQL command name */
			 errmsg("%s command cannot affect row a second time",
					merge ? "MERGE" : "ON CONFLICT DO UPDATE"),
			 merge ?
			 errhint("Ensure that not more than one source row matches any one target row.") :
			 errhint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")));
}

TupleTableSlot *
dp_new_values(ModifyTableState *mt, ResultRelInfo *rri, TupleTableSlot *row,
			  TupleTableSlot *existing, HeapTuple old, Buffer buf, bool *lock)
{
	ExprContext *econtext = mt->ps.ps_ExprContext;

	ResetExprContext(econtext);
	ExecStoreBufferHeapTuple(old, existing, buf);
	if (mt->operation == CMD_UPDATE)
		return ExecGetUpdateNewTuple(rri, row, existing);
	econtext->ecxt_scantuple = existing;
	econtext->ecxt_innertuple = row;
	econtext->ecxt_outertuple = NULL;
	return mt->operation == CMD_MERGE ? merge_matched(mt, rri, econtext) :
		on_conflict(mt, rri, econtext, lock);
}

void
dp_check_new_version(ModifyTableState *mt, ResultRelInfo *rri,
					 TupleTableSlot *newslot)
{
	Relation	rel = rri->ri_RelationDesc;
	EState	   *estate = mt->ps.state;

	/* ExecUpdatePrepareSlot's generated columns, then ExecUpdateAct's */
	if (mt->operation == CMD_UPDATE && rel->rd_att->constr &&
		rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, newslot, CMD_UPDATE);
	if (mt->operation == CMD_UPDATE && rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_RLS_UPDATE_CHECK, rri, newslot, estate);
	if (rel->rd_att->constr)
		ExecConstraints(rri, newslot, estate);
}

void
dp_changed_row(ModifyTableState *mt, ResultRelInfo *rri, ItemPointer oldtid,
			   TupleTableSlot *oldslot, TupleTableSlot *newslot,
			   TupleTableSlot *planslot, Tuplestorestate *retstore)
{
	EState	   *estate = mt->ps.state;

	/* as ExecDeleteEpilogue and ExecUpdateEpilogue queue them */
	if (newslot == NULL)
		ExecARDeleteTriggers(estate, rri, oldtid, NULL,
							 mt->mt_transition_capture, false);
	else
		ExecARUpdateTriggers(estate, rri, NULL, NULL, oldtid, NULL, newslot,
							 NIL, mt->mt_transition_capture, false);
	if (newslot != NULL && rri->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_VIEW_CHECK, rri, newslot, estate);
	if (retstore != NULL)
	{
		ProjectionInfo *proj = rri->ri_projectReturning;

		dp_returning_prepare(proj, estate, rri, oldslot, newslot, planslot);
		tuplestore_puttupleslot(retstore, ExecProject(proj));
		ResetExprContext(proj->pi_exprContext);
	}
}
