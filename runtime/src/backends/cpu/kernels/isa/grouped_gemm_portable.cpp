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

// (see IsaKernels::s4GemmTile)
void s4GemmTilePortable(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                        const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < kGroupedPanelColumns; ++j) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t *weights = panel + g * kS4GroupBytes;
        const int8_t *row = a + r * lda + g * kWeightGroup;
        int32_t sum = 0;
        for (int d = 0; d < 4; ++d)
          for (int t = 0; t < 4; ++t) {
            const uint8_t pair = weights[d * 32 + j * 4 + t];
            sum += row[8 * d + t] * (pair & 15) + row[8 * d + 4 + t] * (pair >> 4);
          }
        uint16_t scaleBits;
        __builtin_memcpy(&scaleBits, weights + 128 + 2 * j, 2);
        const float scale = aScale[r * lds + g] * halfToFloat(scaleBits);
        acc = std::fma(static_cast<float>(sum - 8 * aSum[r * lds + g]), scale, acc);
      }
      c[r * ldc + j] = acc;
    }
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTilePortable(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                               const int32_t * /*aSum*/, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < kGroupedPanelColumns; ++j) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t *weights = panel + g * kS8GroupBytes;
        const int8_t *row = a + r * lda + g * kWeightGroup;
        int32_t sum = 0;
        for (int d = 0; d < 8; ++d)
          for (int t = 0; t < 4; ++t) sum += row[4 * d + t] * static_cast<int8_t>(weights[d * 32 + j * 4 + t]);
        uint16_t scaleBits;
        __builtin_memcpy(&scaleBits, weights + 256 + 2 * j, 2);
        const float scale = aScale[r * lds + g] * halfToFloat(scaleBits);
        acc = std::fma(static_cast<float>(sum), scale, acc);
      }
      c[r * ldc + j] = acc;
    }
}

}  // namespace ein::detail::cpu
