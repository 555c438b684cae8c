/*-------------------------------------------------------------------------
 *
 * fastbin.c
 *	  The fast binary input: a binary COPY field of a common fixed-width
 *	  type converted as the type's receive function converts it, for
 *	  fastin.c's binary stand-in (dp_fastin_read_binary).
 *
 * A field of int2, int4, int8, float4, float8, bool, date, timestamp,
 * timestamptz (typmod -1, which fastin.c checks) or uuid whose length is
 * the type's is converted from network byte order, at any alignment,
 * without the call; a date or timestamp outside the range the receive
 * function accepts (its error), any other length (its error too) and every
 * other kind are left to the receive function.  The conversion raises no
 * error.
 *
 *-------------------------------------------------------------------------
 */
#include "input/input_private.h"

#include "port/pg_bswap.h"
#include "utils/date.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* A 64-bit integer in network byte order, at any alignment. */
static inline uint64
net64(const char *s)
{
	uint64		v;

	memcpy(&v, s, sizeof(v));
	return pg_ntoh64(v);
}

/*
 * The value of a binary field as the kind's receive function makes it;
 * false for another length, or a date or timestamp out of the range the
 * receive function accepts (its error).  In that range timestamp2tm, which
 * the timestamp receive functions also call, cannot fail: its one check is
 * the day's.
 */
bool
dp_read_binary(DPFastKind kind, const char *s, int len, Datum *d)
{
	static const int8 sizes[FAST_KINDS] = {2, 4, 8, 1, 4, 8, 8, UUID_LEN, 4, 8};
	uint32		u32;
	uint64		u64;
	pg_uuid_t  *u;

	if (len != sizes[kind])
		return false;
	switch (kind)
	{
		case FAST_INT2:
			*d = Int16GetDatum((int16) dp_get_net_int(s, 2));
			return true;
		case FAST_INT4:
			*d = Int32GetDatum(dp_get_net_int(s, 4));
			return true;
		case FAST_INT8:
			*d = Int64GetDatum((int64) net64(s));
			return true;
		case FAST_BOOL:
			*d = BoolGetDatum(*s != 0);
			return true;
		case FAST_DATE:
			u32 = (uint32) dp_get_net_int(s, 4);
			if (!DATE_NOT_FINITE((DateADT) u32) && !IS_VALID_DATE((DateADT) u32))
				return false;
			*d = DateADTGetDatum((DateADT) u32);
			return true;
		case FAST_TIMESTAMP:
		case FAST_TIMESTAMPTZ:
			u64 = net64(s);
			if (!TIMESTAMP_NOT_FINITE((Timestamp) u64) &&
				!IS_VALID_TIMESTAMP((Timestamp) u64))
				return false;
			*d = TimestampGetDatum((Timestamp) u64);
			return true;
		case FAST_UUID:
			u = palloc(UUID_LEN);
			memcpy(u->data, s, UUID_LEN);
			*d = UUIDPGetDatum(u);
			return true;
		case FAST_FLOAT4:
			{
				float4		f;

				u32 = (uint32) dp_get_net_int(s, 4);
				memcpy(&f, &u32, sizeof(f));
				*d = Float4GetDatum(f);
				return true;
			}
		case FAST_FLOAT8:
			{
				float8		f;

				u64 = net64(s);
				memcpy(&f, &u64, sizeof(f));
				*d = Float8GetDatum(f);
				return true;
			}
		default:
			return false;
	}
}
