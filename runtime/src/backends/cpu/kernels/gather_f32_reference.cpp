#include <string>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

// y[i.., w] = table[ids[i..], w]. Each id is checked against [0, rows)
// before its row is read.
Status gatherF32Reference(const Gather &op, const KernelContext &context) {
  const std::byte *ids = context.bases[op.ids.tensor];
  const bool wideIds = context.dtype(op.ids) == DType::I64;
  const float *table = context.data<const float>(op.table);
  float *y = context.data<float>(op.y);
  const size_t rank = op.idsShape.size();
  const Dims yRows = op.y.strides.first(rank);
  const int64_t yW = op.y.strides[rank], tableRow = op.table.strides[0], tableW = op.table.strides[1];
  Status status;
  int64_t position = 0;  // row-major number of the current id, for messages
  forEachIndex<2>(op.idsShape, {op.ids.offset, op.y.offset}, {&op.ids.strides, &yRows},
                  [&](const std::array<int64_t, 2> &at) {
                    if (!status.ok()) return;
                    int64_t id = wideIds ? reinterpret_cast<const int64_t *>(ids)[at[0]]
                                         : reinterpret_cast<const int32_t *>(ids)[at[0]];
                    if (id < 0 || id >= op.rows) {
                      status = Status(StatusCode::OutOfRange, "id " + std::to_string(id) + " (ids element " +
                                                                  std::to_string(position) + ") is outside [0, " +
                                                                  std::to_string(op.rows) + ")");
                      return;
                    }
                    const float *row = table + op.table.offset + id * tableRow;
                    for (int64_t w = 0; w < op.width; ++w) y[at[1] + w * yW] = row[w * tableW];
                    ++position;
                  });
  return status;
}

}  // namespace ein::detail::cpu
