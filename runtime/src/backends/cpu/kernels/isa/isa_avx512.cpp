// The avx512 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "backends/cpu/kernels/isa/isa_kernels.hpp"
#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/isa/simd_avx512.hpp"

namespace ein::detail::cpu {

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Avx512, 6, 4>("avx512");
    EIN_USE_S8_GEMM(table, Avx2, 4, 16, 0);  // every AVX-512 CPU has AVX2
    return table;
  }();
  return kernels;
}

// s8_gemm_avx512vnni.cpp, built with -mavx512vnni.
const IsaKernels &avx512VnniKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512Kernels();
    table.name = "avx512vnni";
    EIN_USE_S8_GEMM(table, Avx512vnni, 6, 64, 128);
    return table;
  }();
  return kernels;
}

// Built with -mavx512bf16 (bf16_gemm_avx512bf16.cpp).
void bf16GemmTileAvx512bf16(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                            bool accumulate, const char *prefetch, int64_t prefetchBytes);
void bf16PackRowsAvx512bf16(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, uint32_t *dst,
                            int64_t ldd);

const IsaKernels &avx512Bf16Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512VnniKernels();
    table.name = "avx512bf16";
    table.bf16GemmTile = &bf16GemmTileAvx512bf16;
    table.bf16PackRows = &bf16PackRowsAvx512bf16;
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
