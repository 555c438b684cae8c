/*-------------------------------------------------------------------------
 *
 * keyimage.c
 *	  The image of an index key's values: the bytes ON CONFLICT's
 *	  decisions compare and hash (conflict.c, and a parallel load's leader
 *	  through the keys messages).
 *
 * Per key column, in the index's order: a flag byte ('n' NULL, 'v' a
 * value), then the value's bytes: a by-value datum's Datum, a fixed-length
 * one's attlen bytes, a varlena's length (uint32) and data, detoasted and
 * with its header form ignored (a short and a long header give one image,
 * as nbtree's deduplication compares them), a cstring's bytes and its
 * terminator.  Two keys are equal iff their images are, which is the
 * index's equality where its operator classes declare "equal image"
 * (_bt_allequalimage); the callers keep other indexes out.
 *
 * Invariants: an image depends only on the values and the index's column
 * types, never on where the values came from (a heap tuple, an index
 * tuple, a worker's row).
 *
 *-------------------------------------------------------------------------
 */
#include "load/load_private.h"

#include "common/hashfn.h"
#include "utils/rel.h"

/* Append one key column's image: a NULL flag, then its bytes. */
static void
image_column(StringInfo buf, Form_pg_attribute att, Datum value, bool isnull)
{
	appendStringInfoChar(buf, isnull ? 'n' : 'v');
	if (isnull)
		return;
	if (att->attbyval)
		appendBinaryStringInfo(buf, (char *) &value, sizeof(Datum));
	else if (att->attlen > 0)
		appendBinaryStringInfo(buf, DatumGetPointer(value), att->attlen);
	else if (att->attlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));
		uint32		len = VARSIZE_ANY_EXHDR(v);

		appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(buf, VARDATA_ANY(v), len);
	}
	else
		appendBinaryStringInfo(buf, DatumGetPointer(value),
							   strlen(DatumGetPointer(value)) + 1);
}

DPKeyImage
dp_key_image(StringInfo buf, Relation index, Datum *values, bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(index);
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	DPKeyImage	k;

	resetStringInfo(buf);
	for (int j = 0; j < nkeys; j++)
		image_column(buf, TupleDescAttr(desc, j), values[j], isnull[j]);
	k.bytes = buf->data;
	k.len = buf->len;
	k.hash = hash_bytes((const unsigned char *) k.bytes, k.len);
	return k;
}
