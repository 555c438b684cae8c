/*-------------------------------------------------------------------------
 *
 * directpath.c
 *	  Module entry point: defines the settings and installs the hooks.
 *
 * The library must be loaded before the statements it should handle are
 * parsed: shared_preload_libraries, session_preload_libraries or LOAD.
 * _PG_init defines every directpath.* setting (common/settings.c, then the
 * fault points' own, common/fault.c), reserves the prefix, asks for the
 * progress view's shared memory when preloaded (common/progress.c), and
 * lets the statement stage install its hooks: parse analysis and the planner
 * (plan.c), executor start and finish (exec.c), utility statements
 * (copy.c), and CREATE TABLE AS / REFRESH (born.c).
 *
 * The source tree, stage by stage, is described in docs/internals.md (the
 * one map; scripts/callgraph.py checks it against the files).
 *
 *-------------------------------------------------------------------------
 */
#include "statement/statement.h"

#include "common/fault.h"
#include "common/progress.h"
#include "common/settings.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	dp_settings_init();
	dp_fault_init();
	MarkGUCPrefixReserved("directpath");
	dp_progress_init();

	dp_plan_init();
	dp_exec_init();
	dp_copy_init();
	dp_born_init();
}
