// Standalone: CUB onesweep depth sort (4-byte keys, int32 values) of P items,
// CUB's own policy against smaller tiles; mean us per sort of back-to-back calls,
// and a check that every variant gives CUB's default order.
#include <cub/cub.cuh>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>

using K = uint32_t; using V = int32_t; using O = unsigned long long;
using Base = cub::detail::radix::policy_hub<K, V, O>;

template <int T, int I, int BITS> struct Sizes { static constexpr int threads = T, items = I; };
template <int T, int I, int BITS>
struct Hub {
  struct P900 : cub::ChainedPolicy<900, P900, typename Base::Policy800>,
                Base::template OnesweepSmallKeyTunedPolicy<Sizes<T, I, BITS>> {
    static constexpr int ONESWEEP_RADIX_BITS = BITS;
    using HistogramPolicy = cub::AgentRadixSortHistogramPolicy<128, 16, 1, K, BITS>;
    using ExclusiveSumPolicy = cub::AgentRadixSortExclusiveSumPolicy<256, BITS>;
    using OnesweepPolicy = cub::AgentRadixSortOnesweepPolicy<T, I, typename Base::DominantT, 1,
        cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY, cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT, BITS>;
  };
  using MaxPolicy = P900;
};

template <class Disp>
float run(const char* name, K* ki, K* ko, V* vi, V* vo, O n, std::vector<V>* out, int reps) {
  size_t bytes = 0;
  cub::DoubleBuffer<K> dk(ki, ko); cub::DoubleBuffer<V> dv(vi, vo);
  if (Disp::Dispatch(nullptr, bytes, dk, dv, n, 0, 32, false, 0) != cudaSuccess) { printf("%s: sizing failed\n", name); return -1; }
  void* tmp; cudaMalloc(&tmp, bytes);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int w = 0; w < 5; ++w) { cub::DoubleBuffer<K> k2(ki, ko); cub::DoubleBuffer<V> v2(vi, vo); Disp::Dispatch(tmp, bytes, k2, v2, n, 0, 32, false, 0); }
  cudaEventRecord(a);
  for (int r = 0; r < reps; ++r) { cub::DoubleBuffer<K> k2(ki, ko); cub::DoubleBuffer<V> v2(vi, vo); Disp::Dispatch(tmp, bytes, k2, v2, n, 0, 32, false, 0); }
  cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  cudaError_t e = cudaGetLastError();
  out->resize(n); cudaMemcpy(out->data(), vo, n * sizeof(V), cudaMemcpyDeviceToHost);
  cudaFree(tmp);
  printf("  %-22s %8.2f us/sort  tmp %zu B  %s\n", name, 1e3f * ms / reps, bytes, e == cudaSuccess ? "" : cudaGetErrorString(e));
  return 1e3f * ms / reps;
}

template <int T, int I, int B> using D = cub::DispatchRadixSort<cub::SortOrder::Ascending, K, V, O, cub::detail::identity_decomposer_t, Hub<T, I, B>>;
using DDef = cub::DispatchRadixSort<cub::SortOrder::Ascending, K, V, O>;
using DDef32 = cub::DispatchRadixSort<cub::SortOrder::Ascending, K, V, uint32_t>;

// The entries' sort: 2-byte tile keys (15 bits), int32 values, 64- vs 32-bit offsets.
template <typename Off>
void entries(long long n, int end_bit, int reps) {
  std::mt19937 rng(2); std::uniform_int_distribution<int> U(0, (1 << end_bit) - 2);
  std::vector<uint16_t> hk(n); std::vector<int32_t> hv(n);
  for (long long i = 0; i < n; ++i) { hk[i] = (uint16_t)U(rng); hv[i] = (int32_t)i; }
  std::sort(hk.begin(), hk.begin() + n / 3); /* runs of one tile, as an item's keys */
  uint16_t *ki, *ko; int32_t *vi, *vo;
  cudaMalloc(&ki, n * 2); cudaMalloc(&ko, n * 2); cudaMalloc(&vi, n * 4); cudaMalloc(&vo, n * 4);
  cudaMemcpy(ki, hk.data(), n * 2, cudaMemcpyHostToDevice); cudaMemcpy(vi, hv.data(), n * 4, cudaMemcpyHostToDevice);
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, ki, ko, vi, vo, (Off)n, 0, end_bit);
  void* tmp; cudaMalloc(&tmp, bytes);
  for (int w = 0; w < 3; ++w) cub::DeviceRadixSort::SortPairs(tmp, bytes, ki, ko, vi, vo, (Off)n, 0, end_bit);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int r = 0; r < reps; ++r) cub::DeviceRadixSort::SortPairs(tmp, bytes, ki, ko, vi, vo, (Off)n, 0, end_bit);
  cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  printf("  entries n=%lld bits=%d offsets=%zu B: %8.2f us/sort\n", n, end_bit, sizeof(Off), 1e3f * ms / reps);
  cudaFree(ki); cudaFree(ko); cudaFree(vi); cudaFree(vo); cudaFree(tmp);
}

int main() {
  for (long long n : {2360000LL, 5840000LL, 30000000LL}) {
    entries<int64_t>(n, 15, 30); entries<uint32_t>(n, 15, 30); entries<int64_t>(n, 15, 30); entries<uint32_t>(n, 15, 30);
  }
  for (long long n : {120000LL, 335000LL, 600000LL, 1000000LL, 10000000LL}) {
    std::mt19937 rng(1); std::uniform_real_distribution<float> U(0.5f, 60.f);
    std::vector<K> hk(n); std::vector<V> hv(n);
    for (long long i = 0; i < n; ++i) { float d = U(rng); uint32_t bits; memcpy(&bits, &d, 4); hk[i] = bits | 0x80000000u; hv[i] = (V)i; }
    K *ki, *ko; V *vi, *vo;
    cudaMalloc(&ki, n * 4); cudaMalloc(&ko, n * 4); cudaMalloc(&vi, n * 4); cudaMalloc(&vo, n * 4);
    cudaMemcpy(ki, hk.data(), n * 4, cudaMemcpyHostToDevice); cudaMemcpy(vi, hv.data(), n * 4, cudaMemcpyHostToDevice);
    int reps = n > 2000000 ? 50 : 200;
    printf("P = %lld\n", n);
    std::vector<V> ref, o;
    run<DDef>("cub default (64-bit n)", ki, ko, vi, vo, n, &ref, reps);
    auto chk = [&](const std::vector<V>& x) { if (x != ref) printf("    ORDER DIFFERS\n"); };
    run<DDef32>("cub default (32-bit n)", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<256, 8, 8>>("256 x 8, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<256, 12, 8>>("256 x 12, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<384, 8, 8>>("384 x 8, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<512, 8, 8>>("512 x 8, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<384, 17, 8>>("384 x 17, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<384, 6, 8>>("384 x 6, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<384, 10, 8>>("384 x 10, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<D<448, 8, 8>>("448 x 8, 8 bits", ki, ko, vi, vo, n, &o, reps); chk(o);
    run<DDef>("cub default (64-bit n)", ki, ko, vi, vo, n, &o, reps); chk(o);
    cudaFree(ki); cudaFree(ko); cudaFree(vi); cudaFree(vo);
  }
  return 0;
}
