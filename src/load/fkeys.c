/*-------------------------------------------------------------------------
 *
 * fkeys.c
 *	  Foreign keys of directly written rows, checked per batch (or, for a
 *	  large load, as a set at its end).
 *
 * Core checks a foreign key with an AFTER ROW trigger (RI_FKey_check_ins)
 * that queues one event per inserted row; at the end of the statement each
 * event runs "SELECT 1 FROM ONLY parent x WHERE pk = $1 FOR KEY SHARE OF
 * x".  For the rows of a batch written directly, a constraint that can be
 * checked set-wise is checked instead once per batch, after the batch's
 * pages are written (queue.c), by one query:
 *
 *	SELECT k.ord FROM unnest($1, ..., $n) WITH ORDINALITY k(v1, ..., ord)
 *	  WHERE NOT EXISTS (SELECT FROM ONLY parent x
 *						WHERE x.pk1 OPERATOR(=) k.v1 AND ...
 *						FOR KEY SHARE OF x)
 *	  ORDER BY k.ord
 *
 * (stopped after its first row unless every violation is wanted) over the
 * batch's keys in input order, once batch_all_found, probing them sorted
 * and distinct, has missed one (MATCH SIMPLE skips a key with a NULL
 * column; MATCH FULL skips an all-NULL key and rejects a mixed one, as
 * core does), with the constraint's PK = FK operators, each referenced
 * row locked FOR KEY SHARE as core's check locks it, run as core runs it:
 * as the referenced table's owner, FORCE ROW LEVEL SECURITY ignored, a
 * fresh snapshot (SPI, not read-only).  The first key found missing is
 * reported with core's error (23503, message, detail, and COPY's line of
 * its row): the first violating row's in input order, its first
 * constraint's in trigger order, as core's events would report.  The
 * checks come after the batch's other after-insert work (queue.c), so that
 * a unique violation, raised at once by core, is reported first too.  The
 * rows queue no event for the constraint: while their AFTER ROW triggers
 * are queued, the leaf's trigger descriptor is a copy without the
 * constraint's check trigger (dp_fkeys_swap).
 *
 * With directpath.fkey_table_lock the referenced table is locked SHARE when
 * the load begins and no row is locked (nobody else writes the table until
 * the transaction ends; a check's fresh snapshot comes after the lock).
 *
 * A constraint keeps core's per-row events, and the report says why, when
 * checking per batch could answer differently: deferrable; referencing
 * the target or an ancestor (a row may reference a later batch's); a
 * partitioned referenced table; a temporal key; REPEATABLE READ and
 * SERIALIZABLE (core checks against the transaction's snapshot); a leaf
 * with other AFTER ROW triggers (they run before core's check and could
 * add the referenced rows).  Rows left on the normal path keep them too.
 *
 * A large load checks its later keys as one set (fkset.c): past
 * directpath.fkey_set_rows rows of a leaf, a MATCH SIMPLE constraint's keys
 * go into a sort (goes_to_set; in a parallel load's leader, in parallel
 * mode where no query may run, from the first row, and a constraint that
 * cannot go keeps the load serial: dp_fkeys_parallel_refusal).  Once every
 * constraint of a leaf does and nothing else acts per row, a row's keys go
 * to the sets as it is placed and it is not queued (dp_fkeys_at_place).
 * At the end (dp_fkeys_check_sets in fkahead.c, from finish.c) the
 * distinct keys are checked in chunks, each with the first ordinal of its
 * rows, found by one scan whose rows are locked page by page (fklock.c;
 * after a parallel load, found by a worker beside the index work), else
 * by the same query: the first violation in input order (a parallel
 * load's: in the order pages arrived) is reported as above, without an
 * input line.
 *
 * COPY ... REJECTS_TABLE: every violation of the batch is wanted, each row's
 * first constraint in trigger order (dp_fkeys_check with 'all'), taken
 * back by queue.c.  A constraint left per row fails the COPY.
 *
 * Invariants: every directly written row of a batched constraint is
 * checked before the statement ends, after its page is written, and
 * queues no event for it; the leaf's trigger descriptor is its own
 * outside dp_fkeys_swap's window.
 *
 *-------------------------------------------------------------------------
 */
#include "load/fkeys_private.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_partitioned_table.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "common/settings.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

/* A leaf's AFTER ROW INSERT trigger other than a foreign key check? */
static bool
other_after_row_triggers(TriggerDesc *td)
{
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_AFTER(t->tgtype) &&
			TRIGGER_FOR_INSERT(t->tgtype) && t->tgfoid != F_RI_FKEY_CHECK_INS)
			return true;
	}
	return false;
}

/* The owner of a relation. */
Oid
dp_fkeys_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* Is 'relid' the leaf or one of its ancestors? */
static bool
references_itself(Relation leaf, Oid relid)
{
	if (relid == RelationGetRelid(leaf))
		return true;
	if (!leaf->rd_rel->relispartition)
		return false;
	return list_member_oid(get_partition_ancestors(RelationGetRelid(leaf)),
						   relid);
}

/*
 * The check query of 'fk' (see the file header), prepared and kept for
 * the statement.
 */
static SPIPlanPtr
prepare_check(DPForeignKey *fk, AttrNumber *pkatts, Oid *pf_ops)
{
	StringInfoData q;
	Oid			argtypes[INDEX_MAX_KEYS];

	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT k.ord FROM unnest(");
	for (int i = 0; i < fk->nkeys; i++)
	{
		argtypes[i] = get_array_type(fk->fktypes[i]);
		appendStringInfo(&q, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	appendStringInfoString(&q, ") WITH ORDINALITY AS k(");
	for (int i = 0; i < fk->nkeys; i++)
		appendStringInfo(&q, "v%d, ", i + 1);
	appendStringInfo(&q, "ord) WHERE NOT EXISTS (SELECT FROM ONLY %s x",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(fk->pkrel)),
												get_rel_name(fk->pkrel)));
	for (int i = 0; i < fk->nkeys; i++)
	{
		char	   *pkcol = psprintf("x.%s",
									 quote_identifier(get_attname(fk->pkrel, pkatts[i], false)));
		char	   *fkval = psprintf("k.v%d", i + 1);

		appendStringInfoString(&q, i > 0 ? " AND " : " WHERE ");
		generate_operator_clause(&q, pkcol, get_atttype(fk->pkrel, pkatts[i]),
								 pf_ops[i], fkval, fk->fktypes[i]);
	}
	appendStringInfo(&q, "%s) ORDER BY k.ord", DP_FKEY_ROW_LOCK);
	return dp_fkset_keep_plan(q.data, fk->nkeys, argtypes);
}

/*
 * Why the constraint of trigger 't' cannot be checked per batch, or NULL
 * when it can; '*fk' is filled in, and with 'prepare' its check query
 * prepared.
 */
static const char *
describe(Relation leaf, Trigger *t, DPForeignKey *fk, bool prepare)
{
	HeapTuple	tup;
	Form_pg_constraint con;
	AttrNumber	pkatts[INDEX_MAX_KEYS];
	Oid			pf_ops[INDEX_MAX_KEYS],
				pp_ops[INDEX_MAX_KEYS],
				ff_ops[INDEX_MAX_KEYS];
	int			ndelset;
	AttrNumber	delset[INDEX_MAX_KEYS];
	const char *why = NULL;

	if (t->tgdeferrable)
		return "deferrable";
	tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(t->tgconstraint));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for constraint %u", t->tgconstraint);
	con = (Form_pg_constraint) GETSTRUCT(tup);
	fk->conoid = con->oid;
	fk->conname = pstrdup(NameStr(con->conname));
	fk->pkrel = con->confrelid;
	fk->match = con->confmatchtype;
	DeconstructFkConstraintRow(tup, &fk->nkeys, fk->fkatts, pkatts, pf_ops,
							   pp_ops, ff_ops, &ndelset, delset);
	if (DP_CONSTRAINT_HAS_PERIOD(con))
		why = "a temporal key";
	ReleaseSysCache(tup);
	if (why)
		return why;
	if (fk->match != FKCONSTR_MATCH_SIMPLE && fk->match != FKCONSTR_MATCH_FULL)
		return "MATCH PARTIAL";
	if (references_itself(leaf, fk->pkrel))
		return "it references the table loaded";
	if (get_rel_relkind(fk->pkrel) != RELKIND_RELATION)
		return "the referenced table is partitioned";
	for (int i = 0; i < fk->nkeys; i++)
	{
		fk->fktypes[i] = TupleDescAttr(RelationGetDescr(leaf),
									   fk->fkatts[i] - 1)->atttypid;
		if (!OidIsValid(get_array_type(fk->fktypes[i])))
			return "a key type without an array type";
		get_typlenbyvalalign(fk->fktypes[i], &fk->typlen[i],
							 &fk->typbyval[i], &fk->typalign[i]);
	}
	fk->set_ok = fk->match == FKCONSTR_MATCH_SIMPLE &&
		dp_fkset_possible(leaf, fk->nkeys, fk->fkatts);
	/* the referenced rows kept by a lock on their table, not one by one */
	if (prepare && dp_fkey_table_lock)
		LockRelationOid(fk->pkrel, ShareLock);
	if (prepare)
		fk->plan = prepare_check(fk, pkatts, pf_ops);
	if (prepare && fk->set_ok)
		fk->find = dp_fkfind_prepare(fk->pkrel, fk->conoid, fk->nkeys, pkatts,
									 pf_ops, fk->fktypes);
	return NULL;
}

/*
 * Why no constraint of a leaf can be checked per batch, or NULL.  Set
 * per statement: SET CONSTRAINTS or an isolation level cannot change
 * during a load.
 */
static const char *
why_none(TriggerDesc *td)
{
	if (!dp_fkey_batches)
		return "directpath.fkey_batches is off";
	if (IsolationUsesXactSnapshot())
		return "the transaction's snapshot lasts";
	if (other_after_row_triggers(td))
		return "the table has AFTER ROW triggers";
	return NULL;
}

const char *
dp_fkeys_parallel_refusal(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	const char *all_why;
	const char *why;

	if (td == NULL)
		return NULL;
	all_why = why_none(td);
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];
		DPForeignKey fk = {0};

		if (!TRIGGER_FOR_INSERT(t->tgtype) || !TRIGGER_FOR_ROW(t->tgtype) ||
			t->tgfoid != F_RI_FKEY_CHECK_INS)
			continue;			/* other triggers: parcheck.c's */
		if ((why = all_why) != NULL ||
			(why = describe(rel, t, &fk, false)) != NULL)
			return psprintf("has foreign key \"%s\", checked per row (%s)",
							get_constraint_name(t->tgconstraint), why);
		if (!fk.set_ok)
			return psprintf("has foreign key \"%s\", which cannot be checked as a set",
							fk.conname);
		if (dp_fkey_set_rows <= 0)
			return "has foreign keys and directpath.fkey_set_rows is 0";
	}
	return NULL;
}

/* Add a constraint to a report's list, once (partitions repeat names). */
void
dp_fkeys_note(StringInfo list, const char *item)
{
	char	   *copy = pstrdup(list->data);

	for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
		if (strcmp(tok + (tok[0] == ' '), item) == 0)
			return;
	appendStringInfo(list, "%s%s", list->len > 0 ? ", " : "", item);
}

DPForeignKeys *
dp_fkeys_begin(ResultRelInfo *rri, StringInfo batched, StringInfo kept)
{
	TriggerDesc *td = rri->ri_TrigDesc;
	DPForeignKeys *f;
	const char *all_why = NULL;

	if (td == NULL)
		return NULL;
	all_why = why_none(td);

	f = palloc0(sizeof(DPForeignKeys));
	f->rri = rri;
	f->own = td;
	f->keys = palloc0(sizeof(DPForeignKey) * td->numtriggers);
	f->rowwise = palloc(sizeof(TriggerDesc));
	*f->rowwise = *td;
	f->rowwise->triggers = palloc(sizeof(Trigger) * td->numtriggers);
	f->rowwise->numtriggers = 0;
	f->rowwise->trig_insert_after_row = false;
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];
		const char *why = NULL;

		if (t->tgfoid == F_RI_FKEY_CHECK_INS && TRIGGER_FOR_INSERT(t->tgtype))
		{
			why = all_why ? all_why :
				describe(rri->ri_RelationDesc, t, &f->keys[f->nkeys], true);
			if (why == NULL)
			{
				dp_fkeys_note(batched, f->keys[f->nkeys++].conname);
				continue;		/* not in the per-row descriptor */
			}
			dp_fkeys_note(kept, psprintf("%s (%s)",
										 get_constraint_name(t->tgconstraint),
										 why));
		}
		f->rowwise->triggers[f->rowwise->numtriggers++] = *t;
		if (TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_AFTER(t->tgtype) &&
			TRIGGER_FOR_INSERT(t->tgtype))
			f->rowwise->trig_insert_after_row = true;
	}
	return f->nkeys > 0 ? f : NULL;
}

void
dp_fkeys_swap(DPForeignKeys *f, bool rowwise)
{
	f->rri->ri_TrigDesc = rowwise ? f->rowwise : f->own;
}

/*
 * Core's message and detail (ri_ReportViolation's) for key 'keyvals' of
 * constraint 'k'; NULL 'keyvals': a MATCH FULL key that mixes NULLs.
 */
static void
describe_key(DPForeignKeys *f, int k, Datum *keyvals, bool *isnull,
			 char **message, char **detail)
{
	DPForeignKey *fk = &f->keys[k];
	Relation	leaf = f->rri->ri_RelationDesc;
	Oid			relid = RelationGetRelid(leaf);
	bool		has_perm = true;
	StringInfoData names,
				values;

	*message = psprintf("insert or update on table \"%s\" violates foreign key constraint \"%s\"",
						RelationGetRelationName(leaf), fk->conname);
	if (keyvals == NULL)
	{
		*detail = pstrdup("MATCH FULL does not allow mixing of null and nonnull key values.");
		return;
	}
	/* as core's ri_ReportViolation: the key only if the user may see it */
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		has_perm = false;
	else if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		for (int i = 0; i < fk->nkeys && has_perm; i++)
			has_perm = pg_attribute_aclcheck(relid, fk->fkatts[i], GetUserId(),
											 ACL_SELECT) == ACLCHECK_OK;
	if (!has_perm)
	{
		*detail = psprintf("Key is not present in table \"%s\".",
						   get_rel_name(fk->pkrel));
		return;
	}
	initStringInfo(&names);
	initStringInfo(&values);
	for (int i = 0; i < fk->nkeys; i++)
	{
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(fk->fktypes[i], &out, &varlena);
		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 NameStr(TupleDescAttr(RelationGetDescr(leaf), fk->fkatts[i] - 1)->attname));
		appendStringInfo(&values, "%s%s", i > 0 ? ", " : "",
						 isnull[i] ? "null" : OidOutputFunctionCall(out, keyvals[i]));
	}
	*detail = psprintf("Key (%s)=(%s) is not present in table \"%s\".",
					   names.data, values.data, get_rel_name(fk->pkrel));
}

/*
 * Core's message and detail for a row whose key is not in the referenced
 * table ('v' says which constraint), or whose MATCH FULL key mixes NULLs.
 */
void
dp_fkeys_describe(DPForeignKeys *f, DPFkeyViolation v, HeapTuple row,
				  char **message, char **detail)
{
	DPForeignKey *fk = &f->keys[v.key];
	TupleDesc	desc = RelationGetDescr(f->rri->ri_RelationDesc);
	Datum		keyvals[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	if (v.mixed)
	{
		describe_key(f, v.key, NULL, NULL, message, detail);
		return;
	}
	for (int i = 0; i < fk->nkeys; i++)
		keyvals[i] = heap_getattr(row, fk->fkatts[i], desc, &isnull[i]);
	describe_key(f, v.key, keyvals, isnull, message, detail);
}

void
dp_fkeys_report(DPForeignKeys *f, DPFkeyViolation v, HeapTuple row)
{
	char	   *message;
	char	   *detail;

	dp_fkeys_describe(f, v, row, &message, &detail);
	ereport(ERROR,
			(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
			 errmsg_internal("%s", message),
			 errdetail_internal("%s", detail),
			 errtableconstraint(f->rri->ri_RelationDesc, f->keys[v.key].conname)));
}

/*
 * The keys of the batch's rows to check (rows[] gets each one's row), in
 * input order, as arrays for the query; returns how many.  A MATCH FULL key
 * with some columns NULL violates 'k' at once: its row is marked in v[]
 * (unless an earlier constraint marked it); without 'all' the first such
 * row ends the list, as no later row can come first.
 */
static int
batch_keys(DPForeignKeys *f, int k, HeapTuple *tuples, int n, bool all,
		   Datum *arrays, int *rows, DPFkeyViolation *v)
{
	DPForeignKey *fk = &f->keys[k];
	TupleDesc	desc = RelationGetDescr(f->rri->ri_RelationDesc);
	Datum	   *cols[INDEX_MAX_KEYS];
	int			m = 0;

	for (int i = 0; i < fk->nkeys; i++)
		cols[i] = palloc(sizeof(Datum) * n);
	for (int r = 0; r < n; r++)
	{
		int			nnull = 0;

		for (int i = 0; i < fk->nkeys; i++)
		{
			bool		isnull;

			cols[i][m] = heap_getattr(tuples[r], fk->fkatts[i], desc, &isnull);
			nnull += isnull;
		}
		if (nnull == fk->nkeys || (nnull > 0 && fk->match == FKCONSTR_MATCH_SIMPLE))
			continue;
		if (nnull == 0)
		{
			rows[m++] = r;
			continue;
		}
		if (v[r].key < 0)
			v[r] = (DPFkeyViolation) {k, true};
		if (!all)
			break;
	}
	for (int i = 0; i < fk->nkeys && m > 0; i++)
		arrays[i] = PointerGetDatum(construct_array(cols[i], m, fk->fktypes[i],
													fk->typlen[i], fk->typbyval[i],
													fk->typalign[i]));
	return m;
}

/*
 * Run the check as the referenced table's owner, as core does; the
 * (0-based) positions of the keys not found, in order, go to missing[]
 * (only the first without 'all'); returns how many; with 'plan' NULL, the
 * constraint's find (fkfind.c): the keys found and locked, or -1.
 */
int
dp_fkeys_run_check(DPForeignKey *fk, SPIPlanPtr plan, Datum *arrays,
				   bool all, int *missing)
{
	Oid			save_userid;
	int			save_sec_context;
	int			nmissing;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(dp_fkeys_owner(fk->pkrel),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_NOFORCE_RLS);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan == NULL)
		nmissing = (int) dp_fkfind_run(fk->find, arrays, !dp_fkey_table_lock);
	else if (SPI_execute_plan(plan, arrays, NULL, false, all ? 0 : 1) != SPI_OK_SELECT)
		elog(ERROR, "directpath: the check of foreign key \"%s\" failed",
			 fk->conname);
	else
		nmissing = (int) SPI_processed;
	for (int i = 0; missing != NULL && i < nmissing; i++)
	{
		bool		isnull;

		missing[i] = (int) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc,
													   1, &isnull)) - 1;
	}
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return nmissing;
}

/* The query's arrays of a chunk of 'n' keys read back from a set. */
void
dp_fkeys_chunk_arrays(DPForeignKey *fk, Datum **values, int n, Datum *arrays)
{
	for (int i = 0; i < fk->nkeys; i++)
		arrays[i] = PointerGetDatum(construct_array(values[i], n, fk->fktypes[i],
													fk->typlen[i], fk->typbyval[i],
													fk->typalign[i]));
}

/*
 * Are all the batch's keys of constraint 'k' found (and locked)?  Its
 * keys sorted and made distinct as a set's are (fkset.c, a small set of
 * the batch), each chunk found by one scan or checked by the check query
 * in key order: every key once, in the referenced index's order, not every
 * row's in input order.  False when a key is missing: the caller then
 * finds the first row that has one, in input order.
 */
static bool
batch_all_found(DPForeignKeys *f, int k, HeapTuple *tuples, int ntuples)
{
	DPForeignKey *fk = &f->keys[k];
	DPFkeySet  *set = dp_fkset_begin(f->rri->ri_RelationDesc, fk->nkeys,
									 fk->fkatts, work_mem);
	uint64	   *ordinals = palloc(sizeof(uint64) * DP_FKSET_CHUNK);
	Datum	   *values[INDEX_MAX_KEYS];
	int			missing;
	bool		found = true;
	int			n;

	for (int r = 0; r < ntuples; r++)
		dp_fkset_add(set, tuples[r], r);
	while (found && (n = dp_fkset_next(set, DP_FKSET_CHUNK, values, ordinals)) > 0)
	{
		Datum		arrays[INDEX_MAX_KEYS];

		dp_fkeys_chunk_arrays(fk, values, n, arrays);
		if (fk->find == NULL ||
			dp_fkeys_run_check(fk, NULL, arrays, true, NULL) != n)
			found = dp_fkeys_run_check(fk, fk->plan, arrays, false,
									   &missing) == 0;
	}
	dp_fkset_end(set);
	return found;
}

/* Mark the batch's rows that violate constraint 'k' (see dp_fkeys_check). */
static void
mark_violations(DPForeignKeys *f, int k, HeapTuple *tuples, int ntuples,
				bool all, DPFkeyViolation *v)
{
	Datum		arrays[INDEX_MAX_KEYS];
	int		   *rows = palloc(sizeof(int) * ntuples);
	int			m;
	int		   *missing;
	int			nmissing;

	/* no query in a parallel load's leader (goes_to_set) */
	if (IsInParallelMode())
		elog(ERROR, "directpath: foreign key \"%s\" checked per batch in parallel mode",
			 f->keys[k].conname);
	/* the common case, every key there, answered in key order */
	if (!all && f->keys[k].set_ok && batch_all_found(f, k, tuples, ntuples))
		return;
	m = batch_keys(f, k, tuples, ntuples, all, arrays, rows, v);
	missing = palloc(sizeof(int) * Max(m, 1));
	nmissing = m > 0 ? dp_fkeys_run_check(&f->keys[k], f->keys[k].plan, arrays,
										  all, missing) : 0;
	for (int i = 0; i < nmissing; i++)
	{
		int			r = rows[missing[i]];

		if (v[r].key < 0)
			v[r] = (DPFkeyViolation) {k, false};
	}
}

/*
 * Does constraint 'k' go over to the set check with this batch?  Past
 * directpath.fkey_set_rows rows, where every violation need not be found
 * per row (no rejects table) and its keys can be sorted; from the first
 * row in a parallel load's leader (dp_fkeys_parallel_refusal).
 */
static bool
goes_to_set(DPForeignKeys *f, int k, int ntuples, bool all)
{
	DPForeignKey *fk = &f->keys[k];
	MemoryContext old;

	if (fk->set != NULL)
		return true;
	if (all || !fk->set_ok)
		return false;
	/* in parallel mode no query may run: the set from the first row */
	if (!IsInParallelMode() &&
		(dp_fkey_set_rows <= 0 || f->rows + ntuples <= (uint64) dp_fkey_set_rows))
		return false;
	/* the leaf's sets share maintenance_work_mem, as its index spools do */
	old = MemoryContextSwitchTo(GetMemoryChunkContext(f));
	fk->set = dp_fkset_begin(f->rri->ri_RelationDesc, fk->nkeys, fk->fkatts,
							 Max(work_mem, maintenance_work_mem / f->nkeys));
	MemoryContextSwitchTo(old);
	return true;
}

bool
dp_fkeys_at_place(DPForeignKeys *f)
{
	if (f->rowwise->trig_insert_after_row || f->rowwise->trig_insert_new_table)
		return false;			/* other trigger events need the rows queued */
	for (int k = 0; k < f->nkeys; k++)
		if (!goes_to_set(f, k, 0, false))
			return false;
	return true;
}

bool
dp_fkeys_has_sets(DPForeignKeys *f)
{
	for (int k = 0; f != NULL && k < f->nkeys; k++)
		if (f->keys[k].set != NULL)
			return true;
	return false;
}

void
dp_fkeys_add_row(DPForeignKeys *f, TupleTableSlot *slot, uint64 ordinal)
{
	for (int k = 0; k < f->nkeys; k++)
		dp_fkset_add_slot(f->keys[k].set, slot, ordinal);
	f->rows++;
}

int
dp_fkeys_check(DPForeignKeys *f, HeapTuple *tuples, const uint64 *ordinals,
			   int ntuples, bool all, DPFkeyViolation *v)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "directpath foreign keys",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);

	for (int r = 0; r < ntuples; r++)
		v[r] = (DPFkeyViolation) {-1, false};
	for (int k = 0; k < f->nkeys; k++)
	{
		CHECK_FOR_INTERRUPTS();
		if (goes_to_set(f, k, ntuples, all))
			for (int r = 0; r < ntuples; r++)
				dp_fkset_add(f->keys[k].set, tuples[r], ordinals[r]);
		else
			mark_violations(f, k, tuples, ntuples, all, v);
		MemoryContextReset(cxt);
	}
	f->rows += ntuples;
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	for (int r = 0; r < ntuples; r++)
		if (v[r].key >= 0)
			return r;
	return -1;
}


void
dp_fkeys_report_found(DPFkeyFound *found)
{
	char	   *message;
	char	   *detail;
	DPForeignKeys *f = found->f;

	describe_key(f, found->key, found->values, found->isnull, &message, &detail);
	ereport(ERROR,
			(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
			 errmsg_internal("%s", message),
			 errdetail_internal("%s", detail),
			 errtableconstraint(f->rri->ri_RelationDesc, f->keys[found->key].conname)));
}
