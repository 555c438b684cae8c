/*-------------------------------------------------------------------------
 *
 * entry.c
 *	  A row's entry for one index, as ExecInsert forms it, for every way a
 *	  load takes entries (sorted.c per batch and as rows are placed,
 *	  rebuild.c's build of new storage).
 *
 * The partial-index predicate is prepared once per index (kept in its
 * IndexInfo, as core keeps it) and evaluated on the row; then the key
 * columns and expressions are formed by FormIndexDatum.  Both run in the
 * estate's per-tuple context, which the caller resets between rows; the
 * values point into the row or that context, so a caller that keeps an
 * entry copies it (the sorts do).
 *
 *-------------------------------------------------------------------------
 */
#include "index/index_private.h"

#include "catalog/index.h"
#include "executor/executor.h"

bool
dp_index_entry_values(ResultRelInfo *rri, int i, EState *estate,
					  TupleTableSlot *slot, Datum *values, bool *isnull)
{
	IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
	ExprContext *econtext = GetPerTupleExprContext(estate);

	econtext->ecxt_scantuple = slot;
	if (ii->ii_Predicate != NIL)
	{
		if (ii->ii_PredicateState == NULL)
			ii->ii_PredicateState = ExecPrepareQual(ii->ii_Predicate, estate);
		if (!ExecQual(ii->ii_PredicateState, econtext))
			return false;
	}
	FormIndexDatum(ii, slot, estate, values, isnull);
	return true;
}
