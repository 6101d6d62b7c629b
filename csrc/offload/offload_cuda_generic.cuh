/* Generic over real_t (see math/generic.h). */

/* kVec values of one thread, moved as one 16-byte access (4 floats, 2
 * doubles): where a row's D values split into whole vectors and every
 * buffer is 16-byte aligned, a warp reads 512 bytes of rows per load
 * instruction instead of 128. Over PCIe (a pinned host table) what counts
 * is the bytes each request carries and how many are in flight. */
union NR(offload_vec) {
    int4 raw;
    real_t v[16 / sizeof(real_t)];
};

/* Values a thread moves at a time: a vector, or one. A thread t covers
 * columns c .. c + V of entry k (t = k D / V + c / V): consecutive threads
 * along a row, so that a row's reads coalesce. */
template <bool kVec>
__host__ __device__ constexpr int NR(offload_width)() {
    return kVec ? (int)(16 / sizeof(real_t)) : 1;
}

template <bool kVec>
__device__ __forceinline__ void NR(offload_load)(const real_t* src, real_t out[]) {
    if (kVec) {
        NR(offload_vec) u;
        u.raw = *(const int4*)src;
        NUREC_UNROLL
        for (int i = 0; i < NR(offload_width)<kVec>(); ++i) out[i] = u.v[i];
    } else {
        out[0] = *src;
    }
}

template <bool kVec>
__device__ __forceinline__ void NR(offload_store)(real_t* dst, const real_t in[]) {
    if (kVec) {
        NR(offload_vec) u;
        NUREC_UNROLL
        for (int i = 0; i < NR(offload_width)<kVec>(); ++i) u.v[i] = in[i];
        *(int4*)dst = u.raw;
    } else {
        *dst = in[0];
    }
}

/* rows[k, c .. c + V) of table row index[k] (zeros for padding, NaN for a
 * bad entry: nothing is read there). */
template <bool kVec>
__global__ void __launch_bounds__(NUREC_OFFLOAD_THREADS) NR(gather_rows_kernel)(nurec_gather_rows_params p) {
    constexpr int V = NR(offload_width)<kVec>();
    const int64_t groups = p.dim / V;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.num_index * groups) return;
    const int64_t k = t / groups, c = (t - k * groups) * V;
    const int64_t r = p.index[k];
    real_t x[V];
    if (nurec_offload_is_row(r, p.num_rows)) {
        NR(offload_load)<kVec>((const real_t*)p.table + r * p.dim + c, x);
    } else {
        NUREC_UNROLL
        for (int i = 0; i < V; ++i) x[i] = NR(offload_fill)(r);
    }
    NR(offload_store)<kVec>((real_t*)p.rows + k * p.dim + c, x);
}

/* The entry k, columns c .. c + V and row r of this thread in a checked
 * update (adam_rows, put_rows: the check kernel ran first); false where
 * the thread has nothing to do: a non-zero status (a bad index: nothing is
 * written), past the end, or padding. */
template <bool kVec>
__device__ __forceinline__ bool NR(offload_checked_entry)(const int64_t* status, const int64_t* index,
                                                          int64_t num_index, int64_t dim, int64_t* k, int64_t* c,
                                                          int64_t* r) {
    constexpr int V = NR(offload_width)<kVec>();
    if (*status != 0) return false;
    const int64_t groups = dim / V;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_index * groups) return false;
    *k = t / groups;
    *c = (t - *k * groups) * V;
    *r = index[*k];
    return *r >= 0;
}

/* Adam on param, exp_avg, exp_avg_sq [index[k], c .. c + V), after the
 * check kernel: a non-zero status (bad entries) leaves everything as it
 * was; with a zero status every entry is a row or padding, and no row is
 * listed twice (so no two threads touch one element). */
template <bool kVec>
__global__ void __launch_bounds__(NUREC_OFFLOAD_THREADS) NR(adam_rows_kernel)(nurec_adam_rows_params p) {
    constexpr int V = NR(offload_width)<kVec>();
    int64_t k, c, r;
    if (!NR(offload_checked_entry)<kVec>(p.status, p.index, p.num_index, p.dim, &k, &c, &r)) return;
    const NR(offload_adam_coefs) coefs = NR(offload_adam_coefs_of)(&p);
    const int64_t at = r * p.dim + c;
    real_t g[V], x[V], m[V], v[V];
    NR(offload_load)<kVec>((const real_t*)p.grad + k * p.dim + c, g);
    NR(offload_load)<kVec>((const real_t*)p.param + at, x);
    NR(offload_load)<kVec>((const real_t*)p.exp_avg + at, m);
    NR(offload_load)<kVec>((const real_t*)p.exp_avg_sq + at, v);
    NUREC_UNROLL
    for (int i = 0; i < V; ++i) NR(offload_adam_element)(&coefs, g[i], x + i, m + i, v + i);
    NR(offload_store)<kVec>((real_t*)p.param + at, x);
    NR(offload_store)<kVec>((real_t*)p.exp_avg + at, m);
    NR(offload_store)<kVec>((real_t*)p.exp_avg_sq + at, v);
}

/* table[index[k], c .. c + V) = rows[k, c .. c + V), after the check
 * kernel (as adam_rows_kernel: a non-zero status writes nothing; a zero one
 * means no row is listed twice). */
template <bool kVec>
__global__ void __launch_bounds__(NUREC_OFFLOAD_THREADS) NR(put_rows_kernel)(nurec_put_rows_params p) {
    constexpr int V = NR(offload_width)<kVec>();
    int64_t k, c, r;
    if (!NR(offload_checked_entry)<kVec>(p.status, p.index, p.num_index, p.dim, &k, &c, &r)) return;
    real_t x[V];
    NR(offload_load)<kVec>((const real_t*)p.rows + k * p.dim + c, x);
    NR(offload_store)<kVec>((real_t*)p.table + r * p.dim + c, x);
}
