#include "executor/executor.hpp"

#include <string>

#include "executor/cpu_executor.hpp"

namespace ein::detail {

bool deviceAvailable(Device device) { return device == Device::Cpu; }

Status deviceUnavailable(Device device) {
  return Status(StatusCode::Unimplemented, std::string("device ") + deviceName(device) +
                                               " is not available: this runtime was built without it (devices: cpu)");
}

StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options) {
  switch (options.device) {
    case Device::Cpu: return createCpuExecutor(program, options);
    case Device::Cuda: break;
  }
  return deviceUnavailable(options.device);
}

}  // namespace ein::detail
