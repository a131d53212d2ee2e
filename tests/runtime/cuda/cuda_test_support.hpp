// Shared by the CUDA tests: the skip when there is no GPU, and running one
// artifact on a device.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "artifact_builder.hpp"
#include "backends/cuda/cuda_executor.hpp"

// Skips the calling test, with the CUDA runtime's reason, when no CUDA device
// can be used ("no CUDA device: cudaGetDeviceCount returned ...").
#define EIN_REQUIRE_CUDA()                                                  \
  do {                                                                      \
    ::ein::StatusOr<int> ein_devices_ = ::ein::detail::cudaDeviceCount();   \
    if (!ein_devices_.ok()) GTEST_SKIP() << ein_devices_.status().message(); \
  } while (false)

namespace ein::testing {

// Output name -> values (as f32; bool outputs as 0/1) of one run on `device`.
using Outputs = std::map<std::string, std::vector<float>>;

inline StatusOr<Outputs> runOn(Device device, const std::vector<uint8_t> &artifact,
                               const std::map<std::string, std::vector<uint8_t>> &inputs) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "test.einb");
  if (!model.ok()) return model.status();
  auto session = Session::create(model.value(), {1, device});
  if (!session.ok()) return session.status();
  for (const TensorInfo &info : model.value()->inputs()) {
    const std::vector<uint8_t> &bytes = inputs.at(info.name);
    Status status = session.value()->setInput(info.name, info.dtype, info.shape, bytes.data(), bytes.size());
    if (!status.ok()) return status;
  }
  Status status = session.value()->run();
  if (!status.ok()) return status;
  Outputs outputs;
  for (const TensorInfo &info : model.value()->outputs()) {
    StatusOr<TensorRef> ref = session.value()->output(info.name);
    if (!ref.ok()) return ref.status();
    if (info.dtype == DType::Bool) {
      std::vector<uint8_t> flags = valuesOf<uint8_t>(ref.value());
      outputs[info.name] = std::vector<float>(flags.begin(), flags.end());
    } else {
      outputs[info.name] = valuesOf<float>(ref.value());
    }
  }
  return outputs;
}

}  // namespace ein::testing
