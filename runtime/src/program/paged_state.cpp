#include "program/paged_state.hpp"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <variant>

namespace ein::detail {
namespace {

// Row-major element strides of `shape`, with `rows` rows along `rowsAxis`.
Dims rowMajorStrides(const Dims &shape, size_t rowsAxis, int64_t rows) {
  Dims strides = shape;
  int64_t stride = 1;
  for (size_t axis = shape.size(); axis-- > 0;) {
    strides[axis] = stride;
    stride *= axis == rowsAxis ? rows : shape[axis];
  }
  return strides;
}

// The axis of `shape` (longer than one) whose row-major stride is `stride`.
std::optional<size_t> axisWithStride(const Dims &shape, int64_t stride) {
  const Dims strides = rowMajorStrides(shape, shape.size(), 0);
  for (size_t axis = 0; axis < shape.size(); ++axis)
    if (shape[axis] > 1 && strides[axis] == stride) return axis;
  return std::nullopt;
}

uint64_t alignTo64(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// Every view of `tensor` step `s` takes, with the extents it walks and the
// axis that must walk rows (attention's keys); false
// when the step uses the tensor other than as a paged state allows.
struct Use {
  View view;
  Dims extents;
  int rowsViewAxis;
};
bool pagedUses(const Program &program, size_t s, uint32_t tensor, std::vector<Use> &views) {
  // Only a sequence's own steps see its blocks (the others run once for all).
  if (!program.steps[s].perSequence) return false;
  const Kernel &kernel = program.steps[s].kernel;
  if (const auto *copy = std::get_if<Copy>(&kernel)) {
    if (copy->x.tensor == tensor || copy->y.tensor != tensor) return false;
    views.push_back({copy->y, copy->shape, -1});
    return true;
  }
  if (const auto *attention = std::get_if<Attention>(&kernel)) {
    if (attention->q.tensor == tensor || attention->out.tensor == tensor ||
        (attention->mask && attention->mask->tensor == tensor))
      return false;
    const int keysAxis = static_cast<int>(attention->batch.size());
    if (attention->k.tensor == tensor)
      views.push_back({attention->k, attention->batch.concat({attention->keys, attention->headDim}), keysAxis});
    if (attention->v.tensor == tensor)
      views.push_back({attention->v, attention->batch.concat({attention->keys, attention->valueDim}), keysAxis});
    return true;
  }
  return false;
}

}  // namespace

PagedStates pagedStatesOf(const Program &program, int64_t blockRows) {
  PagedStates paged;
  paged.blockRows = blockRows;
  paged.entryOf.assign(program.tensors.size(), -1);
  if (blockRows < 1 || program.stepInfos.size() != program.steps.size()) return paged;
  for (uint32_t id : program.stateTensors) {
    if (id >= program.tensors.size()) continue;
    const Tensor &state = program.tensors[id];
    if (state.storage != Storage::State || state.shape.empty() || state.numElements == 0) continue;
    std::vector<Use> views;
    std::optional<size_t> rowsAxis;
    bool pageable = true;
    for (size_t s = 0; s < program.steps.size() && pageable; ++s) {
      bool uses = false;
      for (const StepOperand &operand : program.stepInfos[s].operands) uses = uses || operand.tensor == id;
      if (!uses) continue;
      // A state kept at the first run holds an encoder's rows, not one a token.
      if (program.steps[s].firstRun || !pagedUses(program, s, id, views)) pageable = false;
      // The rows axis: the one attention's keys walk.
      if (const auto *attention = std::get_if<Attention>(&program.steps[s].kernel); attention && pageable)
        for (const View *keys : {&attention->k, &attention->v}) {
          if (keys->tensor != id) continue;
          const std::optional<size_t> axis =
              attention->keys > 1 ? axisWithStride(state.shape, keys->strides[attention->batch.size()]) : std::nullopt;
          if (!axis || (rowsAxis && *rowsAxis != *axis)) pageable = false;
          rowsAxis = axis;
        }
    }
    if (!pageable || !rowsAxis) continue;
    PagedTensor entry{id, *rowsAxis, 0, 0};
    entry.blockBytes = state.byteSize / static_cast<uint64_t>(state.shape[*rowsAxis]) * static_cast<uint64_t>(blockRows);
    for (const Use &use : views)
      if (!pageView(state, entry, blockRows, use.view, use.extents, use.rowsViewAxis).ok()) pageable = false;
    if (!pageable) continue;
    entry.poolOffset = paged.poolBlockBytes;
    paged.poolBlockBytes += alignTo64(entry.blockBytes);
    paged.entryOf[id] = static_cast<int32_t>(paged.tensors.size());
    paged.tensors.push_back(entry);
  }
  return paged;
}

std::vector<bool> keptStatesOf(const Program &program) {
  std::vector<bool> kept(program.tensors.size(), false);
  for (size_t s = 0; s < program.steps.size() && s < program.stepInfos.size(); ++s)
    if (program.steps[s].firstRun)
      for (const StepOperand &operand : program.stepInfos[s].operands)
        if (operand.written && operand.tensor < kept.size() &&
            program.tensors[operand.tensor].storage == Storage::State)
          kept[operand.tensor] = true;
  return kept;
}

StatusOr<PagedView> pageView(const Tensor &state, const PagedTensor &paged, int64_t blockRows, const View &view,
                             const Dims &extents, int rowsViewAxis) {
  auto refuse = [&](const std::string &why) {
    return Status(StatusCode::InvalidArtifact, fmt::format("a view of paged state tensor {} {}", paged.tensor, why));
  };
  const Dims &shape = state.shape;
  const size_t axis = paged.rowsAxis;
  if (view.tensor != paged.tensor || axis >= shape.size() || view.strides.size() != extents.size())
    return refuse("is not over that tensor's axes");
  if (view.offset < 0 || view.offset >= state.numElements) return refuse("starts outside it");
  const Dims strides = rowMajorStrides(shape, shape.size(), 0), blockStrides = rowMajorStrides(shape, axis, blockRows);
  Dims index = shape;
  for (size_t i = 0; i < shape.size(); ++i) index[i] = view.offset / strides[i] % shape[i];
  PagedView paged_view;
  paged_view.view.tensor = view.tensor;
  paged_view.firstRow = index[axis];
  paged_view.rowStride = blockStrides[axis];
  for (size_t i = 0; i < shape.size(); ++i)
    if (i != axis) paged_view.view.offset += index[i] * blockStrides[i];
  std::array<bool, kMaxRank> walked{};
  if (rowsViewAxis >= static_cast<int>(extents.size())) return refuse("has no such axis of rows");
  for (size_t v = 0; v < extents.size(); ++v) {
    if (static_cast<int>(v) == rowsViewAxis && extents[v] <= 1) {  // one row or none: its stride is the rows'
      paged_view.view.strides.push_back(blockStrides[axis]);
      paged_view.rowsAxis = rowsViewAxis;
      paged_view.rowCount = extents[v];
      if (index[axis] + extents[v] > shape[axis]) return refuse("leaves its rows");
      continue;
    }
    if (extents[v] <= 1 || view.strides[v] == 0) {
      paged_view.view.strides.push_back(0);
      continue;
    }
    const std::optional<size_t> walks = axisWithStride(shape, view.strides[v]);
    if (!walks) return refuse(fmt::format("walks none of its axes along axis {}", v));
    if (walked[*walks]) return refuse(fmt::format("walks its axis {} twice", *walks));
    walked[*walks] = true;
    if (index[*walks] + extents[v] > shape[*walks]) return refuse(fmt::format("leaves its axis {}", *walks));
    paged_view.view.strides.push_back(blockStrides[*walks]);
    if (static_cast<int>(v) == rowsViewAxis && *walks != axis)
      return refuse(fmt::format("walks its axis {} along axis {}, which must walk its rows", *walks, v));
    if (rowsViewAxis >= 0 && static_cast<int>(v) != rowsViewAxis && *walks == axis)
      return refuse(fmt::format("walks its rows along axis {}, not {}", v, rowsViewAxis));
    if (*walks == axis) {
      paged_view.rowsAxis = static_cast<int>(v);
      paged_view.rowCount = extents[v];
    }
  }
  if (rowsViewAxis >= 0 && paged_view.rowsAxis != rowsViewAxis)
    return refuse(fmt::format("does not walk its rows along axis {}", rowsViewAxis));
  return paged_view;
}

}  // namespace ein::detail
