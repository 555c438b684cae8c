/*-------------------------------------------------------------------------
 *
 * copy.c
 *	  COPY ... FROM through the direct path.
 *
 * A COPY FROM that carries the hint (a leading /\*+ APPEND *\/), or any
 * COPY FROM under directpath.mode = always, is taken over in the utility
 * hook.  The input is parsed by core's COPY code (BeginCopyFrom /
 * NextCopyFrom: every format and option behaves as core's), and the rows go
 * through the same load as a direct-path INSERT (load.c): partition
 * routing, constraints, page writers, per-batch index entries and AFTER ROW
 * triggers, freezing where the storage is new.
 *
 * What DoCopy checks before loading is checked here in the same order with
 * the same messages: pg_read_server_files / pg_execute_server_program for
 * server files and programs, INSERT privilege on the columns, WHERE clause
 * rules, read-only transactions.  Where core would refuse (row-level
 * security, a missing table, missing privileges) or the direct path cannot
 * keep COPY's semantics (see eligibility.c; also a volatile function that
 * is not built in, in a column default or the WHERE clause), we leave the
 * statement to core, which raises the same error or runs it normally.
 *
 * The table is locked ShareRowExclusive before anything else is done, so
 * two loaders queue; the executor state is built as core's CopyFrom builds
 * it, and its loop is followed: ON_ERROR ignore and REJECT_LIMIT (17+,
 * 18), the WHERE filter, progress in pg_stat_progress_copy, the error
 * context line "COPY t, line N", statement-level triggers.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/copy.h"
#include "commands/trigger.h"
#include "executor/execPartition.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/cmdtag.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

/* DoCopy's WHERE clause processing. */
static Node *
transform_where(ParseState *pstate, ParseNamespaceItem *nsitem, Relation rel,
				Node *raw)
{
	Node	   *where;
	Bitmapset  *attrs = NULL;
	int			i;

	addNSItemToQuery(pstate, nsitem, false, true, true);
	where = transformExpr(pstate, raw, EXPR_KIND_COPY_WHERE);
	where = coerce_to_boolean(pstate, where, "WHERE");
	assign_expr_collations(pstate, where);

	/* a whole-row reference counts as every column */
	pull_varattnos(where, 1, &attrs);
	if (bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs))
	{
		attrs = bms_add_range(attrs,
							  1 - FirstLowInvalidHeapAttributeNumber,
							  RelationGetNumberOfAttributes(rel) - FirstLowInvalidHeapAttributeNumber);
		attrs = bms_del_member(attrs, 0 - FirstLowInvalidHeapAttributeNumber);
	}
	i = -1;
	while ((i = bms_next_member(attrs, i)) >= 0)
	{
		AttrNumber	attno = i + FirstLowInvalidHeapAttributeNumber;

		if (attno > 0 && TupleDescAttr(RelationGetDescr(rel), attno - 1)->attgenerated)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("generated columns are not supported in COPY FROM WHERE conditions"),
					 errdetail("Column \"%s\" is a generated column.",
							   get_attname(RelationGetRelid(rel), attno, false))));
	}

	where = eval_const_expressions(NULL, where);
	where = (Node *) canonicalize_qual((Expr *) where, false);
	return (Node *) make_ands_implicit((Expr *) where);
}

/* Defaults COPY evaluates: those of the columns not in the column list. */
static List *
default_exprs(Relation rel, List *attnums)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *exprs = NIL;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Node	   *def;

		if (att->attisdropped || att->attgenerated ||
			list_member_int(attnums, att->attnum))
			continue;
		def = build_column_default(rel, att->attnum);
		if (def)
			exprs = lappend(exprs, def);
	}
	return exprs;
}

/* Core's CopyFrom loop, with the rows going to a direct-path load. */
static uint64
copy_rows(CopyFromState cstate, Relation rel, bool hinted, bool freeze_allowed)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri;
	ModifyTableState *mtstate;
	TupleTableSlot *slot;
	ExprContext *econtext;
	ErrorContextCallback errcallback;
	MemoryContext oldcontext = CurrentMemoryContext;
	DPLoad	   *load;
	uint64		processed = 0;
	uint64		excluded = 0;

	if (cstate->opts.freeze)
	{
		/* COPY FREEZE's own rules, with core's messages */
		if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot perform COPY FREEZE on a partitioned table")));
		if (!freeze_allowed)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
					 errmsg("cannot perform COPY FREEZE because of prior transaction activity")));
		if (!dp_storage_new_in_subxact(rel))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot perform COPY FREEZE because the table was not created or truncated in the current subtransaction")));
	}

	DP_INIT_COPY_RANGE_TABLE(estate, cstate);
	rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(estate, rri, 1);
	DP_CHECK_VALID_INSERT_REL(rri);

	mtstate = makeNode(ModifyTableState);
	mtstate->ps.plan = NULL;
	mtstate->ps.state = estate;
	mtstate->operation = CMD_INSERT;
	mtstate->canSetTag = true;
	mtstate->mt_nrels = 1;
	mtstate->resultRelInfo = rri;
	mtstate->rootResultRelInfo = rri;

	AfterTriggerBeginQuery();
	cstate->transition_capture = mtstate->mt_transition_capture =
		MakeTransitionCaptureState(rel->trigdesc, RelationGetRelid(rel), CMD_INSERT);
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		mtstate->mt_partition_tuple_routing =
			ExecSetupPartitionTupleRouting(estate, rel);
	if (cstate->whereClause)
		cstate->qualexpr = ExecInitQual(castNode(List, cstate->whereClause),
										&mtstate->ps);

	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsVirtual);
	ExecBSInsertTriggers(estate, rri);
	load = dp_load_begin("COPY", estate, mtstate, hinted, freeze_allowed,
						 NULL, &cstate->cur_lineno,
						 &cstate->line_buf_valid);
	econtext = GetPerTupleExprContext(estate);

	errcallback.callback = CopyFromErrorCallback;
	errcallback.arg = (void *) cstate;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);
		MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		ExecClearTuple(slot);
		if (!NextCopyFrom(cstate, econtext, slot->tts_values, slot->tts_isnull))
			break;
		if (dp_copy_row_skipped(cstate))
		{
			MemoryContextSwitchTo(oldcontext);
			continue;
		}
		ExecStoreVirtualTuple(slot);
		slot->tts_tableOid = RelationGetRelid(rel);
		MemoryContextSwitchTo(oldcontext);

		if (cstate->whereClause)
		{
			econtext->ecxt_scantuple = slot;
			if (!ExecQual(cstate->qualexpr, econtext))
			{
				pgstat_progress_update_param(PROGRESS_COPY_TUPLES_EXCLUDED,
											 ++excluded);
				continue;
			}
		}

		dp_load_row(load, slot);
		pgstat_progress_update_param(PROGRESS_COPY_TUPLES_PROCESSED, ++processed);
	}
	MemoryContextSwitchTo(oldcontext);

	/* the last batch's errors still name their input lines */
	dp_load_finish(load);
	error_context_stack = errcallback.previous;
	dp_copy_report_skipped(cstate);

	ExecASInsertTriggers(estate, rri, cstate->transition_capture);
	AfterTriggerEndQuery(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	if (mtstate->mt_partition_tuple_routing)
		ExecCleanupTupleRouting(mtstate, mtstate->mt_partition_tuple_routing);
	ExecCloseResultRelations(estate);
	ExecCloseRangeTableRelations(estate);
	FreeExecutorState(estate);
	return processed;
}

/*
 * Run a COPY FROM through the direct path if it qualifies; false leaves
 * the statement to core.
 */
bool
dp_copy_utility(PlannedStmt *pstmt, const char *queryString,
				QueryEnvironment *queryEnv, QueryCompletion *qc)
{
	CopyStmt   *stmt = (CopyStmt *) pstmt->utilityStmt;
	DPHint		hint;
	bool		hinted;
	Oid			relid;
	Relation	rel;
	const char *why;
	ParseState *pstate;
	ParseNamespaceItem *nsitem;
	DPPermInfo *perminfo;
	Node	   *where = NULL;
	List	   *attnums;
	ListCell   *lc;
	List	   *exprs;
	bool		freeze_allowed;
	CopyFromState cstate;
	uint64		processed;

	if (!stmt->is_from || stmt->relation == NULL || dp_mode == DP_MODE_OFF)
		return false;
	hint = dp_find_hint(queryString, pstmt->stmt_location, pstmt->stmt_len);
	if (hint == DP_HINT_NOAPPEND ||
		(hint != DP_HINT_APPEND && dp_mode != DP_MODE_ALWAYS))
		return false;
	hinted = hint == DP_HINT_APPEND;

	/* DoCopy's first checks: leave their errors to core */
	if (stmt->filename != NULL &&
		!has_privs_of_role(GetUserId(), stmt->is_program ?
						   ROLE_PG_EXECUTE_SERVER_PROGRAM :
						   ROLE_PG_READ_SERVER_FILES))
		return false;
	relid = RangeVarGetRelid(stmt->relation, AccessShareLock, true);
	if (!OidIsValid(relid) ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;

	/* Eligible?  Look first, then take the strong lock and look again. */
	rel = table_open(relid, NoLock);
	why = dp_relation_ineligible(rel, true);
	table_close(rel, NoLock);
	if (why == NULL)
	{
		LockRelationOid(relid, ShareRowExclusiveLock);
		rel = table_open(relid, NoLock);
		why = dp_relation_ineligible(rel, true);
		if (why != NULL)
			table_close(rel, NoLock);
	}
	if (why != NULL)
	{
		dp_report_fallback(hinted, "COPY", why);
		dp_set_last(false, why, 0, 0, false, 0, 0);
		return false;
	}

	/* DoCopy's range table, WHERE clause and permission checks */
	pstate = make_parsestate(NULL);
	pstate->p_sourcetext = queryString;
	pstate->p_queryEnv = queryEnv;
	nsitem = addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock,
										   NULL, false, false);
	perminfo = DP_NSITEM_PERMS(nsitem);
	perminfo->requiredPerms = ACL_INSERT;
	if (stmt->whereClause)
		where = transform_where(pstate, nsitem, rel, stmt->whereClause);
	attnums = CopyGetAttnums(RelationGetDescr(rel), rel, stmt->attlist);
	foreach(lc, attnums)
		perminfo->insertedCols = bms_add_member(perminfo->insertedCols,
												lfirst_int(lc) - FirstLowInvalidHeapAttributeNumber);
	DP_CHECK_PERMISSIONS(pstate, perminfo);
	if (XactReadOnly && !rel->rd_islocaltemp)
		PreventCommandIfReadOnly("COPY FROM");

	/* functions COPY evaluates per row: defaults and the WHERE clause */
	exprs = default_exprs(rel, attnums);
	if (where)
		exprs = lappend(exprs, where);
	why = dp_expr_ineligible((Node *) exprs);
	if (why != NULL)
	{
		dp_report_fallback(hinted, "COPY", why);
		dp_set_last(false, why, 0, 0, false, 0, 0);
		table_close(rel, NoLock);
		free_parsestate(pstate);
		return false;
	}

	/* COPY FREEZE's "prior transaction activity" test */
	InvalidateCatalogSnapshot();
	freeze_allowed = ThereAreNoPriorRegisteredSnapshots() &&
		ThereAreNoReadyPortals() &&
		!dp_expr_has_user_function((Node *) exprs);

	cstate = BeginCopyFrom(pstate, rel, where, stmt->filename,
						   stmt->is_program, NULL, stmt->attlist,
						   stmt->options);
	processed = copy_rows(cstate, rel, hinted, freeze_allowed);
	EndCopyFrom(cstate);

	table_close(rel, NoLock);
	free_parsestate(pstate);
	if (qc)
		SetQueryCompletion(qc, CMDTAG_COPY, processed);
	return true;
}
