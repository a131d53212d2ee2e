// The int8 gemm's register tile and row quantization in portable C++ (the
// portable table; the reference the vector tiles are tested against shares
// quantize_s8.hpp).
#include <cstdint>

#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int kMr = 4, kNr = 16;

}  // namespace

// c[r * ldc + j] (+)= sum_p a[r * lda + p] (s8) * b[p][j] (s8) (see IsaKernels::s8GemmTile).
void s8GemmTilePortable(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                        bool accumulate) {
  int32_t acc[kMr][kNr];
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < kNr; ++j) acc[r][j] = accumulate ? c[r * ldc + j] : 0;
  for (int64_t q = 0; q < quads; ++q)
    for (int r = 0; r < kMr; ++r) {
      const auto *row = reinterpret_cast<const int8_t *>(a + r * lda + 4 * q);
      for (int j = 0; j < kNr; ++j) {
        const int8_t *column = b + (q * kNr + j) * 4;
        acc[r][j] += row[0] * column[0] + row[1] * column[1] + row[2] * column[2] + row[3] * column[3];
      }
    }
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < kNr; ++j) c[r * ldc + j] = acc[r][j];
}

void s8DequantizeRowPortable(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                             const float *columnScale, int64_t n, float *out) {
  dequantizeRowS8(acc, columnSums, offset, rowScale, columnScale, n, out);
}

float s8QuantizeRowPortable(const float *x, int64_t k, int64_t kPadded, uint8_t *q) {
  return quantizeRowS8(x, 1, k, kPadded, 0, q);
}

}  // namespace ein::detail::cpu
