/*-------------------------------------------------------------------------
 *
 * admission/admission.h
 *	  The admission stage: whether a statement takes the direct path and why
 *	  not (admission.c), the hint (hint.c), the rules (eligibility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_ADMISSION_H
#define DP_ADMISSION_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

/* ---------- hint.c ---------- */

typedef enum DPHint
{
	DP_HINT_NONE,
	DP_HINT_APPEND,
	DP_HINT_NOAPPEND,
} DPHint;

/*
 * The hint of the statement at [location, location + len) of 'source';
 * '*parallel' (unless NULL) gets the workers asked for: PARALLEL(n), else
 * directpath.parallel_workers.
 */
extern DPHint dp_find_hint(const char *source, int location, int len,
						   int *parallel);

/* ---------- eligibility.c: the rules (reasons are static strings) ---------- */

/* Why rows cannot be appended to 'rel' (with its partitions: 'recurse'). */
extern const char *dp_relation_ineligible(Relation rel, bool recurse);

/* The same checks for a partition that tuple routing reached. */
extern const char *dp_partition_ineligible(Relation rel);

/* Is the foreign table postgres_fdw's (its handler postgres_fdw_handler)? */
extern bool dp_is_postgres_fdw(Relation rel);

/* Is the foreign server postgres_fdw's? */
extern bool dp_server_is_postgres_fdw(Oid serverid);

/* Why a planned INSERT cannot take the direct path, or NULL. */
extern const char *dp_statement_ineligible(Query *parse, PlannedStmt *stmt,
										   bool hinted);

/* May the statement's rows be frozen (nothing in it reads the target)? */
extern bool dp_statement_freeze_safe(Query *parse, PlannedStmt *stmt,
									 Oid target);

/* Upper bound of a VALUES INSERT's row bytes into 'rel', or -1 if unknown. */
extern int64 dp_values_max_bytes(Query *parse, Relation rel);

/* Is the INSERT a single row of VALUES? */
extern bool dp_query_is_single_row(Query *parse);

/* Why per-row expressions (COPY defaults, WHERE) keep a COPY off, or NULL. */
extern const char *dp_expr_ineligible(Node *expr);

/* Does the expression call a function that is not built in? */
extern bool dp_expr_has_user_function(Node *expr);

/* ---------- existing.c: ON CONFLICT and MERGE's rules ---------- */

/*
 * ON CONFLICT (conflict.c): are a btree's keys equal exactly when their
 * bytes are; is 'index' one of 'arbiters' (NIL: every unique index), or a
 * partition of one; why the arbiters in the leaves of 'relid' cannot be
 * checked on the direct path, or NULL.
 */
extern bool dp_index_keys_equal_image(Relation index);
extern bool dp_index_is_arbiter(Relation index, List *arbiters);
extern const char *dp_arbiters_ineligible(Oid relid, List *arbiters);

/* Why a planned DO UPDATE into 'target', or a MERGE, stays off, or NULL. */
extern const char *dp_do_update_ineligible(ModifyTable *mt, Oid target);

/*
 * Why COPY's ON_CONFLICT 'update' on 'arbiter' cannot be, or NULL; its
 * update assigns *assigned, the columns of 'copied' outside the arbiter.
 */
extern const char *dp_copy_update_ineligible(Oid target, Oid arbiter,
											 List *copied, List **assigned);
extern const char *dp_merge_ineligible(PlannedStmt *stmt, ModifyTable *mt);

/* Why a hinted UPDATE or DELETE cannot be made in bulk, or NULL. */
extern const char *dp_rewrite_ineligible(PlannedStmt *stmt, ModifyTable *mt);

/* ---------- admission.c ---------- */

/* The decision for one statement. */
typedef struct DPAdmission
{
	bool		hinted;			/* the statement asked for the direct path */
	bool		direct;			/* admitted: ShareRowExclusiveLock on the
								 * target is held (or with 'beside'
								 * RowExclusiveLock) */
	bool		beside;			/* a COPY or INSERT loading beside the
								 * table's other writers
								 * (directpath.concurrent_loads) */
	const char *reason;			/* why not admitted, or NULL */
	bool		small;			/* not admitted only for its size */
	bool		freeze_allowed; /* the statement's freezing rule allows it */
	int			parallel;		/* COPY: parallel workers asked for, or 0 */
} DPAdmission;

/* How a COPY FROM goes. */
typedef enum DPAdmitCopy
{
	DP_COPY_NOT_WANTED,			/* no hint (or refused by it, or mode off) */
	DP_COPY_CORE,				/* core must run it (and raise its errors) */
	DP_COPY_NORMAL,				/* considered, refused: reason set */
	DP_COPY_DIRECT,				/* target locked and opened: *relp */
} DPAdmitCopy;

/* Post-parse analysis: take the early strong lock for a wanted INSERT. */
extern void dp_admit_parse(const char *source, Query *query);

/*
 * Before planning: is the INSERT wanted on the direct path?  *hinted set,
 * and *parallel to the parallel workers asked for (0: none).
 */
extern bool dp_admit_insert_wanted(Query *parse, const char *source,
								   bool *hinted, int *parallel);

/*
 * REFRESH MATERIALIZED VIEW CONCURRENTLY, its text at 'location' for 'len'
 * bytes, begins: until dp_admit_refresh_done(the value returned), the
 * DELETE and INSERT core runs on the view take its hint (or NOAPPEND) as
 * theirs.
 */
extern int	dp_admit_refresh_concurrently(const char *source, int location,
										  int len);
extern void dp_admit_refresh_done(int saved);

/*
 * A statement whose target it creates (CREATE TABLE AS, REFRESH
 * MATERIALIZED VIEW: born.c), its text at 'location' for 'len' bytes: is it
 * wanted on the direct path?  *hinted set, and *parallel to the workers
 * asked for (the hint's PARALLEL(n), else directpath.parallel_workers).
 */
extern bool dp_admit_born_wanted(const char *source, int location, int len,
								 bool *hinted, int *parallel);

/* After planning (plan top is a ModifyTable): the decision for the INSERT. */
extern void dp_admit_insert(Query *parse, PlannedStmt *stmt, bool hinted,
							DPAdmission *a);

/*
 * A COPY FROM: the hint, the privileges core checks first, the rules and
 * the lock.  DP_COPY_DIRECT returns the target opened (NoLock, the caller
 * closes it) in *relp; the caller then applies DoCopy's checks and asks
 * dp_admit_copy_exprs.  'own_option' names one of directpath's COPY
 * options the statement has, which want the direct path, or is NULL.
 */
extern DPAdmitCopy dp_admit_copy(CopyStmt *stmt, const char *source,
								 int location, int len, const char *own_option,
								 DPAdmission *a, Relation *relp);

/* COPY's per-row expressions; true admits and sets the freezing rule. */
extern bool dp_admit_copy_exprs(Node *exprs, DPAdmission *a);

/*
 * COPY FREEZE's "no prior transaction activity" test; must run before the
 * executor registers the statement's snapshot.
 */
extern bool dp_admit_no_prior_activity(void);

#endif							/* DP_ADMISSION_H */
