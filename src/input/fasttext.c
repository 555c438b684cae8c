/*-------------------------------------------------------------------------
 *
 * fasttext.c
 *	  The fast parser of character(n), for fastin.c's dispatch (text and
 *	  varchar, a copy of the bytes, are the dispatch's own).
 *
 * character(n) takes a value of at most n characters, counted as core
 * counts them (pg_mbstrlen_with_len; a value of ASCII bytes alone, checked
 * a word at a time, has as many characters as bytes in every server
 * encoding), and pads it with spaces to n characters as bpchar_input does;
 * a longer value, which core clips when the rest is spaces and refuses
 * otherwise, is the input function's.  The parser reads exactly the 'len'
 * bytes it is given (it is dp_fastin_bounded).
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "mb/pg_wchar.h"

/*
 * Whether the len bytes at s are all ASCII, a word at a time: then each is
 * a character in every server encoding.
 */
static inline bool
all_ascii(const char *s, int len)
{
	uint64		seen = 0;
	int			i = 0;

	for (; i + 8 <= len; i += 8)
	{
		uint64		w;

		memcpy(&w, s + i, sizeof(w));
		seen |= w;
	}
	for (; i < len; i++)
		seen |= (unsigned char) s[i];
	return (seen & UINT64CONST(0x8080808080808080)) == 0;
}

/*
 * character(n): the text padded with spaces to n characters, as
 * bpchar_input makes it; a value longer than n characters (which core
 * clips when the rest is spaces, or refuses) is the input function's.
 */
bool
dp_read_bpchar(const char *s, int len, int32 typmod, DPValueSpace *vs,
			   Datum *d)
{
	int			charlen;
	int			padded = len;
	BpChar	   *result;

	if (typmod >= (int32) VARHDRSZ)
	{
		charlen = all_ascii(s, len) ? len : pg_mbstrlen_with_len(s, len);
		if (charlen > typmod - (int32) VARHDRSZ)
			return false;
		padded = len + (typmod - VARHDRSZ - charlen);
	}
	result = (BpChar *) dp_value_alloc(vs, padded + VARHDRSZ);
	SET_VARSIZE(result, padded + VARHDRSZ);
	memcpy(VARDATA(result), s, len);
	memset(VARDATA(result) + len, ' ', padded - len);
	*d = PointerGetDatum(result);
	return true;
}
