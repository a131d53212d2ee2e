// The ein dialect's passes: canonical forms and fusions, before the lowering.
#ifndef EIN_TRANSFORMS_EIN_PASSES_TD
#define EIN_TRANSFORMS_EIN_PASSES_TD

include "mlir/Pass/PassBase.td"

def WidenHalfFloats : Pass<"ein-widen-half-floats", "mlir::func::FuncOp"> {
  let summary = "Compute f16 and bf16 values in f32";
  let description = [{
    The kernels compute in f32, so half floats are a storage type: inputs
    declared f16/bf16 are cast to f32 where the function reads them, half
    params and constants become f32 (einc converts the weights once, when it
    writes the artifact), every other half result is computed as f32,
    and outputs declared half are cast back just before they are returned.
    Results then differ from an all-half computation only by that
    computation's own rounding.
  }];
}

def FoldConstants : Pass<"ein-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Compute ops of constants at compile time";
  let description = [{
    An ein op whose operands are all `ein.constant`s (and whose shape is
    static, up to 2^20 elements) becomes an `ein.constant` holding its value
    as the reference evaluator computes it (in double, then rounded to the
    result type). So index tables and masks that a model computes from
    `arange`, `//`, `%`, comparisons and views (Swin's relative position
    index and shifted-window mask) are data in the artifact, not steps. An op
    the evaluator rejects (an integer division by zero) is left in place.
  }];
}

def CanonicalizeFormulas : Pass<"ein-canonicalize-formulas", "mlir::func::FuncOp"> {
  let summary = "Rewrite the spellings of a formula into the one the fusions match";
  let description = [{
    `x ** 2` becomes `x * x`, `x ** 0.5` `sqrt(x)`, `x ** -0.5` `rsqrt(x)` and
    `x ** -1` `1 / x`; `a * rsqrt(b)` becomes `a / sqrt(b)` and `a * (1 / b)`
    becomes `a / b`; `mean(d * d, axes)` with `d = x - mean(x, axes, keepdim)`
    becomes the biased `var(x, axes)`. So every spelling of a layer norm or a
    softmax reaches the fusion passes in the form they match. Each rewrite
    computes the same function (up to f32 rounding). Run CSE before and after.
  }];
}

def FuseSoftmax : Pass<"ein-fuse-softmax", "mlir::func::FuncOp"> {
  let summary = "Recognise a softmax written out by hand";
  let description = [{
    `exp(x - max(x, a, keepdim)) / sum(exp(x - max(x, a, keepdim)), a, keepdim)`
    over one axis `a` becomes `ein.softmax x, axis = a`: the kernel computes
    exactly this formula. Without the max subtraction the formula overflows
    where softmax does not, so it is left as written. Run CSE first so both
    spellings of the exponential are one value.
  }];
}

def FuseLayerNorm : Pass<"ein-fuse-layernorm", "mlir::func::FuncOp"> {
  let summary = "Recognise a layer norm written out by hand";
  let description = [{
    Over the last axis: `(x - mean(x)) / sqrt(var(x) + eps)` (biased var)
    becomes `ein.layernorm` with variant `variance`, and
    `(x - mean(x)) / (std(x, unbiased) + eps)` with variant `unbiased_std`,
    and RMSNorm, `x / sqrt(mean(x * x) + eps)`, with variant `rms`, so each
    computes what it says. A scale `w` (on the normalised values or on the
    quotient) and then a shift `+ b` (not for rms), both of the last axis'
    size, join as weight and bias. A norm of a sum `x + r` (same shapes) that nothing
    else reads takes `r` as its residual. Run CSE first so `x` and the mean
    are single values.
  }];
}

def FuseAttention : Pass<"ein-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Recognise attention by the roles of its indices";
  let description = [{
    From each softmax, traces the scores back through an optional mask
    (`masked_fill`/`where` with a constant fill, or an added float mask),
    constant scales (on the scores, Q or K) to a contraction of Q and K, and
    the probabilities forward to a contraction with V over the softmax axis.
    The labels decide the roles (batch, query, key, feature), so any einsum
    spelling, head layout or matmul works, with or without a query axis. A
    contraction over a head axis with a square matrix (plus a bias indexed by
    the head alone) before the mask and/or after the softmax makes it
    talking-heads attention. The chain becomes `ein.attention` or
    `ein.talking_heads_attention` with operands rearranged into the op's
    layout (strides after lowering). A constant mask that hides exactly the
    keys causal attention hides (with -inf, or a fill at most -1e30) becomes
    `causal_positions` and no mask. Nothing fuses when an intermediate
    (scores, probabilities) has another user, such as a model output, or
    when the ops come in another order that would change the result (a
    scale after an additive mask; after a boolean mask the fill is scaled).
  }];
}

def FuseParallelLinears : Pass<"ein-fuse-parallel-linears", "mlir::func::FuncOp"> {
  let summary = "Fuse projections of one input into one GEMM over concatenated weights";
  let description = [{
    Horizontal GEMM fusion. Projections that read the same input (all
    `linear(x, w[, b])`, all `x @ w`, or two-operand einsums of one
    equation by a parameter, e.g. `einsum("s d, h d e -> h s e", x, w)`),
    whose weights (and biases, all or none) are parameters of one element
    type agreeing on every axis but the output one, become one projection
    over the weights (and biases) concatenated along the output axis (an
    einsum's: the outermost weight label the result keeps and the input
    lacks, such as the heads), in the order the projections come; each part
    is a slice of the fused result along that axis (a linear's or matmul's
    last), which lowering turns into a strided view, so the
    consumers (a head split, attention, an append into a cache, SwiGLU's
    product) read the fused GEMM's output in place. The concatenations are
    expressions of parameters only: kern-plan-memory folds them, so einc
    stores the fused weight once, and at bf16/int8 it is stored as any GEMM
    weight is (bf16; int8 with its per-column scales). Every output column
    is computed from the same row and column as before, so results are
    unchanged. Epilogues: an activation that would become its GEMM's
    epilogue (a linear's only reader, not itself read only by element-wise
    ops) must be the same for every part, and then applies to the fused
    result; a linear whose only reader adds to it (a residual, which joins
    its GEMM) stays alone.
  }];
}

def PlanContractions : Pass<"ein-plan-contractions", "mlir::func::FuncOp"> {
  let summary = "Split einsums of three or more operands into pairwise contractions";
  let description = [{
    Finds the cheapest binary contraction tree by dynamic programming over
    subsets of operands (opt_einsum's "optimal" search, exact for the handful
    of operands einsums have): the cost of a tree is the multiply-adds of its
    contractions plus the elements of the intermediates it stores, so among
    equal-FLOP orders the one with smaller temporaries wins. Each intermediate
    keeps only the labels still needed by the remaining operands or the
    output, summing the rest as early as possible, and is laid out for the
    contraction that reads it (batch labels first, the labels summed there
    innermost in a left operand and outermost in a right one, in the order a
    fixed sibling has them), so the lowered GEMMs read it without copies.
  }];
}

#endif // EIN_TRANSFORMS_EIN_PASSES_TD
