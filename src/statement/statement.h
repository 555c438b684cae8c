/*-------------------------------------------------------------------------
 *
 * statement/statement.h
 *	  The statement stage: the hooks through which directpath takes over an
 *	  INSERT (plan.c, exec.c) or a COPY FROM (copy.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_STATEMENT_H
#define DP_STATEMENT_H

#include "parallel/parallel.h"

/* Each module's hooks, installed by _PG_init. */
extern void dp_plan_init(void);
extern void dp_exec_init(void);
extern void dp_copy_init(void);

/* ---------- exec.c ---------- */

/* The CustomScan methods of the DirectPath node, for plan.c to wrap with. */
extern const CustomScanMethods *dp_exec_plan_methods(void);

#endif							/* DP_STATEMENT_H */
