// The f32 gemm's register tile (MR rows by NV vectors of c, a packed panel
// or plain rows of a against a packed panel of b) and the gemv's panel walk
// for a few rows.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu::isa {

// The register tile: MR rows x NV vectors of accumulators, one a element
// broadcast per row and NV b-vector loads per step of k. a[r * aRow + p * aStep]
// covers both packed panels (aRow 1, aStep MR) and plain rows (aRow lda, aStep 1);
// b's rows are bStep floats apart. Always inlined, so each caller's constant
// strides become immediate offsets (a few percent of the tile's speed).
template <class S, int MR, int NV>
[[gnu::always_inline]] inline void gemmTileStrided(int64_t kc, const float *a, int64_t aRow, int64_t aStep,
                                                   const float *b, int64_t bStep, float *c, int64_t ldc,
                                                   bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[MR][NV];
  // One line of the bytes to prefetch every few steps, spread over the tile.
  const int64_t lines = prefetchBytes / 64;
  const int64_t every = lines > 0 ? std::max<int64_t>(1, kc / lines) : kc + 1;
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? S::load(c + r * ldc + v * W) : S::zero();
  int64_t line = 0, countdown = every;
  for (int64_t p = 0; p < kc; ++p) {
    if (--countdown == 0) {
      countdown = every;
      if (line < lines) __builtin_prefetch(prefetch + 64 * line++, 0, 2);
    }
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + p * bStep + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V ar = S::set1(a[r * aRow + p * aStep]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = S::fmadd(ar, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::store(c + r * ldc + v * W, acc[r][v]);
}

template <class S, int MR, int NV>
void gemmTile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool accumulate,
              const char *prefetch, int64_t prefetchBytes) {
  gemmTileStrided<S, MR, NV>(kc, a, 1, MR, b, NV * S::W, c, ldc, accumulate, prefetch, prefetchBytes);
}

template <class S, int MR, int NV>
void gemmTileRows(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, bool accumulate,
                  const char *prefetch, int64_t prefetchBytes) {
  gemmTileStrided<S, MR, NV>(kc, a, lda, 1, b, NV * S::W, c, ldc, accumulate, prefetch, prefetchBytes);
}

template <class S, int MR>
void gemmTileRowsVector(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                        bool accumulate) {
  gemmTileStrided<S, MR, 1>(kc, a, lda, 1, b, ldb, c, ldc, accumulate, nullptr, 0);
}

// gemmTileRows over `rows` <= MR rows (IsaKernels::gemmTileRowsUpTo).
template <class S, int MR, int NV>
void gemmTileRowsUpTo(int rows, int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                      bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  withRows<MR>(rows, [&](auto mr) {
    gemmTileStrided<S, decltype(mr)::value, NV>(kc, a, lda, 1, b, NV * S::W, c, ldc, accumulate, prefetch,
                                                prefetchBytes);
  });
}

// A bf16 pair panel's rows [0, kc) widened exactly into an f32 panel of NV
// vectors per row (IsaKernels::bf16WidenPairPanel): an odd kc's last pair
// gives its even half only.
template <class S, int NV>
void widenPairPanel(int64_t kc, const uint32_t *pairs, float *panel) {
  using V = typename S::V;
  constexpr int W = S::W, NR = NV * W;
  for (int64_t q = 0; q < kc / 2; ++q)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V even, odd;
      S::loadPairs(pairs + q * NR + v * W, even, odd);
      S::store(panel + 2 * q * NR + v * W, even);
      S::store(panel + (2 * q + 1) * NR + v * W, odd);
    }
  if (kc % 2)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V even, odd;
      S::loadPairs(pairs + kc / 2 * NR + v * W, even, odd);
      S::store(panel + (kc - 1) * NR + v * W, even);
    }
}

// The gemv's MR rows over one panel of NV vectors (see IsaKernels::gemvPanel).
// One row alone would be a chain of k dependent FMAs per accumulator, so it
// keeps two sets of sums (even and odd steps). No software prefetch: with
// so little work a line, the loads run far enough ahead by themselves, and
// prefetches 1 KiB ahead held the L1's miss slots that they
// need (Zen 3, 2 threads, 768 x 32000 cold: 1.14x the weights' GB/s
// without them, 8 of 8 alternated pairs; the widening and int8 gemvs,
// with more work a line, stream faster with them).
template <class S, int MR, int NV>
[[gnu::always_inline]] inline void gemvPanelRows(int64_t k, const float *a, int64_t lda, const float *b, float *c,
                                                 int64_t ldc) {
  using V = typename S::V;
  constexpr int W = S::W, NR = NV * W, U = MR == 1 ? 2 : 1;
  V acc[U][MR][NV];
#pragma GCC unroll 2
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[u][r][v] = S::zero();
  int64_t p = 0;
  for (; p + U <= k; p += U)
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) {
      const float *row = b + (p + u) * NR;
      V bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = S::load(row + v * W);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const V ar = S::set1(a[r * lda + p + u]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[u][r][v] = S::fmadd(ar, bv[v], acc[u][r][v]);
      }
    }
  for (; p < k; ++p)
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const V ar = S::set1(a[r * lda + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[0][r][v] = S::fmadd(ar, S::load(b + p * NR + v * W), acc[0][r][v]);
    }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V sum = acc[0][r][v];
      if constexpr (U == 2) sum = S::add(sum, acc[U - 1][r][v]);
      S::store(c + r * ldc + v * W, sum);
    }
}

template <class S, int NV>
void gemvPanel(int rows, int64_t k, const float *a, int64_t lda, const float *b, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { gemvPanelRows<S, decltype(mr)::value, NV>(k, a, lda, b, c, ldc); });
}

// The gemv over a bf16 pair panel (IsaKernels::bf16WidenGemvPanel): as
// gemvPanelRows, each pair's two weights widened exactly to f32 in registers
// and multiplied by f32 rows of a, the even and the odd k in two chains of
// sums (added at the end) while they and the widened pair fit the registers,
// else in one (AVX2 at 3 and 4 rows: 16 sums spilled from its 16 registers).
// Half the bytes of an f32 panel stream through, its lines pulled
// ahead (GemvPrefetch).
template <class S, int MR, int NV>
void gemvPairPanelRows(int64_t k, const float *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc) {
  using V = typename S::V;
  constexpr int W = S::W, NR = NV * W;
  constexpr int Chains = 2 * MR * NV + 2 * NV + 2 <= S::Registers ? 2 : 1;
  constexpr int OddChain = Chains - 1;
  V acc[Chains][MR][NV];
#pragma GCC unroll 2
  for (int chain = 0; chain < Chains; ++chain)
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[chain][r][v] = S::zero();
  const int64_t whole = k / 2;
  for (int64_t q = 0; q < whole; ++q) {
    const uint32_t *row = b + q * NR;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      if ((v * W * 4) % 64 == 0) GemvPrefetch<W * 32>::line(row + v * W);
    V even[NV], odd[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::loadPairs(row + v * W, even[v], odd[v]);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const V first = S::set1(a[r * lda + 2 * q]), second = S::set1(a[r * lda + 2 * q + 1]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        acc[0][r][v] = S::fmadd(first, even[v], acc[0][r][v]);
        acc[OddChain][r][v] = S::fmadd(second, odd[v], acc[OddChain][r][v]);
      }
    }
  }
  if (k % 2) {  // an odd k's last weight, paired with zero
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V even, odd;
      S::loadPairs(b + whole * NR + v * W, even, odd);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) acc[0][r][v] = S::fmadd(S::set1(a[r * lda + k - 1]), even, acc[0][r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      S::store(c + r * ldc + v * W, Chains == 2 ? S::add(acc[0][r][v], acc[OddChain][r][v]) : acc[0][r][v]);
}

template <class S, int NV>
void gemvPairPanel(int rows, int64_t k, const float *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc) {
  withGemvRows(rows, [&](auto mr) { gemvPairPanelRows<S, decltype(mr)::value, NV>(k, a, lda, b, c, ldc); });
}

}  // namespace ein::detail::cpu::isa
