// The CPU backend: the executor of cpu_executor.cpp, the kernels of
// kernels/ (chosen by CPUID) and, once per model, the gemm weights packed
// for those kernels' register tiles.
#include "backends/backend.hpp"
#include "backends/backend_table.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail {
namespace {

struct CpuBackend {
  static constexpr Device kDevice = Device::Cpu;
  static StatusOr<int> deviceCount() { return 1; }
  static void prepareWeights(Program &program, const bool *eligible) { cpu::prepackGemmWeights(program, eligible); }
  static StatusOr<std::unique_ptr<ExecutorImplementation>> createExecutor(const Program &program,
                                                                          const SessionOptions &options,
                                                                          const StateSlots &slots) {
    return createCpuExecutor(program, options, slots);
  }
};

}  // namespace

const ein_backend_table &cpuBackendTable() { return backendTable<CpuBackend>(); }

}  // namespace ein::detail
