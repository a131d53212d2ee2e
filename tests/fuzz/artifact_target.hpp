// The body both artifact fuzz targets share: load the bytes as an artifact,
// and when they load (and the model is small), run it with zero inputs (a
// model with dims at its dims' minima and maxima).
// Loading must refuse with a Status whatever it cannot run safely, so any
// crash or sanitizer report while loading or running is a finding.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::fuzz {

// Models that ask for more are loaded (fully verified) but not run, so each
// input stays fast; the limits themselves are exercised by loading.
inline constexpr uint64_t kMaxRunBytes = uint64_t{64} << 20;

// Sets zero inputs of `shapes` and runs; a model's own shapes must be accepted.
inline void runWithZeros(const Model &model, Session &session, const std::vector<std::vector<int64_t>> &shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorInfo &input = model.inputs()[i];
    size_t bytes = dtypeSize(input.dtype);
    for (int64_t size : shapes[i]) bytes *= static_cast<size_t>(size);
    std::vector<uint8_t> zeros(bytes);
    if (!session.setInput(input.name, input.dtype, shapes[i], zeros.data(), zeros.size()).ok())
      __builtin_trap();  // the model's own shapes must be accepted
  }
  (void)session.run();
}

// The bytes of tensors `infos` at `shapes`, capped just past the limit.
inline uint64_t bytesAt(const std::vector<TensorInfo> &infos, const std::vector<std::vector<int64_t>> &shapes) {
  uint64_t total = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    uint64_t bytes = dtypeSize(infos[i].dtype);
    for (int64_t size : shapes[i])
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(size), &bytes)) return kMaxRunBytes + 1;
    total += std::min(bytes, kMaxRunBytes + 1);
  }
  return total;
}

// A static model runs once; a model with dims at its dims' minima and then
// their maxima, so the expression evaluator, the checks and a second
// instantiation are reached.
inline void loadAndRun(const uint8_t *data, size_t size) {
  auto model = Model::loadFromMemory(data, size, "fuzz.einb");
  if (!model.ok()) return;
  const Model &loaded = *model.value();
  std::vector<std::vector<int64_t>> dimValues(1);
  if (!loaded.dims().empty()) {
    dimValues.assign(2, {});
    for (const DimInfo &dim : loaded.dims()) {
      dimValues[0].push_back(dim.min);
      dimValues[1].push_back(dim.max);
    }
  }
  uint64_t bytes = loaded.arenaBytes();
  // 0 for a dynamic shape: the sessions' buffers then grow per run.
  for (const TensorInfo &info : loaded.inputs()) bytes += info.byteSize();
  for (const TensorInfo &info : loaded.outputs()) bytes += info.byteSize();
  if (bytes > kMaxRunBytes) return;
  SessionOptions options;
  options.threads = 2;  // the threaded paths too
  auto session = Session::create(model.value(), options);
  if (!session.ok()) return;
  for (const std::vector<int64_t> &dims : dimValues) {
    auto shapes = loaded.inputShapes(dims);
    if (!shapes.ok()) return;  // an expression without a value at these dims
    uint64_t runBytes = bytesAt(loaded.inputs(), shapes.value());
    // Outputs have no shape where a check fails: that run fails before allocating them.
    if (auto outputShapes = loaded.outputShapes(shapes.value()); outputShapes.ok())
      runBytes += bytesAt(loaded.outputs(), outputShapes.value());
    if (runBytes > kMaxRunBytes) return;
    runWithZeros(loaded, *session.value(), shapes.value());
  }
}

}  // namespace ein::fuzz
