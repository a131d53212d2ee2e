// The `kern` dialect: one op per runtime kernel call.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/ein/ein_dialect.hpp"

#include "ir/kern/kern_ops_dialect.h.inc"
#include "ir/kern/kern_ops_enums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/kern/kern_ops_attrs.h.inc"
#define GET_OP_CLASSES
#include "ir/kern/kern_ops.h.inc"

namespace ein::kern {

// Attributes the memory planner puts on every op that owns a buffer.
inline constexpr const char *kArenaOffsetAttr = "kern.arena_offset";
// On a constant kern-store-weights computed from weights: the names of the
// parameters it holds (the artifact lists them), possibly none.
inline constexpr const char *kFoldedFromAttr = "kern.folded_from";
// On a constant kern-store-weights made of one parameter in another type
// (bf16, i8): that parameter's name.
inline constexpr const char *kStoredFromAttr = "kern.stored_from";
inline constexpr const char *kArenaBytesAttr = "kern.arena_bytes";
// kern-plan-sequences' marks: a kernel that runs once per sequence when many
// run at once; on the function, the dim of the tokens laid end to end, or
// where and why the model serves one sequence at a time.
inline constexpr const char *kPerSequenceAttr = "kern.per_sequence";
inline constexpr const char *kSequenceTokensAttr = "kern.sequence_tokens";
inline constexpr const char *kOneSequenceAttr = "kern.one_sequence";
// kern-plan-sequences' mark on a per-sequence kernel that computes each
// token's rows from that token's rows and what a first run kept alone (a
// cross-attention), at any position: sequences sharing what their first run
// kept (beams of one search) may run it once for them all over their
// tokens, reading the kept states once.
inline constexpr const char *kRowsOverKeptAttr = "kern.rows_over_kept";
// kern-plan-first-run's mark: a kernel that runs only at a sequence's first
// run (position 0): a kern.append with first_run, and every kernel whose
// results only such kernels read. On a function argument: an input only they
// read.
inline constexpr const char *kFirstRunAttr = "kern.first_run";

// The dims each sequence has a value of its own of when many run at once:
// the position (ein.position), and the dims of the inputs read at the first
// run only (kern.first_run: an encoder's length, bound once per sequence).
std::set<std::string> sequenceDims(mlir::FunctionOpInterface function);

// The axis of `shape` that holds the tokens when the shape is a row per token,
// [1, .., 1, tokens, inner..], no inner size depending on `tokens` or a dim
// of `sequenceDims`; nullopt otherwise.
std::optional<size_t> tokenRowAxis(const ein::Shape &shape, const std::string &tokens,
                                   const std::set<std::string> &sequenceDims);

// The flat element range [min, max] a view reaches over `sizes`; false when
// `sizes` is empty of elements.
struct ViewExtent {
  int64_t min = 0;
  int64_t max = 0;
};
// Known only where every size, stride and the offset are constants.
std::optional<ViewExtent> viewExtent(ViewAttr view, const ein::Shape &sizes);

// The strides of a dense row-major buffer of `sizes`, in elements.
ein::Shape denseStrides(const ein::Shape &sizes);

// Sizes as the kern ops hold them: a list, or one size (m, n, k, ...).
ein::ir::SizesAttr sizesAttr(mlir::MLIRContext *context, const ein::Shape &sizes);
ein::ir::SizesAttr sizeAttr(mlir::MLIRContext *context, const ein::Size &size);
ein::Size sizeOf(ein::ir::SizesAttr attr);

// The shape a kern.gather reads its ids over: the result's axes but the last
// (the table's width). The ids buffer's own shape may differ, as the ids may
// be a view of it (a flatten or a slice).
ein::Shape gatherIdsShape(GatherOp gather);
// The [rows, width] a kern.gather reads its dense table as: the width is the
// result's last axis. The table buffer may have another shape (a flatten of
// `[b, h, w, c]` into rows is a view of it).
ein::Shape gatherTableShape(GatherOp gather);

}  // namespace ein::kern
