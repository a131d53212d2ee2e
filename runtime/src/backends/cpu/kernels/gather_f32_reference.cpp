#include <string>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"
#include "util/status_macros.hpp"

namespace ein::detail::cpu {

Status checkGatherIds(const Gather &op, const KernelContext &context) {
  Status status;
  int64_t position = 0;  // row-major number of the current id, for messages
  forEachIndex<1>(op.idsShape, {op.ids.offset}, {&op.ids.strides}, [&](const std::array<int64_t, 1> &at) {
    if (!status.ok()) return;
    if (const int64_t id = gatherId(op, context, at[0]); id < 0 || id >= op.rows)
      status = Status(StatusCode::OutOfRange, "id " + std::to_string(id) + " (ids element " +
                                                  std::to_string(position) + ") is outside [0, " +
                                                  std::to_string(op.rows) + ")");
    ++position;
  });
  return status;
}

// y[i.., w] = table[ids[i..], w], every id checked against [0, rows) first.
Status gatherF32Reference(const Gather &op, const KernelContext &context) {
  EIN_RETURN_IF_ERROR(checkGatherIds(op, context));
  const float *table = context.data<const float>(op.table);
  float *y = context.data<float>(op.y);
  const size_t rank = op.idsShape.size();
  const Dims yRows = op.y.strides.first(rank);
  const int64_t yW = op.y.strides[rank], tableRow = op.table.strides[0], tableW = op.table.strides[1];
  forEachIndex<2>(op.idsShape, {op.ids.offset, op.y.offset}, {&op.ids.strides, &yRows},
                  [&](const std::array<int64_t, 2> &at) {
                    const float *row = table + op.table.offset + gatherId(op, context, at[0]) * tableRow;
                    for (int64_t w = 0; w < op.width; ++w) y[at[1] + w * yW] = row[w * tableW];
                  });
  return Status();
}

}  // namespace ein::detail::cpu
