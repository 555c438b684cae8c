/*-------------------------------------------------------------------------
 *
 * copyopts.c
 *	  directpath's own COPY FROM options: what they mean, how they are
 *	  checked, and what a COPY that has them does when it cannot take the
 *	  direct path.
 *
 *	REJECTS_TABLE 'name' [, MAX_REJECTS n]	bad rows into a table (rejects.c)
 *	ON_CONFLICT 'nothing' [, ON_CONFLICT_CONSTRAINT 'name']
 *											rows whose key is taken skipped,
 *											as INSERT ... ON CONFLICT DO
 *											NOTHING skips them (conflict.c)
 *	ON_CONFLICT 'update' [, ON_CONFLICT_CONSTRAINT 'name']
 *											a row whose key is taken updates
 *											that row with its values, as
 *											INSERT ... ON CONFLICT DO UPDATE
 *											SET (its columns) = EXCLUDED
 *											does (upsert.c)
 *
 * They are taken out of the option list before core parses the rest, and
 * they ask for the direct path by themselves: core does not know them, so
 * a COPY that has one and cannot take the direct path fails, saying why,
 * instead of running on the normal path without it.  ON_CONFLICT's
 * arbiters are checked as INSERT ... ON CONFLICT's are (existing.c).
 *
 * ON_CONFLICT 'update' has one arbiter: ON_CONFLICT_CONSTRAINT's, or the
 * table's only unique index.  Its rows are decided as DO UPDATE's are
 * (conflict.c): new keys loaded directly, a key an earlier row of the COPY
 * loaded is core's "cannot affect row a second time", a key in the table
 * kept; the kept rows then run, after the load, as
 *
 *	INSERT INTO t (every column the COPY has) SELECT ... FROM <kept rows>
 *	ON CONFLICT (the arbiter's columns) DO UPDATE
 *	SET (the COPY's columns outside the arbiter) = ROW(EXCLUDED. ...)
 *
 * through SPI, the kept rows an ephemeral named relation (upsert.c): core's
 * update, its triggers, row security and errors, for each of them.  The
 * statement is hinted: its updates are made in bulk (load/versions.c)
 * where that is allowed, by core's executor otherwise, as any DO UPDATE's.
 * Columns the COPY does not list keep their values; a generated column is
 * recomputed.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "admission/admission.h"
#include "load/load.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_constraint.h"
#include "commands/defrem.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/*
 * ON_CONFLICT's value: 'nothing' (keep the row already there) or 'update'
 * (give it the new row's values); true for 'update'.
 */
static bool
on_conflict_update(DefElem *def)
{
	char	   *v = defGetString(def);

	if (pg_strcasecmp(v, "nothing") == 0)
		return false;
	if (pg_strcasecmp(v, "update") == 0)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("COPY option ON_CONFLICT must be 'nothing' or 'update', not \"%s\"", v)));
	return false;
}

/* The name of a directpath option the COPY has (it wants the direct path). */
const char *
dp_copy_own_option(DPCopyOptions *opts)
{
	if (opts->rejects_table)
		return "REJECTS_TABLE";
	return opts->on_conflict ? "ON_CONFLICT" : NULL;
}

void
dp_copy_split_options(List *options, DPCopyOptions *opts)
{
	ListCell   *lc;

	memset(opts, 0, sizeof(DPCopyOptions));
	opts->max_rejects = -1;
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
		else if (strcmp(def->defname, "on_conflict") == 0)
		{
			opts->conflict_update = on_conflict_update(def);
			opts->on_conflict = true;
		}
		else if (strcmp(def->defname, "on_conflict_constraint") == 0)
			opts->conflict_constraint = defGetString(def);
		else
			opts->core_options = lappend(opts->core_options, def);
	}
	if (opts->max_rejects >= 0 && opts->rejects_table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("MAX_REJECTS needs REJECTS_TABLE")));
	if (opts->conflict_constraint && !opts->on_conflict)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ON_CONFLICT_CONSTRAINT needs ON_CONFLICT")));
	if (opts->on_conflict && opts->rejects_table)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY options ON_CONFLICT and REJECTS_TABLE cannot be used together yet")));
}

/* ON_CONFLICT 'update' without a constraint named: the only unique index. */
static Oid
only_unique_index(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	Oid			found = InvalidOid;
	int			n = 0;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		if (index->rd_index->indisunique)
		{
			found = lfirst_oid(lc);
			n++;
		}
		index_close(index, AccessShareLock);
	}
	if (n != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("COPY option ON_CONFLICT 'update' needs ON_CONFLICT_CONSTRAINT: relation \"%s\" has %d unique indexes",
						RelationGetRelationName(rel), n),
				 errhint("Name the unique or primary key constraint whose key decides which row a new row updates.")));
	return found;
}

/*
 * ON_CONFLICT 'update''s statement: the kept rows (upsert.c's relation)
 * inserted into 'rel' with every column the COPY has ('attnums'), their
 * conflicts on 'arbiter''s columns updating 'assigned'.
 */
static char *
update_statement(Relation rel, Oid arbiter, List *attnums, List *assigned)
{
	Relation	index = index_open(arbiter, AccessShareLock);
	Oid			relid = RelationGetRelid(rel);
	AttrNumber	first_key = index->rd_index->indkey.values[0];
	StringInfoData sql;
	StringInfoData cols;
	ListCell   *lc;

	initStringInfo(&cols);
	foreach(lc, attnums)
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "",
						 quote_identifier(get_attname(relid, lfirst_int(lc), false)));
	initStringInfo(&sql);
	appendStringInfo(&sql, "/*+ APPEND */ INSERT INTO %s (%s) SELECT %s FROM %s ON CONFLICT (",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)),
					 cols.data, cols.data, DP_UPSERT_ROWS);
	for (int i = 0; i < IndexRelationGetNumberOfKeyAttributes(index); i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 quote_identifier(get_attname(relid, index->rd_index->indkey.values[i],
													  false)));
	index_close(index, AccessShareLock);
	/* no column to assign: the key's first column, to its own value */
	if (assigned == NIL)
		assigned = list_make1_int(first_key);
	appendStringInfoString(&sql, ") DO UPDATE SET (");
	foreach(lc, assigned)
		appendStringInfo(&sql, "%s%s", foreach_current_index(lc) ? ", " : "",
						 quote_identifier(get_attname(relid, lfirst_int(lc), false)));
	appendStringInfoString(&sql, ") = ROW(");
	foreach(lc, assigned)
		appendStringInfo(&sql, "%sEXCLUDED.%s", foreach_current_index(lc) ? ", " : "",
						 quote_identifier(get_attname(relid, lfirst_int(lc), false)));
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * ON_CONFLICT's arbiters in 'rel' (ON_CONFLICT_CONSTRAINT's index; else
 * every unique index, or for 'update' the only one), checked as INSERT ...
 * ON CONFLICT's are: a COPY cannot fall back to core with our option, so a
 * refusal is an error.
 */
void
dp_copy_resolve_arbiters(DPCopyOptions *opts, Relation rel, List *attnums)
{
	const char *why;
	List	   *assigned = NIL;

	if (opts->conflict_constraint)
	{
		Oid			con = get_relation_constraint_oid(RelationGetRelid(rel),
													  opts->conflict_constraint,
													  false);
		HeapTuple	tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(con));
		char		contype;
		Oid			index;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for constraint %u", con);
		contype = ((Form_pg_constraint) GETSTRUCT(tup))->contype;
		index = ((Form_pg_constraint) GETSTRUCT(tup))->conindid;
		ReleaseSysCache(tup);
		if (contype != CONSTRAINT_PRIMARY && contype != CONSTRAINT_UNIQUE)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("constraint \"%s\" of relation \"%s\" is not a unique or primary key constraint",
							opts->conflict_constraint, RelationGetRelationName(rel)),
					 errhint("ON_CONFLICT_CONSTRAINT names the unique constraint whose key decides conflicts.")));
		opts->arbiters = list_make1_oid(index);
	}
	else if (opts->conflict_update)
		opts->arbiters = list_make1_oid(only_unique_index(rel));
	why = dp_arbiters_ineligible(RelationGetRelid(rel), opts->arbiters);
	if (why == NULL && opts->conflict_update)
		why = dp_copy_update_ineligible(RelationGetRelid(rel),
										linitial_oid(opts->arbiters), attnums,
										&assigned);
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY option ON_CONFLICT cannot be used with this table"),
				 errdetail("%s.", why)));
	if (opts->conflict_update)
		opts->update_sql = update_statement(rel, linitial_oid(opts->arbiters),
											attnums, assigned);
}

/*
 * The statement goes to core after all.  Core does not know our options,
 * so a COPY that uses them cannot: say why.
 */
bool
dp_copy_leave_to_core(DPCopyOptions *opts, const char *why)
{
	const char *option = dp_copy_own_option(opts);

	if (option)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY option %s needs the direct path", option),
				 why ? errdetail("This COPY cannot take it: %s.", why) :
				 errdetail("Core COPY refuses this statement; run it without %s to see why.",
						   option)));
	return false;
}

