#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu {

namespace {
std::atomic<uint64_t> epoch{1};
}  // namespace

void beginKernelEpoch() { epoch.fetch_add(1, std::memory_order_relaxed); }
uint64_t kernelEpoch() { return epoch.load(std::memory_order_relaxed); }

bool amxUsable() {
  static const bool usable = [] {
#if defined(__x86_64__) && defined(__linux__)
    // CPUID leaf 7: EDX bit 22 AMX-BF16, 24 AMX-TILE, 25 AMX-INT8.
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    constexpr unsigned kAmx = 1u << 22 | 1u << 24 | 1u << 25;
    if ((edx & kAmx) != kAmx) return false;
    // The OS saves the tile state: XCR0 bits 17 (TILECFG) and 18 (TILEDATA)
    // (OSXSAVE, CPUID.1:ECX bit 27, says xgetbv may be used).
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & 1u << 27)) return false;
    unsigned xcr0Low, xcr0High;
    __asm__ volatile("xgetbv" : "=a"(xcr0Low), "=d"(xcr0High) : "c"(0));
    constexpr unsigned kTileState = 1u << 17 | 1u << 18;
    if ((xcr0Low & kTileState) != kTileState) return false;
    // Linux hands out the 8 KiB of tile data per process on request; a tile
    // instruction without it is killed with SIGILL.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return usable;
}

std::vector<const IsaKernels *> supportedKernels() {
  std::vector<const IsaKernels *> tables;
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks that the OS saves the wide registers.
  if (__builtin_cpu_supports("avx512f")) {
    // The same table plus the int8 gemm on VNNI, then plus the bf16 gemm:
    // preferred, so int8 and bf16 artifacts use them; f32 work runs exactly
    // as on avx512. (Every CPU with AVX512_BF16 has AVX512_VNNI; every one
    // with AMX has both.)
    const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
    const bool bf16 = vnni && __builtin_cpu_supports("avx512bf16");
    if (bf16 && amxUsable()) tables.push_back(&amxKernels());
    if (bf16) tables.push_back(&avx512Bf16Kernels());
    if (vnni) tables.push_back(&avx512VnniKernels());
    tables.push_back(&avx512Kernels());
  }
  // F16C (the int4 gemm's f16 scales) came with or before AVX2 on every x86 CPU.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
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
