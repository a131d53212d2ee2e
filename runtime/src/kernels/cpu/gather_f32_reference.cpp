#include <cstring>

#include "kernels.hpp"

namespace ein::cpu {

Status gatherF32Reference(const detail::Gather &step, const std::vector<detail::TensorSlot> &tensors,
                          TensorBases bases) {
  const std::byte *ids = bases[step.ids.tensor];
  bool wide = tensors[step.ids.tensor].dtype == DType::I64;
  const auto *table = reinterpret_cast<const float *>(bases[step.table.tensor]);
  auto *y = reinterpret_cast<float *>(bases[step.y.tensor]);
  std::vector<int64_t> idsStrides = step.ids.strides;
  detail::View rows{step.y.tensor, step.y.offset, {step.y.strides.begin(), step.y.strides.end() - 1}};
  int64_t yWidthStride = step.y.strides.back();
  int64_t tableRowStride = step.table.strides[0], tableColStride = step.table.strides[1];
  Status status;
  std::array<const detail::View *, 2> views{&step.ids, &rows};
  forEachIndex(step.idsShape, views, [&](const std::array<int64_t, 2> &base) {
    if (!status.ok()) return;
    int64_t id = wide ? reinterpret_cast<const int64_t *>(ids)[base[0]] : reinterpret_cast<const int32_t *>(ids)[base[0]];
    if (id < 0 || id >= step.rows) {
      status = Status(StatusCode::OutOfRange, "embedding id " + std::to_string(id) + " is outside [0, " +
                                                  std::to_string(step.rows) + ")");
      return;
    }
    for (int64_t w = 0; w < step.width; ++w)
      y[base[1] + w * yWidthStride] = table[step.table.offset + id * tableRowStride + w * tableColStride];
  });
  return status;
}

}  // namespace ein::cpu
