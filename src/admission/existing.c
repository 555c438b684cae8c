/*-------------------------------------------------------------------------
 *
 * existing.c
 *	  The rules for statements that meet rows already in the table:
 *	  INSERT ... ON CONFLICT (conflict.c, upsert.c) and MERGE (exec.c).
 *
 * ON CONFLICT.  conflict.c keeps the keys of the rows not yet in the index
 * as byte images, so an arbiter must compare its keys by their bytes: not
 * an exclusion constraint, not numeric, float or a nondeterministic
 * collation (dp_arbiters_ineligible).  DO UPDATE hands the rows whose key
 * is in the table to core's executor after the load (upsert.c), which is
 * core's outcome only if no row inserted later can meet a key an update
 * made: one arbiter, whose columns (key, expression, predicate) SET does
 * not assign and none of which is generated; and nothing of the update
 * may run while the statement's rows wait in memory: no BEFORE ROW UPDATE
 * trigger (dp_do_update_ineligible).  Nor may an update free a key of any
 * unique index that a row inserted before it could then have taken in
 * core's order but meets in ours (keys_rule): SET assigns no column of a
 * unique or exclusion index, none of those has a generated column.
 *
 * MERGE.  Its WHEN NOT MATCHED inserts are appended and its matched rows
 * left to core after the load (exec.c): so it must have an INSERT action
 * (else there is nothing to append), no RETURNING (its rows would come
 * back out of order, and 17's merge_action() is the executor's), and no
 * BEFORE ROW trigger of the UPDATE or DELETE it does, no DELETE from a
 * table with a unique index and no UPDATE of such an index's column
 * (keys_rule, as for DO UPDATE) (dp_merge_ineligible; its expressions are
 * INSERT's concern, eligibility.c).  Foreign partitions are refused for both: their
 * wrapper's updates are no part of this.
 *
 * UPDATE and DELETE in bulk (versions.c): plain tables - the target, or
 * each leaf of a partitioned table or an inheritance tree the plan kept -
 * and an UPDATE whose SET assigns no column of a unique or exclusion index
 * (keys_rule) nor of a partition key above or below the target
 * (partition_key_rule: a row that leaves its partition is core's to move
 * or to fail) (dp_rewrite_ineligible).
 *
 *-------------------------------------------------------------------------
 */
#include "admission/admission.h"

#include "access/nbtree.h"
#include "access/relation.h"
#include "catalog/catalog.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "common/report.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

/*
 * Are the index's keys equal exactly when their bytes are?  As
 * _bt_allequalimage asks each key column's operator class, but without
 * its refusal of INCLUDE columns (deduplication's concern, not ours: they
 * are no part of the key).
 */
bool
dp_index_keys_equal_image(Relation index)
{
	if (index->rd_rel->relam != BTREE_AM_OID || IsSystemRelation(index))
		return false;
	for (int j = 0; j < IndexRelationGetNumberOfKeyAttributes(index); j++)
	{
		Oid			type = index->rd_opcintype[j];
		Oid			proc = get_opfamily_proc(index->rd_opfamily[j], type, type,
											 BTEQUALIMAGE_PROC);

		if (!OidIsValid(proc) ||
			!DatumGetBool(OidFunctionCall1Coll(proc, index->rd_indcollation[j],
											   ObjectIdGetDatum(type))))
			return false;
	}
	return true;
}

/*
 * Is 'index' an arbiter of 'arbiters' (OIDs; NIL: every unique index)?  A
 * partition's index is one when an index it is a partition of is.
 */
bool
dp_index_is_arbiter(Relation index, List *arbiters)
{
	List	   *ancestors;
	bool		found = false;
	ListCell   *lc;

	if (arbiters == NIL || list_member_oid(arbiters, RelationGetRelid(index)))
		return true;
	if (!index->rd_rel->relispartition)
		return false;
	ancestors = get_partition_ancestors(RelationGetRelid(index));
	foreach(lc, ancestors)
		found = found || list_member_oid(arbiters, lfirst_oid(lc));
	list_free(ancestors);
	return found;
}

/* A rule for one index of a relation: why not, or NULL. */
typedef const char *(*DPIndexRule) (Relation rel, Relation index, const void *arg);

/* The first reason 'rule' gives for one of the relation's indexes. */
static const char *
indexes_ineligible(Relation rel, DPIndexRule rule, const void *arg)
{
	List	   *indexes = RelationGetIndexList(rel);
	const char *r = NULL;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		r = rule(rel, index, arg);
		index_close(index, AccessShareLock);
		if (r != NULL)
			break;
	}
	list_free(indexes);
	return r;
}

/* Why an arbiter (of 'arbiters', a List) keeps ON CONFLICT off, or NULL. */
static const char *
arbiter_rule(Relation rel, Relation index, const void *arg)
{
	Form_pg_index ix = index->rd_index;

	if ((!ix->indisunique && !ix->indisexclusion) ||
		!dp_index_is_arbiter(index, (List *) arg))
		return NULL;
	if (ix->indisexclusion)
		return dp_report_reason("the ON CONFLICT arbiter \"%s\" is an exclusion constraint",
								RelationGetRelationName(index));
	if (!dp_index_keys_equal_image(index))
		return dp_report_reason("the ON CONFLICT arbiter \"%s\" has a key type whose equal values can differ in their bytes (such as numeric, float or a nondeterministic collation)",
								RelationGetRelationName(index));
	return NULL;
}

/* A rule for one relation of a target's tree: why not, or NULL. */
typedef const char *(*DPTreeRule) (Relation rel, const void *arg);

/*
 * The first reason 'rule' gives for one of the relations 'relids' (a list
 * it frees), each locked AccessShareLock until the transaction ends, as
 * find_all_inheritors locks them.
 */
static const char *
rels_ineligible(List *relids, DPTreeRule rule, const void *arg)
{
	const char *r = NULL;
	ListCell   *lc;

	foreach(lc, relids)
	{
		Relation	rel = relation_open(lfirst_oid(lc), AccessShareLock);

		r = rule(rel, arg);
		relation_close(rel, NoLock);
		if (r != NULL)
			break;
	}
	list_free(relids);
	return r;
}

/* The first reason 'rule' gives for 'relid' or any of its partitions. */
static const char *
tree_ineligible(Oid relid, DPTreeRule rule, const void *arg)
{
	return rels_ineligible(find_all_inheritors(relid, AccessShareLock, NULL),
						   rule, arg);
}

static const char *
arbiters_rule(Relation rel, const void *arg)
{
	/* a foreign partition's arbiters are its wrapper's */
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		return NULL;
	return indexes_ineligible(rel, arbiter_rule, arg);
}

/*
 * Arbiters conflict.c can check, in every leaf of 'relid': with no
 * conflict target a partition's own unique index is an arbiter too.
 */
const char *
dp_arbiters_ineligible(Oid relid, List *arbiters)
{
	return tree_ineligible(relid, arbiters_rule, arbiters);
}

/*
 * The columns of an index (key, INCLUDE, expression and predicate columns)
 * as attribute numbers offset by FirstLowInvalidHeapAttributeNumber, as
 * pull_varattnos gives them.
 */
static Bitmapset *
index_columns(Relation index)
{
	Bitmapset  *cols = NULL;

	for (int i = 0; i < index->rd_index->indnatts; i++)
		if (index->rd_index->indkey.values[i] != 0)
			cols = bms_add_member(cols, index->rd_index->indkey.values[i] -
								  FirstLowInvalidHeapAttributeNumber);
	pull_varattnos((Node *) RelationGetIndexExpressions(index), 1, &cols);
	pull_varattnos((Node *) RelationGetIndexPredicate(index), 1, &cols);
	return cols;
}

/* The actions core runs after the load: their BEFORE ROW triggers count. */
typedef struct DPDeferred
{
	bool		update;
	bool		delete;
} DPDeferred;

/*
 * A relation of a statement whose updates or deletes core makes after the
 * load (ON CONFLICT DO UPDATE, MERGE: upsert.c): why it cannot be one, or
 * NULL.  A BEFORE ROW trigger of those would run while the statement's
 * rows wait to be written, and could read the table; a foreign partition
 * is the wrapper's (and core refuses most of it).
 */
static const char *
deferred_rule(Relation rel, const void *arg)
{
	const DPDeferred *d = arg;
	TriggerDesc *trig = rel->trigdesc;

	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		return dp_report_reason("partition \"%s\" is a foreign table",
								RelationGetRelationName(rel));
	if (trig && d->update && trig->trig_update_before_row)
		return dp_report_reason("\"%s\" has a BEFORE ROW UPDATE trigger (it would run while rows of the statement wait to be written)",
								RelationGetRelationName(rel));
	if (trig && d->delete && trig->trig_delete_before_row)
		return dp_report_reason("\"%s\" has a BEFORE ROW DELETE trigger (it would run while rows of the statement wait to be written)",
								RelationGetRelationName(rel));
	return NULL;
}

/*
 * What core's updates and deletes after the load may do to the keys of
 * unique indexes: 'assigned' names the columns updates assign (of the
 * target), 'delete' says whether rows are deleted.
 */
typedef struct DPKeyChange
{
	List	   *assigned;		/* column names (String) */
	bool		delete;
} DPKeyChange;

/*
 * Could an update or a delete made after the load free a key of one of
 * the relation's unique or exclusion indexes?  Then a row the statement
 * inserted (before it, on the direct path) could have met that key where
 * core, inserting in input order after it, would not: refused.  A
 * generated column in such an index counts as assigned when anything is
 * (an update recomputes it).
 */
static const char *
key_rule(Relation rel, Relation index, const void *arg)
{
	const DPKeyChange *k = arg;
	Bitmapset  *cols;
	int			col = -1;

	if (!index->rd_index->indisunique && !index->rd_index->indisexclusion)
		return NULL;
	if (k->delete)
		return dp_report_reason("the statement deletes rows of \"%s\", which has the unique index \"%s\"",
								RelationGetRelationName(rel),
								RelationGetRelationName(index));
	cols = index_columns(index);
	while ((col = bms_next_member(cols, col)) >= 0)
	{
		AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;
		Form_pg_attribute att;

		if (attno <= 0)
			continue;
		att = TupleDescAttr(RelationGetDescr(rel), attno - 1);
		if ((att->attgenerated && k->assigned != NIL) ||
			list_member(k->assigned, makeString(NameStr(att->attname))))
			return dp_report_reason("the statement's update assigns column \"%s\" of the unique index \"%s\"",
									NameStr(att->attname),
									RelationGetRelationName(index));
	}
	return NULL;
}

static const char *
keys_rule(Relation rel, const void *arg)
{
	return indexes_ineligible(rel, key_rule, arg);
}

/* The names of the target's columns 'attnums' (integers). */
static List *
column_names(Oid target, List *attnums)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, attnums)
		names = lappend(names, makeString(get_attname(target, lfirst_int(lc), false)));
	return names;
}

/*
 * The rules of an update core makes after the load (upsert.c hands the
 * conflicting rows to core's executor, after the rows the statement
 * inserts are written), its SET assigning 'assigned' (attribute numbers)
 * on a key of 'arbiter': the update cannot change the key (SET assigns
 * none of its columns, none is generated), so that no row inserted later
 * can meet a key the update made; no BEFORE UPDATE row trigger, no foreign
 * partition, no other unique key assigned.
 */
static const char *
update_ineligible(Oid target, Oid arbiter, List *assigned)
{
	Relation	index = index_open(arbiter, AccessShareLock);
	Relation	rel = relation_open(target, NoLock);
	Bitmapset  *cols = index_columns(index);
	const char *r = NULL;
	ListCell   *lc;
	int			col = -1;

	foreach(lc, assigned)
		if (bms_is_member(lfirst_int(lc) - FirstLowInvalidHeapAttributeNumber, cols))
			r = dp_report_reason("ON CONFLICT DO UPDATE SET assigns column \"%s\" of the arbiter \"%s\"",
								 get_attname(target, lfirst_int(lc), false),
								 RelationGetRelationName(index));
	while (r == NULL && (col = bms_next_member(cols, col)) >= 0)
	{
		AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;

		if (attno > 0 &&
			TupleDescAttr(RelationGetDescr(rel), attno - 1)->attgenerated)
			r = dp_report_reason("the ON CONFLICT DO UPDATE arbiter \"%s\" has a generated column",
								 RelationGetRelationName(index));
	}
	relation_close(rel, NoLock);
	index_close(index, AccessShareLock);

	if (r == NULL)
		r = tree_ineligible(target, deferred_rule, &(DPDeferred) {.update = true});
	if (r == NULL)
		r = tree_ineligible(target, keys_rule, &(DPKeyChange) {
			.assigned = column_names(target, assigned)});
	return r;
}

/* ON CONFLICT DO UPDATE: one arbiter, and the rules of its update. */
const char *
dp_do_update_ineligible(ModifyTable *mt, Oid target)
{
	if (list_length(mt->arbiterIndexes) != 1)
		return "ON CONFLICT DO UPDATE with more than one arbiter index";
	return update_ineligible(target, linitial_oid(mt->arbiterIndexes),
							 mt->onConflictCols);
}

/*
 * COPY's ON_CONFLICT 'update': a row whose key 'arbiter' has in the table
 * updates that row's columns of 'copied' (the COPY's attribute numbers)
 * other than the arbiter's; *assigned gets those.  The arbiter must name
 * plain columns (the update is run as INSERT ... ON CONFLICT (columns) DO
 * UPDATE), and the update follow DO UPDATE's rules.
 */
const char *
dp_copy_update_ineligible(Oid target, Oid arbiter, List *copied,
						  List **assigned)
{
	Relation	index = index_open(arbiter, AccessShareLock);
	Bitmapset  *cols = index_columns(index);
	bool		plain = RelationGetIndexExpressions(index) == NIL &&
		RelationGetIndexPredicate(index) == NIL;
	char	   *name = pstrdup(RelationGetRelationName(index));
	ListCell   *lc;

	index_close(index, AccessShareLock);
	if (!plain)
		return dp_report_reason("the arbiter \"%s\" has expressions or a predicate", name);
	*assigned = NIL;
	foreach(lc, copied)
		if (!bms_is_member(lfirst_int(lc) - FirstLowInvalidHeapAttributeNumber, cols))
			*assigned = lappend_int(*assigned, lfirst_int(lc));
	return update_ineligible(target, arbiter, *assigned);
}

/*
 * MERGE: its WHEN NOT MATCHED inserts take the direct path, the rest of
 * its rows are core's after the load (exec.c, upsert.c).  The rules hold
 * for every leaf of a partitioned target, not only the plan's first result
 * relation (a leaf can have a unique index or a trigger of its own); the
 * actions' column numbers are the first result relation's.
 */
const char *
dp_merge_ineligible(PlannedStmt *stmt, ModifyTable *mt)
{
	bool		insert = false;
	DPDeferred	d = {false, false};
	DPKeyChange keys = {NIL, false};
	const char *r;
	Oid			first = rt_fetch(linitial_int(mt->resultRelations),
								 stmt->rtable)->relid;
	Oid			target = mt->rootRelation == 0 ? first :
		rt_fetch(mt->rootRelation, stmt->rtable)->relid;
	ListCell   *lc;

	if (stmt->hasModifyingCTE)
		return "the statement has a data-modifying WITH";
	if (mt->returningLists != NIL)
		return "MERGE ... RETURNING";
	foreach(lc, (List *) linitial(mt->mergeActionLists))
	{
		MergeAction *action = lfirst_node(MergeAction, lc);

		insert |= action->commandType == CMD_INSERT;
		d.update |= action->commandType == CMD_UPDATE;
		d.delete |= action->commandType == CMD_DELETE;
		if (action->commandType == CMD_UPDATE)
			keys.assigned = list_concat(keys.assigned,
										column_names(first, action->updateColnos));
	}
	keys.delete = d.delete;
	if (!insert)
		return "MERGE without WHEN NOT MATCHED THEN INSERT (nothing it does is an append)";
	r = tree_ineligible(target, deferred_rule, &d);
	return r ? r : tree_ineligible(target, keys_rule, &keys);
}

/*
 * Does an update assigning 'arg' (a DPKeyChange's column names) assign a
 * column of the partition key of 'rel', a partitioned table of the
 * target's tree or above it?  A row could then leave its partition: core
 * moves it (a delete and an insert through the root) or, the partition
 * being the target, fails it; the bulk path does neither, so it refuses.
 * An expression of the whole row counts as every column.
 */
static const char *
partition_key_rule(Relation rel, const void *arg)
{
	const DPKeyChange *k = arg;
	PartitionKey key;
	Bitmapset  *cols = NULL;
	int			col = -1;

	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE || k->assigned == NIL)
		return NULL;
	key = RelationGetPartitionKey(rel);
	for (int i = 0; i < key->partnatts; i++)
		if (key->partattrs[i] != 0)
			cols = bms_add_member(cols, key->partattrs[i] -
								  FirstLowInvalidHeapAttributeNumber);
	pull_varattnos((Node *) key->partexprs, 1, &cols);
	while ((col = bms_next_member(cols, col)) >= 0)
	{
		AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;
		const char *name;

		if (attno < 0)
			continue;
		name = attno == 0 ? strVal(linitial(k->assigned)) :
			NameStr(TupleDescAttr(RelationGetDescr(rel), attno - 1)->attname);
		if (list_member(k->assigned, makeString(pstrdup(name))))
			return dp_report_reason("the statement's update assigns column \"%s\" of the partition key of \"%s\" (a row could move to another partition)",
									name, RelationGetRelationName(rel));
	}
	return NULL;
}

/*
 * A bulk UPDATE or DELETE (versions.c): plain tables - one, or the leaves
 * of a partitioned table or an inheritance tree that the plan kept -
 * changed by this statement alone, and an UPDATE whose SET assigns no
 * column of a unique or exclusion index, nor of a partition key.  Core
 * checks such an update's new key row by row, against rows the statement
 * has not yet reached (so that "SET id = id + 1" fails or not by the
 * order of the scan); the bulk path changes every old version before it
 * adds a new entry, and would accept what core refuses.
 */
const char *
dp_rewrite_ineligible(PlannedStmt *stmt, ModifyTable *mt)
{
	Index		top = mt->rootRelation != 0 ? mt->rootRelation :
		linitial_int(mt->resultRelations);
	Oid			target = rt_fetch(top, stmt->rtable)->relid;
	bool		one = list_length(mt->resultRelations) == 1;
	DPKeyChange k = {0};
	const char *r;
	ListCell   *lc;

	foreach(lc, mt->resultRelations)
	{
		RangeTblEntry *rte = rt_fetch(lfirst_int(lc), stmt->rtable);

		/* a materialized view: REFRESH ... CONCURRENTLY's DELETE (eligibility.c) */
		if (rte->relkind == RELKIND_RELATION ||
			(one && rte->relkind == RELKIND_MATVIEW))
			continue;
		return one ? "the target is not a plain table" :
			dp_report_reason("\"%s\" of the target's partitions or children is not a plain table",
							 get_rel_name(rte->relid));
	}
	if (stmt->hasModifyingCTE)
		return "the statement has a data-modifying WITH";
	if (mt->operation != CMD_UPDATE)
		return NULL;
	/* SET's columns by name: a leaf's numbers can differ from the root's */
	k.assigned = column_names(rt_fetch(linitial_int(mt->resultRelations),
									   stmt->rtable)->relid,
							  linitial(mt->updateColnosLists));
	r = tree_ineligible(target, keys_rule, &k);
	if (r == NULL)
		r = tree_ineligible(target, partition_key_rule, &k);
	if (r == NULL && get_rel_relispartition(target))
		r = rels_ineligible(get_partition_ancestors(target), partition_key_rule,
							&k);
	return r;
}
