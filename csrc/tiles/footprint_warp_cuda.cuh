/* The camera projection's footprint walk spread over a warp (CUDA only).
 *
 * A thread's walk of its item's tile rows (tiles_math.h: two double square
 * roots and two divisions a row) made a warp wait for its longest
 * footprint: 5.5 rows a visible item on average on the 1944 garden, 13 at
 * the 99th percentile, 21 at most, and the walk was two thirds of the
 * projection (68.6 us of which 45.8, H200, a build without it).
 * Here the warp's footprints are staged in shared memory, the warp's rows
 * are numbered item after item, and each lane computes one row a round;
 * each item's own thread then folds its rows' runs in ascending order
 * (nurec_box_fold_row), so that the box and count are the bits of
 * nurec_footprint_box's serial walk (the CPU's).
 *
 * A warp whose footprints are about as long as each other walks them as
 * before, each thread its own: the spread pays where a few long ones would
 * hold the warp (the street's near Gaussians).
 *
 * Every lane of the warp calls it (reach = 0 where a lane has no item or
 * its item reaches no cell), with the warp converged and its full mask. */
#ifndef NUREC_FOOTPRINT_WARP_CUDA_CUH
#define NUREC_FOOTPRINT_WARP_CUDA_CUH

#ifndef NUREC_FOOTPRINT_WARP_SLACK /* overridable for benchmark variants (a large value: never spread) */
#define NUREC_FOOTPRINT_WARP_SLACK 2
#endif

typedef struct nurec_footprint_stage {
    nurec_footprint f[32];
    int start[32]; /* the lanes' first row in the warp's numbering (exclusive scan) */
    int ok[32];    /* a round's rows: whether each has a run, and the run */
    int a[32], b[32];
} nurec_footprint_stage;

/* The item's box and count from its own thread's walk (none: an empty box). */
static __device__ __forceinline__ int64_t nurec_footprint_box_own(const nurec_footprint* f, int reach, int width,
                                                                  int32_t box[NUREC_BOX_SIZE]) {
    if (!reach) {
        nurec_box_empty(box);
        return 0;
    }
    return nurec_footprint_box(f, width, box);
}

static __device__ __forceinline__ int64_t nurec_footprint_box_warp(const nurec_footprint* f, int reach, int width,
                                                                   int32_t box[NUREC_BOX_SIZE],
                                                                   nurec_footprint_stage* st) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int ty_first = reach ? f->py0 / NUREC_TILE : 0;
    const int rows = reach ? f->py1 / NUREC_TILE - ty_first + 1 : 0;
    /* the warp's row numbers are ints: 32 footprints of up to 2^25 tile
       rows each (an image 2^29 pixels tall) keep them below 2^30; a taller
       one walks its own rows, whatever its length */
    const int huge = __any_sync(full, rows > (1 << 25));
    int incl = huge ? 0 : rows;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(full, incl, o);
        if (lane >= o) incl += y;
    }
    const int total = __shfl_sync(full, incl, 31), first = incl - rows;
    int most = rows;
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) most = max(most, __shfl_xor_sync(full, most, o));
    /* a warp whose longest walk is within twice its spread rounds (+2) walks
       its own rows: spreading costs a round more than a row in registers
       (H200: the 1944 garden's projection 57.1 us with every
       warp walking its own rows, 63.8 spreading them all; the street's,
       whose few near footprints are long, 71.5 against 62.4) */
    if (huge || most <= 2 * ((total + 31) >> 5) + NUREC_FOOTPRINT_WARP_SLACK)
        return nurec_footprint_box_own(f, reach, width, box);
    if (reach) st->f[lane] = *f;
    st->start[lane] = first;
    __syncwarp(full);
    nurec_box_fold s;
    nurec_box_fold_init(&s);
    for (int base = 0; base < total; base += 32) {
        const int j = base + lane;
        int ok = 0, a = 0, b = -1;
        if (j < total) {
            /* the row's item: the last lane whose first row is <= j (a lane
               without rows shares its first row with the next lane's, so
               it is never the last such lane) */
            int i = 0;
#pragma unroll
            for (int step = 16; step >= 1; step >>= 1)
                if (st->start[i + step] <= j) i += step;
            const nurec_footprint* fi = &st->f[i];
            ok = nurec_footprint_row(fi, fi->py0 / NUREC_TILE + (j - st->start[i]), width, &a, &b);
        }
        st->ok[lane] = ok;
        st->a[lane] = a;
        st->b[lane] = b;
        __syncwarp(full);
        const int r0 = first > base ? first : base, r1 = incl < base + 32 ? incl : base + 32;
        for (int r = r0; r < r1; ++r)
            if (st->ok[r - base]) nurec_box_fold_row(&s, ty_first + (r - first), st->a[r - base], st->b[r - base]);
        __syncwarp(full);
    }
    /* the item's own staged footprint: f need not live through the rounds */
    return nurec_box_fold_finish(&s, &st->f[lane], width, box);
}

#endif /* NUREC_FOOTPRINT_WARP_CUDA_CUH */
