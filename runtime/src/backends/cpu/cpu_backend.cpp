// The CPU backend: the executor of cpu_executor.cpp, the kernels of
// kernels/ (chosen by CPUID) and, once per model, the gemm weights packed
// for those kernels' register tiles.
#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::Cpu; }
  StatusOr<int> deviceCount() const override { return 1; }
  void prepareWeights(Program &program, const std::vector<bool> *eligible) const override {
    cpu::prepackGemmWeights(program, eligible);
  }
  StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program,
                                                     const SessionOptions &options) const override {
    return createCpuExecutor(program, options);
  }
};

}  // namespace

const Backend &cpuBackend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace ein::detail
