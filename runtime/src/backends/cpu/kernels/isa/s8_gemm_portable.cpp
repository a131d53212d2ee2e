// The int8 gemm's register tile and row quantization in portable C++ (the
// portable table; the reference the vector tiles are tested against shares
// quantize_s8.hpp).
#include <cstdint>

#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 4, kNr = 16;

// c[r * ldc + j] (+)= sum_p a[r * lda + p] * b[p][j] for r < MR; the gemv
// (Prefetch) also pulls the panel's lines ahead (GemvPrefetch).
template <int MR, bool Prefetch>
inline void s8Tile(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                   bool accumulate, SpreadPrefetch ahead) {
  int32_t acc[MR][kNr];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < kNr; ++j) acc[r][j] = accumulate ? c[r * ldc + j] : 0;
  for (int64_t q = 0; q < quads; ++q) {
    ahead.step();
    if constexpr (Prefetch) GemvPrefetch<256>::line(b + q * kNr * 4);
    for (int r = 0; r < MR; ++r) {
      const auto *row = reinterpret_cast<const int8_t *>(a + r * lda + 4 * q);
      for (int j = 0; j < kNr; ++j) {
        const int8_t *column = b + (q * kNr + j) * 4;
        acc[r][j] += row[0] * column[0] + row[1] * column[1] + row[2] * column[2] + row[3] * column[3];
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < kNr; ++j) c[r * ldc + j] = acc[r][j];
}

}  // namespace

// (see IsaKernels::s8GemmTile)
void s8GemmTilePortable(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                        bool accumulate, const char *prefetch, int64_t prefetchBytes) {
  s8Tile<kMr, false>(quads, a, lda, b, c, ldc, accumulate, SpreadPrefetch(prefetch, prefetchBytes, quads));
}

// (see IsaKernels::s8GemvPanel)
void s8GemvPanelPortable(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                         int64_t ldc, const char *prefetch, int64_t prefetchBytes) {
  withGemvRows(rows, [&](auto mr) {
    s8Tile<decltype(mr)::value, true>(quads, a, lda, b, c, ldc, false, SpreadPrefetch(prefetch, prefetchBytes, quads));
  });
}

void s8DequantizeRowPortable(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                             const float *columnScale, int64_t n, float *out) {
  dequantizeRowS8(acc, columnSums, offset, rowScale, columnScale, n, out);
}

float s8QuantizeRowPortable(const float *x, int64_t k, int64_t kPadded, uint8_t *q) {
  return quantizeRowS8(x, 1, k, kPadded, 0, q);
}

}  // namespace ein::detail::cpu
