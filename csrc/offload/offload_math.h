/* Per-element math of offload (gather_rows, adam_rows), C99 and CUDA, float
 * and double; the index rules both launchers and their checks share. */
#ifndef NUREC_OFFLOAD_MATH_H
#define NUREC_OFFLOAD_MATH_H

#include "math/defs.h"
#include "offload/offload.h"

/* An index entry names a row of a table of n rows when it is in [0, n);
 * -1 is padding (a compaction's fixed capacity past its count); any other
 * entry is bad. Nothing is ever read or written at a bad entry. */
NUREC_HD int nurec_offload_is_row(int64_t r, int64_t n) { return r >= 0 && r < n; }

/* The row an entry names, or -1 where it names none (padding or bad): the
 * values the check's scan carries. */
NUREC_HD int64_t nurec_offload_row_or_none(int64_t r, int64_t n) { return nurec_offload_is_row(r, n) ? r : -1; }

/* The later of two such values a, b (b after a in index order): b where it
 * names a row, else a. Associative: the CUDA check scans with it. */
NUREC_HD int64_t nurec_offload_last_row(int64_t a, int64_t b) { return b >= 0 ? b : a; }

/* Whether entry r of adam_rows' index is bad, `prev` being the nearest
 * entry before it that names a row (-1: none): an entry that is neither a
 * row nor padding, or a row not above `prev` (valid entries must be
 * strictly increasing, so that no row is listed twice: two threads
 * updating one row would race). The count of bad entries is the status:
 * an entry out of order counts once, whatever follows it. */
NUREC_HD int nurec_offload_bad_entry(int64_t r, int64_t prev, int64_t n) {
    if (r == -1) return 0;
    if (!nurec_offload_is_row(r, n)) return 1;
    return r <= prev;
}

/* Adam's step count t, a float32 or float64 value on the kernels' device. */
NUREC_HD double nurec_offload_step(const void* step, int is_f64) {
    return is_f64 ? *(const double*)step : (double)*(const float*)step;
}

#define NUREC_GENERIC_FILE "offload/offload_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_OFFLOAD_MATH_H */
