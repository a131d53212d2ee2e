#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"
#include "util/status_macros.hpp"

namespace ein::detail::cpu {

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
