/*-------------------------------------------------------------------------
 *
 * eligibility.c
 *	  The rules: what keeps a statement or a relation off the direct path,
 *	  and how to say why.  admission.c applies them, for INSERT and COPY.
 *
 * The direct path keeps every row semantics of a plain INSERT, but it
 * writes rows in batches: a row is on disk, in the indexes and visible to
 * AFTER triggers only once its batch has been flushed.  Whatever could
 * observe that difference, or whatever the page writer cannot produce with
 * identical results, sends the statement to the normal path:
 *
 *	- what keeps ON CONFLICT and MERGE off (existing.c);
 *	- data-modifying WITH, more than one target;
 *	- targets that are not heap tables: views (INSTEAD OF triggers),
 *	  foreign tables of wrappers other than postgres_fdw (postgres_fdw's
 *	  get their rows as COPY streams, remote/shard.c), other table access
 *	  methods; temporary tables (local
 *	  buffers); system catalogs and user_catalog_table tables (logical
 *	  decoding reads those through historic snapshots, which need the
 *	  command ids that heap inserts log for them);
 *	- BEFORE ROW or INSTEAD OF ROW INSERT triggers on the target or any
 *	  partition (they may read the table and expect every earlier row);
 *	- a foreign partition whose wrapper cannot insert routed rows (the
 *	  other foreign partitions of a partitioned target get their rows
 *	  through the wrapper, batched as core batches them, load.c);
 *	- a volatile function that is not built in (it may read the table and
 *	  expect the rows inserted so far); built-in volatile functions such as
 *	  random() or clock_timestamp() cannot, except those that run queries.
 *
 * Logically logged tables (wal_level = logical) are eligible: wal.c
 * writes records that decoding reads as one INSERT per row.
 *
 * Relation checks (dp_relation_ineligible) run twice: at parse analysis,
 * before the early lock is taken, and at plan time (for COPY: before and
 * after the lock); a partition reached by routing is checked again when
 * first written (leaf.c).  Statement checks run at plan time.  Runtime
 * conditions (statement too small, freezing per relation) are decided by
 * the load.  Reasons are static strings or allocated in the caller's
 * memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "admission/admission.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "commands/matview.h"
#include "common/report.h"
#include "common/settings.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"


bool
dp_is_postgres_fdw(Relation rel)
{
	return dp_server_is_postgres_fdw(GetForeignTable(RelationGetRelid(rel))->serverid);
}

bool
dp_server_is_postgres_fdw(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);
	HeapTuple	tup;
	bool		ours = false;

	if (!OidIsValid(fdw->fdwhandler))
		return false;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fdw->fdwhandler));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);

		ours = proc->prolang == ClanguageId && !isnull &&
			strcmp(TextDatumGetCString(src), "postgres_fdw_handler") == 0;
		ReleaseSysCache(tup);
	}
	return ours;
}

/*
 * Checks of one relation, without looking at its partitions.  A foreign
 * table is acceptable as a partition reached by routing whose wrapper can
 * insert, or as the target itself if it is postgres_fdw's (its rows are
 * streamed as COPY).
 */
static const char *
check_one_relation(Relation rel, bool as_partition)
{
	const char *name = RelationGetRelationName(rel);
	TriggerDesc *trig = rel->trigdesc;

	switch (rel->rd_rel->relkind)
	{
		case RELKIND_RELATION:
		case RELKIND_PARTITIONED_TABLE:
			break;
		case RELKIND_FOREIGN_TABLE:
			/*
			 * a target of its own: its rows are streamed (remote/shard.c); the
			 * wrapper is asked nothing before it is known to be postgres_fdw
			 * (a wrapper without handler is core's error to raise, later)
			 */
			if (!as_partition && !dp_foreign_copy)
				return dp_report_reason("\"%s\" is a foreign table and directpath.foreign_copy is off",
										name);
			if (!as_partition && !dp_is_postgres_fdw(rel))
				return dp_report_reason("\"%s\" is a foreign table of another wrapper than postgres_fdw",
										name);
			if (GetFdwRoutineForRelation(rel, false)->ExecForeignInsert == NULL)
				return dp_report_reason("partition \"%s\" is a foreign table whose wrapper cannot insert",
										name);
			break;
		case RELKIND_MATVIEW:
			/* only REFRESH ... CONCURRENTLY writes one by DML, as core allows */
			if (!MatViewIncrementalMaintenanceIsEnabled())
				return dp_report_reason("\"%s\" is a materialized view", name);
			break;
		case RELKIND_VIEW:
			return dp_report_reason("\"%s\" is a view", name);
		default:
			return dp_report_reason("\"%s\" is not a table", name);
	}
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		return dp_report_reason("\"%s\" is a temporary table", name);
	if (IsCatalogRelation(rel) || RelationIsAccessibleInLogicalDecoding(rel))
		return dp_report_reason("\"%s\" is a catalog table", name);
	if (rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		return dp_report_reason("\"%s\" does not use the heap access method", name);
	if (trig && trig->trig_insert_before_row)
		return dp_report_reason("\"%s\" has a BEFORE ROW INSERT trigger", name);
	if (trig && trig->trig_insert_instead_row)
		return dp_report_reason("\"%s\" has an INSTEAD OF INSERT trigger", name);
	return NULL;
}

/*
 * Why can rows not be appended directly to this relation?  NULL if they
 * can.  With 'recurse', a partitioned table's partitions are checked too;
 * they are locked AccessShare for that, as the planner would for a read.
 */
const char *
dp_relation_ineligible(Relation rel, bool recurse)
{
	const char *r = check_one_relation(rel, false);
	List	   *children;
	ListCell   *lc;

	if (r != NULL || !recurse ||
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return r;

	children = find_all_inheritors(RelationGetRelid(rel), AccessShareLock, NULL);
	foreach(lc, children)
	{
		Oid			childid = lfirst_oid(lc);
		Relation	child;

		if (childid == RelationGetRelid(rel))
			continue;
		child = relation_open(childid, NoLock);
		r = check_one_relation(child, true);
		relation_close(child, NoLock);
		if (r != NULL)
			break;
	}
	list_free(children);
	return r;
}

/* The checks of a partition that tuple routing reached. */
const char *
dp_partition_ineligible(Relation rel)
{
	return check_one_relation(rel, true);
}

/* Built-in volatile functions that run queries of their own. */
static bool
builtin_runs_queries(Oid funcid)
{
	static const char *const names[] = {
		"query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
		"cursor_to_xml", "cursor_to_xmlschema",
		"table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema",
		"schema_to_xml", "schema_to_xmlschema", "schema_to_xml_and_xmlschema",
		"database_to_xml", "database_to_xmlschema",
		"database_to_xml_and_xmlschema", "ts_stat",
	};
	static Oid	last_funcid = InvalidOid;	/* the last answer, for nextval() */
	static bool last_found = false;
	char	   *name;
	bool		found = false;

	if (funcid == last_funcid)
		return last_found;
	name = get_func_name(funcid);
	if (name == NULL)
		return false;
	for (int i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			found = true;
	pfree(name);
	last_funcid = funcid;
	last_found = found;
	return found;
}

/*
 * Looking for a function in a query or expression tree: 'checker' decides
 * which function counts, 'found' is the first one that did.
 */
typedef struct FuncScan
{
	check_function_callback checker;
	Oid			found;
} FuncScan;

static bool
function_walker(Node *node, void *context)
{
	FuncScan   *fs = (FuncScan *) context;

	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, function_walker, context, 0);
	if (check_functions_in_node(node, fs->checker, context))
		return true;
	return expression_tree_walker(node, function_walker, context);
}

static Oid
find_function(Node *node, check_function_callback checker)
{
	FuncScan	fs = {checker, InvalidOid};

	function_walker(node, &fs);
	return fs.found;
}

/* A volatile function that may query the table being loaded. */
static bool
unsafe_function(Oid funcid, void *context)
{
	if (func_volatile(funcid) != PROVOLATILE_VOLATILE ||
		(funcid < FirstNormalObjectId && !builtin_runs_queries(funcid)))
		return false;
	((FuncScan *) context)->found = funcid;
	return true;
}

/* Any function that is not built in. */
static bool
user_function(Oid funcid, void *context)
{
	if (funcid < FirstNormalObjectId)
		return false;
	((FuncScan *) context)->found = funcid;
	return true;
}

/*
 * Why expressions evaluated per row (COPY's column defaults and WHERE
 * clause) keep a COPY off the direct path, or NULL.
 */
const char *
dp_expr_ineligible(Node *expr)
{
	Oid			func = find_function(expr, unsafe_function);

	if (OidIsValid(func))
		return dp_report_reason("volatile function %s() could observe the partly loaded table",
								get_func_name(func));
	return NULL;
}

/*
 * Does the statement insert a single row of VALUES?  Such an INSERT has an
 * empty FROM list (multi-row VALUES and INSERT ... SELECT have one entry).
 * In directpath.mode = always these are left alone: they can never fill a
 * page, and the strong lock would only serialize them.
 */
bool
dp_query_is_single_row(Query *parse)
{
	return parse->jointree == NULL || parse->jointree->fromlist == NIL;
}

/*
 * Statement-level checks, at plan time.  'parse' is the query as the planner
 * received it (before planning), 'stmt' the finished plan.
 */
const char *
dp_statement_ineligible(Query *parse, PlannedStmt *stmt, bool hinted)
{
	ModifyTable *mt;
	const char *why;
	Oid			target;

	if (!IsA(stmt->planTree, ModifyTable))
		return "the statement's plan does not end in an INSERT";
	mt = (ModifyTable *) stmt->planTree;
	if (mt->operation == CMD_MERGE)
	{
		why = dp_expr_ineligible((Node *) parse);
		return why ? why : dp_merge_ineligible(stmt, mt);
	}
	if (mt->operation == CMD_UPDATE || mt->operation == CMD_DELETE)
	{
		why = dp_expr_ineligible((Node *) parse);
		return why ? why : dp_rewrite_ineligible(stmt, mt);
	}
	if (mt->operation != CMD_INSERT)
		return "not an INSERT";
	if (list_length(mt->resultRelations) != 1)
		return "more than one target relation";
	if (stmt->hasModifyingCTE)
		return "the statement has a data-modifying WITH";
	if (!hinted && dp_query_is_single_row(parse))
		return "single-row VALUES";
	why = dp_expr_ineligible((Node *) parse);
	target = rt_fetch(linitial_int(mt->resultRelations), stmt->rtable)->relid;
	if (why == NULL && mt->onConflictAction != ONCONFLICT_NONE)
		why = dp_arbiters_ineligible(target, mt->arbiterIndexes);
	if (why == NULL && mt->onConflictAction == ONCONFLICT_UPDATE)
		why = dp_do_update_ineligible(mt, target);
	return why;
}

/* Does the expression call a function that is not built in? */
bool
dp_expr_has_user_function(Node *expr)
{
	return OidIsValid(find_function(expr, user_function));
}

/*
 * May the statement's rows be frozen?  Frozen rows are visible to every
 * snapshot, including the statement's own, so nothing in the statement may
 * read the target: the final range table holds every relation of every
 * subquery, and a second entry for any member of the target's inheritance
 * tree means a read.  A function that is not built in may read anything.
 * 'parse' is the query as the planner received it.
 */
bool
dp_statement_freeze_safe(Query *parse, PlannedStmt *stmt, Oid target)
{
	List	   *tree = find_all_inheritors(target, NoLock, NULL);
	ListCell   *lc;
	int			seen = 0;

	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && list_member_oid(tree, rte->relid))
			seen++;
	}
	list_free(tree);
	if (seen > 1)
		return false;
	return !dp_expr_has_user_function((Node *) parse);
}

/*
 * Upper bound of one value's size, or -1 when it is only known at run
 * time (a variable-length value that is not a constant).
 */
static int64
value_max_bytes(Node *expr)
{
	int16		typlen = IsA(expr, Const) ? ((Const *) expr)->constlen :
		get_typlen(exprType(expr));

	if (typlen > 0)
		return typlen + (typlen > 1 ? 7 : 0);	/* alignment padding */
	if (!IsA(expr, Const))
		return -1;
	if (((Const *) expr)->constisnull)
		return 0;
	return datumGetSize(((Const *) expr)->constvalue, false, typlen) + 7;
}

/* Upper bound of one row's tuple size, from its values; -1 if unknown. */
static int64
row_max_bytes(List *exprs, int natts)
{
	int64		bytes = MAXALIGN(SizeofHeapTupleHeader + BITMAPLEN(natts)) + 8;
	ListCell   *lc;

	foreach(lc, exprs)
	{
		Node	   *expr = lfirst(lc);
		int64		v;

		if (IsA(expr, TargetEntry))
			expr = (Node *) ((TargetEntry *) expr)->expr;
		v = value_max_bytes(expr);
		if (v < 0)
			return -1;
		bytes += v;
	}
	return bytes;
}

/*
 * Columns the statement leaves to run time, not in its target list: their
 * size bound, -1 when one may be variable-length (a default or a generated
 * value), 0 when all are NULL or fixed-length.
 */
static int64
missing_columns_max_bytes(Query *parse, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Bitmapset  *given = NULL;
	ListCell   *lc;
	int64		bytes = 0;

	foreach(lc, parse->targetList)
		given = bms_add_member(given, lfirst_node(TargetEntry, lc)->resno);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || bms_is_member(i + 1, given))
			continue;
		if (att->attlen > 0)
			bytes += att->attlen + 7;
		else if (att->atthasdef || att->attgenerated)
			return -1;
	}
	return bytes;
}

/*
 * An upper bound of the bytes an INSERT's rows take when they are all known
 * before execution: VALUES (one row or a list) whose values have a fixed
 * length or are constants.  -1 when the rows are only known at run time.
 * 'rel' is the target, whose unlisted columns count too.
 */
int64
dp_values_max_bytes(Query *parse, Relation rel)
{
	List	   *fromlist = parse->jointree ? parse->jointree->fromlist : NIL;
	int			natts = RelationGetDescr(rel)->natts;
	int64		missing = missing_columns_max_bytes(parse, rel);
	int64		total = 0;
	RangeTblEntry *rte;
	ListCell   *lc;

	if (missing < 0 || parse->cteList != NIL || parse->setOperations != NULL)
		return -1;
	if (list_length(fromlist) == 1 && IsA(linitial(fromlist), RangeTblRef))
		rte = rt_fetch(linitial_node(RangeTblRef, fromlist)->rtindex, parse->rtable);
	else
		rte = NULL;
	/* no FROM (the planner puts an RTE_RESULT there): one row */
	if (fromlist == NIL || (rte && rte->rtekind == RTE_RESULT))
	{
		int64		row = row_max_bytes(parse->targetList, natts);

		return row < 0 ? -1 : row + missing;
	}
	if (rte == NULL || rte->rtekind != RTE_VALUES)
		return -1;
	/* target entries that are not the list's columns (rewritten defaults) */
	foreach(lc, parse->targetList)
	{
		Node	   *expr = (Node *) lfirst_node(TargetEntry, lc)->expr;
		int64		v = IsA(expr, Var) ? 0 : value_max_bytes(expr);

		if (v < 0)
			return -1;
		missing += v;
	}
	foreach(lc, rte->values_lists)
	{
		int64		row = row_max_bytes((List *) lfirst(lc), natts);

		if (row < 0)
			return -1;
		total += row + missing;
	}
	return total;
}
