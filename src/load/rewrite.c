/*-------------------------------------------------------------------------
 *
 * rewrite.c
 *	  A hinted UPDATE or DELETE made in bulk: the rows core's plan finds are
 *	  kept, sorted by the TID of the version each one changes, and applied
 *	  page by page (versions.c, oldpages.c); the rows that cannot be go
 *	  through the statement's own ModifyTable node afterwards (upsert.c).
 *
 * The DirectPath node (exec.c) pulls the ModifyTable's subplan rows - an
 * UPDATE's new values of the assigned columns, a DELETE's nothing, both
 * with the target row's ctid and the junk columns EvalPlanQual needs - and
 * hands each to dp_rewrite_row.  The plan reads the table as its snapshot
 * sees it, as core's does: a command never sees its own changes, so rows
 * may be changed while the plan still runs.  The bulk changes:
 *
 *	1. rows a scan of the target gives in TID order are changed as they
 *	   arrive; the others are kept and sorted by TID (then by arrival), so
 *	   every old page is visited once and the rows of one target row are
 *	   together, the first to arrive first (core changes a row for the
 *	   first plan row that reaches it and skips the others:
 *	   TM_SelfModified);
 *	2. versions.c takes ExclusiveLock if it can at once (no other session
 *	   then writes or locks rows of the table until the end of the
 *	   transaction), evaluates each row on its pinned old page - an UPDATE
 *	   projects its new version with core's own projection and checks NOT
 *	   NULL and CHECK constraints; the new versions go to new pages - and
 *	   changes the old versions' headers one page at a time;
 *	3. at dp_rewrite_finish, the rows it could not take (a row locked or
 *	   changed by another transaction since the snapshot, or every row
 *	   when the lock was not free) run through core's ModifyTable node,
 *	   which does for them what a plain UPDATE or DELETE does
 *	   (EvalPlanQual included).
 *
 * A partitioned table or an inheritance tree is changed leaf by leaf: each
 * plan row goes, by its tableoid junk column, to its leaf's own bulk
 * changes (upsert.c), so steps 1 and 2 happen per leaf - its own sort or
 * stream, its own lock - and step 3 after every leaf's run.
 *
 * RETURNING rows are projected as each row is changed (versions.c), so they
 * come in the order rows are changed - a scan's order when the rows
 * stream, TID order when sorted - then those of the rows core's node
 * takes; the DirectPath node returns them once the statement is done.
 *
 * A statement refused at execution (BEFORE ROW triggers, SERIALIZABLE,
 * ...: bulkrules.c) keeps nothing: the DirectPath node (exec.c) lets core's
 * ModifyTable node run it as the plain statement, and the report says why.
 *
 * Why the outcome is core's: the same plan finds the same rows with the
 * same values; the headers written are heap_update's and heap_delete's;
 * an UPDATE assigns no column of a unique index (existing.c), so no
 * uniqueness check can depend on the order the rows are changed in.  What
 * differs: which failing row's error comes first (TID order here, plan
 * order in core), and an UPDATE's new versions are never HOT (a table whose
 * fillfactor leaves room for HOT and whose SET assigns no indexed column is
 * left to core: bulkrules.c).
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "common/progress.h"
#include "common/settings.h"
#include "utils/rel.h"

struct DPRewrite
{
	ModifyTableState *mt;
	EState	   *estate;
	bool		hinted;
	DPUpsert   *upsert;
	uint64		rows_in;		/* plan rows kept */
	DPReport	report;
};

static const char *
kind_of(ModifyTableState *mt)
{
	return mt->operation == CMD_UPDATE ? "UPDATE" : "DELETE";
}

DPRewrite *
dp_rewrite_begin(EState *estate, ModifyTableState *mt, bool hinted,
				 Tuplestorestate *retstore)
{
	DPRewrite  *r = palloc0(sizeof(DPRewrite));
	Plan	   *subplan = outerPlan(mt->ps.plan);
	const char *why;

	Assert(mt->operation == CMD_UPDATE || mt->operation == CMD_DELETE);
	r->mt = mt;
	r->estate = estate;
	r->hinted = hinted;
	dp_report_init(&r->report);
	r->upsert = dp_upsert_begin(estate, mt, retstore, NULL);
	why = dp_upsert_refusal(r->upsert);
	if (why != NULL)
		dp_report_normal(&r->report, hinted, kind_of(mt), why);
	else
		r->report.direct = true;
	dp_progress_begin(r, RelationGetRelid(mt->rootResultRelInfo->ri_RelationDesc),
					  kind_of(mt));
	if (subplan != NULL)
		dp_progress_expect_rows(r, subplan->plan_rows);
	return r;
}

void
dp_rewrite_row(DPRewrite *r, TupleTableSlot *planSlot)
{
	dp_upsert_keep(r->upsert, NULL, planSlot, NULL);
	if (++r->rows_in % DP_PROGRESS_ROWS == 0)
		dp_progress_rows(r, r->rows_in);
}

void
dp_rewrite_finish(DPRewrite *r)
{
	dp_progress_phase(r, DP_PHASE_UPDATES, r->rows_in);
	dp_upsert_run(r->upsert);
	if (r->report.direct)
	{
		dp_upsert_describe(r->upsert, r->report.updates,
						   sizeof(r->report.updates));
		r->report.pages = dp_upsert_pages(r->upsert);
	}
	dp_upsert_end(r->upsert);
	r->upsert = NULL;
	r->report.rows = r->estate->es_processed;
	r->report.relations = r->mt->mt_nrels;
	dp_progress_describe_phases(r, r->report.phases, sizeof(r->report.phases));
	dp_report_publish(&r->report);
	dp_progress_end(r);
}

const DPReport *
dp_rewrite_report(DPRewrite *r)
{
	return &r->report;
}
