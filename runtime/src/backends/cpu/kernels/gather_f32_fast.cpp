// Threaded embedding lookup: every id is checked first (checkGatherIds, as
// the reference does), then the rows are copied in parallel chunks, whole
// rows with memcpy where both the table's and y's rows are contiguous.
#include <algorithm>
#include <cstring>
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

Status gatherF32Fast(const Gather &op, const KernelContext &context) {
  EIN_RETURN_IF_ERROR(checkGatherIds(op, context));
  const size_t rank = op.idsShape.size();
  const float *table = context.data<const float>(op.table) + op.table.offset;
  float *y = context.data<float>(op.y);
  const Dims yRows = op.y.strides.first(rank);
  const int64_t yW = op.y.strides[rank], tableRow = op.table.strides[0], tableW = op.table.strides[1];
  const bool wholeRows = yW == 1 && tableW == 1;
  const size_t rowBytes = sizeof(float) * static_cast<size_t>(op.width);
  // About 16 KB of rows a chunk: a few lines each would cost more in hand-offs.
  const int64_t grain = std::max<int64_t>(1, 16384 / static_cast<int64_t>(std::max<size_t>(1, rowBytes)));
  context.parallelChunks(op.idsShape.product(), grain, [&](int64_t begin, int64_t end, int) {
    IndexOffsets<2> at(op.idsShape, {&op.ids.strides, &yRows}, {op.ids.offset, op.y.offset}, begin);
    for (int64_t i = begin; i < end; ++i, at.next()) {
      const float *row = table + gatherId(op, context, at[0]) * tableRow;
      float *out = y + at[1];
      if (wholeRows)
        std::memcpy(out, row, rowBytes);
      else
        for (int64_t w = 0; w < op.width; ++w) out[w * yW] = row[w * tableW];
    }
  });
  return Status();
}

Status runStep(const Gather &op, const KernelContext &context) { return gatherF32Fast(op, context); }
size_t stepScratchFloats(const Gather &) { return 0; }

}  // namespace ein::detail::cpu
