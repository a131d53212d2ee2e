// The body both artifact fuzz targets share: load the bytes as an artifact,
// and when they load (and the model is small), run it with zero inputs.
// Loading must refuse with a Status whatever it cannot run safely, so any
// crash or sanitizer report while loading or running is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::fuzz {

// Models that ask for more are loaded (fully verified) but not run, so each
// input stays fast; the limits themselves are exercised by loading.
inline constexpr uint64_t kMaxRunBytes = uint64_t{64} << 20;

inline void loadAndRun(const uint8_t *data, size_t size) {
  auto model = Model::loadFromMemory(data, size, "fuzz.einb");
  if (!model.ok()) return;
  uint64_t bytes = model.value()->arenaBytes();
  for (const TensorInfo &info : model.value()->inputs()) bytes += info.byteSize();
  for (const TensorInfo &info : model.value()->outputs()) bytes += info.byteSize();
  if (bytes > kMaxRunBytes) return;
  SessionOptions options;
  options.threads = 2;  // the threaded paths too
  auto session = Session::create(model.value(), options);
  if (!session.ok()) return;
  for (const TensorInfo &input : model.value()->inputs()) {
    std::vector<uint8_t> zeros(input.byteSize());
    if (!session.value()->setInput(input.name, input.dtype, input.shape, zeros.data(), zeros.size()).ok())
      __builtin_trap();  // the model's own shapes must be accepted
  }
  (void)session.value()->run();
}

}  // namespace ein::fuzz
