/*-------------------------------------------------------------------------
 *
 * rejects.c
 *	  Rejected rows of a direct-path COPY: which failures a row may be
 *	  rejected for, how they are detected without aborting the load, and
 *	  where rejected rows go.
 *
 * COPY ... WITH (REJECTS_TABLE 'tab' [, MAX_REJECTS n]) loads the good rows
 * and records the bad ones in 'tab' (shaped like directpath.rejects):
 *
 *	malformed input (class 22: bad syntax for a type, missing or extra
 *	  columns, values too long, domain checks) - copy.c reads each row in
 *	  a subtransaction and rejects it when reading fails;
 *	NOT NULL and CHECK constraints, and the partition constraint of a
 *	  partition loaded directly - evaluated here without raising
 *	  (dp_soft_constraints), with the messages ExecConstraints would give;
 *	duplicate keys - found when the row's index entries are inserted after
 *	  its batch is written, using core's partial uniqueness check
 *	  (UNIQUE_CHECK_PARTIAL, as INSERT ... ON CONFLICT does); the row is then
 *	  deleted again (queue.c), as pg_bulkload does with duplicates.
 *
 * Under the load's ShareRowExclusiveLock nobody else can be inserting, so a
 * possible conflict reported by the partial check is a real one.
 *
 * Everything else (encoding errors, errors in generated columns, routing
 * failures, foreign keys, which are AFTER triggers) still aborts the load.
 * Rejects are written through SPI in the loading transaction: they commit
 * with the load and vanish if it fails.  More than MAX_REJECTS rejected
 * rows (default: no limit) fail the load.
 *
 * Logical decoding forgets the TOAST chunks it has collected after any
 * ordinary INSERT, and the chunks of a row the direct path has toasted are
 * in WAL before the row itself (wal.c).  So while the load says that such
 * rows are waiting ('hold', a count kept by the writers), rejects are kept
 * in memory and written once none are; the load writes every page early
 * rather than keep more than DP_REJECTS_QUEUE_MAX of them.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "access/genam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "nodes/readfuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

struct DPRejects
{
	Oid			relid;			/* the rejects table */
	char	   *qualified;		/* its quoted, qualified name */
	Oid			target;			/* the table being loaded */
	int64		limit;			/* -1: none */
	uint64		count;
	SPIPlanPtr	plan;
	int		   *hold;			/* write nothing while *hold > 0 */
	List	   *queued;			/* QueuedReject, held back */
	MemoryContext queue_cxt;
};

typedef struct QueuedReject
{
	uint64		lineno;
	char	   *raw;
	int			sqlerrcode;
	char	   *message;
	char	   *detail;
} QueuedReject;

DPRejects *
dp_rejects_open(const char *name, int64 limit, Relation target)
{
	DPRejects  *r = palloc0(sizeof(DPRejects));
	List	   *names = DP_QUALIFIED_NAME_LIST(name);
	RangeVar   *rv = makeRangeVarFromNameList(names);

	r->relid = RangeVarGetRelid(rv, RowExclusiveLock, true);
	if (!OidIsValid(r->relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("rejects table \"%s\" does not exist", name),
				 errhint("Create it with: CREATE TABLE %s (LIKE directpath.rejects INCLUDING ALL);",
						 name)));
	if (r->relid == RelationGetRelid(target))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the rejects table cannot be the table being loaded")));
	r->qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(r->relid)),
											  get_rel_name(r->relid));
	r->target = RelationGetRelid(target);
	r->limit = limit;
	r->queue_cxt = AllocSetContextCreate(CurrentMemoryContext,
										 "directpath rejects",
										 ALLOCSET_SMALL_SIZES);
	return r;
}

/* Hold rejects back while *hold > 0 (see the file header). */
void
dp_rejects_hold_while(DPRejects *r, int *hold)
{
	r->hold = hold;
}

/* Insert one row into the rejects table. */
static void
write_reject(DPRejects *r, uint64 lineno, const char *raw, int sqlerrcode,
			 const char *message, const char *detail)
{
	Oid			types[6] = {REGCLASSOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = ObjectIdGetDatum(r->target);
	values[1] = Int64GetDatum((int64) lineno);
	values[2] = raw ? CStringGetTextDatum(raw) : (Datum) 0;
	nulls[2] = raw ? ' ' : 'n';
	values[3] = CStringGetTextDatum(unpack_sql_state(sqlerrcode));
	values[4] = CStringGetTextDatum(message ? message : "");
	values[5] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
	nulls[5] = detail ? ' ' : 'n';

	SPI_connect();
	if (r->plan == NULL)
	{
		char	   *sql = psprintf("INSERT INTO %s (relation, line, raw_line, sqlstate, message, detail) "
								   "VALUES ($1, $2, $3, $4, $5, $6)", r->qualified);

		r->plan = SPI_prepare(sql, 6, types);
		if (r->plan == NULL)
			elog(ERROR, "directpath: could not prepare the insert into %s: %s",
				 r->qualified, SPI_result_code_string(SPI_result));
		SPI_keepplan(r->plan);
	}
	if (SPI_execute_plan(r->plan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "directpath: could not record a rejected row in %s", r->qualified);
	SPI_finish();
}

/* Write the rejects held back so far. */
void
dp_rejects_write_queued(DPRejects *r)
{
	ListCell   *lc;

	if (r->queued == NIL)
		return;
	foreach(lc, r->queued)
	{
		QueuedReject *q = lfirst(lc);

		write_reject(r, q->lineno, q->raw, q->sqlerrcode, q->message, q->detail);
	}
	r->queued = NIL;
	MemoryContextReset(r->queue_cxt);
}

int
dp_rejects_queued(DPRejects *r)
{
	return list_length(r->queued);
}

/* Record one rejected row; fail the load past MAX_REJECTS. */
void
dp_rejects_add(DPRejects *r, uint64 lineno, const char *raw, int sqlerrcode,
			   const char *message, const char *detail)
{
	r->count++;
	if (r->limit >= 0 && r->count > (uint64) r->limit)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("more than MAX_REJECTS (" INT64_FORMAT ") rows were rejected", r->limit),
				 errdetail("Line %llu: %s", (unsigned long long) lineno, message),
				 errhint("The load and its rejected rows were rolled back.")));

	if (r->hold && *r->hold > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(r->queue_cxt);
		QueuedReject *q = palloc(sizeof(QueuedReject));

		q->lineno = lineno;
		q->raw = raw ? pstrdup(raw) : NULL;
		q->sqlerrcode = sqlerrcode;
		q->message = message ? pstrdup(message) : NULL;
		q->detail = detail ? pstrdup(detail) : NULL;
		r->queued = lappend(r->queued, q);
		MemoryContextSwitchTo(old);
		return;
	}
	dp_rejects_write_queued(r);
	write_reject(r, lineno, raw, sqlerrcode, message, detail);
}

uint64
dp_rejects_count(DPRejects *r)
{
	return r->count;
}

/* May a row be rejected for an error with this SQLSTATE? */
bool
dp_rejects_error_ok(int sqlerrcode)
{
	if (sqlerrcode == ERRCODE_CHARACTER_NOT_IN_REPERTOIRE ||
		sqlerrcode == ERRCODE_UNTRANSLATABLE_CHARACTER)
		return false;			/* the input stream itself is unusable */
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_DATA_EXCEPTION ||
		ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION;
}

/* "Failing row contains (...)", as core builds it (values clipped at 64). */
static char *
failing_row(TupleTableSlot *slot)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	StringInfoData buf;
	bool		first = true;

	slot_getallattrs(slot);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		char	   *val;
		int			len;

		if (att->attisdropped)
			continue;
		if (slot->tts_isnull[i])
			val = "null";
		else
		{
			Oid			outfunc;
			bool		varlena;

			getTypeOutputInfo(att->atttypid, &outfunc, &varlena);
			val = OidOutputFunctionCall(outfunc, slot->tts_values[i]);
		}
		if (!first)
			appendStringInfoString(&buf, ", ");
		first = false;
		len = strlen(val);
		if (len > 64)
		{
			len = pg_mbcliplen(val, len, 64);
			appendBinaryStringInfo(&buf, val, len);
			appendStringInfoString(&buf, "...");
		}
		else
			appendStringInfoString(&buf, val);
	}
	appendStringInfoChar(&buf, ')');
	return psprintf("Failing row contains %s.", buf.data);
}

/* A violation found without raising: what core would have reported. */
typedef struct DPViolation
{
	int			sqlerrcode;
	char	   *message;
	char	   *detail;
} DPViolation;

static bool
violation(DPViolation *v, int sqlerrcode, char *message, TupleTableSlot *slot)
{
	v->sqlerrcode = sqlerrcode;
	v->message = message;
	v->detail = failing_row(slot);
	return false;
}

/* NOT NULL, as ExecConstraints checks it. */
static bool
not_null_ok(Relation rel, TupleTableSlot *slot, DPViolation *v)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attnotnull && slot_attisnull(slot, i + 1))
			return violation(v, ERRCODE_NOT_NULL_VIOLATION,
							 psprintf("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
									  NameStr(att->attname), RelationGetRelationName(rel)),
							 slot);
	}
	return true;
}

/* The same CHECK expressions ExecConstraints builds, kept for the query. */
static ExprState **
check_exprs(ResultRelInfo *rri, EState *estate)
{
	Relation	rel = rri->ri_RelationDesc;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	MemoryContext old;

	if (DP_RI_CHECK_EXPRS(rri) != NULL)
		return DP_RI_CHECK_EXPRS(rri);
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	DP_RI_CHECK_EXPRS(rri) = palloc0(sizeof(ExprState *) * constr->num_check);
	for (int i = 0; i < constr->num_check; i++)
	{
		if (!DP_CHECK_ENFORCED(&constr->check[i]))
			continue;
		DP_RI_CHECK_EXPRS(rri)[i] =
			ExecPrepareExpr(DP_CHECK_EXPR(stringToNode(constr->check[i].ccbin), rel),
							estate);
	}
	MemoryContextSwitchTo(old);
	return DP_RI_CHECK_EXPRS(rri);
}

/* CHECK constraints, as ExecConstraints evaluates them. */
static bool
checks_ok(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate,
		  DPViolation *v)
{
	Relation	rel = rri->ri_RelationDesc;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	ExprContext *econtext = GetPerTupleExprContext(estate);
	ExprState **exprs = check_exprs(rri, estate);

	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < constr->num_check; i++)
	{
		if (exprs[i] && !ExecCheck(exprs[i], econtext))
			return violation(v, ERRCODE_CHECK_VIOLATION,
							 psprintf("new row for relation \"%s\" violates check constraint \"%s\"",
									  RelationGetRelationName(rel), constr->check[i].ccname),
							 slot);
	}
	return true;
}

/*
 * NOT NULL, CHECK and (for a partition loaded directly) the partition
 * constraint, evaluated without raising.  On failure, fills in what
 * ExecConstraints / ExecPartitionCheck would have reported.
 */
bool
dp_soft_constraints(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate,
					int *sqlerrcode, char **message, char **detail)
{
	Relation	rel = rri->ri_RelationDesc;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	DPViolation v = {0};
	bool		ok = true;

	if (constr && constr->has_not_null)
		ok = not_null_ok(rel, slot, &v);
	if (ok && constr && constr->num_check > 0)
		ok = checks_ok(rri, slot, estate, &v);
	if (ok && rel->rd_rel->relispartition && rri->ri_RootResultRelInfo == NULL &&
		!ExecPartitionCheck(rri, slot, estate, false))
		ok = violation(&v, ERRCODE_CHECK_VIOLATION,
					   psprintf("new row for relation \"%s\" violates partition constraint",
								RelationGetRelationName(rel)),
					   slot);
	*sqlerrcode = v.sqlerrcode;
	*message = v.message;
	*detail = v.detail;
	return ok;
}

/*
 * The message a plain INSERT gives for the row in 'slot', which conflicts
 * in one of the unique indexes listed in 'conflicts'.
 */
void
dp_describe_duplicate(ResultRelInfo *rri, List *conflicts, TupleTableSlot *slot,
					  EState *estate, char **message, char **detail)
{
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	idx = rri->ri_IndexRelationDescs[i];
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];
		char	   *key;

		if (!list_member_oid(conflicts, RelationGetRelid(idx)))
			continue;
		GetPerTupleExprContext(estate)->ecxt_scantuple = slot;
		FormIndexDatum(rri->ri_IndexRelationInfo[i], slot, estate, values, isnull);
		key = BuildIndexValueDescription(idx, values, isnull);
		*message = psprintf("duplicate key value violates unique constraint \"%s\"",
							RelationGetRelationName(idx));
		*detail = key ? psprintf("Key %s already exists.", key) : NULL;
		return;
	}
	*message = pstrdup("duplicate key value violates a unique constraint");
	*detail = NULL;
}
