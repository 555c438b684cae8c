/*-------------------------------------------------------------------------
 *
 * upsert.c
 *	  The rows a direct-path statement leaves to core's own executor, run
 *	  once the rows it inserts are written: INSERT ... ON CONFLICT DO
 *	  UPDATE's rows that meet a row of the table, MERGE's matched rows.
 *
 * conflict.c decides each row of a DO UPDATE statement as it decides rows
 * for DO NOTHING, with two changes: a row whose key an earlier row of the
 * statement inserted raises core's "cannot affect row a second time"
 * (that earlier row is this command's, which is what core's tuple lock
 * finds); a row whose key a live row of the table has is not skipped but
 * kept here.  The others take the direct path.
 *
 * The rows kept are stored in input order, in the layout of the
 * ModifyTable's subplan (an INSERT's subplan yields one column per
 * attribute of the target, so a target row has it), in a tuplestore
 * (spilling to disk past work_mem).  When every row the statement inserts
 * is written, its page builders are finished and its index work is done
 * (dp_load_finish), they are run through the statement's own ModifyTable
 * node: its subplan is replaced, for the run, by a feeder that returns the
 * kept rows one by one, and ExecModifyTable does for each exactly what it
 * does for a plain INSERT ... ON CONFLICT DO UPDATE - routing, the
 * conflict check, the tuple lock, EXCLUDED, the WHERE clause, RLS, the
 * update with its triggers, index entries and transition tables,
 * RETURNING, the counters, and every error.  RETURNING rows go to the
 * load's tuplestore.
 *
 * Why at the very end: core's heap_update may extend the relation, and a
 * page builder owns the blocks past the end of the relation while it runs
 * (append.c); and the index work that waits for the end (indexes.c:
 * appended, merged or run-inserted entries) takes the load's entries to
 * follow every entry already in the index with an equal key, which the
 * new versions' entries would not.  Why this is the same outcome as
 * core's, row for row:
 *	- the arbiter's key cannot change (existing.c: SET assigns none of
 *	  its columns, none is generated, no BEFORE UPDATE trigger), so a kept
 *	  row and an inserted row never share an arbiter key; every later row
 *	  with a kept row's key is kept too, behind it;
 *	- no update (or MERGE's delete) frees a key of any unique index
 *	  (existing.c), so an inserted row cannot meet, before the update, a
 *	  key that core's order would have freed for it;
 *	- the rows of this command are invisible to its snapshot on both paths
 *	  (the load does not freeze under DO UPDATE), so SET and WHERE
 *	  expressions see the same table; volatile functions that could read
 *	  it are refused;
 *	- ExecModifyTable's AFTER STATEMENT triggers, queued at the end of each
 *	  run, are cancelled by the ones the DirectPath node queues last, as
 *	  core cancels repeated ones (trigger.c).
 * What differs is order: the updated rows' trigger events and RETURNING
 * rows come after those of the rows inserted, and when several rows would
 * fail, an inserted row's error can come first.
 *
 * MERGE (exec.c) keeps its matched rows here as the subplan produced them,
 * junk columns included; ExecModifyTable takes each down its matched path
 * (ExecMergeMatched: the row lock, the actions, the cardinality check).
 * The inserted rows cannot be matched instead: the join reads the target
 * through the statement's snapshot, which does not see this command's
 * rows (the load does not freeze under MERGE either).
 *
 * Where the changes may be made in bulk (bulkrules.c), a kept row goes
 * instead to its relation's bulk changes (versions.c): the target's, begun
 * with the statement, or a leaf's, begun at the leaf's first row - an
 * UPDATE's, DELETE's or MERGE's leaf found by the row's tableoid, an
 * upsert's by its routing - kept by relation OID.  An upsert's or a
 * MERGE's leaf is judged at that first row, and a refused leaf's rows
 * stay here for core; every leaf's bulk run ends before core takes the
 * rows kept here.
 *
 * COPY's ON_CONFLICT 'update' (copyopts.c) has no ModifyTable node: its
 * rows whose key is in the table are kept in the target's format and run,
 * at the same point, through the INSERT ... ON CONFLICT DO UPDATE statement
 * copyopts.c wrote, by SPI, reading them as the ephemeral named relation
 * DP_UPSERT_ROWS (as a trigger reads its transition tables).  The
 * statement is planned and run as any other: its own command, after this
 * command's rows (CommandCounterIncrement), with its own triggers
 * (statement triggers of INSERT and UPDATE included), row security and
 * errors.  The same arguments as above make the outcome core's: the rows
 * kept met a live row of the table when decided, the update assigns no
 * key of a unique index, and a key two kept rows share is core's "cannot
 * affect row a second time".
 *
 * Invariants: the ModifyTable node's subplan is restored after each run,
 * also on error (the executor's end would otherwise end the feeder); the
 * kept rows are run once, in input order.
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "common/report.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "utils/hsearch.h"
#include "utils/queryenvironment.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/*
 * One relation's changes in bulk: the target's, or one leaf's (a result
 * relation of an UPDATE, a DELETE or a MERGE of a partitioned table or an
 * inheritance tree; a leaf an upsert's rows are routed to).
 */
typedef struct DPUpsertRel
{
	Oid			relid;			/* hash key */
	DPVersions *versions;		/* NULL: the leaf was refused, its rows are
								 * core's */
} DPUpsertRel;

/* The subplan ExecModifyTable pulls from during a run. */
typedef struct DPFeeder
{
	PlanState	ps;				/* first: ExecProcNode calls ps.ExecProcNode */
	DPUpsert   *u;
} DPFeeder;

struct DPUpsert
{
	ModifyTableState *mtstate;
	Tuplestorestate *rows;		/* the kept rows, the subplan's layout */
	Tuplestorestate *retstore;	/* RETURNING output, or NULL */
	TupleTableSlot *read;		/* a kept row read back (minimal tuple) */
	TupleTableSlot *fed;		/* ... in the subplan's slot type */
	TupleTableSlot *root;		/* a leaf's row converted to the target's */
	DPFeeder	feeder;
	uint64		kept;
	uint64		core_rows;		/* rows run through core's executor */
	const char *update_sql;		/* COPY: the statement run instead */
	bool		bulk;			/* the changes in bulk (versions.c)... */
	const char *why;			/* ... or why not */
	HTAB	   *rels;			/* DPUpsertRel by relation OID */
	List	   *order;			/* ... in the order of their first rows */
	DPUpsertRel *last;			/* ... the last one a row went to */
	uint64		leaf_core;		/* rows of leaves refused (to core) */
	const char *leaf_why;		/* ... the first leaf's reason */
	DPReport	statement_report;	/* COPY: its update statement's */
	bool		statement_reported;
};

static DPUpsertRel *rel_of(DPUpsert *u, ResultRelInfo *rri);

static TupleTableSlot *
feed_next(PlanState *ps)
{
	DPUpsert   *u = ((DPFeeder *) ps)->u;

	if (!tuplestore_gettupleslot(u->rows, true, false, u->read))
		return NULL;
	ExecCopySlot(u->fed, u->read);
	return u->fed;
}

/*
 * The target's indexes, opened once for the statement (see below), each
 * unique one with the operators core's conflict check needs (as
 * ExecOpenIndices(..., true) gives them): whoever opened them first, a
 * kept row may take core's ON CONFLICT path.
 */
static void
open_target_indexes(EState *estate, ResultRelInfo *rri)
{
	MemoryContext old;

	if (rri->ri_RelationDesc->rd_rel->relkind != RELKIND_RELATION ||
		!rri->ri_RelationDesc->rd_rel->relhasindex)
		return;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	if (rri->ri_IndexRelationDescs == NULL)
		ExecOpenIndices(rri, true);
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *info = rri->ri_IndexRelationInfo[i];

		if (info->ii_Unique && info->ii_UniqueOps == NULL)
			BuildSpeculativeIndexInfo(rri->ri_IndexRelationDescs[i], info);
	}
	MemoryContextSwitchTo(old);
}

DPUpsert *
dp_upsert_begin(EState *estate, ModifyTableState *mtstate,
				Tuplestorestate *retstore, const char *update_sql)
{
	DPUpsert   *u = palloc0(sizeof(DPUpsert));
	PlanState  *subplan = outerPlanState(mtstate);
	TupleDesc	rootdesc = RelationGetDescr(mtstate->rootResultRelInfo->ri_RelationDesc);
	bool		fixed;

	u->mtstate = mtstate;
	u->retstore = retstore;
	u->rows = tuplestore_begin_heap(false, false, work_mem);
	u->update_sql = update_sql;
	if (update_sql != NULL)
	{
		/* COPY: the rows in the target's format, for the statement */
		u->root = ExecInitExtraTupleSlot(estate, rootdesc, &TTSOpsVirtual);
		return u;
	}
	/* a target's row has the subplan's layout (one column per attribute) */
	u->read = ExecInitExtraTupleSlot(estate, ExecGetResultType(subplan),
									 &TTSOpsMinimalTuple);
	u->root = ExecInitExtraTupleSlot(estate, rootdesc, &TTSOpsVirtual);
	/* the type of slot the ModifyTable's projection was compiled for */
	u->fed = ExecInitExtraTupleSlot(estate, ExecGetResultType(subplan),
									ExecGetResultSlotOps(subplan, &fixed));
	u->feeder.ps.state = estate;
	u->feeder.ps.plan = subplan->plan;
	u->feeder.ps.ExecProcNode = feed_next;
	u->feeder.u = u;

	/*
	 * The bulk updates index their new versions through the target's
	 * ResultRelInfo.  Core opens an UPDATE's or MERGE's indexes only when
	 * it first updates a row (ExecUpdatePrologue), and a load opens them
	 * when it first inserts one (leaf.c): a MERGE that inserts nothing
	 * would find none open.  Open them now, in the query's context, as
	 * ExecUpdatePrologue would, for every result relation (an UPDATE's or
	 * a DELETE's leaves); the refusal checks read them too.
	 */
	for (int i = 0; i < mtstate->mt_nrels; i++)
		open_target_indexes(estate, &mtstate->resultRelInfo[i]);
	if ((u->why = dp_versions_refusal(mtstate)) == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(DPUpsertRel);
		ctl.hcxt = CurrentMemoryContext;
		u->bulk = true;
		u->rels = hash_create("directpath bulk changes", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (mtstate->mt_nrels == 1 && !dp_versions_leaves_late(mtstate))
			(void) rel_of(u, mtstate->resultRelInfo);
	}
	return u;
}

/*
 * The bulk changes of 'rri', begun at its first row, so that leaves
 * without rows cost nothing (a single target is begun with the
 * statement).  An upsert's or a MERGE's leaf is judged then (the others
 * were judged with the statement, dp_versions_refusal).
 */
static DPUpsertRel *
rel_of(DPUpsert *u, ResultRelInfo *rri)
{
	ModifyTableState *mt = u->mtstate;
	Oid			relid = RelationGetRelid(rri->ri_RelationDesc);
	DPUpsertRel *r;
	bool		found;

	if (u->last != NULL && u->last->relid == relid)
		return u->last;
	r = hash_search(u->rels, &relid, HASH_ENTER, &found);
	if (!found)
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(u));
		const char *why = NULL;

		r->versions = NULL;
		if (dp_versions_leaves_late(mt))
		{
			open_target_indexes(mt->ps.state, rri);
			why = dp_versions_leaf_refusal(mt, rri);
		}
		if (why != NULL && u->leaf_why == NULL)
			u->leaf_why = why;
		if (why == NULL)
			r->versions = dp_versions_begin(mt->ps.state, mt, rri, u->rows,
											u->retstore);
		u->order = lappend(u->order, r);
		MemoryContextSwitchTo(old);
	}
	u->last = r;
	return r;
}

/*
 * The result relation of a subplan row (MERGE, UPDATE, DELETE): the only
 * one, or the one its tableoid names, as ExecModifyTable finds it.
 */
static ResultRelInfo *
result_rel_of(ModifyTableState *mt, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		oid;

	if (mt->mt_nrels == 1)
		return mt->resultRelInfo;
	oid = ExecGetJunkAttribute(slot, mt->mt_resultOidAttno, &isnull);
	Assert(!isnull);
	return ExecLookupResultRelByOid(mt, DatumGetObjectId(oid), false, true);
}

void
dp_upsert_keep(DPUpsert *u, ResultRelInfo *rri, TupleTableSlot *slot,
			   ItemPointer found)
{
	TupleConversionMap *map = NULL;

	/* DO UPDATE's rows with the entry they met, MERGE's with their ctid */
	if (u->bulk)
	{
		DPUpsertRel *r = rel_of(u, rri != NULL ? rri :
								result_rel_of(u->mtstate, slot));

		if (r->versions != NULL)
		{
			dp_versions_keep(r->versions, slot, found);
			return;
		}
		u->leaf_core++;
	}

	if (rri != NULL && rri != u->mtstate->rootResultRelInfo)
		map = ExecGetChildToRootMap(rri);
	if (map != NULL)
		slot = execute_attr_map_slot(map->attrMap, slot, u->root);
	tuplestore_puttupleslot(u->rows, slot);
	u->kept++;
}

/* COPY's kept rows through its update statement, by SPI. */
static void
run_statement(DPUpsert *u)
{
	Relation	target = u->mtstate->rootResultRelInfo->ri_RelationDesc;
	EphemeralNamedRelation enr = palloc0(sizeof(EphemeralNamedRelationData));
	int			rc;

	enr->md.name = DP_UPSERT_ROWS;
	enr->md.reliddesc = InvalidOid;
	enr->md.tupdesc = RelationGetDescr(target);
	enr->md.enrtype = ENR_NAMED_TUPLESTORE;
	enr->md.enrtuples = u->kept;
	enr->reldata = u->rows;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_register_relation(enr) != SPI_OK_REL_REGISTER)
		elog(ERROR, "could not register the kept rows of ON_CONFLICT 'update'");
	rc = SPI_execute(u->update_sql, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "ON_CONFLICT 'update''s statement failed: %s",
			 SPI_result_code_string(rc));
	SPI_finish();
	/* what the statement (a direct one, or core's) said of its updates */
	if (dp_report_last(&u->statement_report))
		u->statement_reported = true;
}

void
dp_upsert_run_node(ModifyTableState *mt, Tuplestorestate *retstore)
{
	for (;;)
	{
		TupleTableSlot *ret = ExecProcNode(&mt->ps);

		if (TupIsNull(ret))
			break;
		if (retstore)
			tuplestore_puttupleslot(retstore, ret);
	}
}

void
dp_upsert_run(DPUpsert *u)
{
	ModifyTableState *mt = u->mtstate;
	PlanState  *subplan = outerPlanState(mt);

	if (u->bulk)
	{
		bool		ran = false;
		ListCell   *lc;

		/* every leaf's bulk changes, then core's rows */
		foreach(lc, u->order)
		{
			DPUpsertRel *r = lfirst(lc);

			if (r->versions == NULL)
				continue;
			u->kept += dp_versions_run(r->versions);
			ran = true;
		}
		/* EXPLAIN ANALYZE: the node ran, though no leaf had a row */
		if (!ran && mt->ps.instrument)
		{
			InstrStartNode(mt->ps.instrument);
			InstrStopNode(mt->ps.instrument, 0);
		}
	}
	if (u->kept == 0)
		return;
	u->core_rows += u->kept;
	if (u->update_sql != NULL)
	{
		run_statement(u);
		tuplestore_clear(u->rows);
		u->kept = 0;
		return;
	}
	outerPlanState(mt) = &u->feeder.ps;
	mt->mt_done = false;
	PG_TRY();
	{
		dp_upsert_run_node(mt, u->retstore);
	}
	PG_FINALLY();
	{
		outerPlanState(mt) = subplan;
	}
	PG_END_TRY();
	tuplestore_clear(u->rows);
	u->kept = 0;
}

/* The bulk changes of every relation together, and core's rows. */
static void
describe_bulk(DPUpsert *u, char *buf, size_t len)
{
	CmdType		op = u->mtstate->operation;
	uint64		changed = 0,
				locked = 0,
				to_core = u->leaf_core;
	const char *core_why = u->leaf_why;
	ListCell   *lc;
	int			w;

	foreach(lc, u->order)
	{
		DPUpsertRel *r = lfirst(lc);

		if (r->versions != NULL)
			dp_versions_counts(r->versions, &changed, &locked, &to_core,
							   &core_why);
	}
	if (op == CMD_UPDATE || op == CMD_DELETE)
		w = snprintf(buf, len, "%llu rows %s in bulk",
					 (unsigned long long) changed,
					 op == CMD_UPDATE ? "updated" : "deleted");
	else
		w = snprintf(buf, len, "%llu in bulk", (unsigned long long) changed);
	if (locked > 0 && w < (int) len)
		w += snprintf(buf + w, len - w, " (%llu more locked: WHERE false)",
					  (unsigned long long) locked);
	if (to_core > 0 && w < (int) len)
		snprintf(buf + w, len - w, ", %llu rows by core's executor: %s",
				 (unsigned long long) to_core, core_why);
}

void
dp_upsert_describe(DPUpsert *u, char *buf, size_t len)
{
	buf[0] = '\0';
	if (u->statement_reported)
	{
		DPReport   *r = &u->statement_report;

		snprintf(buf, len, "%llu rows through INSERT ... ON CONFLICT DO UPDATE: %s",
				 (unsigned long long) u->core_rows,
				 r->updates[0] ? r->updates :
				 r->direct ? "" : r->reason[0] ? r->reason : "normal path");
	}
	else if (u->bulk)
		describe_bulk(u, buf, len);
	else if (u->core_rows > 0 && u->why != NULL)
		snprintf(buf, len, "%llu rows by core's executor: %s",
				 (unsigned long long) u->core_rows, u->why);
}

void
dp_upsert_end(DPUpsert *u)
{
	ListCell   *lc;

	foreach(lc, u->order)
	{
		DPUpsertRel *r = lfirst(lc);

		if (r->versions != NULL)
			dp_versions_end(r->versions);
	}
	tuplestore_end(u->rows);
}

const char *
dp_upsert_refusal(DPUpsert *u)
{
	return u->bulk ? NULL : u->why;
}

uint64
dp_upsert_pages(DPUpsert *u)
{
	uint64		pages = 0;
	ListCell   *lc;

	foreach(lc, u->order)
	{
		DPUpsertRel *r = lfirst(lc);

		if (r->versions != NULL)
			pages += dp_versions_pages(r->versions);
	}
	return pages;
}
