/*-------------------------------------------------------------------------
 *
 * fault.h
 *	  Named fault points for the crash and error tests (fault.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DP_FAULT_H
#define DP_FAULT_H

/* Define the fault-injection settings. */
extern void dp_fault_init(void);

/* A statement begins: count fault-point hits from zero. */
extern void dp_fault_reset(void);

/* Pass the named point; may raise, sleep or notify (see fault.c). */
extern void dp_fault(const char *point);

#endif							/* DP_FAULT_H */
