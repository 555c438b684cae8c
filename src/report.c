/*-------------------------------------------------------------------------
 *
 * report.c
 *	  What a statement did, said in one place: directpath.last_statement(),
 *	  EXPLAIN's lines and the "uses the normal path" message.
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
 * The notes are few (the most recent DP_PLAN_NOTES statements) and only
 * looked up under mode = always.
 *
 * Invariant: last_statement() describes the last INSERT or COPY that
 * directpath considered in this session, and nothing else writes dp_last.
 *
 *-------------------------------------------------------------------------
 */
#include "directpath.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

/* the report last_statement() returns, and its id */
static DPReport last;
static bool last_valid = false;
static uint64 last_id = 0;

/* plan-time reasons of statements planned without our node */
#define DP_PLAN_NOTES 16

typedef struct DPPlanNote
{
	uint32		hash;			/* of the statement's text; 0: unused */
	char	   *text;			/* the statement's text */
	char		reason[DP_REASON_LEN];
} DPPlanNote;

static DPPlanNote notes[DP_PLAN_NOTES];
static int	next_note = 0;

void
dp_report_init(DPReport *r)
{
	memset(r, 0, sizeof(DPReport));
}

void
dp_report_normal(DPReport *r, bool hinted, const char *kind, const char *why)
{
	r->direct = false;
	strlcpy(r->reason, why, sizeof(r->reason));
	ereport(hinted ? dp_fallback_level : DEBUG1,
			(errmsg("directpath: %s uses the normal path: %s", kind, why)));
}

uint64
dp_report_publish(const DPReport *r)
{
	last = *r;
	last_valid = true;
	return ++last_id;
}

void
dp_report_rows(uint64 id, uint64 rows)
{
	if (last_valid && last_id == id)
		last.rows = rows;
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
	if (note->text)
		pfree(note->text);
	note->text = MemoryContextAlloc(TopMemoryContext, n + 1);
	memcpy(note->text, text, n);
	note->text[n] = '\0';
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

		if (note->hash != hash || strncmp(note->text, text, n) != 0 ||
			note->text[n] != '\0')
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
	Datum		values[7];
	bool		nulls[7] = {0};

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
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
