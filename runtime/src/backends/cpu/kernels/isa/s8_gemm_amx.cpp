// The int8 gemm's 32 x 64 tile on AMX (tdpbusd). Built with -mamx-tile
// -mamx-int8 -mavx512vnni and used only through the amx table
// (isa_avx512.cpp), which isa_select.cpp offers only where the CPU has AMX
// and the OS lets this process use it.
//
// One tdpbusd multiplies a 16 x 64 u8 tile by a 64 x 16 s8 one into 16 x 16
// int32 sums (16384 multiply-adds, exact), as vpdpbusd does 64: activations
// are q + 128 as on AVX512_VNNI, and the driver subtracts 128 * the column
// sums. Row quantization and dequantization are the avx512vnni table's.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/amx_tiles.hpp"

namespace ein::detail::cpu {
namespace {

using amx::kMr;
using amx::kNr;

// c (+)= the quads [from, quads) of the 32 x 64 tile with vpdpbusd: the k
// tail a 16-quad tile step does not cover.
void addQuadTail(int64_t from, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                 int64_t ldc) {
  for (int r = 0; r < kMr; ++r) {
    __m512i acc[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[v] = _mm512_loadu_si512(c + r * ldc + v * 16);
    for (int64_t q = from; q < quads; ++q) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, 4);
      const __m512i ar = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
        acc[v] = _mm512_dpbusd_epi32(acc[v], ar, _mm512_loadu_si512(b + (q * kNr + v * 16) * 4));
    }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_storeu_si512(c + r * ldc + v * 16, acc[v]);
  }
}

}  // namespace

// c[r * ldc + j] (+)= sum_p a[r * lda + p] (u8) * b[p][j] (s8) for r < 32,
// j < 64 (IsaKernels::s8GemmTile): per 32-column half, 4 int32 tiles of c
// over 16 quads of k at a time (the next panel pulled into L2 meanwhile),
// then the k tail on AVX512_VNNI.
void s8GemmTileAmx(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                   bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  amx::configureTiles();
  const int64_t steps = quads / amx::kTileRows;
  SpreadPrefetch nextPanel(prefetch, prefetchBytes, 2 * steps);
  for (int half = 0; half < 2; ++half) {
    int32_t *ch = c + half * 32;
    const int8_t *bh = b + half * 32 * 4;
    amx::loadBlockC(ch, ldc, accumulate);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t q = s * amx::kTileRows;
      _tile_loadd(4, a + 4 * q, lda);
      _tile_loadd(5, a + 16 * lda + 4 * q, lda);
      _tile_loadd(6, bh + q * kNr * 4, amx::kPanelRowBytes);
      _tile_loadd(7, bh + (q * kNr + 16) * 4, amx::kPanelRowBytes);
      const char *ahead = amx::panelStepAhead(b, quads, 2, steps, half, s, 2);
      nextPanel.step();
      _tile_dpbusd(0, 4, 6);
      amx::prefetchPanelStep(ahead, 0, 4);
      _tile_dpbusd(1, 4, 7);
      amx::prefetchPanelStep(ahead, 1, 4);
      _tile_dpbusd(2, 5, 6);
      amx::prefetchPanelStep(ahead, 2, 4);
      _tile_dpbusd(3, 5, 7);
      amx::prefetchPanelStep(ahead, 3, 4);
    }
    amx::storeBlockC(ch, ldc);
  }
  if (steps * amx::kTileRows < quads) addQuadTail(steps * amx::kTileRows, quads, a, lda, b, c, ldc);
}

}  // namespace ein::detail::cpu
