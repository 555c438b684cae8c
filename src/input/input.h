/*-------------------------------------------------------------------------
 *
 * input/input.h
 *	  The input stage: how a direct COPY's bytes become rows.  chunker.c
 *	  reads the input and cuts it into chunks of whole lines (tuples),
 *	  rowform.c forms a text or CSV chunk's rows in one pass, fastin.c
 *	  parses the values of common types.  Serial and parallel COPY (the
 *	  parallel stage's parcopy.c) share them.
 *
 *	  This is the stage's public face: what the files outside src/input/
 *	  use.  What the stage's own files share among themselves is in
 *	  input_private.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_INPUT_H
#define DP_INPUT_H

#include "common/compat.h"

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/queryenvironment.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

/*
 * What the input stage did in this process's last COPY: per type with a
 * fast parser the fields it took and those it handed to the type's input
 * function, and the rows the row former formed and those core's reader
 * read.  A parallel worker hands its counts to the leader, which adds them
 * to its own.
 */
#define DP_FASTIN_KINDS 14

typedef struct DPInputCounts
{
	uint64		fast[DP_FASTIN_KINDS];
	uint64		fallback[DP_FASTIN_KINDS];
	uint64		rows_formed;
	uint64		rows_core;
} DPInputCounts;

/* A COPY begins: the counts start from zero. */
extern void dp_input_reset_counts(void);
extern void dp_input_get_counts(DPInputCounts *counts);
extern void dp_input_add_counts(const DPInputCounts *counts);
extern void dp_input_note_reader(const char *why);

/*
 * After BeginCopyFrom of a text or CSV COPY (or of a parallel COPY's
 * chunk): the columns whose type has an exact fast parser get it in place
 * of their input function, which still takes every form the parser does
 * not.
 */
extern void dp_fastin_install(CopyFromState cstate);

/* ---------- chunker.c: the input cut into chunks ---------- */

/* What precedes a chunk's bytes in its message. */
typedef struct DPChunkHeader
{
	uint64		offset;			/* bytes of the input before it */
	uint64		lines_before;	/* physical lines of the input before it */
	int			eol;			/* EolType in force at its start */
	uint64		seq;			/* the chunks cut before it */
} DPChunkHeader;

typedef struct DPChunker DPChunker;

/* The chunker of the input that BeginCopyFrom opened, seeded with what it read ahead. */
extern DPChunker *dp_chunker_begin(CopyFromState cstate);

/*
 * The next chunk, at least 'target' bytes unless it is the last, as a
 * message (palloc'd; *len its size): a DPChunkHeader, then (binary) a file
 * header, then the chunk's bytes.  NULL at the end of the input.
 */
extern char *dp_chunker_next(DPChunker *ch, Size target, Size *len);

/* Bytes of the input cut into chunks so far. */
extern uint64 dp_chunker_consumed(DPChunker *ch);

/* A binary COPY file's header without extensions: each binary chunk's. */
#define DP_BINARY_HEADER_LEN 19
extern const char dp_binary_header[DP_BINARY_HEADER_LEN];

/*
 * BeginCopyFrom of core's reader over data[0, len) (a chunk, or part of
 * one); one such reader reads at a time.
 */
extern CopyFromState dp_copy_from_memory(ParseState *pstate, Relation rel,
										 List *attlist, List *options,
										 const char *data, Size len);

/* ---------- rowform.c: a chunk's rows formed in one pass ---------- */

typedef struct DPRowFormer DPRowFormer;

/*
 * Why directpath's row former cannot read this COPY (an option or state it
 * does not reproduce), or NULL when it can.
 */
extern const char *dp_rowform_refusal(CopyFromState cstate);

/*
 * A row former for the COPY begun as 'cstate' (its options, columns, input
 * functions and defaults); 'pstate', 'attlist' and 'options' are what that
 * BeginCopyFrom got, for core's reader where the former hands a chunk's
 * rest to it.
 */
extern DPRowFormer *dp_rowform_begin(CopyFromState cstate, ParseState *pstate,
									 List *attlist, List *options);

/*
 * Form the rows of a chunk of whole lines (chunker.c): 'data' stays valid
 * until the next call; its place in the input as the chunk header says.
 */
extern void dp_rowform_chunk(DPRowFormer *rf, const char *data, Size len,
							 const DPChunkHeader *where);

/*
 * The chunk's next row into values/nulls (every column of the relation,
 * as NextCopyFrom fills them; called in the per-row memory context);
 * false at the chunk's end.  cstate->cur_lineno is the row's line.
 */
extern bool dp_rowform_next(DPRowFormer *rf, ExprContext *econtext,
							Datum *values, bool *nulls);

/*
 * The error context callback of a COPY read by a row former (arg: the
 * former): core's "COPY t, line N[, column c]" for the row being read.
 */
extern void dp_rowform_error_callback(void *arg);

#endif							/* DP_INPUT_H */
