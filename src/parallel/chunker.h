/*-------------------------------------------------------------------------
 *
 * parallel/chunker.h
 *	  A parallel COPY's input cut into chunks of whole lines or tuples
 *	  (chunker.c), for parcopy.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_CHUNKER_H
#define DP_CHUNKER_H

#include "parallel/parallel.h"

/* What precedes a chunk's bytes in its message. */
typedef struct DPChunkHeader
{
	uint64		offset;			/* bytes of the input before it */
	uint64		lines_before;	/* physical lines of the input before it */
	int			eol;			/* EolType in force at its start */
} DPChunkHeader;

typedef struct DPChunker DPChunker;

extern DPChunker *dp_chunker_begin(CopyFromState cstate);

/*
 * The next chunk, at least 'target' bytes unless it is the last, as a
 * message (palloc'd; *len its size): a DPChunkHeader, then (binary) a file
 * header, then the chunk's bytes.  NULL at the end of the input.
 */
extern char *dp_chunker_next(DPChunker *ch, Size target, Size *len);

extern uint64 dp_chunker_consumed(DPChunker *ch);

#endif							/* DP_CHUNKER_H */
