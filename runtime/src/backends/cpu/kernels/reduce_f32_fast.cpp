// Vectorised, threaded reduction of the trailing axes: each kept element's
// reduced values are read as one contiguous row when their strides allow it,
// else gathered into scratch first: kColumnLanes neighbouring kept elements
// at a time where the last kept axis is contiguous (a mean over the tokens
// of [batch, tokens, channels]: each reduced position's lanes are one short
// contiguous read), one element at a time otherwise. Every row then goes
// through the same reduceRow: f32 with several accumulators; NaN propagates
// through max and min; the mean of nothing is NaN. Variance steps walk their
// rows the same way, then take each row's mean and squared deviations.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/blocking.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

// Whether the axes of `shape` with `strides` cover one dense run of memory
// in row-major order (size-1 axes may have any stride).
bool isContiguous(const Dims &shape, const Dims &strides) {
  int64_t expected = 1;
  for (size_t axis = shape.size(); axis-- > 0;) {
    if (shape[axis] == 1) continue;
    if (strides[axis] != expected) return false;
    expected *= shape[axis];
  }
  return true;
}

// Kept elements gathered together where the last kept axis is contiguous,
// and the most reduced values per element for which they are (the scratch
// holds kColumnLanes rows of them).
constexpr int64_t kColumnLanes = 16, kMaxColumnCount = 65536;

bool gathersColumns(const Reduce &op) {
  const size_t keptRank = op.shape.size() - op.reducedRank;
  const int64_t count = op.shape.dropFirst(keptRank).product();
  return keptRank > 0 && op.x.strides[keptRank - 1] == 1 && op.shape[keptRank - 1] > 1 && count > 0 &&
         count <= kMaxColumnCount;
}

// The sum of term(row[i]) in kLanes independent f32 partial sums, which the
// compiler turns into vector adds (a single sum would be one dependent
// chain), then added in double.
template <typename Term>
double laneSum(const float *row, int64_t count, Term term) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] += term(row[i + lane]);
  double total = 0.0;
  for (float lane : lanes) total += lane;
  for (; i < count; ++i) total += term(row[i]);
  return total;
}

// How a reduction over the trailing `reducedRank` axes (Reduce, Variance)
// walks x: the kept and reduced axes, their strides, the reduced count and
// whether each kept item's reduced values are one contiguous run.
struct Rows {
  Dims kept, reduced, xKept, xReduced;
  int64_t count = 0;
  bool contiguous = false;
};

template <typename Op>
Rows rowsOf(const Op &op) {
  const size_t keptRank = op.shape.size() - op.reducedRank;
  Rows rows{op.shape.first(keptRank), op.shape.dropFirst(keptRank), op.x.strides.first(keptRank),
            op.x.strides.dropFirst(keptRank)};
  rows.count = rows.reduced.product();
  rows.contiguous = isContiguous(rows.reduced, rows.xReduced);
  return rows;
}

// body(row, y) for each kept item, spread over the threads: `row` the item's
// reduced values, read in place when contiguous, else gathered into the
// thread's scratch (count floats), and `y` its place in the output.
template <typename Op, typename Body>
void forEachRow(const Op &op, const Rows &rows, const KernelContext &context, Body &&body) {
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  context.parallelChunks(rows.kept.product(), std::max<int64_t>(1, 16384 / std::max<int64_t>(rows.count, 1)),
                         [&](int64_t begin, int64_t end, int thread) {
                           float *scratch = context.threadScratch(thread);
                           for (int64_t item = begin; item < end; ++item) {
                             const int64_t base = offsetOfIndex(rows.kept, rows.xKept, op.x.offset, item);
                             const float *row = x + base;
                             if (!rows.contiguous && rows.count > 0) {
                               float *to = scratch;
                               forEachIndex<1>(rows.reduced, {base}, {&rows.xReduced},
                                               [&](const std::array<int64_t, 1> &at) { *to++ = x[at[0]]; });
                               row = scratch;
                             }
                             body(row, y[offsetOfIndex(rows.kept, op.y.strides, op.y.offset, item)]);
                           }
                         });
}

}  // namespace

size_t reduceF32FastScratchFloats(const Reduce &op) {
  const size_t count = static_cast<size_t>(op.shape.dropFirst(op.shape.size() - op.reducedRank).product());
  return gathersColumns(op) ? static_cast<size_t>(kColumnLanes) * count : count;
}

Status reduceF32Fast(const Reduce &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const float *x = context.data<const float>(op.x);
  float *y = context.data<float>(op.y);
  const Rows rows = rowsOf(op);
  const Dims &kept = rows.kept, &reduced = rows.reduced, &xKept = rows.xKept, &xReduced = rows.xReduced;
  const int64_t count = rows.count;
  auto finish = [&](float value) {
    if (op.kind != ReduceKind::Mean) return value;
    return count > 0 ? value / static_cast<float>(count) : std::numeric_limits<float>::quiet_NaN();
  };
  if (!rows.contiguous && gathersColumns(op)) {
    const int64_t last = kept.back(), blocksPerRow = ceilDiv(last, kColumnLanes);
    context.parallelChunks(kept.product() / last * blocksPerRow,
                           std::max<int64_t>(1, 16384 / (count * kColumnLanes)),
                           [&](int64_t begin, int64_t end, int thread) {
                             float *columns = context.threadScratch(thread);
                             for (int64_t block = begin; block < end; ++block) {
                               const int64_t first = block / blocksPerRow * last + block % blocksPerRow * kColumnLanes;
                               const int64_t lanes = std::min(kColumnLanes, last - block % blocksPerRow * kColumnLanes);
                               int64_t position = 0;
                               forEachIndex<1>(reduced, {offsetOfIndex(kept, xKept, op.x.offset, first)}, {&xReduced},
                                               [&](const std::array<int64_t, 1> &at) {
                                                 for (int64_t lane = 0; lane < lanes; ++lane)
                                                   columns[lane * count + position] = x[at[0] + lane];
                                                 ++position;
                                               });
                               for (int64_t lane = 0; lane < lanes; ++lane)
                                 y[offsetOfIndex(kept, op.y.strides, op.y.offset, first + lane)] =
                                     finish(isa.reduceRow(columns + lane * count, count, op.kind));
                             }
                           });
    return Status();
  }
  forEachRow(op, rows, context, [&](const float *row, float &out) { out = finish(isa.reduceRow(row, count, op.kind)); });
  return Status();
}

Status runStep(const Reduce &op, const KernelContext &context) { return reduceF32Fast(op, context); }
size_t stepScratchFloats(const Reduce &op) { return reduceF32FastScratchFloats(op); }

// var / std: each kept item's row, read in place when contiguous, else
// gathered into scratch; its mean, then the sum of squared deviations from
// it over max(0, n - correction), both summed in f32 lanes (0 / 0 is NaN, as
// in torch).
Status runStep(const Variance &op, const KernelContext &context) {
  const Rows rows = rowsOf(op);
  const int64_t count = rows.count;
  forEachRow(op, rows, context, [&](const float *row, float &out) {
    const double mean = laneSum(row, count, [](float v) { return v; }) / static_cast<double>(count);
    const auto shift = static_cast<float>(mean);
    const double squares = laneSum(row, count, [shift](float v) {
      const float deviation = v - shift;
      return deviation * deviation;
    });
    const double variance = squares / std::max(0.0, static_cast<double>(count) - static_cast<double>(op.correction));
    out = static_cast<float>(op.root ? std::sqrt(variance) : variance);
  });
  return Status();
}
size_t stepScratchFloats(const Variance &op) {
  return static_cast<size_t>(op.shape.dropFirst(op.shape.size() - op.reducedRank).product());
}

}  // namespace ein::detail::cpu
