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
    one scale per column (B[k, n] = b[k, n] * b_scale[n]).
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
}

def Kern_ReduceOp : Kern_Op<"reduce", [Pure]> {
  let summary = "reduction of the trailing `reduced_rank` axes of `shape`";
  let arguments = (ins Kern_Tensor:$x, Ein_SizesAttr:$shape, I64Attr:$reduced_rank,
                       Kern_ReduceKindAttr:$kind, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "`` $kind $x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Kern_GatherOp : Kern_Op<"gather", [Pure]> {
  let summary = "rows of a [rows, width] table picked by integer ids";
  let arguments = (ins Kern_Tensor:$ids, Kern_Tensor:$table, Kern_ViewAttr:$ids_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
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
}

def Kern_AppendOp : Kern_Op<"append", [MemoryEffects<[MemWrite]>]> {
  let summary = "copies x into session state through `state_view`";
  let description = [{
    Reads `x` through `x_view` over `shape` and writes it into `state`
    through `state_view` (which starts at the session's position). Unlike
    other ops, the result is no fresh buffer: it is `state` itself, after
    the write, which the ops reading the appended state take as operand.
  }];
  let arguments = (ins Kern_Tensor:$state, Kern_Tensor:$x, Ein_SizesAttr:$shape, Kern_ViewAttr:$x_view,
                       Kern_ViewAttr:$state_view);
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
    `j <= i mod P + keys - P`.
  }];
  let arguments = (ins Kern_Tensor:$q, Kern_Tensor:$k, Kern_Tensor:$v, Optional<Kern_Tensor>:$mask,
                       Ein_SizesAttr:$batch, Ein_SizesAttr:$queries, Ein_SizesAttr:$keys, Ein_SizesAttr:$head_dim,
                       Ein_SizesAttr:$value_dim, F32Attr:$scale,
                       Kern_ViewAttr:$q_view, Kern_ViewAttr:$k_view, Kern_ViewAttr:$v_view,
                       Kern_ViewAttr:$out_view, OptionalAttr<Kern_ViewAttr>:$mask_view,
                       DefaultValuedAttr<Kern_MaskKindAttr, "::ein::kern::MaskKind::none">:$mask_kind,
                       DefaultValuedAttr<F32Attr, "0.0f">:$mask_fill,
                       OptionalAttr<Ein_SizesAttr>:$causal_positions);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$q `,` $k `,` $v (`mask` $mask^)? attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
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
}

#endif // KERN_OPS_TD
