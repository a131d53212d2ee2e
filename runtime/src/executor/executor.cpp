#include "executor/executor.hpp"

#include <string>

#include "executor/cpu_executor.hpp"
#if defined(EIN_HAVE_CUDA)
#include "cuda/cuda_executor.hpp"
#endif

namespace ein::detail {

#if defined(EIN_HAVE_CUDA)
inline constexpr bool kCudaBuiltIn = true;
inline constexpr const char *kDevices = "cpu, cuda";
#else
inline constexpr bool kCudaBuiltIn = false;
inline constexpr const char *kDevices = "cpu";
#endif

// Whether the device is built in; a CUDA build without a usable GPU fails
// later, when the executor is created, with the CUDA runtime's reason.
bool deviceAvailable(Device device) { return device == Device::Cpu || (device == Device::Cuda && kCudaBuiltIn); }

Status deviceUnavailable(Device device) {
  return Status(StatusCode::Unimplemented, std::string("device ") + deviceName(device) +
                                               " is not available: this runtime was built without it (devices: " +
                                               kDevices + ")");
}

namespace {

StatusOr<std::unique_ptr<Executor>> createForDevice(const Program &program, const SessionOptions &options) {
  switch (options.device) {
    case Device::Cpu: return createCpuExecutor(program, options);
    case Device::Cuda:
#if defined(EIN_HAVE_CUDA)
      return createCudaExecutor(program, options);
#else
      break;
#endif
  }
  return deviceUnavailable(options.device);
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options) {
  StatusOr<std::unique_ptr<Executor>> executor = createForDevice(program, options);
  if (!executor.ok() || program.dynamicBase) return executor;
  if (Status status = executor.value()->prepare(program); !status.ok()) return status;
  return executor;
}

}  // namespace ein::detail
