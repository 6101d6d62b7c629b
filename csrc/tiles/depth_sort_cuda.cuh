/* The items' depth sort (tiles.cu's depth_order): a stable radix sort of
 * their depth keys with their indices, CUB's onesweep with tiles sized for
 * a few hundred thousand items.
 *
 * Why not CUB's own tuning: its onesweep tile on sm_90 is 384 threads x 17
 * pairs (4-byte keys and values, 64-bit offsets), 6,528 items, so the 1944
 * garden's 335 k items ran as 52 blocks a pass on 132 SMs, 18% occupancy
 * and 8% SM throughput, ~11 us a pass for 2.7 MB, four passes (ncu, H200:
 * latency, not bytes). A smaller tile gives a pass more blocks
 * than SMs, each with less serial work. Past DEPTH_SORT_SMALL_MAX items
 * (a 2 M Gaussian rig's 10 M) CUB's tile is kept: there the sort is bound by
 * its bytes, which larger tiles move better.
 *
 * The policy reuses CUB's sm_90 radix policy and replaces its onesweep
 * agent's tile only (every pass, histogram and scan unchanged), chained
 * above CUB's sm_80 policy, so older GPUs keep CUB's choice. It names
 * CUB's dispatch layer (cub::DispatchRadixSort with a policy hub, CCCL
 * 3.x); other CUB versions take DeviceRadixSort's own tuning. The order is
 * the same either way: a stable LSD sort of the same keys (the GPU tests
 * compare the binning with the CPU's). */
#pragma once

#include <cub/device/device_radix_sort.cuh>
#include <cub/version.cuh>

#ifndef NUREC_DEPTH_SORT_THREADS
#define NUREC_DEPTH_SORT_THREADS 384
#endif
#ifndef NUREC_DEPTH_SORT_ITEMS
#define NUREC_DEPTH_SORT_ITEMS 8
#endif
#ifndef NUREC_DEPTH_SORT_SMALL_MAX
#define NUREC_DEPTH_SORT_SMALL_MAX (1 << 19)
#endif

#if CUB_VERSION >= 300000 && CUB_VERSION < 400000
#define NUREC_DEPTH_SORT_TUNED 1
template <typename DK>
struct nurec_depth_sort_hub {
    using base = cub::detail::radix::policy_hub<DK, int32_t, unsigned long long>;
    struct sizes {
        static constexpr int threads = NUREC_DEPTH_SORT_THREADS, items = NUREC_DEPTH_SORT_ITEMS;
    };
    struct Policy900 : cub::ChainedPolicy<900, Policy900, typename base::Policy800>,
                       base::template OnesweepSmallKeyTunedPolicy<sizes> {
        using OnesweepPolicy =
            cub::AgentRadixSortOnesweepPolicy<NUREC_DEPTH_SORT_THREADS, NUREC_DEPTH_SORT_ITEMS,
                                              typename base::DominantT, 1, cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY,
                                              cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT,
                                              base::Policy900::ONESWEEP_RADIX_BITS>;
    };
    using MaxPolicy = Policy900;
};
#else
#define NUREC_DEPTH_SORT_TUNED 0
#endif

/* Sorts (keys_in, vals_in) of n items into (keys_out, vals_out) by all of
 * the keys' bits, stably; with tmp null, writes the scratch it needs to
 * *bytes (CUB's convention). Inputs are left as they were. */
template <typename DK>
cudaError_t nurec_depth_sort(void* tmp, size_t* bytes, const DK* keys_in, DK* keys_out, const int32_t* vals_in,
                             int32_t* vals_out, int64_t n, cudaStream_t s) {
    const int end_bit = (int)(8 * sizeof(DK));
#if NUREC_DEPTH_SORT_TUNED
    if (n <= (int64_t)NUREC_DEPTH_SORT_SMALL_MAX) {
        using dispatch = cub::DispatchRadixSort<cub::SortOrder::Ascending, DK, int32_t, unsigned long long,
                                                cub::detail::identity_decomposer_t, nurec_depth_sort_hub<DK>>;
        cub::DoubleBuffer<DK> k(const_cast<DK*>(keys_in), keys_out);
        cub::DoubleBuffer<int32_t> v(const_cast<int32_t*>(vals_in), vals_out);
        /* not overwrite-okay: the sorted pairs land in the _out buffers, as SortPairs's */
        return dispatch::Dispatch(tmp, *bytes, k, v, (unsigned long long)n, 0, end_bit, false, s);
    }
#endif
    if (n <= (int64_t)UINT32_MAX) /* CUB's tile for 32-bit offsets: 384 x 23 pairs instead of x 17 */
        return cub::DeviceRadixSort::SortPairs(tmp, *bytes, keys_in, keys_out, vals_in, vals_out, (uint32_t)n, 0,
                                               end_bit, s);
    return cub::DeviceRadixSort::SortPairs(tmp, *bytes, keys_in, keys_out, vals_in, vals_out, n, 0, end_bit, s);
}
