/*-------------------------------------------------------------------------
 *
 * fasttime.c
 *	  The fast parsers of date, timestamp and timestamptz, for fastin.c's
 *	  dispatch.
 *
 * The forms taken (anything else is the type's input function's):
 *
 *	date				YYYY-MM-DD, year 0001-9999, a real day (with 4 year
 *						digits core reads Y-M-D under every DateStyle)
 *	timestamp			YYYY-MM-DD HH:MM:SS[.f{1,6}], hour 00-23, second
 *						00-59 (typmod -1)
 *	timestamptz			the same, then an optional offset +HH, +HH:MM or
 *						+HH:MM:SS (hour at most 15, as core's limit); without
 *						one the session's TimeZone decides, by the same call
 *						core makes (DetermineTimeZoneOffset)
 *
 * The result is computed by the functions core's own path ends in (date2j,
 * which fastin.c applies to dp_read_date's fields, tm2timestamp,
 * DetermineTimeZoneOffset), so it cannot differ; fractional seconds of at
 * most 6 digits are exact integers where core rounds (rint) a double.
 *
 * The parsers read a terminated string, byte by byte in order, and stop at
 * the first byte out of place, so they never read past the terminator
 * (which is why the timestamps are not dp_fastin_bounded: the string must
 * be terminated).  A date is: fastin.c hands dp_read_date a field of
 * exactly ten bytes, all of which it reads.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "datatype/timestamp.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

/* YYYY-MM-DD, a real day of years 1-9999, into tm; the rest at *end. */
bool
dp_read_date(const char *s, struct pg_tm *tm, const char **end)
{
	int64		y,
				m,
				d;

	if (!dp_digits(s, 4, &y) || s[4] != '-' || !dp_digits(s + 5, 2, &m) ||
		s[7] != '-' || !dp_digits(s + 8, 2, &d))
		return false;
	if (y < 1 || m < 1 || m > MONTHS_PER_YEAR || d < 1 ||
		d > day_tab[isleap(y)][m - 1])
		return false;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = (int) y;
	tm->tm_mon = (int) m;
	tm->tm_mday = (int) d;
	*end = s + 10;
	return true;
}

/*
 * " HH:MM:SS[.f{1,6}]" after a date, hour 0-23 and second 0-59, into tm
 * and *fsec; the rest at *end.
 */
static bool
read_time(const char *s, struct pg_tm *tm, fsec_t *fsec, const char **end)
{
	int64		h,
				mi,
				sec,
				f = 0;
	int			n = 0;

	if (s[0] != ' ' || !dp_digits(s + 1, 2, &h) || s[3] != ':' ||
		!dp_digits(s + 4, 2, &mi) || s[6] != ':' || !dp_digits(s + 7, 2, &sec))
		return false;
	if (h > 23 || mi > 59 || sec > 59)
		return false;
	s += 9;
	if (*s == '.')
	{
		s++;
		while (s[n] >= '0' && s[n] <= '9')
			n++;
		if (n < 1 || n > 6)
			return false;
		(void) dp_digits(s, n, &f);
		for (int i = n; i < 6; i++)
			f *= 10;
		s += n;
	}
	tm->tm_hour = (int) h;
	tm->tm_min = (int) mi;
	tm->tm_sec = (int) sec;
	*fsec = (fsec_t) f;
	*end = s;
	return true;
}

/* "+HH", "+HH:MM" or "+HH:MM:SS" (or '-') and nothing after: *tz as core's. */
static bool
read_offset(const char *s, int *tz)
{
	int64		h,
				mi = 0,
				sec = 0;
	int			secs;

	if ((s[0] != '+' && s[0] != '-') || !dp_digits(s + 1, 2, &h))
		return false;
	if (s[3] == ':')
	{
		if (!dp_digits(s + 4, 2, &mi))
			return false;
		if (s[6] == ':')
		{
			if (!dp_digits(s + 7, 2, &sec) || s[9] != '\0')
				return false;
		}
		else if (s[6] != '\0')
			return false;
	}
	else if (s[3] != '\0')
		return false;
	if (h > 15 || mi > 59 || sec > 59)
		return false;
	secs = (int) ((h * MINS_PER_HOUR + mi) * SECS_PER_MINUTE + sec);
	/* core's DecodeTimezone: seconds west of Greenwich */
	*tz = s[0] == '-' ? secs : -secs;
	return true;
}

/*
 * A timestamp (with_tz: a timestamptz) of the forms above, terminated,
 * into *result; false for any other text or a value out of range.
 */
bool
dp_read_timestamp(const char *s, bool with_tz, Timestamp *result)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	const char *p;

	if (!dp_read_date(s, &tm, &p) || !read_time(p, &tm, &fsec, &p))
		return false;
	if (!with_tz)
		return *p == '\0' && tm2timestamp(&tm, fsec, NULL, result) == 0;
	if (*p == '\0')
		tz = DetermineTimeZoneOffset(&tm, session_timezone);
	else if (!read_offset(p, &tz))
		return false;
	return tm2timestamp(&tm, fsec, &tz, result) == 0;
}
