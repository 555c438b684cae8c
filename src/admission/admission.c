/*-------------------------------------------------------------------------
 *
 * admission.c
 *	  Whether an INSERT or a COPY FROM takes the direct path: one decision,
 *	  made here for both, with the lock and the freezing rule that go with
 *	  it.  plan.c and copy.c ask; the rules themselves are eligibility.c's.
 *
 * A statement is *wanted* when it carries /\*+ APPEND *\/ (hint.c), or when
 * directpath.mode = always and it is not a single-row VALUES INSERT (such a
 * statement can never fill a page, and the strong lock would only
 * serialize it); NOAPPEND and mode = off refuse.  The DELETE and INSERT
 * that REFRESH MATERIALIZED VIEW CONCURRENTLY runs on the view have no
 * text of their own to carry a hint: they take the REFRESH's
 * (statement_hint).  A wanted statement is
 * *admitted* when the rules find nothing against it and the target is held
 * in ShareRowExclusiveLock.  The answer is a DPAdmission: direct or not
 * (direct means the lock is held), why not, whether freezing is allowed by
 * the statement (each relation's storage is judged later, leaf.c).
 *
 * The lock.  The parser has already locked the target RowExclusive.  The
 * direct path needs ShareRowExclusiveLock (it conflicts with every other
 * writer and with itself, but not with readers).  Upgrading late would let
 * two loaders deadlock: each holds RowExclusive and waits for the other's.
 * So an INSERT takes the strong lock as soon as it is analysed
 * (dp_admit_parse) and records it as the RTE's rellockmode, so that a
 * cached plan takes it directly; a COPY takes it before anything else.  If
 * the lock is not free at once, this statement's RowExclusive lock is
 * given back before waiting, so that two loaders queue; afterwards the
 * table's row type is verified unchanged.  If the transaction held a lock
 * on the table before this statement, ours cannot be given back and
 * waiting could deadlock: then the lock is taken only if it is free at
 * once, else the statement uses the normal path.  A COPY or an INSERT
 * (not ON CONFLICT) that directpath.mode = always sends (no hint) and that
 * finds the strong lock taken loads beside the other writers instead
 * (directpath.concurrent_loads): it keeps to RowExclusiveLock, as the
 * plain statement, so that sessions sending batches into one table run at
 * once, and the load writes through shared buffers (DPAdmission.beside;
 * heap/shared.c).  An INSERT asks at parse analysis only whether the lock
 * is free, and at plan time again (a cached plan records which it took).
 * Users without INSERT privilege take no strong lock at all: they get the
 * plain path's permission error.  Nor does a foreign table targeted directly: its rows
 * go to its server (remote/shard.c), and core's RowExclusive is enough.
 *
 * Small statements.  An INSERT of VALUES whose size is known before
 * execution (every value of fixed length or constant) and below
 * directpath.min_bytes is refused at once, without the strong lock; other
 * small statements are found out by the load (load.c) and finish on the
 * normal path.
 *
 * Freezing (COPY FREEZE's rules, PostgreSQL 14+).  Frozen rows are visible
 * to every snapshot, so freezing needs: nothing in the statement reads the
 * target or calls a function that is not built in (eligibility.c), no
 * snapshot registered before the statement and no ready portal
 * (dp_admit_no_prior_activity, which must run before the executor
 * registers the statement's own snapshot), and storage new in the current
 * subtransaction (leaf.c, per relation).
 *
 *-------------------------------------------------------------------------
 */
#include "admission/admission.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/copy.h"
#include "commands/matview.h"
#include "common/report.h"
#include "common/settings.h"
#include "miscadmin.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#define CONFLICTING_LOCK \
	"another session holds a conflicting lock on the table, and waiting for it here could deadlock"

/*
 * REFRESH MATERIALIZED VIEW CONCURRENTLY's own DELETE and INSERT on the view
 * (matview.c:refresh_by_match_merge runs them through SPI, with no hint in
 * their text) take the REFRESH's hint: its DPHint while it runs, else -1.
 */
static int	refresh_hint = -1;

/*
 * The hint of the statement whose text is [location, location + len) of
 * 'source' and whose target is 'target': its own, but the REFRESH's for a
 * materialized view under incremental maintenance, which core allows only
 * for that refresh's statements.
 */
static DPHint
statement_hint(const char *source, int location, int len, int *parallel,
			   RangeTblEntry *target)
{
	if (refresh_hint >= 0 && target->relkind == RELKIND_MATVIEW &&
		MatViewIncrementalMaintenanceIsEnabled())
	{
		if (parallel)
			*parallel = 0;
		return (DPHint) refresh_hint;
	}
	return dp_find_hint(source, location, len, parallel);
}

/* The hint and the mode: is the statement a candidate at all? */
static DPHint
wanted(DPHint hint, bool single_row)
{
	if (dp_mode == DP_MODE_OFF || hint == DP_HINT_NOAPPEND)
		return DP_HINT_NOAPPEND;
	if (hint == DP_HINT_APPEND)
		return DP_HINT_APPEND;
	if (dp_mode == DP_MODE_ALWAYS && !single_row)
		return DP_HINT_NONE;
	return DP_HINT_NOAPPEND;
}

/* May the current user insert into the table at all (any column)? */
static bool
may_insert(Oid relid)
{
	Oid			user = GetUserId();

	return pg_class_aclcheck(relid, user, ACL_INSERT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, user, ACL_INSERT, ACLMASK_ANY) == ACLCHECK_OK;
}

/* Rules of the relation (and its partitions with 'recurse'), or NULL. */
static const char *
relation_rules(Oid relid, bool recurse)
{
	Relation	rel = relation_open(relid, NoLock);
	const char *why = dp_relation_ineligible(rel, recurse);

	relation_close(rel, NoLock);
	return why;
}

/*
 * An INSERT whose VALUES are known to add up to less than min_bytes would
 * only be held and then inserted normally: refuse it before it costs the
 * strong lock.
 */
static const char *
values_too_small(Query *query, Oid relid)
{
	Relation	rel;
	int64		bytes;

	if (dp_min_bytes <= 0)
		return NULL;
	rel = relation_open(relid, NoLock);
	bytes = dp_values_max_bytes(query, rel);
	relation_close(rel, NoLock);
	if (bytes < 0 || bytes >= dp_min_bytes)
		return NULL;
	return psprintf("the statement's VALUES add up to less than directpath.min_bytes (%d bytes)",
					dp_min_bytes);
}

/*
 * Take ShareRowExclusiveLock, waiting if need be (see the file header);
 * false when waiting could deadlock and nothing was taken.
 */
static bool
lock_waiting(Oid relid)
{
	Relation	rel;
	TupleDesc	before;

	if (ConditionalLockRelationOid(relid, ShareRowExclusiveLock))
		return true;

	UnlockRelationOid(relid, RowExclusiveLock);
	if (CheckRelationOidLockedByMe(relid, RowExclusiveLock, true))
	{
		/* held since an earlier statement of this transaction */
		LockRelationOid(relid, RowExclusiveLock);
		return false;
	}

	rel = relation_open(relid, NoLock);
	before = CreateTupleDescCopyConstr(RelationGetDescr(rel));
	relation_close(rel, NoLock);

	LockRelationOid(relid, ShareRowExclusiveLock);
	LockRelationOid(relid, RowExclusiveLock);

	rel = try_relation_open(relid, NoLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u was dropped while the direct path waited for its lock",
						relid)));
	if (!equalTupleDescs(before, RelationGetDescr(rel)))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("table \"%s\" was altered while the direct path waited for its lock",
						RelationGetRelationName(rel)),
				 errhint("Retry the statement.")));
	relation_close(rel, NoLock);
	FreeTupleDesc(before);
	return true;
}

/*
 * May a load whose table's ShareRowExclusiveLock is taken load beside the
 * other writers instead of waiting (the file header)?  Sent to the direct
 * path by directpath.mode = always, not by a hint ('hinted') or our own
 * options; a plain table that another session can write (not temporary)
 * and whose changes are not decoded (the TOAST barrier of wal.c needs the
 * whole table's writers).  The caller holds a lock on it.
 */
static bool
may_load_beside(Oid relid, bool hinted, const char *own_option)
{
	Relation	rel;
	bool		ok;

	if (!dp_concurrent_loads || hinted || own_option != NULL)
		return false;
	rel = relation_open(relid, NoLock);
	ok = rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relpersistence != RELPERSISTENCE_TEMP &&
		!RelationIsLogicallyLogged(rel);
	relation_close(rel, NoLock);
	return ok;
}

/* The same for an INSERT: not ON CONFLICT, whose probes need the table alone. */
static bool
insert_may_load_beside(Query *query, Oid relid, bool hinted)
{
	return query->commandType == CMD_INSERT && query->onConflict == NULL &&
		may_load_beside(relid, hinted, NULL);
}

/*
 * Could a MERGE take the direct path?  It needs a WHEN NOT MATCHED THEN
 * INSERT action; one with a DELETE action is refused at plan time wherever
 * the target has a unique index (existing.c), so it takes no early lock.
 */
static bool
merge_may_be_direct(Query *query)
{
	bool		insert = false;
	ListCell   *lc;

	foreach(lc, query->mergeActionList)
	{
		CmdType		cmd = lfirst_node(MergeAction, lc)->commandType;

		if (cmd == CMD_DELETE)
			return false;
		insert |= cmd == CMD_INSERT;
	}
	return insert;
}

void
dp_admit_parse(const char *source, Query *query)
{
	RangeTblEntry *rte;
	DPHint		hint;

	if (dp_mode == DP_MODE_OFF || query->resultRelation <= 0 ||
		(query->commandType != CMD_INSERT &&
		 !(query->commandType == CMD_MERGE && merge_may_be_direct(query))))
		return;
	rte = rt_fetch(query->resultRelation, query->rtable);
	hint = wanted(statement_hint(source, query->stmt_location, query->stmt_len,
								 NULL, rte),
				  dp_query_is_single_row(query));
	if (hint == DP_HINT_NOAPPEND)
		return;
	if (rte->rellockmode != RowExclusiveLock ||
		relation_rules(rte->relid, false) != NULL ||
		values_too_small(query, rte->relid) != NULL ||
		!may_insert(rte->relid))
		return;
	/* a foreign table's rows go to its server: nothing to lock here */
	if (rte->relkind == RELKIND_FOREIGN_TABLE)
		return;
	/* beside other writers: the strong lock only if it is free at once */
	if (insert_may_load_beside(query, rte->relid, hint == DP_HINT_APPEND))
	{
		if (ConditionalLockRelationOid(rte->relid, ShareRowExclusiveLock))
			rte->rellockmode = ShareRowExclusiveLock;
		return;
	}
	if (lock_waiting(rte->relid))
		rte->rellockmode = ShareRowExclusiveLock;
}

bool
dp_admit_insert_wanted(Query *parse, const char *source, bool *hinted,
					   int *parallel)
{
	DPHint		w;
	RangeTblEntry *target;

	*parallel = 0;
	if (dp_mode == DP_MODE_OFF || parse->resultRelation <= 0)
		return false;
	target = rt_fetch(parse->resultRelation, parse->rtable);
	/* UPDATE and DELETE: hinted, or large enough under mode = always */
	if (parse->commandType == CMD_UPDATE || parse->commandType == CMD_DELETE)
	{
		w = statement_hint(source, parse->stmt_location, parse->stmt_len,
						   NULL, target);
		*hinted = w == DP_HINT_APPEND;
		return *hinted || (w == DP_HINT_NONE && dp_mode == DP_MODE_ALWAYS &&
						   dp_bulk_dml_min_rows >= 0);
	}
	/* a MERGE is judged too, so that a hinted one says why it is refused */
	if (parse->commandType != CMD_INSERT && parse->commandType != CMD_MERGE)
		return false;
	w = wanted(statement_hint(source, parse->stmt_location, parse->stmt_len,
							  parallel, target),
			   dp_query_is_single_row(parse));
	*hinted = w == DP_HINT_APPEND;
	return w != DP_HINT_NOAPPEND;
}

bool
dp_admit_born_wanted(const char *source, int location, int len, bool *hinted,
					 int *parallel)
{
	DPHint		w = wanted(dp_find_hint(source, location, len, parallel), false);

	*hinted = w == DP_HINT_APPEND;
	return w != DP_HINT_NOAPPEND;
}

int
dp_admit_refresh_concurrently(const char *source, int location, int len)
{
	int			saved = refresh_hint;

	refresh_hint = dp_find_hint(source, location, len, NULL);
	return saved;
}

void
dp_admit_refresh_done(int saved)
{
	refresh_hint = saved;
}

/*
 * The strong lock, at plan time, for an INSERT whose parse analysis did not
 * take it (an updatable view's base table is only known after rewriting;
 * the transaction had already locked the table): only if that needs no
 * wait.  The plan records the mode, so a cached plan takes it directly.
 */
static const char *
lock_for_plan(PlannedStmt *stmt, Index rti)
{
	RangeTblEntry *rte = rt_fetch(rti, stmt->rtable);

	if (rte->rellockmode == ShareRowExclusiveLock ||
		rte->relkind == RELKIND_FOREIGN_TABLE)
		return NULL;
	if (!may_insert(rte->relid))
		return "no INSERT privilege on the table";
	if (!ConditionalLockRelationOid(rte->relid, ShareRowExclusiveLock))
		return CONFLICTING_LOCK;
	rte->rellockmode = ShareRowExclusiveLock;
	return NULL;
}

/*
 * The INSERT's target left in RowExclusiveLock by parse analysis, whose
 * strong lock is not free (insert_may_load_beside): it loads beside the
 * other writers.
 */
static bool
beside_for_plan(Query *parse, PlannedStmt *stmt, Index rti, bool hinted)
{
	RangeTblEntry *rte = rt_fetch(rti, stmt->rtable);

	if (rte->rellockmode != RowExclusiveLock ||
		rte->relkind == RELKIND_FOREIGN_TABLE ||
		!insert_may_load_beside(parse, rte->relid, hinted) ||
		!may_insert(rte->relid))
		return false;
	if (!ConditionalLockRelationOid(rte->relid, ShareRowExclusiveLock))
		return true;
	rte->rellockmode = ShareRowExclusiveLock;
	return false;
}

void
dp_admit_insert(Query *parse, PlannedStmt *stmt, bool hinted, DPAdmission *a)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	Index		rti;
	Oid			relid;

	memset(a, 0, sizeof(DPAdmission));
	a->hinted = hinted;
	a->reason = dp_statement_ineligible(parse, stmt, hinted);
	if (a->reason != NULL)
		return;
	/* a bulk UPDATE or DELETE keeps its statement's lock and privileges */
	if (mt->operation == CMD_UPDATE || mt->operation == CMD_DELETE)
	{
		double		rows = outerPlan(mt)->plan_rows;

		if (!hinted && rows < dp_bulk_dml_min_rows)
		{
			a->small = true;
			a->reason = dp_report_reason("expected to change %.0f rows, fewer than directpath.bulk_dml_min_rows",
										 rows);
			return;
		}
		a->reason = relation_rules(rt_fetch(linitial_int(mt->resultRelations),
											stmt->rtable)->relid, false);
		a->direct = a->reason == NULL;
		return;
	}
	rti = linitial_int(mt->resultRelations);
	relid = rt_fetch(rti, stmt->rtable)->relid;
	a->reason = values_too_small(parse, relid);
	a->small = a->reason != NULL;
	if (a->reason == NULL)
		a->reason = relation_rules(relid, true);
	if (a->reason == NULL)
		a->beside = beside_for_plan(parse, stmt, rti, hinted);
	if (a->reason == NULL && !a->beside)
		a->reason = lock_for_plan(stmt, rti);
	if (a->reason != NULL)
		return;
	a->direct = true;
	a->freeze_allowed = dp_statement_freeze_safe(parse, stmt, relid);
}

DPAdmitCopy
dp_admit_copy(CopyStmt *stmt, const char *source, int location, int len,
			  const char *own_option, DPAdmission *a, Relation *relp)
{
	DPHint		hint;
	Oid			relid;
	Relation	rel;
	bool		foreign;

	memset(a, 0, sizeof(DPAdmission));
	*relp = NULL;
	hint = dp_find_hint(source, location, len, &a->parallel);
	/* our own options (REJECTS_TABLE, ON_CONFLICT) ask for it by themselves */
	if (own_option)
	{
		if (dp_mode == DP_MODE_OFF || hint == DP_HINT_NOAPPEND)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("COPY option %s needs the direct path", own_option),
					 errdetail("The statement has /*+ NOAPPEND */ or directpath.mode is off.")));
		hint = DP_HINT_APPEND;
	}
	hint = wanted(hint, false);
	if (hint == DP_HINT_NOAPPEND)
		return DP_COPY_NOT_WANTED;
	a->hinted = hint == DP_HINT_APPEND;

	/* DoCopy's first checks, whose errors are core's to raise */
	if (stmt->filename != NULL &&
		!has_privs_of_role(GetUserId(), stmt->is_program ?
						   ROLE_PG_EXECUTE_SERVER_PROGRAM :
						   ROLE_PG_READ_SERVER_FILES))
		return DP_COPY_CORE;
	relid = RangeVarGetRelid(stmt->relation, AccessShareLock, true);
	if (!OidIsValid(relid) ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED ||
		!may_insert(relid))
		return DP_COPY_CORE;

	/* the rules; then the strong lock; then the rules again under it */
	a->reason = relation_rules(relid, true);
	foreign = get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE;
	if (a->reason == NULL && !foreign &&
		!ConditionalLockRelationOid(relid, ShareRowExclusiveLock))
	{
		if (may_load_beside(relid, a->hinted, own_option))
			a->beside = true;
		else if (CheckRelationOidLockedByMe(relid, RowExclusiveLock, true))
			a->reason = CONFLICTING_LOCK;
	}
	if (a->reason != NULL)
		return DP_COPY_NORMAL;
	/* a foreign table's rows go to its server: core's lock is enough */
	LockRelationOid(relid, foreign || a->beside ?
					RowExclusiveLock : ShareRowExclusiveLock);
	rel = table_open(relid, NoLock);
	a->reason = dp_relation_ineligible(rel, true);
	if (a->reason != NULL)
	{
		table_close(rel, NoLock);
		return DP_COPY_NORMAL;
	}
	*relp = rel;
	return DP_COPY_DIRECT;
}

bool
dp_admit_copy_exprs(Node *exprs, DPAdmission *a)
{
	a->reason = dp_expr_ineligible(exprs);
	if (a->reason != NULL)
		return false;
	a->direct = true;
	a->freeze_allowed = dp_admit_no_prior_activity() &&
		!dp_expr_has_user_function(exprs);
	return true;
}

/*
 * COPY FREEZE's "no prior transaction activity" test (core's CopyFrom):
 * no snapshot registered before this statement and no ready portal.
 * ThereAreNoReadyPortals() stops its scan of the portal table at the first
 * ready portal without ending the scan; core raises an error right after,
 * and the abort discards the scan quietly.  We go on instead, so the scan
 * would be reported as leaked at commit.  It therefore runs inside an
 * internal subtransaction whose rollback ends the scan
 * (AtEOSubXact_HashTables).  The subtransaction assigns no XID and leaves
 * nothing behind; it is entered only when no snapshot is registered, since
 * a registered one already answers the question.
 */
bool
dp_admit_no_prior_activity(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		none;

	InvalidateCatalogSnapshot();
	if (!ThereAreNoPriorRegisteredSnapshots())
		return false;
	BeginInternalSubTransaction(NULL);
	none = ThereAreNoReadyPortals();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return none;
}
