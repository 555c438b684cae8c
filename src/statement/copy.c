/*-------------------------------------------------------------------------
 *
 * copy.c
 *	  COPY ... FROM through the direct path.
 *
 * A COPY FROM that admission.c admits (the hint, a leading
 * /\*+ APPEND *\/, or directpath.mode = always, and the relation rules) is
 * taken over in the utility hook, which this file installs.  The input is parsed by core's COPY code (BeginCopyFrom /
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
 * two loaders queue (or, under directpath.mode = always, RowExclusive when
 * that lock is taken: the load runs beside the other writers, admission.c); the executor state is built as core's CopyFrom builds
 * it, and its loop is followed: ON_ERROR ignore and REJECT_LIMIT (17+,
 * 18), the WHERE filter, progress in pg_stat_progress_copy, the error
 * context line "COPY t, line N", statement-level triggers.
 *
 * Our own options (REJECTS_TABLE, ON_CONFLICT: copyopts.c) are taken out
 * of the option list before core sees it; they imply the direct path.
 *
 * The load reads COPY's input position through a DPInputLine this file
 * owns (the current line number and text, which queued rows remember) and
 * never writes it; while a queued row's deferred work runs, the load's
 * error line names it, and this file's error context reports that line in
 * place of the one being read, so errors name the right line.
 * A COPY left to core after admission considered it gets its row count
 * into last_statement() when core is done.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "admission/admission.h"
#include "heap/heap.h"
#include "input/input.h"
#include "load/load.h"
#include "parallel/parallel.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/copy.h"
#include "commands/defrem.h"
#include "commands/trigger.h"
#include "common/report.h"
#include "common/settings.h"
#include "executor/execPartition.h"
#include "foreign/fdwapi.h"
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
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

static ProcessUtility_hook_type prev_process_utility = NULL;

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

/*
 * COPY FREEZE's own rules, with core's messages; and ON_CONFLICT 'update''s
 * (its updates after the load must meet rows this command did not freeze).
 */
static void
check_copy_freeze(Relation rel, bool freeze_allowed, bool conflict_update)
{
	if (conflict_update)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY FREEZE cannot be used with ON_CONFLICT 'update'")));
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot perform COPY FREEZE on a partitioned table")));
	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot perform COPY FREEZE on a foreign table")));
	if (!freeze_allowed)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot perform COPY FREEZE because of prior transaction activity")));
	if (!dp_storage_new_in_subxact(rel))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot perform COPY FREEZE because the table was not created or truncated in the current subtransaction")));
}

/*
 * The executor state core's CopyFrom builds: range table, result relation,
 * a ModifyTableState for routing and transition capture, the WHERE qual.
 * Also begins the AFTER trigger query.
 */
static ModifyTableState *
begin_executor(CopyFromState cstate, Relation rel, EState *estate)
{
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	ModifyTableState *mtstate;

	DP_INIT_COPY_RANGE_TABLE(estate, cstate);
	ExecInitResultRelation(estate, rri, 1);
	DP_CHECK_VALID_INSERT_REL(rri);
	mtstate = dp_insert_state(estate, rri);

	AfterTriggerBeginQuery();
	cstate->transition_capture = mtstate->mt_transition_capture =
		MakeTransitionCaptureState(rel->trigdesc, RelationGetRelid(rel), CMD_INSERT);
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		mtstate->mt_partition_tuple_routing =
			ExecSetupPartitionTupleRouting(estate, rel);
	/* a foreign table targeted itself: its wrapper's insert, as CopyFrom */
	if (rri->ri_FdwRoutine != NULL)
	{
		rri->ri_BatchSize = rri->ri_FdwRoutine->GetForeignModifyBatchSize ?
			rri->ri_FdwRoutine->GetForeignModifyBatchSize(rri) : 1;
		if (rri->ri_FdwRoutine->BeginForeignInsert != NULL)
			rri->ri_FdwRoutine->BeginForeignInsert(mtstate, rri);
	}
	if (cstate->whereClause)
		cstate->qualexpr = ExecInitQual(castNode(List, cstate->whereClause),
										&mtstate->ps);
	return mtstate;
}

/* AFTER STATEMENT triggers, then core's CopyFrom cleanup. */
static void
end_executor(CopyFromState cstate, ModifyTableState *mtstate, EState *estate)
{
	ExecASInsertTriggers(estate, mtstate->rootResultRelInfo,
						 cstate->transition_capture);
	AfterTriggerEndQuery(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	if (mtstate->mt_partition_tuple_routing)
		ExecCleanupTupleRouting(mtstate, mtstate->mt_partition_tuple_routing);
	if (mtstate->rootResultRelInfo->ri_FdwRoutine != NULL &&
		mtstate->rootResultRelInfo->ri_FdwRoutine->EndForeignInsert != NULL)
		mtstate->rootResultRelInfo->ri_FdwRoutine->EndForeignInsert(estate,
																 mtstate->rootResultRelInfo);
	ExecCloseResultRelations(estate);
	ExecCloseRangeTableRelations(estate);
	FreeExecutorState(estate);
}

/*
 * The input read by the row former (rowform.c): chunks of whole lines
 * from the chunker, their rows formed one by one.
 */
typedef struct DPFormedInput
{
	DPChunker  *chunker;
	DPRowFormer *rf;
	char	   *chunk;			/* the chunk being formed, or NULL */
} DPFormedInput;

/* Bytes of a serial COPY's chunk. */
#define DP_SERIAL_CHUNK		(256 * 1024)

/* The next row of a formed input; false at the end. */
static bool
next_formed(DPFormedInput *in, EState *estate, TupleTableSlot *slot)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);
	MemoryContext oldcontext = CurrentMemoryContext;

	for (;;)
	{
		DPChunkHeader h;
		Size		len;
		bool		more = false;

		if (in->chunk)
		{
			MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
			more = dp_rowform_next(in->rf, econtext, slot->tts_values,
								   slot->tts_isnull);
			MemoryContextSwitchTo(oldcontext);
			if (more)
				return true;
			pfree(in->chunk);
		}
		in->chunk = dp_chunker_next(in->chunker, DP_SERIAL_CHUNK, &len);
		if (in->chunk == NULL)
			return false;
		pgstat_progress_update_param(PROGRESS_COPY_BYTES_PROCESSED,
									 dp_chunker_consumed(in->chunker));
		memcpy(&h, in->chunk, sizeof(h));
		dp_rowform_chunk(in->rf, in->chunk + sizeof(h), len - sizeof(h), &h);
	}
}

/*
 * Core's CopyFrom row loop: read (core's reader, or the row former when
 * 'formed'), skip (ON_ERROR ignore), filter (WHERE), load; progress in
 * pg_stat_progress_copy.  Returns the rows loaded.
 */
static uint64
read_rows(CopyFromState cstate, EState *estate, TupleTableSlot *slot,
		  DPLoad *load, DPRejects *rejects, DPFormedInput *formed)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);
	MemoryContext oldcontext = CurrentMemoryContext;
	uint64		processed = 0;
	uint64		excluded = 0;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		ResetPerTupleExprContext(estate);
		ExecClearTuple(slot);
		if (formed ? !next_formed(formed, estate, slot) :
			!next_row(cstate, estate, slot, rejects))
			break;
		if (dp_copy_row_skipped(cstate))
			continue;
		ExecStoreVirtualTuple(slot);
		slot->tts_tableOid = RelationGetRelid(cstate->rel);

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
	return processed;
}

/*
 * With PARALLEL(n), the rows are parsed by parallel workers and the leader
 * (parcopy.c) when the COPY allows, every row's work done by the end;
 * false (the reason noted in the load's report) leaves them to read_rows.  'exprs' are the defaults and WHERE
 * clause a worker would evaluate.
 */
static bool
copy_in_parallel(CopyFromState cstate, ModifyTableState *mtstate,
				 DPLoad *load, const DPAdmission *a, DPCopyOptions *opts,
				 CopyStmt *stmt, Node *where, List *exprs, uint64 *processed)
{
	if (a->parallel <= 0)
		return false;
	if (a->beside)
		dp_load_note_parallel(load, 0,
							  "it loads beside other writers of the table");
	else if (opts->rejects_table)
		dp_load_note_parallel(load, 0, "the COPY has a rejects table");
	else if (!dp_expr_parallel_safe((Node *) exprs))
		dp_load_note_parallel(load, 0,
							  "a column default or the WHERE clause is not parallel safe");
	else
		return dp_parallel_copy(load, cstate, mtstate, where, stmt->attlist,
								opts->core_options, a->parallel, processed);
	return false;
}

/* The NOTICEs of rows not loaded: ON_ERROR's, ON_CONFLICT's, rejects. */
static void
report_skipped(CopyFromState cstate, DPCopyOptions *opts, DPLoad *load,
			   DPRejects *rejects)
{
	dp_copy_report_skipped(cstate);
	if (opts->on_conflict && dp_load_deleted(load) > 0)
		ereport(NOTICE,
				(errmsg("%llu rows were skipped: their key was in the table already, or in an earlier row",
						(unsigned long long) dp_load_deleted(load))));
	if (rejects && dp_rejects_count(rejects) > 0)
		ereport(NOTICE,
				(errmsg("%llu rows were rejected into %s",
						(unsigned long long) dp_rejects_count(rejects),
						opts->rejects_table)));
}

/*
 * A serial COPY's error context: the line of the row whose deferred work
 * is running (the load's error line), else the reader's own context,
 * core's or the row former's.
 */
typedef struct DPCopyErrorContext
{
	CopyFromState cstate;
	DPLoad	   *load;
	void		(*reader) (void *arg);
	void	   *reader_arg;
} DPCopyErrorContext;

static void
copy_error_callback(void *arg)
{
	DPCopyErrorContext *c = arg;

	if (DP_COPY_RELNAME_ONLY(c->cstate) ||
		!dp_load_error_context(c->load, c->cstate->cur_relname, 0))
		c->reader(c->reader_arg);
}

/* A serial COPY's rows read (by 'rf', or core's reader) into the load. */
static uint64
read_serially(CopyFromState cstate, EState *estate, TupleTableSlot *slot,
			  DPLoad *load, DPRejects *rejects, DPRowFormer *rf)
{
	DPFormedInput formed = {NULL, rf, NULL};
	DPCopyErrorContext context = {cstate, load, CopyFromErrorCallback, cstate};
	ErrorContextCallback errcallback;
	uint64		processed;

	if (rf && !rejects)
	{
		formed.chunker = dp_chunker_begin(cstate);
		context.reader = dp_rowform_error_callback;
		context.reader_arg = rf;
	}
	errcallback.callback = copy_error_callback;
	errcallback.arg = (void *) &context;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	processed = read_rows(cstate, estate, slot, load, rejects,
						  formed.chunker ? &formed : NULL);
	/* the last batch's errors still name their input lines */
	dp_load_end_rows(load);
	error_context_stack = errcallback.previous;
	return processed;
}

/*
 * Core's CopyFrom, with the rows going to a direct-path load; 'rf' the row
 * former that reads a serial COPY's input, or NULL for core's reader.
 */
static uint64
copy_rows(CopyFromState cstate, Relation rel, const DPAdmission *a,
		  DPCopyOptions *opts, CopyStmt *stmt, Node *where, List *exprs,
		  DPRowFormer *rf)
{
	DPInputLine input = {&cstate->cur_lineno, &cstate->line_buf_valid,
	&cstate->line_buf};
	EState	   *estate = CreateExecutorState();
	DPRejects  *rejects = NULL;
	ModifyTableState *mtstate;
	TupleTableSlot *slot;
	DPLoad	   *load;
	uint64		processed;
	bool		parallel;

	if (cstate->opts.freeze)
		check_copy_freeze(rel, a->freeze_allowed, opts->conflict_update);
	mtstate = begin_executor(cstate, rel, estate);
	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsVirtual);
	ExecBSInsertTriggers(estate, mtstate->rootResultRelInfo);
	if (opts->rejects_table)
		rejects = dp_rejects_open(opts->rejects_table, opts->max_rejects, rel);
	load = dp_load_begin("COPY", estate, mtstate, a->hinted, a->freeze_allowed,
						 NULL, &input, rejects);
	if (a->beside)
		dp_load_beside(load);
	if (opts->on_conflict)
	{
		dp_copy_resolve_arbiters(opts, rel, cstate->attnumlist);
		dp_load_on_conflict(load, opts->arbiters, opts->update_sql);
	}

	parallel = copy_in_parallel(cstate, mtstate, load, a, opts, stmt, where,
								exprs, &processed);
	if (!parallel)
		processed = read_serially(cstate, estate, slot, load, rejects, rf);
	/* an index build's errors (a duplicate) belong to no one line */
	dp_load_finish(load);
	/* the rows read, less those not loaded (a parallel load counted those) */
	if (!parallel)
		processed -= dp_load_deleted(load);

	report_skipped(cstate, opts, load, rejects);
	end_executor(cstate, mtstate, estate);
	return processed;
}

/* A COPY that admission considered goes to core: say why, for the record. */
static uint64
report_normal(const DPAdmission *a)
{
	DPReport	r;

	dp_report_init(&r);
	dp_report_normal(&r, a->hinted, "COPY", a->reason);
	return dp_report_publish(&r);
}

/*
 * DoCopy's range table, WHERE clause and permission checks.  Returns the
 * WHERE clause (or NULL) and the column numbers COPY fills.
 */
static Node *
docopy_checks(ParseState *pstate, CopyStmt *stmt, Relation rel,
			  List **attnums)
{
	ParseNamespaceItem *nsitem;
	DPPermInfo *perminfo;
	Node	   *where = NULL;
	ListCell   *lc;

	nsitem = addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock,
										   NULL, false, false);
	perminfo = DP_NSITEM_PERMS(nsitem);
	perminfo->requiredPerms = ACL_INSERT;
	if (stmt->whereClause)
		where = transform_where(pstate, nsitem, rel, stmt->whereClause);
	*attnums = CopyGetAttnums(RelationGetDescr(rel), rel, stmt->attlist);
	foreach(lc, *attnums)
		perminfo->insertedCols = bms_add_member(perminfo->insertedCols,
												lfirst_int(lc) - FirstLowInvalidHeapAttributeNumber);
	DP_CHECK_PERMISSIONS(pstate, perminfo);
	if (XactReadOnly && !rel->rd_islocaltemp)
		PreventCommandIfReadOnly("COPY FROM");
	return where;
}

/*
 * The row former for a serial text or CSV COPY, or NULL (core's reader):
 * directpath.copy_row_former off, a rejects table (its rows are read one
 * by one in subtransactions), or an option the former does not reproduce.
 * The reason is kept for directpath.last_copy_input().
 */
static DPRowFormer *
row_former(CopyFromState cstate, ParseState *pstate, CopyStmt *stmt,
		   DPCopyOptions *opts)
{
	const char *why;

	if (!dp_copy_row_former)
		why = "directpath.copy_row_former is off";
	else if (opts->rejects_table)
		why = "it has a rejects table";
	else
		why = dp_rowform_refusal(cstate);
	dp_input_note_reader(why);
	return why ? NULL : dp_rowform_begin(cstate, pstate, stmt->attlist,
										 opts->core_options);
}

/*
 * Run a COPY FROM through the direct path if admission admits it; false
 * leaves the statement to core, after recording in *report_id the
 * last_statement() entry of a COPY that admission refused.
 */
static bool
copy_utility(uint64 *report_id, PlannedStmt *pstmt, const char *queryString,
			 QueryEnvironment *queryEnv, QueryCompletion *qc)
{
	CopyStmt   *stmt = (CopyStmt *) pstmt->utilityStmt;
	DPCopyOptions opts;
	DPAdmission a;
	Relation	rel;
	ParseState *pstate;
	Node	   *where;
	List	   *attnums;
	List	   *exprs;
	CopyFromState cstate;
	uint64		processed;

	if (!stmt->is_from || stmt->relation == NULL)
		return false;
	dp_copy_split_options(stmt->options, &opts);
	switch (dp_admit_copy(stmt, queryString, pstmt->stmt_location,
						  pstmt->stmt_len, dp_copy_own_option(&opts), &a, &rel))
	{
		case DP_COPY_NOT_WANTED:
			return false;
		case DP_COPY_CORE:
			return dp_copy_leave_to_core(&opts, NULL);
		case DP_COPY_NORMAL:
			*report_id = report_normal(&a);
			return dp_copy_leave_to_core(&opts, a.reason);
		case DP_COPY_DIRECT:
			break;
	}

	pstate = make_parsestate(NULL);
	pstate->p_sourcetext = queryString;
	pstate->p_queryEnv = queryEnv;
	where = docopy_checks(pstate, stmt, rel, &attnums);

	/* functions COPY evaluates per row: defaults and the WHERE clause */
	exprs = default_exprs(rel, attnums);
	if (where)
		exprs = lappend(exprs, where);
	if (!dp_admit_copy_exprs((Node *) exprs, &a))
	{
		*report_id = report_normal(&a);
		table_close(rel, NoLock);
		free_parsestate(pstate);
		return dp_copy_leave_to_core(&opts, a.reason);
	}

	cstate = BeginCopyFrom(pstate, rel, where, stmt->filename,
						   stmt->is_program, NULL, stmt->attlist,
						   opts.core_options);
	dp_input_reset_counts();
	dp_fastin_install(cstate);
	processed = copy_rows(cstate, rel, &a, &opts, stmt, where, exprs,
						  row_former(cstate, pstate, stmt, &opts));
	EndCopyFrom(cstate);

	table_close(rel, NoLock);
	free_parsestate(pstate);
	if (qc)
		SetQueryCompletion(qc, CMDTAG_COPY, processed);
	return true;
}

/* COPY FROM comes here first. */
static void
dp_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	uint64		report_id = 0;

	if (IsA(pstmt->utilityStmt, CopyStmt) &&
		copy_utility(&report_id, pstmt, queryString, queryEnv, qc))
		return;

	dp_next_process_utility(prev_process_utility, pstmt, queryString,
							readOnlyTree, context, params, queryEnv, dest, qc);

	/* a COPY we left to core: its row count, for last_statement() */
	if (report_id != 0 && qc != NULL)
		dp_report_rows(report_id, qc->nprocessed);
}

void
dp_copy_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = dp_process_utility;
}
