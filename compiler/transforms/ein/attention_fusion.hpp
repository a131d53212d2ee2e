// What fuse_attention.cpp finds around a softmax and the rewrites that replace
// it: fused_attention_builder.cpp builds ein.attention or
// ein.talking_heads_attention, grouped_query_attention.cpp reads repeated key
// heads in place.
#pragma once

#include <optional>
#include <string>

#include "ir/ein/ein_dialect.hpp"
#include "mlir/IR/Operation.h"

namespace ein::attention_fusion {

using mlir::Operation;
using mlir::SmallVector;
using mlir::Value;
using ein::ir::MaskKind;

using Labels = SmallVector<std::string>;

// Q . K: the roles of the score labels.
struct ScoreRoles {
  Value q, k;
  Labels qLabels, kLabels;
  Labels scores;  // the labels of the scores, in order
  Labels batch;   // in score order
  Labels queries;  // in Q and the scores only: none (a single query), one, or several (grouped heads)
  std::string key, feature;
  double scale = 1.0;
};

// A contraction with a [heads, heads] matrix over one batch label of the
// scores (talking heads): s'[.., g, ..] = sum_h w[g, h] s[.., h, ..].
struct HeadMix {
  Value weight;             // [g, h] or [h, g]
  bool transposed = false;  // weight is [h, g]
  Value bias;               // indexed by the mixed head only, or null
};

// Everything between the softmax and the two contractions.
struct Attention {
  ScoreRoles roles;
  std::optional<HeadMix> preMix, postMix;
  std::optional<std::string> head;  // the mixed batch label (talking heads)
  MaskKind maskKind = MaskKind::none;
  Value mask;
  SmallVector<Value> addedMasks;  // further additive terms, summed into `mask`
  double maskFill = 0.0;
  double softcap = 0.0;     // c of c * tanh(s / c) over the scaled scores; 0: none
  Operation *pv = nullptr;  // the contraction with V, which the fused op replaces
  Value v;
  Labels vLabels, outLabels;  // in score names
  std::string value;          // v's own label
};

// The whole attention around `softmax`, if it is one.
std::optional<Attention> matchAttention(ein::ir::SoftmaxOp softmax);

// Replaces `attention` by the fused op (its location names `pass`); false,
// with nothing replaced, where a layout change cannot be written as an
// einops pattern.
bool replaceWithFusedOp(const Attention &attention, llvm::StringRef pass);

// Attention over keys and values repeated alike along a head axis becomes
// grouped-query attention.
void readRepeatedHeadsInPlace(ein::ir::AttentionOp attention, llvm::StringRef pass);

}  // namespace ein::attention_fusion
