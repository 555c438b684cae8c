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
 *
 * They are taken out of the option list before core parses the rest, and
 * they ask for the direct path by themselves: core does not know them, so
 * a COPY that has one and cannot take the direct path fails, saying why,
 * instead of running on the normal path without it.  ON_CONFLICT's
 * arbiters are checked as INSERT ... ON CONFLICT's are (eligibility.c).
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "access/htup_details.h"
#include "catalog/pg_constraint.h"
#include "commands/defrem.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/* ON_CONFLICT's value: 'nothing' (keep the row already there). */
static bool
on_conflict_option(DefElem *def)
{
	char	   *v = defGetString(def);

	if (pg_strcasecmp(v, "nothing") == 0)
		return true;
	if (pg_strcasecmp(v, "update") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY option ON_CONFLICT 'update' is not supported yet"),
				 errhint("ON_CONFLICT 'nothing' keeps the rows already in the table; to keep the new ones, COPY into a staging table and run INSERT ... ON CONFLICT DO UPDATE.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("COPY option ON_CONFLICT must be 'nothing', not \"%s\"", v)));
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
			opts->on_conflict = on_conflict_option(def);
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

/*
 * ON_CONFLICT's arbiters in 'rel' (ON_CONFLICT_CONSTRAINT's index, or every
 * unique index), checked as INSERT ... ON CONFLICT DO NOTHING's are: a
 * COPY cannot fall back to core with our option, so a refusal is an error.
 */
void
dp_copy_resolve_arbiters(DPCopyOptions *opts, Relation rel)
{
	const char *why;

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
					 errhint("ON_CONFLICT_CONSTRAINT names the unique constraint whose duplicates are skipped.")));
		opts->arbiters = list_make1_oid(index);
	}
	why = dp_arbiters_ineligible(RelationGetRelid(rel), opts->arbiters);
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY option ON_CONFLICT cannot be used with this table"),
				 errdetail("%s.", why)));
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

