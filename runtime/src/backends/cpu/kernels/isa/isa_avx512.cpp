// The avx512 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/isa/isa_kernels.hpp"
#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/isa/simd_avx512.hpp"

namespace ein::detail::cpu {

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Avx512, 6, 4>("avx512");
    EIN_USE_S8_GEMM(table, Avx2, 4, 16, 0);  // every AVX-512 CPU has AVX2
    EIN_USE_GROUPED_GEMM(table, Avx2, 8, Avx2);
    return table;
  }();
  return kernels;
}

// s8_gemm_avx512vnni.cpp and grouped_gemm_avx512vnni.cpp, built with -mavx512vnni.
const IsaKernels &avx512VnniKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512Kernels();
    table.name = "avx512vnni";
    EIN_USE_S8_GEMM(table, Avx512vnni, 6, 64, 128);
    EIN_USE_GROUPED_GEMM(table, Avx512vnni, 16, Avx2);
    // On AMD's cores one row streams faster without the grouped tiles'
    // software prefetch (Zen 4, 1.1B decode, a token of each artifact in
    // turn against the int8 gemv's: int4 1.01-1.10x, int8 in groups
    // 1.10-1.21x), and more rows slower (0.6-0.8x); on the Xeon with AMX it
    // made one row stream 1.2x faster. docs/benchmarks.md.
    if (__builtin_cpu_is("amd")) EIN_USE_GROUPED_GEMM(table, Avx512vnniRowUnprefetched, 16, Avx2);
    return table;
  }();
  return kernels;
}

// Built with -mavx512bf16 (bf16_gemm_avx512bf16.cpp).
void bf16GemmTileAvx512bf16(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                            bool accumulate, const char *prefetch, int64_t prefetchBytes);
void bf16GemvPanelAvx512bf16(int rows, int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                             int64_t ldc, bool accumulate, const char *prefetch, int64_t prefetchBytes);
void bf16PackRowsAvx512bf16(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, uint32_t *dst,
                            int64_t ldd);
void bf16InterleaveRowsAvx512bf16(const float *a, const float *b, int64_t n, uint32_t *dst);
void bf16TransposePairsAvx512bf16(const uint32_t *src, int64_t lds, int64_t rows, int64_t cols, uint32_t *dst,
                                  int64_t ldd);
float bf16ExpShiftSumPairsAvx512bf16(const float *x, int64_t n, float shift, uint32_t *dst);

const IsaKernels &avx512Bf16Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512VnniKernels();
    table.name = "avx512bf16";
    table.bf16GemmTile = &bf16GemmTileAvx512bf16;
    table.bf16GemvPanel = &bf16GemvPanelAvx512bf16;
    table.bf16PackRows = &bf16PackRowsAvx512bf16;
    table.bf16InterleaveRows = &bf16InterleaveRowsAvx512bf16;
    table.bf16TransposePairs = &bf16TransposePairsAvx512bf16;
    table.bf16ExpShiftSumPairs = &bf16ExpShiftSumPairsAvx512bf16;
    return table;
  }();
  return kernels;
}

// Built with -mamx-tile and -mamx-bf16 / -mamx-int8 (bf16_gemm_amx.cpp, s8_gemm_amx.cpp).
void bf16GemmTileAmx(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                     bool accumulate, const char *prefetch, int64_t prefetchBytes);
void bf16GemmTileFromRowAmx(int64_t pairs, const uint32_t *aSteps, const uint32_t *b, const float *rowInit, float *c,
                            int64_t ldc, const TileSideWork *side);
void bf16GemmHalfTileAmx(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                         bool accumulate);
void s8GemmTileAmx(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                   bool accumulate, const char *prefetch, int64_t prefetchBytes);

// Every AMX CPU has AVX512_BF16 and AVX512_VNNI: the k tails of the AMX
// tiles, attention's bf16 tile, row quantization and f32 work are avx512bf16's.
const IsaKernels &amxKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512Bf16Kernels();
    table.name = "amx";
    table.bf16GemmTallMr = 32;
    table.bf16GemmTallTile = &bf16GemmTileAmx;
    table.bf16GemmTallTileFromRow = &bf16GemmTileFromRowAmx;
    table.bf16GemmTallHalfTile = &bf16GemmHalfTileAmx;
    table.bf16GemmTallPairStep = 16;
    table.s8GemmMr = 32;  // the same 64-column panels and offset as avx512vnni
    table.s8GemmTile = &s8GemmTileAmx;
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
