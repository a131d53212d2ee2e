#ifndef KERN_OPS_TD
#define KERN_OPS_TD

include "ir/kern/kern_dialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"

defvar Kern_Tensor = Ein_SizedTensor;

def Kern_GemmOp : Kern_Op<"gemm", [Pure, AttrSizedOperandSegments]> {
  let summary = "batched strided GEMM with a fused epilogue";
  let description = [{
    `C[b.., m, n] = activation(alpha * sum_k A[b.., m, k] * B[b.., k, n] + bias[b.., m, n]) + residual[b.., m, n]`.
    The views of `a`, `b`, `bias` and `residual` are indexed [batch..., m, k],
    [batch..., k, n] and [batch..., m, n]; `c` places the product in the
    result buffer. `b` is f32, or weights in their stored type
    (kern-store-weights): bf16, or i8 with `b_scale`, an f32 [n] tensor of
    one scale per column (B[k, n] = b[k, n] * b_scale[n]), or i4 or i8 with
    `b_scale`, an f16 [ceil(k / 32), n] tensor of one scale per group of 32
    along k and column (B[k, n] = b[k, n] * b_scale[k / 32, n]).
  }];
  let arguments = (ins Kern_Tensor:$a, Kern_Tensor:$b, Optional<Kern_Tensor>:$bias,
                       Optional<Kern_Tensor>:$residual, Optional<Kern_Tensor>:$b_scale,
                       Ein_SizesAttr:$batch, Ein_SizesAttr:$m, Ein_SizesAttr:$n, Ein_SizesAttr:$k,
                       Kern_ViewAttr:$a_view, Kern_ViewAttr:$b_view, Kern_ViewAttr:$c_view,
                       OptionalAttr<Kern_ViewAttr>:$bias_view, OptionalAttr<Kern_ViewAttr>:$residual_view,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                       DefaultValuedAttr<Kern_ActivationAttr, "::ein::kern::Activation::none">:$activation);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`bias` $bias^)? (`residual` $residual^)? (`scale` $b_scale^)? attr-dict `:`
    functional-type(operands, $result)
  }];
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let hasRuntimeMembers = 1;
  let extraClassDeclaration = [{
    // Quantized weights b whose b_scale holds an f16 scale per group of 32
    // along k and column (i4, or i8 as q8_0 holds it).
    bool hasGroupScales() {
      return getBScale() &&
             ::llvm::cast<::mlir::RankedTensorType>(getBScale().getType()).getElementType().isF16();
    }
  }];
  let stepNumber = 1;
  let stepDoc = [{
    C[b.., m, n] = activation(alpha * sum_k A[b.., m, k] * B[b.., k, n] + bias[b.., m, n])
                  + residual[b.., m, n].
    Views are indexed [batch..., m, k] / [batch..., k, n] / [batch..., m, n];
    `bias` and `residual` are optional; bias usually broadcasts over m.

    Int8 (only in an Int8 CPU artifact): b is an I8 weight tensor, one matrix
    shared by the batch (batch strides 0), and `b_scale` views an F32 weight
    tensor indexed [n] (its per-column scale, symmetric: b[k, n] ~ q * b_scale[n]).
    Each row of a is quantized at run time: s = max_k |a[m, k]| / 127 and
    qa[m, k] = round_half_even(a[m, k] * (127 / max_k |a[m, k]|)) in [-127, 127]
    (computed in f32; a row of zeros gives 0; a non-finite max gives NaN); then
      C[m, n] = activation(alpha * s[m] * b_scale[n] * sum_k qa[m, k] * b[k, n]
                           + bias[m, n]) + residual[m, n]
    with the sum exact (int32).

    Int4 (only in an Int4 CPU artifact): b is an I4 weight tensor, one matrix
    shared by the batch, and `b_group_scale` views an F16 weight tensor
    indexed [ceil(k / 32), n]: a scale per group of 32 along k and column
    (symmetric: b[k, n] ~ q * b_group_scale[k / 32, n], q in [-8, 7]). An
    Int8 artifact's I8 b may have such a `b_group_scale` instead of `b_scale`
    (llama.cpp's q8_0: q in [-128, 127]), computed as Int4's. Each
    row of a is quantized at run time per group of 32 along k, as the int8
    row above but over the group: s[m, g] = max |a[m, 32g..32g+31]| / 127 and
    qa in [-127, 127]; then
      C[m, n] = activation(alpha * sum_g s[m, g] * b_group_scale[g, n]
                             * sum_{k in g} qa[m, k] * b[k, n]
                           + bias[m, n]) + residual[m, n]
    with each group's sum exact (int32) and the sum over groups in f32.
  }];
  let step = (fields StepSizes<3>:$batch, StepSize:$m, StepSize:$n, StepSize:$k,
                     StepView<"$batch.concat({$m, $k})", ["F32"]>:$a,
                     StepView<"$batch.concat({$k, $n})">:$b,
                     StepView<"$batch.concat({$m, $n})", ["F32"], 1>:$c,
                     StepOptionalView<"$batch.concat({$m, $n})", ["F32"]>:$bias,
                     StepFloat<"1.0">:$alpha,
                     StepEnum<"Activation", "None">:$activation,
                     StepOptionalView<"$batch.concat({$m, $n})", ["F32"]>:$residual,
                     StepOptionalView<"Dims{$n}", ["F32"]>:$b_scale,
                     StepOptionalView<"Dims{($k + 31) / 32, $n}", ["F16"]>:$b_group_scale);
  let stepSpaceChecks = [StepSpaceCheck<"$batch.concat({$m, $n, $k})", "batch x m x n x k">];
  // The scales are dense weight tensors: [n] per column (f32) or
  // [ceil(k / 32), n] per group and column (f16).
  let stepWrites = (writes [{$_op.getBScale() && !$_op.hasGroupScales()
                                 ? denseView($_op.getBScale(), ir::shapeOf($_op.getBScale().getType()))
                                 : flatbuffers::Offset<fb::View>()}]:$b_scale,
                           [{$_op.hasGroupScales()
                                 ? denseView($_op.getBScale(), ir::shapeOf($_op.getBScale().getType()))
                                 : flatbuffers::Offset<fb::View>()}]:$b_group_scale);
}

def Kern_ElementwiseOp : Kern_Op<"elementwise", [Pure]> {
  let summary = "a scalar program applied at every element of the result";
  let description = [{
    The body computes one result element from one element of each input (all
    converted to f32) with `arith` and `math` ops and the activation ops of this
    dialect. `input_views` read the inputs over the result's shape (stride 0
    broadcasts).
  }];
  let arguments = (ins Variadic<Kern_Tensor>:$inputs, ArrayAttr:$input_views);
  let results = (outs Kern_Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result) $body";
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let hasRuntimeMembers = 1;
  let stepNumber = 2;
  let stepDoc = [{
    out[i..] = program(inputs[0][i..], inputs[1][i..], ...) over `shape`,
    computed in f32: inputs of any dtype are converted to f32, the result is
    stored as the output's dtype (f16/bf16 rounded to nearest even; integers
    rounded to nearest, NaN giving 0, out-of-range values saturating).
  }];
  let step = (fields StepSizes<>:$shape, StepCustom<"[View]", "std::vector<View>">:$inputs,
                     StepView<"$shape", ["F32", "F16", "BF16", "I32", "I64", "Bool"], 1>:$output,
                     StepCustom<"[Instruction]", "std::vector<Instruction>">:$program);
  // Any result type: the kernel computes in f32 and stores the result's dtype.
  let stepWritePrologue = [{
    auto compiled = compileProgram($_op.getBody().front());
    if (failed(compiled)) return failure();
  }];
  let stepWrites = (writes [{fields(ir::shapeOf($_result.getType()))}]:$shape,
                           [{views($_op.getInputs(), $_op.getInputViews().getValue())}]:$inputs,
                           [{denseView($_result, ir::shapeOf($_result.getType()))}]:$output,
                           [{*compiled}]:$program);
}

def Kern_YieldOp : Kern_Op<"yield", [Pure, Terminator, ParentOneOf<["ElementwiseOp", "ConcatOp"]>]> {
  let summary = "the result element of an elementwise body or of a concat part";
  let arguments = (ins F32:$value);
  let assemblyFormat = "$value attr-dict";
}

class Kern_ScalarActivationOp<string mnemonic> : Kern_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict";
}
def Kern_ReluOp : Kern_ScalarActivationOp<"relu"> { let summary = "max(x, 0)"; }
def Kern_GeluOp : Kern_ScalarActivationOp<"gelu"> { let summary = "0.5 x (1 + erf(x / sqrt 2))"; }
def Kern_GeluTanhOp : Kern_ScalarActivationOp<"gelu_tanh"> { let summary = "GELU, tanh approximation"; }
def Kern_SiluOp : Kern_ScalarActivationOp<"silu"> { let summary = "x sigmoid(x)"; }
def Kern_SigmoidOp : Kern_ScalarActivationOp<"sigmoid"> { let summary = "1 / (1 + exp(-x))"; }
def Kern_SoftplusOp : Kern_ScalarActivationOp<"softplus"> { let summary = "x > 20 ? x : log1p(exp(x))"; }

class Kern_ScalarBinaryOp<string mnemonic> : Kern_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins F32:$lhs, F32:$rhs);
  let results = (outs F32:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict";
}
def Kern_FloorDivOp : Kern_ScalarBinaryOp<"floordiv"> { let summary = "floor(a / b), Python's //"; }
def Kern_ModOp : Kern_ScalarBinaryOp<"mod"> { let summary = "a - b floor(a / b), Python's %"; }

def Kern_SoftmaxOp : Kern_Op<"softmax", [Pure]> {
  let summary = "softmax over the last axis of `shape`";
  let description = [{
    `x_view` and `y_view` map the iteration space `shape` (softmax axis last)
    onto the input and the result buffer.
  }];
  let arguments = (ins Kern_Tensor:$x, Ein_SizesAttr:$shape, Kern_ViewAttr:$x_view,
                       Kern_ViewAttr:$y_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let stepNumber = 3;
  let stepDoc = [{
    Softmax over the last axis of `shape` (the compiler permutes the axis there
    through the views' strides).
  }];
  let step = (fields StepSizes<0, 1>:$shape, StepView<"$shape", ["F32"]>:$x,
                     StepView<"$shape", ["F32"], 1>:$y);
}

def Kern_ReduceOp : Kern_Op<"reduce", [Pure]> {
  let summary = "reduction of the trailing `reduced_rank` axes of `shape`";
  let arguments = (ins Kern_Tensor:$x, Ein_SizesAttr:$shape, I64Attr:$reduced_rank,
                       Kern_ReduceKindAttr:$kind, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "`` $kind $x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let stepNumber = 4;
  let stepDoc = [{
    Reduces the trailing `reduced_rank` axes of `shape`. `x` is indexed over all
    of `shape`, `y` over its leading (kept) axes.
  }];
  let step = (fields StepSizes<>:$shape, StepAxisCount<"shape">:$reduced_rank,
                     StepEnum<"ReduceKind", "Sum", /*shown=*/1>:$kind,
                     StepView<"$shape", ["F32"]>:$x, StepView<"$shape.dropLast($reduced_rank)", ["F32"], 1>:$y);
  let stepReadBounds = [StepReadBound<"x", "$shape.dropFirst($shape.size() - $reduced_rank).product()",
                                      "$shape.dropLast($reduced_rank).product() > 0">];
  let stepWritePrologue = [{
    ::ein::Shape kept = $_op.getShape().sizes();
    kept.resize(kept.size() - $_op.getReducedRank());
  }];
  let stepWrites = (writes [{denseView($_result, kept)}]:$y);
}

def Kern_VarianceOp : Kern_Op<"variance", [Pure]> {
  let summary = "variance or standard deviation over the trailing `reduced_rank` axes of `shape`";
  let description = [{
    For each kept item, over its n reduced elements: the sum of squared
    deviations from their mean divided by max(0, n - correction) (torch.var),
    or its square root when `root` (torch.std). One pass where a mean, the
    squared deviations and their sum were three steps; n may depend on
    ranged dims. `x_view` maps `shape` onto the input; the result is dense
    over the kept axes.
  }];
  let arguments = (ins Kern_Tensor:$x, Ein_SizesAttr:$shape, I64Attr:$reduced_rank, I64Attr:$correction,
                       BoolAttr:$root, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let stepNumber = 10;
  let stepDoc = [{
    For each kept item of `shape` (all but the trailing `reduced_rank` axes),
    over its n reduced elements x_i with mean m:
      y = sum_i (x_i - m)^2 / max(0, n - correction), or its square root when `root`
    (torch.var and torch.std; 0 / 0 gives NaN, as there). `x` is indexed over
    all of `shape`, `y` over its kept axes.
  }];
  let step = (fields StepSizes<>:$shape, StepAxisCount<"shape">:$reduced_rank, StepInt</*shown=*/1>:$correction,
                     StepBool<"false", /*shown=*/1>:$root, StepView<"$shape", ["F32"]>:$x,
                     StepView<"$shape.dropLast($reduced_rank)", ["F32"], 1>:$y);
  let stepReadBounds = [StepReadBound<"x", "$shape.dropFirst($shape.size() - $reduced_rank).product()",
                                      "$shape.dropLast($reduced_rank).product() > 0">];
  let stepWritePrologue = [{
    ::ein::Shape kept = $_op.getShape().sizes();
    kept.resize(kept.size() - $_op.getReducedRank());
  }];
  let stepWrites = (writes [{denseView($_result, kept)}]:$y);
}

def Kern_GatherOp : Kern_Op<"gather", [Pure]> {
  let summary = "rows of a [rows, width] table picked by integer ids";
  let arguments = (ins Kern_Tensor:$ids, Kern_Tensor:$table, Kern_ViewAttr:$ids_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let stepNumber = 5;
  let stepDoc = [{
    out[i.., :] = table[ids[i..], :] for ids of shape `ids_shape`; an id outside
    [0, rows) is a run-time error. `table` is dense [rows, width]; `y` is indexed
    [i.., w].
  }];
  let step = (fields StepSizes<1>:$ids_shape, StepSize:$rows, StepSize:$width,
                     StepView<"$ids_shape", ["I32", "I64"]>:$ids,
                     StepView<"Dims{$rows, $width}", ["F32"]>:$table,
                     StepView<"$ids_shape.concat({$width})", ["F32"], 1>:$y);
  let stepSpaceChecks = [StepSpaceCheck<"$ids_shape.concat({$width})", "ids_shape x width">,
                         StepSpaceCheck<"Dims{$rows, $width}", "rows x width">];
  let stepReadBounds = [StepReadBound<"ids", "$ids_shape.product()">];
  let stepWritePrologue = [{
    ::ein::Shape idsSizes = kern::gatherIdsShape($_op), tableSizes = kern::gatherTableShape($_op);
    ::ein::Shape ySizes = idsSizes;
    ySizes.push_back(tableSizes[1]);
  }];
  let stepWrites = (writes [{fields(idsSizes)}]:$ids_shape, [{field(tableSizes[0])}]:$rows,
                           [{field(tableSizes[1])}]:$width, [{denseView($_op.getTable(), tableSizes)}]:$table,
                           [{denseView($_result, ySizes)}]:$y);
}

def Kern_CopyOp : Kern_Op<"copy", [Pure]> {
  let summary = "materialises a strided view as a dense buffer";
  let description = [{
    Reads `x` through `x_view` over `shape` and writes the elements in row-major
    order; the result may name the same elements with another shape.
  }];
  let arguments = (ins Kern_Tensor:$x, Ein_SizesAttr:$shape, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let stepNumber = 6;
  let stepDoc = [{
    y[i..] = x[i..] over `shape`, same dtype: materialises a permuted or sliced view.
    The one conversion: x f32 into y bf16, rounded to nearest even (appending
    rows to a bf16 key/value cache, the step of kern.append).
  }];
  let step = (fields StepSizes<>:$shape, StepView<"$shape">:$x, StepView<"$shape", [], 1>:$y);
  let stepWrites = (writes [{denseView($_result, $_op.getShape().sizes())}]:$y);
}

def Kern_AppendOp : Kern_Op<"append", [MemoryEffects<[MemWrite]>]> {
  let summary = "copies x into session state through `state_view`";
  let description = [{
    Reads `x` through `x_view` over `shape` and writes it into `state`
    through `state_view` (which starts at the session's position). Unlike
    other ops, the result is no fresh buffer: it is `state` itself, after
    the write, which the ops reading the appended state take as operand.
    With `first_run` (ein.append's), the write happens at a sequence's first
    run only (kern-plan-first-run marks it and what only it reads).
  }];
  let arguments = (ins Kern_Tensor:$state, Kern_Tensor:$x, Ein_SizesAttr:$shape, Kern_ViewAttr:$x_view,
                       Kern_ViewAttr:$state_view, UnitAttr:$first_run);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$state `,` $x attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Kern_ConcatOp : Kern_Op<"concat", [Pure]> {
  let summary = "joins parts along one axis, each a copy or an element-wise program";
  let description = [{
    Part `i` has the result's shape except `sizes[i]` along `axis` and is
    written into the result at the running offset along `axis`. It reads the
    next `part_inputs[i]` inputs, each through its view in `input_views`
    over the part's shape, and its body region computes each element from
    them as a kern.elementwise body does (in f32, stored as the result's
    type). A part whose body yields its one input of the result's type is a
    copy. kern-fuse-elementwise puts element-wise producers of a part and an
    element-wise user of the whole concat into the parts' bodies, so a
    concat of computed parts is written in place and costs no copy.
  }];
  let arguments = (ins Variadic<Kern_Tensor>:$inputs, ArrayAttr:$input_views, DenseI64ArrayAttr:$part_inputs,
                       I64Attr:$axis, Ein_SizesAttr:$sizes);
  let results = (outs Kern_Tensor:$result);
  let regions = (region VariadicRegion<SizedRegion<1>>:$parts);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result) $parts";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // Part `part`'s inputs and their views: the next part_inputs[part] of each.
    ::mlir::OperandRange partInputs(size_t part);
    ::llvm::ArrayRef<::mlir::Attribute> partViews(size_t part);
    // Where part `part` starts along the axis.
    ::ein::Size partStart(size_t part);
    // Whether part `part` is a plain copy: its body yields its only input,
    // which has the result's element type.
    bool isCopy(size_t part);
  }];
}

def Kern_AttentionOp : Kern_Op<"attention", [Pure]> {
  let summary = "fused scaled dot-product attention";
  let description = [{
    `out[b.., i, e] = sum_j softmax_j(mask(scale * q[b.., i, :] . k[b.., j, :])) v[b.., j, e]`.
    Views index q `[batch.., queries, head_dim]`, k `[batch.., keys, head_dim]`,
    v `[batch.., keys, value_dim]` and the mask `[batch.., queries, keys]`
    (stride 0 broadcasts); `out_view` places `[batch.., queries, value_dim]`
    in the result, so a head merge after the op costs nothing.
    `causal_positions` as in `ein.attention`: query i sees key j only where
    `j <= i mod P + keys - P`. `softcap = c > 0` caps the scaled scores as
    `c * tanh(s / c)` before the mask.
  }];
  let arguments = (ins Kern_Tensor:$q, Kern_Tensor:$k, Kern_Tensor:$v, Optional<Kern_Tensor>:$mask,
                       Ein_SizesAttr:$batch, Ein_SizesAttr:$queries, Ein_SizesAttr:$keys, Ein_SizesAttr:$head_dim,
                       Ein_SizesAttr:$value_dim, F32Attr:$scale,
                       Kern_ViewAttr:$q_view, Kern_ViewAttr:$k_view, Kern_ViewAttr:$v_view,
                       Kern_ViewAttr:$out_view, OptionalAttr<Kern_ViewAttr>:$mask_view,
                       DefaultValuedAttr<Kern_MaskKindAttr, "::ein::kern::MaskKind::none">:$mask_kind,
                       DefaultValuedAttr<F32Attr, "0.0f">:$mask_fill,
                       OptionalAttr<Ein_SizesAttr>:$causal_positions,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$q `,` $k `,` $v (`mask` $mask^)? attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let hasRuntimeMembers = 1;
  let stepNumber = 7;
  let stepDoc = [{
    Scaled dot-product attention over batch axes (heads among them):
      s[b.., i, j]   = scale * sum_d q[b.., i, d] * k[b.., j, d], capped as
                       softcap * tanh(s / softcap) where softcap > 0, then the mask
      p[b.., i, :]   = softmax(s[b.., i, :])
      out[b.., i, e] = sum_j p[b.., i, j] * v[b.., j, e]
    Views are indexed q [b.., i, d], k [b.., j, d], v [b.., j, e],
    out [b.., i, e], mask [b.., i, j] (zero strides broadcast). A row whose
    scores are all -inf gives NaN, as softmax does. q and out are f32; k and v
    are both f32, or both bf16 on the CPU target (a bf16 key/value cache).
    The mask (MaskKind) is present exactly when mask_kind is not None.
    Causal, aligned bottom-right: the queries are causal_positions positions
    P (queries a multiple of P: query heads sharing a key head stack their
    positions), query i is position i mod P of the last P of the keys, and
    sees key j only where j <= i mod P + keys - P (masked before the mask).
  }];
  let step = (fields StepSizes<4>:$batch, StepSize:$queries, StepSize:$keys, StepSize:$head_dim,
                     StepSize:$value_dim, StepFloat<"1.0">:$scale,
                     StepView<"$batch.concat({$queries, $head_dim})", ["F32"]>:$q,
                     StepView<"$batch.concat({$keys, $head_dim})">:$k,
                     StepView<"$batch.concat({$keys, $value_dim})">:$v,
                     StepView<"$batch.concat({$queries, $value_dim})", ["F32"], 1>:$out,
                     StepEnum<"MaskKind", "None">:$mask_kind,
                     StepOptionalView<"$batch.concat({$queries, $keys})">:$mask,
                     StepFloat<"-inf">:$mask_fill, StepBool<>:$causal, StepConditionalSize:$causal_positions,
                     StepFloat<"0.0">:$softcap);
  let stepSpaceChecks = [StepSpaceCheck<"$batch.concat({$queries, $keys, $head_dim, $value_dim})",
                                        "batch x queries x keys x head_dim x value_dim">];
  let stepWrites = (writes [{$_op.getCausalPositions().has_value()}]:$causal,
                           [{$_op.getCausalPositions() ? field(kern::sizeOf(*$_op.getCausalPositions())) : fb::Size(0)}]:$causal_positions);
}

def Kern_TalkingHeadsAttentionOp : Kern_Op<"talking_heads_attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "attention with heads mixed before the mask and after the softmax";
  let description = [{
    As `kern.attention` with a heads axis after the batch axes (q
    `[batch.., heads, queries, head_dim]` and so on); `pre_mix`/`post_mix`
    views index `[heads, heads]` (`[g, h]`), the biases `[heads]`. All heads of
    a query are computed together, so the kernel mixes them in registers.
  }];
  let arguments = (ins Kern_Tensor:$q, Kern_Tensor:$k, Kern_Tensor:$v, Optional<Kern_Tensor>:$pre_mix,
                       Optional<Kern_Tensor>:$pre_bias, Optional<Kern_Tensor>:$post_mix,
                       Optional<Kern_Tensor>:$post_bias, Optional<Kern_Tensor>:$mask,
                       Ein_SizesAttr:$batch, Ein_SizesAttr:$heads, Ein_SizesAttr:$queries, Ein_SizesAttr:$keys,
                       Ein_SizesAttr:$head_dim, Ein_SizesAttr:$value_dim, F32Attr:$scale,
                       Kern_ViewAttr:$q_view, Kern_ViewAttr:$k_view, Kern_ViewAttr:$v_view,
                       Kern_ViewAttr:$out_view, OptionalAttr<Kern_ViewAttr>:$pre_mix_view, OptionalAttr<Kern_ViewAttr>:$pre_bias_view,
                       OptionalAttr<Kern_ViewAttr>:$post_mix_view, OptionalAttr<Kern_ViewAttr>:$post_bias_view,
                       OptionalAttr<Kern_ViewAttr>:$mask_view,
                       DefaultValuedAttr<Kern_MaskKindAttr, "::ein::kern::MaskKind::none">:$mask_kind,
                       DefaultValuedAttr<F32Attr, "0.0f">:$mask_fill);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`pre_mix` $pre_mix^)? (`pre_bias` $pre_bias^)? (`post_mix` $post_mix^)?
    (`post_bias` $post_bias^)? (`mask` $mask^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let stepNumber = 8;
  let stepDoc = [{
    Talking-heads attention (Shazeer et al. 2020): heads are mixed by learned
    [heads, heads] matrices before and/or after the softmax.
      s[b.., h, i, j]  = scale * sum_d q[b.., h, i, d] * k[b.., h, j, d]
      s'[b.., g, i, j] = sum_h pre_mix[g, h] * s[b.., h, i, j] + pre_bias[g]   (when pre_mix is given)
      then the mask (indexed [b.., g, i, j]) and the softmax over j, giving p
      p'[b.., g, i, j] = sum_h post_mix[g, h] * p[b.., h, i, j] + post_bias[g] (when post_mix is given)
      out[b.., g, i, e] = sum_j p'[b.., g, i, j] * v[b.., g, j, e]
    Biases are optional even when their matrix is given.
  }];
  let step = (fields StepSizes<5>:$batch, StepSize:$heads, StepSize:$queries, StepSize:$keys,
                     StepSize:$head_dim, StepSize:$value_dim, StepFloat<"1.0">:$scale,
                     StepView<"$batch.concat({$heads, $queries, $head_dim})", ["F32"]>:$q,
                     StepView<"$batch.concat({$heads, $keys, $head_dim})", ["F32"]>:$k,
                     StepView<"$batch.concat({$heads, $keys, $value_dim})", ["F32"]>:$v,
                     StepView<"$batch.concat({$heads, $queries, $value_dim})", ["F32"], 1>:$out,
                     StepOptionalView<"Dims{$heads, $heads}", ["F32"]>:$pre_mix,
                     StepOptionalView<"Dims{$heads}", ["F32"]>:$pre_bias,
                     StepOptionalView<"Dims{$heads, $heads}", ["F32"]>:$post_mix,
                     StepOptionalView<"Dims{$heads}", ["F32"]>:$post_bias,
                     StepEnum<"MaskKind", "None">:$mask_kind,
                     StepOptionalView<"$batch.concat({$heads, $queries, $keys})">:$mask,
                     StepFloat<"-inf">:$mask_fill);
  let stepSpaceChecks = [StepSpaceCheck<"$batch.concat({$heads, $queries, $keys, $head_dim, $value_dim})",
                                        "batch x heads x queries x keys x head_dim x value_dim">];
}

def Kern_LayerNormOp : Kern_Op<"layernorm", [Pure, AttrSizedOperandSegments]> {
  let summary = "layer norm over the last axis of `shape`, with an optional residual";
  let description = [{
    `x' = x + residual`, then `(x' - mean) / sqrt(var + epsilon)` (variant
    `variance`, biased var) or `(x' - mean) / (std + epsilon)` (variant
    `unbiased_std`, n - 1) or `x' / sqrt(mean(x'^2) + epsilon)` (variant
    `rms`, which has no beta), times `gamma`, plus `beta`. Views index x and the
    residual over `shape`, gamma and beta over its last axis; the result is
    dense over `shape`.
  }];
  let arguments = (ins Kern_Tensor:$x, Optional<Kern_Tensor>:$residual, Optional<Kern_Tensor>:$gamma,
                       Optional<Kern_Tensor>:$beta, Ein_SizesAttr:$shape, Kern_ViewAttr:$x_view,
                       OptionalAttr<Kern_ViewAttr>:$residual_view, OptionalAttr<Kern_ViewAttr>:$gamma_view,
                       OptionalAttr<Kern_ViewAttr>:$beta_view, F32Attr:$epsilon,
                       DefaultValuedAttr<Kern_LayerNormVariantAttr, "::ein::kern::LayerNormVariant::variance">:$variant);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = [{
    $x (`residual` $residual^)? (`gamma` $gamma^)? (`beta` $beta^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
  let hasStepChecks = 1;
  let stepNumber = 9;
  let stepDoc = [{
    Over the last axis of `shape` (length n):
      x' = x + residual                   (when residual is given; also written to `sum` when given)
      y  = normalise(x') * gamma + beta   (gamma, beta optional, indexed [n])
  }];
  let step = (fields StepSizes<0, 1>:$shape, StepView<"$shape", ["F32"]>:$x,
                     StepOptionalView<"$shape", ["F32"]>:$residual, StepOptionalView<"$shape", ["F32"]>:$sum,
                     StepOptionalView<"Dims{$shape.back()}", ["F32"]>:$gamma,
                     StepOptionalView<"Dims{$shape.back()}", ["F32"]>:$beta,
                     StepView<"$shape", ["F32"], 1>:$y, StepFloat<>:$epsilon,
                     StepEnum<"LayerNormVariant", "Variance">:$variant);
  // The compiler never writes the sum (the runtime's kernels can).
  let stepWrites = (writes [{flatbuffers::Offset<fb::View>()}]:$sum,
                           [{denseView($_result, $_op.getShape().sizes())}]:$y);
}

#endif // KERN_OPS_TD
