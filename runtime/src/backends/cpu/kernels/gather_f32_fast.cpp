// Threaded embedding lookup: every id is checked first (the error names the
// first bad one in row-major order, as the reference does), then the rows
// are copied in parallel chunks, whole rows with memcpy where both the
// table's and y's rows are contiguous.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {

Status gatherF32Fast(const Gather &op, const KernelContext &context) {
  const std::byte *idBytes = context.bases[op.ids.tensor];
  const bool wideIds = context.dtype(op.ids) == DType::I64;
  const auto idAt = [&](int64_t offset) -> int64_t {
    return wideIds ? reinterpret_cast<const int64_t *>(idBytes)[offset]
                   : reinterpret_cast<const int32_t *>(idBytes)[offset];
  };
  const size_t rank = op.idsShape.size();
  int64_t position = 0;
  Status status;
  forEachIndex<1>(op.idsShape, {op.ids.offset}, {&op.ids.strides}, [&](const std::array<int64_t, 1> &at) {
    if (!status.ok()) return;
    if (const int64_t id = idAt(at[0]); id < 0 || id >= op.rows)
      status = Status(StatusCode::OutOfRange, "id " + std::to_string(id) + " (ids element " +
                                                  std::to_string(position) + ") is outside [0, " +
                                                  std::to_string(op.rows) + ")");
    ++position;
  });
  if (!status.ok()) return status;

  const float *table = context.data<const float>(op.table) + op.table.offset;
  float *y = context.data<float>(op.y);
  const Dims yRows = op.y.strides.first(rank);
  const int64_t yW = op.y.strides[rank], tableRow = op.table.strides[0], tableW = op.table.strides[1];
  const bool wholeRows = yW == 1 && tableW == 1;
  const size_t rowBytes = sizeof(float) * static_cast<size_t>(op.width);
  // About 16 KB of rows a chunk: a few lines each would cost more in hand-offs.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, op.width * 4));
  context.parallelChunks(op.idsShape.product(), grain, [&](int64_t begin, int64_t end, int) {
    IndexOffsets<2> at(op.idsShape, {&op.ids.strides, &yRows}, {op.ids.offset, op.y.offset}, begin);
    for (int64_t i = begin; i < end; ++i, at.next()) {
      const float *row = table + idAt(at[0]) * tableRow;
      float *out = y + at[1];
      if (wholeRows)
        std::memcpy(out, row, rowBytes);
      else
        for (int64_t w = 0; w < op.width; ++w) out[w * yW] = row[w * tableW];
    }
  });
  return Status();
}

}  // namespace ein::detail::cpu
