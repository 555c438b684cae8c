/*-------------------------------------------------------------------------
 *
 * report.c
 *	  What a statement did, said in one place: directpath.last_statement(),
 *	  EXPLAIN's lines and the "uses the normal path" message.
 *
 * Messages.  A hinted statement that is refused says why at
 * directpath.fallback_message_level (NOTICE by default): the user asked for
 * the direct path.  A statement that is only too small to fill a page says
 * so at DEBUG1: the normal path is the better one for it, and a message per
 * small statement would cost its client more than the statement itself.
 * Every reason is in last_statement() and, for a hinted statement, EXPLAIN.
 *
 * Every INSERT or COPY that directpath considered fills one DPReport: the
 * load fills it as it goes (load.c), a statement left to core fills only
 * the reason.  dp_report_publish() makes a report the one that
 * last_statement() returns and gives it an id; a statement that learns its
 * row count only later (core ran it) fills the count in through that id,
 * unless another statement, say one run by a trigger, has published since.
 *
 * Statements left to core at plan time under directpath.mode = always keep
 * core's plan untouched, so no node of ours runs to report them.  The
 * planner notes their reason here, keyed by the statement's text
 * (dp_report_note_plan); when the executor starts a plan of that text
 * without a DirectPath node, the note is published (dp_report_plan_start).
 * The notes are few (the most recent DP_PLAN_NOTES statements), kept in
 * static memory (a text's first DP_NOTE_PREFIX bytes, its length and hash
 * identify it), and only looked up under mode = always.
 *
 * Invariant: last_statement() describes the last INSERT or COPY that
 * directpath considered in this session, and nothing else writes dp_last.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/report.h"
#include "common/settings.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

/* the report last_statement() returns, and its id */
static DPReport last;
static bool last_valid = false;
static uint64 last_id = 0;

/* plan-time reasons of statements planned without our node */
#define DP_PLAN_NOTES 16

/* a note keeps this much of the text; the hash and length cover the rest */
#define DP_NOTE_PREFIX 1024

typedef struct DPPlanNote
{
	uint32		hash;			/* of the statement's text; 0: unused */
	int			len;			/* the text's length */
	char		prefix[DP_NOTE_PREFIX]; /* its first bytes */
	char		reason[DP_REASON_LEN];
} DPPlanNote;

static DPPlanNote notes[DP_PLAN_NOTES];
static int	next_note = 0;

void
dp_report_init(DPReport *r)
{
	memset(r, 0, sizeof(DPReport));
}

const char *
dp_report_reason(const char *fmt,...)
{
	va_list		ap;
	char		buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return pstrdup(buf);
}

void
dp_report_normal(DPReport *r, bool notify, const char *kind, const char *why)
{
	r->direct = false;
	strlcpy(r->reason, why, sizeof(r->reason));
	ereport(notify ? dp_fallback_level : DEBUG1,
			(errmsg("directpath: %s uses the normal path: %s", kind, why)));
}

uint64
dp_report_publish(const DPReport *r)
{
	last = *r;
	last_valid = true;
	return ++last_id;
}

bool
dp_report_last(DPReport *out)
{
	if (last_valid)
		*out = last;
	return last_valid;
}

void
dp_report_foreign_keys(DPReport *r, const char *batched, const char *sets,
					   const char *rowwise)
{
	snprintf(r->foreign_keys, sizeof(r->foreign_keys), "%s%s%s%s%s%s%s%s",
			 batched[0] ? "per batch: " : "", batched,
			 batched[0] && sets[0] ? "; " : "",
			 sets[0] ? "then as a set at the end: " : "", sets,
			 (batched[0] || sets[0]) && rowwise[0] ? "; " : "",
			 rowwise[0] ? "per row: " : "", rowwise);
}

void
dp_report_rows(uint64 id, uint64 rows)
{
	if (last_valid && last_id == id)
		last.rows = rows;
}

/* The index strategies used, named, comma-separated (DPIndexStrategy). */
static const char *
strategies(const DPReport *r)
{
	static const char *const names[] = {"none", "row", "sorted", "build", "reindex", "append", "merge", "summarize", "runs", "leaf merge"};
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 1; i < lengthof(names); i++)
		if (r->index_strategies & (1 << i))
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", names[i]);
	return buf.data;
}

void
dp_report_explain(const DPReport *r, bool ran, ExplainState *es)
{
	if (!r->direct && r->reason[0] != '\0' && !ran)
	{
		/* decided at plan time */
		ExplainPropertyText("Direct Path", "off", es);
		ExplainPropertyText("Reason", r->reason, es);
		return;
	}
	if (!ran)
	{
		ExplainPropertyText("Direct Path", "on", es);
		return;
	}
	ExplainPropertyText("Direct Path",
						r->direct ? "on" : "off (small statement)", es);
	ExplainPropertyInteger("Pages Written", NULL, (int64) r->pages, es);
	ExplainPropertyBool("Frozen", r->frozen, es);
	if (r->indexes_rebuilt > 0)
		ExplainPropertyInteger("Indexes Rebuilt", NULL, r->indexes_rebuilt, es);
	if (r->index_strategies != 0)
		ExplainPropertyText("Index Maintenance", strategies(r), es);
	if (r->foreign_keys[0])
		ExplainPropertyText("Foreign Keys", r->foreign_keys, es);
	if (r->parallel_workers > 0)
		ExplainPropertyInteger("Parallel Workers", NULL, r->parallel_workers, es);
	if (r->parallel[0])
		ExplainPropertyText("Parallel", r->parallel, es);
	if (r->foreign_partitions[0])
		ExplainPropertyText("Foreign Partitions", r->foreign_partitions, es);
	if (r->statistics[0])
		ExplainPropertyText("Statistics", r->statistics, es);
	if (r->updates[0])
		ExplainPropertyText("Updates", r->updates, es);
	/* times vary from run to run: only with TIMING */
	if (r->phases[0] && es->timing)
		ExplainPropertyText("Phases", r->phases, es);
}

/* The text of one statement of a (possibly multi-statement) string. */
static const char *
statement_text(const char *source, int location, int len, int *textlen)
{
	if (location < 0)
		location = 0;
	*textlen = len > 0 ? len : (int) strlen(source + location);
	return source + location;
}

void
dp_report_note_plan(const char *source, int location, int len,
					const char *why)
{
	int			n;
	const char *text = statement_text(source, location, len, &n);
	DPPlanNote *note = &notes[next_note];

	next_note = (next_note + 1) % DP_PLAN_NOTES;
	note->len = n;
	memcpy(note->prefix, text, Min(n, DP_NOTE_PREFIX));
	note->hash = hash_bytes((const unsigned char *) text, n) | 1;
	strlcpy(note->reason, why, sizeof(note->reason));
}

uint64
dp_report_plan_start(const char *source, int location, int len)
{
	int			n;
	const char *text;
	uint32		hash;

	if (source == NULL)
		return 0;
	text = statement_text(source, location, len, &n);
	hash = hash_bytes((const unsigned char *) text, n) | 1;
	for (int i = 0; i < DP_PLAN_NOTES; i++)
	{
		DPPlanNote *note = &notes[i];
		DPReport	r;

		if (note->hash != hash || note->len != n ||
			memcmp(note->prefix, text, Min(n, DP_NOTE_PREFIX)) != 0)
			continue;
		dp_report_init(&r);
		strlcpy(r.reason, note->reason, sizeof(r.reason));
		ereport(DEBUG1,
				(errmsg("directpath: INSERT uses the normal path: %s", r.reason)));
		return dp_report_publish(&r);
	}
	return 0;
}

PG_FUNCTION_INFO_V1(directpath_last_statement);

Datum
directpath_last_statement(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[14];
	bool		nulls[14] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (!last_valid)
		PG_RETURN_NULL();

	values[0] = CStringGetTextDatum(last.direct ? "direct" : "normal");
	if (last.reason[0])
		values[1] = CStringGetTextDatum(last.reason);
	else
		nulls[1] = true;
	values[2] = Int64GetDatum((int64) last.rows);
	values[3] = Int64GetDatum((int64) last.pages);
	values[4] = BoolGetDatum(last.direct && last.frozen);
	values[5] = Int32GetDatum(last.relations);
	values[6] = Int32GetDatum(last.indexes_rebuilt);
	if (last.index_strategies != 0)
		values[7] = CStringGetTextDatum(strategies(&last));
	else
		nulls[7] = true;
	if (last.foreign_keys[0])
		values[8] = CStringGetTextDatum(last.foreign_keys);
	else
		nulls[8] = true;
	values[9] = Int32GetDatum(last.parallel_workers);
	if (last.parallel[0])
		values[10] = CStringGetTextDatum(last.parallel);
	else
		nulls[10] = true;
	/* (the extension's SQL before 0.4, 0.5, 0.8 lacks these: not formed) */
	if (last.foreign_partitions[0])
		values[11] = CStringGetTextDatum(last.foreign_partitions);
	else
		nulls[11] = true;
	if (last.statistics[0])
		values[12] = CStringGetTextDatum(last.statistics);
	else
		nulls[12] = true;
	if (last.updates[0])
		values[13] = CStringGetTextDatum(last.updates);
	else
		nulls[13] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
