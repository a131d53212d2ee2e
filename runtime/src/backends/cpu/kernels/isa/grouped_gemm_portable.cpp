// The group-scaled gemms' register tiles in portable C++ (the portable
// table; the reference the vector tiles are tested against).
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "ein/half_float.hpp"

namespace ein::detail::cpu {

// (see IsaKernels::s8QuantizeGroups)
void s8QuantizeGroupsPortable(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum) {
  quantizeGroupsS8(x, 1, k, groups, q, scale, sum);
}

namespace {

// The exact integer S of IsaKernels::s4GemmTile / s8GroupedGemmTile for one
// group (`weights`, grouped_gemm.hpp's layout), one row of a and column j.
int32_t groupProduct(int bits, const uint8_t *weights, const int8_t *row, int32_t rowSum, int j) {
  int32_t sum = 0;
  if (bits == 8) {
    for (int d = 0; d < 8; ++d)
      for (int t = 0; t < 4; ++t) sum += row[4 * d + t] * static_cast<int8_t>(weights[d * 32 + j * 4 + t]);
    return sum;
  }
  for (int d = 0; d < 4; ++d)
    for (int t = 0; t < 4; ++t) {
      const uint8_t pair = weights[d * 32 + j * 4 + t];
      sum += row[8 * d + t] * (pair & 15) + row[8 * d + 4 + t] * (pair >> 4);
    }
  return sum - 8 * rowSum;  // u = q + 8 was summed
}

// The portable table's panels of 8 columns.
void groupedTile(int bits, int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                 const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  const int64_t groupBytes = bits == 4 ? kS4GroupBytes : kS8GroupBytes, weightBytes = 32 * bits;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 8; ++j) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t *weights = panel + g * groupBytes;
        const int32_t rowSum = bits == 4 ? aSum[r * lds + g] : 0;
        const int32_t exact = groupProduct(bits, weights, a + r * lda + g * kWeightGroup, rowSum, j);
        uint16_t scaleBits;
        __builtin_memcpy(&scaleBits, weights + weightBytes + 2 * j, 2);
        const float scale = aScale[r * lds + g] * halfToFloat(scaleBits);
        acc = std::fma(static_cast<float>(exact), scale, acc);
      }
      c[r * ldc + j] = acc;
    }
}

}  // namespace

// (see IsaKernels::s4GemmTile)
void s4GemmTilePortable(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                        const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  groupedTile(4, rows, groups, a, lda, aScale, aSum, lds, panel, c, ldc);
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTilePortable(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                               const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  groupedTile(8, rows, groups, a, lda, aScale, aSum, lds, panel, c, ldc);
}

}  // namespace ein::detail::cpu
