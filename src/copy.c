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
 * Our own options, REJECTS_TABLE and MAX_REJECTS (rejects.c), are taken out
 * of the option list before core sees it; they imply the direct path.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/copy.h"
#include "commands/defrem.h"
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

/* directpath's own COPY options, taken out before core parses the rest. */
typedef struct DPCopyOptions
{
	char	   *rejects_table;	/* REJECTS_TABLE 'name' */
	int64		max_rejects;	/* MAX_REJECTS n; -1: no limit */
	List	   *core_options;	/* everything else */
} DPCopyOptions;

static void
split_options(List *options, DPCopyOptions *opts)
{
	ListCell   *lc;

	opts->rejects_table = NULL;
	opts->max_rejects = -1;
	opts->core_options = NIL;
	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, "rejects_table") == 0)
			opts->rejects_table = defGetString(def);
		else if (strcmp(def->defname, "max_rejects") == 0)
		{
			opts->max_rejects = defGetInt64(def);
			if (opts->max_rejects < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("MAX_REJECTS must be zero or more")));
		}
		else
			opts->core_options = lappend(opts->core_options, def);
	}
	if (opts->max_rejects >= 0 && opts->rejects_table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("MAX_REJECTS needs REJECTS_TABLE")));
}

/*
 * Read the next row; with a rejects table, inside a subtransaction, so that
 * a malformed row is recorded and skipped.  Returns false at the end.
 */
static bool
next_row(CopyFromState cstate, EState *estate, TupleTableSlot *slot,
		 DPRejects *rejects)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	for (;;)
	{
		uint64		line_before = cstate->cur_lineno;
		volatile bool more = false;
		ErrorData  *volatile edata = NULL;

		if (rejects == NULL)
		{
			MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
			more = NextCopyFrom(cstate, econtext, slot->tts_values, slot->tts_isnull);
			MemoryContextSwitchTo(oldcontext);
			return more;
		}

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		PG_TRY();
		{
			more = NextCopyFrom(cstate, econtext, slot->tts_values, slot->tts_isnull);
			ReleaseCurrentSubTransaction();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(oldcontext);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		if (edata == NULL)
			return more;

		/* not a bad row, or no progress through the input: give up */
		if (!dp_rejects_error_ok(edata->sqlerrcode) ||
			cstate->cur_lineno == line_before)
			ReThrowError(edata);
		dp_rejects_add(rejects, cstate->cur_lineno,
					   cstate->line_buf_valid ? cstate->line_buf.data : NULL,
					   edata->sqlerrcode, edata->message, edata->detail);
		FreeErrorData(edata);
		ResetPerTupleExprContext(estate);
		ExecClearTuple(slot);
	}
}

/* Core's CopyFrom loop, with the rows going to a direct-path load. */
static uint64
copy_rows(CopyFromState cstate, Relation rel, bool hinted, bool freeze_allowed,
		  DPCopyOptions *opts)
{
	DPRejects  *rejects = NULL;
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri;
	ModifyTableState *mtstate;
	TupleTableSlot *slot;
	ExprContext *econtext;
	ErrorContextCallback errcallback;
	bool		freeze_requested = cstate->opts.freeze;
	MemoryContext oldcontext = CurrentMemoryContext;
	DPLoad	   *load;
	uint64		processed = 0;
	uint64		excluded = 0;

	if (freeze_requested)
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
	if (opts->rejects_table)
	{
		rejects = dp_rejects_open(opts->rejects_table, opts->max_rejects, rel);
		dp_load_set_rejects(load, rejects, &cstate->line_buf,
							&cstate->line_buf_valid);
	}
	econtext = GetPerTupleExprContext(estate);

	errcallback.callback = CopyFromErrorCallback;
	errcallback.arg = (void *) cstate;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);
		ExecClearTuple(slot);
		if (!next_row(cstate, estate, slot, rejects))
			break;
		if (dp_copy_row_skipped(cstate))
			continue;
		ExecStoreVirtualTuple(slot);
		slot->tts_tableOid = RelationGetRelid(rel);

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

		if (dp_load_row(load, slot))
			pgstat_progress_update_param(PROGRESS_COPY_TUPLES_PROCESSED, ++processed);
	}
	MemoryContextSwitchTo(oldcontext);

	/* the last batch's errors still name their input lines */
	dp_load_finish(load);
	processed -= dp_load_deleted(load);
	error_context_stack = errcallback.previous;
	dp_copy_report_skipped(cstate);
	if (rejects && dp_rejects_count(rejects) > 0)
		ereport(NOTICE,
				(errmsg("%llu rows were rejected into %s",
						(unsigned long long) dp_rejects_count(rejects),
						opts->rejects_table)));

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
 * The statement goes to core after all.  Core does not know our options,
 * so a COPY that uses them cannot: say why.
 */
static bool
leave_to_core(DPCopyOptions *opts, const char *why)
{
	if (opts->rejects_table)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY option REJECTS_TABLE needs the direct path"),
				 why ? errdetail("This COPY cannot take it: %s.", why) :
				 errdetail("Core COPY refuses this statement; run it without REJECTS_TABLE to see why.")));
	return false;
}

/*
 * Run a COPY FROM through the direct path if it qualifies; false leaves
 * the statement to core.
 */
bool
dp_copy_utility(uint64 *fallback_id, PlannedStmt *pstmt,
				const char *queryString, QueryEnvironment *queryEnv,
				QueryCompletion *qc)
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
	DPCopyOptions opts;

	if (!stmt->is_from || stmt->relation == NULL)
		return false;
	split_options(stmt->options, &opts);
	hint = dp_find_hint(queryString, pstmt->stmt_location, pstmt->stmt_len);

	/* REJECTS_TABLE asks for the direct path by itself */
	if (opts.rejects_table)
	{
		if (hint == DP_HINT_NOAPPEND || dp_mode == DP_MODE_OFF)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("COPY option REJECTS_TABLE needs the direct path"),
					 errdetail("The statement has /*+ NOAPPEND */ or directpath.mode is off.")));
		hint = DP_HINT_APPEND;
	}
	if (dp_mode == DP_MODE_OFF || hint == DP_HINT_NOAPPEND ||
		(hint != DP_HINT_APPEND && dp_mode != DP_MODE_ALWAYS))
		return false;
	hinted = hint == DP_HINT_APPEND;

	/* DoCopy's first checks: leave their errors to core */
	if (stmt->filename != NULL &&
		!has_privs_of_role(GetUserId(), stmt->is_program ?
						   ROLE_PG_EXECUTE_SERVER_PROGRAM :
						   ROLE_PG_READ_SERVER_FILES))
		return leave_to_core(&opts, NULL);
	relid = RangeVarGetRelid(stmt->relation, AccessShareLock, true);
	if (!OidIsValid(relid) ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return leave_to_core(&opts, NULL);

	/* no strong lock for a user who cannot insert: core says why */
	if (!dp_may_insert(relid))
		return leave_to_core(&opts, NULL);

	/* Eligible?  Look first, then take the strong lock and look again. */
	rel = table_open(relid, NoLock);
	why = dp_relation_ineligible(rel, true);
	table_close(rel, NoLock);
	if (why == NULL && !ConditionalLockRelationOid(relid, ShareRowExclusiveLock) &&
		CheckRelationOidLockedByMe(relid, RowExclusiveLock, true))
		why = "another session holds a conflicting lock on the table, and waiting for it here could deadlock";
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
		*fallback_id = dp_set_last(false, why, 0, 0, false, 0, 0);
		return leave_to_core(&opts, why);
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
		*fallback_id = dp_set_last(false, why, 0, 0, false, 0, 0);
		table_close(rel, NoLock);
		free_parsestate(pstate);
		return leave_to_core(&opts, why);
	}

	/* COPY FREEZE's "prior transaction activity" test */
	freeze_allowed = dp_no_prior_activity() &&
		!dp_expr_has_user_function((Node *) exprs);

	cstate = BeginCopyFrom(pstate, rel, where, stmt->filename,
						   stmt->is_program, NULL, stmt->attlist,
						   opts.core_options);
	processed = copy_rows(cstate, rel, hinted, freeze_allowed, &opts);
	EndCopyFrom(cstate);

	table_close(rel, NoLock);
	free_parsestate(pstate);
	if (qc)
		SetQueryCompletion(qc, CMDTAG_COPY, processed);
	return true;
}
