// Dynamic batching for servers: checks each request alone, merges the good
// ones into runs (zero-padding the dims that may be padded) and hands each
// request exactly its own rows back. The rules are ein._batching's (the
// Python route of ein.serve); the native Triton backend (serving/triton)
// calls these.
//
//   auto signature = ein::BatchSignature::create(*model, {"t"});
//   for each request: auto dims = ein::checkRequest(*signature, inputs);   // fails alone
//   for (auto &run : ein::planRuns(*signature, goodDims, 1.25)) {
//     auto runDims = ein::mergedDims(*signature, members' dims);
//     ein::copyPadded(...) each member's input into the merged input, run,
//     ein::copyPadded(...) each member's rows out of the merged output
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ein/model.hpp"
#include "ein/runner.hpp"
#include "ein/status.hpp"
#include "ein/types.hpp"

namespace ein {

// An input or output as served: its axes after the batch axis, each a
// constant size or one of the model's ranged dims.
struct BatchedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;  // per axis after the batch axis; -1 where a dim sizes it
  std::vector<int> dims;       // per axis after the batch axis: the index into Model::dims(), or -1
  int64_t idBound = 0;         // ids of an input that indexes a table lie in [0, idBound); 0: unbounded
};

// What a model serves in batches: the first axis of every input and output
// is one ranged dim, the batch dim; `padded` dims are ranged dims besides it
// in which requests of different sizes are zero-padded to the largest (the
// model must read a zero in its mask input as padding).
struct BatchSignature {
  std::vector<DimInfo> dims;  // Model::dims()
  int batchDim = 0;
  std::vector<bool> padded;   // per dim
  std::vector<BatchedTensor> inputs, outputs;

  // InvalidArgument naming what cannot be served: no batch dim, an axis
  // sized by an expression ("t + 1"), a bf16 input or output, or a pad dim
  // that is not a ranged dim besides the batch dim.
  static StatusOr<BatchSignature> create(const Model &model, std::span<const std::string> padDims);
  // The same from a description of a model: its ranged dims, inputs and
  // outputs (TensorInfo's name, dtype, shape, dims and upperBound), for a
  // model that is not an ein::Model (ein.serve's Python route serves any).
  static StatusOr<BatchSignature> create(const std::vector<DimInfo> &dims, std::span<const TensorInfo> inputs,
                                         std::span<const TensorInfo> outputs, std::span<const std::string> padDims);

  int64_t maxBatch() const { return dims[batchDim].max; }
};

// One request's value of every dim (-1 for a dim no input names), read from
// its input shapes; InvalidArgument names the input and says what was
// expected and what came (a missing or unknown input, a dtype, rank or
// constant size, a dim out of its range or unequal across inputs) and
// OutOfRange an id outside its table. `inputs` may come in any order.
StatusOr<std::vector<int64_t>> checkRequest(const BatchSignature &signature, std::span<const InputTensor> inputs);

// Runs for checked requests (their dims): grouped by the dims they cannot be
// padded in, each group, longest first, cut into runs of at most maxBatch()
// rows whose padded elements stay within `maxPadding` (>= 1) times their real
// ones (padding a short request to a long one costs more than running it
// alone). The indices into `requestDims`, cheapest run first.
std::vector<std::vector<size_t>> planRuns(const BatchSignature &signature,
                                          std::span<const std::vector<int64_t>> requestDims, double maxPadding);

// The dims a run's merged tensors take: the batch dim the members' rows
// summed, every other dim the largest member's.
std::vector<int64_t> mergedDims(const BatchSignature &signature, std::span<const std::vector<int64_t>> memberDims);

// A tensor's shape, batch axis first, at `dims` and `rows` rows.
std::vector<int64_t> batchedShape(const BatchedTensor &tensor, std::span<const int64_t> dims, int64_t rows);

// Copies a block of `extent` elements per axis from row-major `from` (shape
// `fromShape`), starting at row `fromRow` of its first axis and 0 on the
// others, to the same block of row-major `to` (shape `toShape`) at row
// `toRow`: a request merged into a run (toRow: its first row there), or its
// rows taken out of the run's output (fromRow). Elements are `elementBytes`
// bytes; the block must lie within both shapes (the dims say so).
void copyBlock(const std::byte *from, std::span<const int64_t> fromShape, int64_t fromRow, std::byte *to,
               std::span<const int64_t> toShape, int64_t toRow, std::span<const int64_t> extent,
               size_t elementBytes);

}  // namespace ein
