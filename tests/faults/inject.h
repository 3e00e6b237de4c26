/* I/O fault injection for the tests (tests/faults/inject.c): wrapping definitions of
 * open, write, fsync, rename and mkdir that count the calls made on paths under a folder
 * and fail the k-th one of a chosen function with a chosen errno, as sqlite's I/O error
 * tests do. Linked into ganfw_faults (the ganfw command line) and into the suites that
 * inject in-process.
 *
 * Driven by the environment, read at the first call:
 *   GANFW_FAULT_UNDER=DIR    only calls on paths under DIR count (on descriptors opened
 *                            under it, for write and fsync); unset: nothing counts
 *   GANFW_FAULT=FN:K:ERRNO[:sticky]  fail the K-th counted call of FN (open, write, fsync,
 *                            rename, mkdir; open counts opens for writing only) with ERRNO
 *                            (ENOSPC, EIO, EROFS, EACCES, EDQUOT); sticky: every later
 *                            call of FN fails too (a disk that stays full). A failing write
 *                            of more than one byte first writes half of them, as a disk
 *                            filling up does, and the next write to that file fails.
 *   GANFW_FAULT_TRACE=FILE   appends "SEQ FN K PATH" for every counted call (SEQ over all
 *                            functions, K per function), " FAIL" when it was made to fail */
#ifndef GANFW_TEST_FAULTS_INJECT_H
#define GANFW_TEST_FAULTS_INJECT_H

/* The same plan set in-process (NULL: unset), replacing the environment's; the counts
 * restart from zero. */
void gt_fault_configure(const char *under, const char *spec, const char *trace);

#endif
