// The group-scaled gemms' register tiles on AVX-VNNI (the VEX vpdpbusd of
// CPUs with AVX2, with or without AVX-512), used by the avx2vnni table. Built
// with -mavxvnni; isa_select.cpp offers the table only on CPUs with the
// feature. vpdpbusd adds the 4 products of unsigned bytes and signed bytes
// of each 32-bit lane to the lane, exactly: one instruction where AVX2
// (grouped_gemm_avx2.cpp) takes vpmaddubsw, vpmaddwd and an add.
#include "backends/cpu/kernels/isa/grouped_gemm_tiles_256.hpp"

namespace ein::detail::cpu {
namespace {

struct VnniProducts {
  using Sums = __m256i;
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i add(__m256i sums, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(sums, u, s); }
  static __m256i total(__m256i sums) { return sums; }
};

}  // namespace

// (see IsaKernels::s4GemmTile)
void s4GemmTileAvxvnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                       const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  s4GemmTile256<VnniProducts>(rows, groups, a, lda, aScale, aSum, lds, panel, c, ldc);
}

// (see IsaKernels::s8GroupedGemmTile)
void s8GroupedGemmTileAvxvnni(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                              const int32_t * /*aSum*/, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) {
  s8GroupedGemmTile256<VnniProducts>(rows, groups, a, lda, aScale, lds, panel, c, ldc);
}

}  // namespace ein::detail::cpu
