#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/isa.hpp"

namespace ein::detail::cpu {

std::vector<const IsaKernels *> supportedKernels() {
  std::vector<const IsaKernels *> tables;
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks that the OS saves the wide registers.
  if (__builtin_cpu_supports("avx512f")) {
    // The same table plus the bf16 gemm: preferred, so bf16 artifacts use it;
    // f32 work runs exactly as on avx512.
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw"))
      tables.push_back(&avx512Bf16Kernels());
    tables.push_back(&avx512Kernels());
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) tables.push_back(&avx2Kernels());
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
