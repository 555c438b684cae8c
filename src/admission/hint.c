/*-------------------------------------------------------------------------
 *
 * hint.c
 *	  Find a directpath hint in the text of an INSERT statement.
 *
 * A hint is a comment that starts with "/\*+", in one of two places:
 *
 *	/\*+ APPEND *\/ INSERT INTO t ...		leading the statement
 *	INSERT /\*+ APPEND *\/ INTO t ...		right after INSERT (Oracle's place)
 *
 * The words inside are separated by white space and compared without
 * regard to case; APPEND asks for the direct path and NOAPPEND refuses it
 * even when directpath.mode = always; PARALLEL(n) asks for n parallel
 * workers (parallel.c; PARALLEL alone: directpath.parallel_workers, else
 * 2).  Other words are ignored, so the comment can carry hints for other
 * tools.
 *
 * Algorithm.  We get the whole source string and the statement's location
 * and length within it (a multi-statement string holds several).  Up to
 * PostgreSQL 17 the location of a top-level statement starts right after
 * the previous semicolon, so a leading comment lies inside the range; from
 * 18 on it starts at the statement's first token.  So we first walk
 * backwards from the location over white space and complete comments to
 * find where the statement's leading comments begin (harmless on 15-17,
 * where there is nothing but white space or ';' before the location).
 * Then we scan forward: white space, ordinary comments and the plain words
 * and punctuation of prefixes such as EXPLAIN (ANALYZE) or PREPARE p AS may
 * precede the hint; once the word INSERT has been read, the hint must be
 * the very next token.  Anything else (a quote, an operator, any other
 * token after INSERT) ends the search without a hint: hints are never
 * looked for inside literals or deeper in the statement.
 *
 *-------------------------------------------------------------------------
 */
#include "admission/admission.h"

#include <ctype.h>
#include "common/settings.h"

#include "parser/scansup.h"

/* Does [p, end) start with the given string? */
static bool
starts_with(const char *p, const char *end, const char *s)
{
	size_t		n = strlen(s);

	return (size_t) (end - p) >= n && strncmp(p, s, n) == 0;
}

/* PARALLEL's degree: the number in "(n)" after it, else the default. */
static int
parallel_degree(const char **pp, const char *end)
{
	const char *p = *pp;
	int			n = 0;

	while (p < end && scanner_isspace(*p))
		p++;
	if (p >= end || *p != '(')
		return dp_parallel_workers > 0 ? dp_parallel_workers : 2;
	p++;
	while (p < end && scanner_isspace(*p))
		p++;
	while (p < end && isdigit((unsigned char) *p) && n < 1024)
		n = n * 10 + (*p++ - '0');
	*pp = p;
	return n;
}

/*
 * Read the words of a hint comment whose body is [p, end).  NOAPPEND wins
 * over APPEND if both are present.  '*parallel' (unless NULL) gets
 * PARALLEL's degree.
 */
static DPHint
parse_hint_body(const char *p, const char *end, int *parallel)
{
	DPHint		result = DP_HINT_NONE;

	while (p < end)
	{
		const char *w;

		while (p < end && !isalnum((unsigned char) *p) && *p != '_')
			p++;
		w = p;
		while (p < end && (isalnum((unsigned char) *p) || *p == '_'))
			p++;
		if (p - w == 6 && pg_strncasecmp(w, "append", 6) == 0)
		{
			if (result == DP_HINT_NONE)
				result = DP_HINT_APPEND;
		}
		else if (p - w == 8 && pg_strncasecmp(w, "noappend", 8) == 0)
			result = DP_HINT_NOAPPEND;
		else if (p - w == 8 && pg_strncasecmp(w, "parallel", 8) == 0)
		{
			int			n = parallel_degree(&p, end);

			if (parallel)
				*parallel = n;
		}
	}
	return result;
}

/* Walk back from 'start' over white space and complete comments. */
static const char *
leading_comments_start(const char *source, const char *start)
{
	const char *p = start;

	for (;;)
	{
		const char *q = p;

		while (q > source && scanner_isspace(q[-1]))
			q--;
		if (q - source >= 4 && q[-1] == '/' && q[-2] == '*')
		{
			const char *c = q - 2;

			/* find the "/\*" that opens this comment */
			while (c > source && !(c[-1] == '/' && c[0] == '*'))
				c--;
			if (c == source)
				break;
			p = c - 1;
			continue;
		}
		break;
	}
	return p;
}

DPHint
dp_find_hint(const char *source, int location, int len, int *parallel)
{
	const char *p;
	const char *end;
	bool		after_insert = false;

	if (parallel)
		*parallel = dp_parallel_workers;
	if (source == NULL)
		return DP_HINT_NONE;
	if (location < 0)
		location = 0;
	p = source + location;
	end = (len > 0) ? p + len : source + strlen(source);
	p = leading_comments_start(source, p);

	while (p < end)
	{
		if (scanner_isspace(*p))
			p++;
		else if (starts_with(p, end, "--"))
		{
			while (p < end && *p != '\n')
				p++;
		}
		else if (starts_with(p, end, "/*+"))
		{
			const char *body = p + 3;
			const char *close = body;

			while (close < end && !starts_with(close, end, "*/"))
				close++;
			if (close >= end)
				return DP_HINT_NONE;	/* unterminated */
			return parse_hint_body(body, close, parallel);
		}
		else if (starts_with(p, end, "/*"))
		{
			p += 2;
			while (p < end && !starts_with(p, end, "*/"))
				p++;
			p += 2;
		}
		else if (after_insert)
			return DP_HINT_NONE;	/* INSERT followed by something else */
		else if (isalpha((unsigned char) *p) || *p == '_')
		{
			const char *w = p;

			while (p < end && (isalnum((unsigned char) *p) || *p == '_'))
				p++;
			if (p - w == 6 && pg_strncasecmp(w, "insert", 6) == 0)
				after_insert = true;
		}
		else if (isdigit((unsigned char) *p) || strchr(",()[]", *p) != NULL)
			p++;
		else
			return DP_HINT_NONE;
	}
	return DP_HINT_NONE;
}
