// The bf16 gemm's 32 x 64 tile on AMX (tdpbf16ps). Built with -mamx-tile
// -mamx-bf16 -mavx512bf16 and used only through the amx table
// (isa_avx512.cpp), which isa_select.cpp offers only where the CPU has AMX
// and the OS lets this process use it.
//
// One tdpbf16ps multiplies a 16 x 32 bf16 tile by a 32 x 16 one into 16 x 16
// f32 sums: 8192 multiply-adds where vdpbf16ps does 32. The products of two
// bf16 are exact in f32 and are added in f32, as on AVX512_BF16.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/blocking.hpp"
#include "backends/cpu/kernels/isa/amx_tiles.hpp"

namespace ein::detail::cpu {
namespace {

using amx::kMr;
using amx::kNr;

inline __m512bh asBf16(__m512i v) { return reinterpret_cast<__m512bh &>(v); }

// c (+)= `pairs` more pairs of the 32 x (32 * Halves) tile with vdpbf16ps
// (a's row r at a + r * lda, b's panel rows from b on): the k tail a 16-pair
// tile step does not cover (the panels hold ceil(k / 2) pairs, not a
// multiple of 16).
template <int Halves>
void addPairTail(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc) {
  constexpr int kVectors = 2 * Halves;
  for (int r = 0; r < kMr; ++r) {
    __m512 acc[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_loadu_ps(c + r * ldc + v * 16);
    for (int64_t q = 0; q < pairs; ++q) {
      const __m512bh ar = asBf16(_mm512_set1_epi32(static_cast<int>(a[r * lda + q])));
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v)
        acc[v] = _mm512_dpbf16_ps(acc[v], ar, asBf16(_mm512_loadu_si512(b + q * kNr + v * 16)));
    }
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[v]);
  }
}

// c[r * ldc + j] (+)= sum_q A[r][q] . b[q * 64 + j] for r < 32 and
// j < 32 * Halves: per 32-column half, 4 f32 tiles of c over 16 pairs of k
// at a time, then the k tail on AVX512_BF16. Step s's pairs of row r are
// at a + s * aStep + r * lda, the tail's at a + steps * aStep + r * tailLda
// (rows of pairs: aStep 16, tailLda lda; in steps, as
// IsaKernels::bf16GemmTallTileFromRow reads a: aStep 512, lda 16, tailLda
// the tail's width). With rowInit, the sums start from rowInit[j] in every
// row instead (a bias, loaded into the tiles at a row stride of 0). With
// side, its parts run spread over the steps (IsaKernels::bf16GemmTallTileFromRow).
template <int Halves>
void bf16GemmHalvesAmx(int64_t pairs, const uint32_t *a, int64_t lda, int64_t aStep, int64_t tailLda,
                       const uint32_t *b, float *c, int64_t ldc, bool accumulate, const char *prefetch,
                       int64_t prefetchBytes, const float *rowInit = nullptr, const TileSideWork *side = nullptr) {
  amx::configureTiles();
  const int64_t steps = pairs / amx::kTileRows, aStride = lda * 4;
  // The next weight panel into L2, spread over both halves' steps.
  const int64_t lines = prefetchBytes / 64;
  int64_t line = 0;
  const int64_t perStep = steps > 0 ? ceilDiv(lines, Halves * steps) : 0;
  // Side part i runs in the step where i * allSteps / sideParts falls.
  const int64_t sideParts = side ? side->parts : 0, allSteps = Halves * steps;
  int64_t sideDone = 0;
  for (int half = 0; half < Halves; ++half) {
    float *ch = c + half * 32;
    const uint32_t *bh = b + half * 32;
    if (rowInit)
      amx::loadBlockCFromRow(rowInit + half * 32);
    else
      amx::loadBlockC(ch, ldc, accumulate);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t q = s * amx::kTileRows;
      for (int64_t i = 0; i < perStep && line < lines; ++i) __builtin_prefetch(prefetch + 64 * line++, 0, 2);
      _tile_loadd(4, a + s * aStep, aStride);
      _tile_loadd(5, a + s * aStep + 16 * lda, aStride);
      _tile_loadd(6, bh + q * kNr, amx::kPanelRowBytes);
      _tile_loadd(7, bh + q * kNr + 16, amx::kPanelRowBytes);
      const char *ahead = amx::panelStepAhead(b, pairs, Halves, steps, half, s, 2);
      _tile_dpbf16ps(0, 4, 6);
      amx::prefetchPanelStep(ahead, 0, 4);
      _tile_dpbf16ps(1, 4, 7);
      amx::prefetchPanelStep(ahead, 1, 4);
      _tile_dpbf16ps(2, 5, 6);
      amx::prefetchPanelStep(ahead, 2, 4);
      _tile_dpbf16ps(3, 5, 7);
      amx::prefetchPanelStep(ahead, 3, 4);
      for (const int64_t through = (half * steps + s + 1) * sideParts; sideDone * allSteps < through; ++sideDone)
        side->run(side->context, sideDone);
    }
    amx::storeBlockC(ch, ldc);
  }
  for (; sideDone < sideParts; ++sideDone) side->run(side->context, sideDone);
  if (const int64_t done = steps * amx::kTileRows; done < pairs)
    addPairTail<Halves>(pairs - done, a + steps * aStep, tailLda, b + done * kNr, c, ldc);
}

}  // namespace

// The whole 32 x 64 tile (IsaKernels::bf16GemmTallTile).
void bf16GemmTileAmx(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                     bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  bf16GemmHalvesAmx<2>(pairs, a, lda, amx::kTileRows, lda, b, c, ldc, accumulate, prefetch, prefetchBytes);
}

// The whole tile from a row of initial sums, a in steps
// (IsaKernels::bf16GemmTallTileFromRow).
void bf16GemmTileFromRowAmx(int64_t pairs, const uint32_t *aSteps, const uint32_t *b, const float *rowInit, float *c,
                            int64_t ldc, const TileSideWork *side) {
  bf16GemmHalvesAmx<2>(pairs, aSteps, amx::kTileRows, kMr * amx::kTileRows, pairs % amx::kTileRows, b, c, ldc, false,
                       nullptr, 0, rowInit, side);
}

// Its first 32 columns (IsaKernels::bf16GemmTallHalfTile).
void bf16GemmHalfTileAmx(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                         bool accumulate) {
  bf16GemmHalvesAmx<1>(pairs, a, lda, amx::kTileRows, lda, b, c, ldc, accumulate, nullptr, 0);
}

}  // namespace ein::detail::cpu
