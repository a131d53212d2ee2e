#include <cstdlib>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

std::vector<const IsaKernels *> supportedKernels() {
  std::vector<const IsaKernels *> tables;
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks that the OS saves the wide registers.
  if (__builtin_cpu_supports("avx512f")) {
    // The same table plus the int8 gemm on VNNI, then plus the bf16 gemm:
    // preferred, so int8 and bf16 artifacts use them; f32 work runs exactly
    // as on avx512. (Every CPU with AVX512_BF16 has AVX512_VNNI.)
    const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
    if (vnni && __builtin_cpu_supports("avx512bf16")) tables.push_back(&avx512Bf16Kernels());
    if (vnni) tables.push_back(&avx512VnniKernels());
    tables.push_back(&avx512Kernels());
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    // AVX-VNNI (VEX vpdpbusd) for the int8 gemm where there is no AVX-512
    // (or it is forced away); f32 work as on avx2.
    if (__builtin_cpu_supports("avxvnni")) tables.push_back(&avx2VnniKernels());
    tables.push_back(&avx2Kernels());
  }
#endif
  tables.push_back(&portableKernels());
  return tables;
}

const IsaKernels &bestKernels() {
  static const IsaKernels *best = [] {
    std::vector<const IsaKernels *> tables = supportedKernels();
    if (const char *wanted = std::getenv("EIN_CPU_ISA"))
      for (const IsaKernels *table : tables)
        if (std::strcmp(table->name, wanted) == 0) return table;
    return tables.front();
  }();
  return *best;
}

}  // namespace ein::detail::cpu
