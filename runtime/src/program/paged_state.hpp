// A paged key/value cache, as vLLM's PagedAttention: when many sequences run
// at once, each state that is only appended to and read as attention's keys
// or values lives in one pool of blocks of `blockRows` rows instead of in a
// whole cache per sequence. A sequence's block table (shared by all such
// states) says which block holds its rows [n * blockRows, (n + 1) *
// blockRows): it takes blocks as it grows, and sequences forked from one
// prompt share its blocks (SequencePool copies a block only when a sequence
// writes into one it shares). A block of a state is the state's shape with
// blockRows rows along its rows axis, row-major like the state, so a view of
// the state walks a block with the state's strides but for the axes before
// the rows axis, whose strides shrink with the rows.
#pragma once

#include <cstdint>
#include <vector>

#include "ein/status.hpp"
#include "program/program.hpp"

namespace ein::detail {

struct PagedTensor {
  uint32_t tensor = 0;
  size_t rowsAxis = 0;
  uint64_t blockBytes = 0;  // one block of it
  uint64_t poolOffset = 0;  // its blocks in the pool: block n at poolOffset + n * blockBytes
};

struct PagedStates {
  int64_t blockRows = 0;
  std::vector<PagedTensor> tensors;
  std::vector<int32_t> entryOf;  // per tensor of the program: its index in `tensors`, or -1
  uint64_t poolBlockBytes = 0;   // one block of every paged state, each part 64-aligned
  bool any() const { return !tensors.empty(); }
  const PagedTensor *find(uint32_t tensor) const {
    return tensor < entryOf.size() && entryOf[tensor] >= 0 ? &tensors[static_cast<size_t>(entryOf[tensor])] : nullptr;
  }
};

// The states of `program` (the model's program at some tokens and position
// where its attention reads at least two keys) that blocks of `blockRows`
// rows can hold: those whose every step is a copy into them (an append) or
// an attention reading them as keys or values, each run per sequence
// (Step::perSequence) and at every run (not Step::firstRun), along one axis
// of rows: the axis attention's keys walk. None when blockRows < 1.
PagedStates pagedStatesOf(const Program &program, int64_t blockRows);

// Per tensor of `program`: whether it is a state a sequence's first run
// writes (keep(): an encoder's keys and values), which later runs only read
// (the loader checks): sequences forked from one share it.
std::vector<bool> keptStatesOf(const Program &program);

// A view of paged state `paged` as it walks its blocks: `view` the same
// elements' view over `extents` in the state as the program lays it out.
struct PagedView {
  View view;  // offset and strides within a block (the rows axis's row 0)
  int rowsAxis = -1;   // the view's axis walking rows; -1: it reads or writes one row
  int64_t firstRow = 0;
  int64_t rowCount = 1;  // rows it reaches from firstRow
  int64_t rowStride = 1;  // elements a row apart within a block
};
// Fails unless each axis of the view that walks more than one element walks
// one axis of the state, no two the same, staying inside it, and the rows
// along axis `rowsViewAxis` where that is not -1 (attention's keys, which
// then take the rows' stride even where they are one).
StatusOr<PagedView> pageView(const Tensor &state, const PagedTensor &paged, int64_t blockRows, const View &view,
                             const Dims &extents, int rowsViewAxis);

}  // namespace ein::detail
