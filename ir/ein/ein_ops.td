#ifndef EIN_OPS_TD
#define EIN_OPS_TD

include "ir/ein/ein_dialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributes.td"

defvar Ein_Tensor = Ein_SizedTensor;

def Ein_ParamOp : Ein_Op<"param", [Pure]> {
  let summary = "a weight, loaded by its PyTorch state_dict name";
  let description = [{
    The front end declares a parameter by its name and type; the compiler
    then binds its values (`value`, of the result's type), most often a
    `dense_resource` over the weights file itself, so that passes read and
    transform weights as any other constant and the artifact writer only
    serialises what they leave. A parameter without `value` is one no
    source has bound yet (a test of a pass, `ein-opt`).
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<ElementsAttr>:$value);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$name), [{
      build($_builder, $_state, type, name, ::mlir::ElementsAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    // Binds values that `make` gives the first time they are read, and again
    // after releaseValues (random weights: generated one parameter at a time,
    // never all held at once).
    void bindOnDemand(std::function<::mlir::FailureOr<::mlir::AsmResourceBlob>()> make);
    // The bytes of the bound values (row-major, little-endian, a bool per
    // byte), made first if bound on demand; empty when none are bound (or
    // making them failed, which it reports).
    ::llvm::ArrayRef<char> getBoundBytes();
    // Lets values bound on demand go until they are next read; others stay.
    void releaseValues();
  }];
  let hasVerifier = 1;
}

def Ein_StateOp : Ein_Op<"state", [MemoryEffects<[MemRead]>]> {
  let summary = "session state (a key/value cache), kept by the session from run to run";
  let description = [{
    A tensor of fixed shape that each session allocates once (zeros) and
    keeps across runs; it is read and written only through `ein.append`.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Ein_AppendOp : Ein_Op<"append", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes rows into session state at the session's position";
  let description = [{
    Writes `x` into `state` at `offset` (the session's position) along
    `axis`; elsewhere x has the state's shape. The result is the state's
    first `offset + n` rows along `axis` after the write, n being x's size
    there: what attention over a key/value cache reads.

    With `first_run` (the language's `keep`), `offset` is 0 and the write
    happens at a sequence's first run only (position 0): later runs read the
    rows it wrote, and what only the write reads (an encoder) does not run
    again. A cross-attention cache.
  }];
  let arguments = (ins Ein_Tensor:$state, Ein_Tensor:$x, I64Attr:$axis, Ein_SizesAttr:$offset,
                       UnitAttr:$first_run);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$state `,` $x attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Ein_ConstantOp : Ein_Op<"constant", [Pure, ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor (usually a scalar)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Ein_EinsumOp : Ein_Op<"einsum", [Pure, InferTypeOpAdaptor]> {
  let summary = "torch.einsum";
  let description = [{
    `equation` is canonical: labels are space-separated words, every operand's
    labels are spelled out ("..." is expanded into labels `.0`, `.1`, ...), and
    the output is explicit. A label missing from the output is summed; a label
    repeated inside one operand takes the diagonal.
  }];
  let arguments = (ins StrAttr:$equation, Variadic<Ein_Tensor>:$inputs);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$equation `(` $inputs `)` attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::llvm::StringRef equation, ::mlir::TypeRange inputs);
  }];
}

def Ein_RearrangeOp : Ein_Op<"rearrange", [Pure, InferTypeOpAdaptor]> {
  let summary = "einops.rearrange, einops.reduce and einops.repeat";
  let description = [{
    `sizes` binds pattern axes (`h = 8`). With `reduction` set, axes missing on
    the right are reduced (einops.reduce); new axes on the right repeat the
    input (einops.repeat).
  }];
  let arguments = (ins Ein_Tensor:$input, StrAttr:$pattern, DictionaryAttr:$sizes,
                       OptionalAttr<Ein_ReduceKindAttr>:$reduction);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$pattern $input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, ::llvm::StringRef pattern, ::mlir::DictionaryAttr sizes, bool reduction);
    // The keyword sizes as a plain map.
    std::map<std::string, ::ein::Size> getSizeMap();
  }];
}

def Ein_SliceOp : Ein_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "basic indexing: x[:, 1:], x[:, 0], x[::2]";
  let description = [{
    Takes `sizes[i]` elements along every axis, starting at `offsets[i]` and
    `steps[i]` apart (1 where `steps` is empty or left out), then drops the axes
    listed in `dropped` (each of size 1): an integer index. Offsets and sizes
    may depend on ranged dims; where whether the slice stays inside the input
    depends on the dims' values, the front end adds a run-time check.
  }];
  let arguments = (ins Ein_Tensor:$input, Ein_SizesAttr:$offsets, Ein_SizesAttr:$sizes,
                       DenseI64ArrayAttr:$dropped, DefaultValuedOptionalAttr<DenseI64ArrayAttr, "{}">:$steps);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, const ::ein::Shape &offsets, const ::ein::Shape &sizes,
        ::llvm::ArrayRef<int64_t> dropped, ::llvm::ArrayRef<int64_t> steps);
    // The step along `axis`: 1 unless `steps` gives one.
    int64_t stepOf(size_t axis) { return getSteps().empty() ? 1 : getSteps()[axis]; }
  }];
}

def Ein_UnaryOp : Ein_Op<"unary", [Pure, SameOperandsAndResultType]> {
  let summary = "element-wise function of one tensor";
  let arguments = (ins Ein_UnaryKindAttr:$kind, Ein_Tensor:$input);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "`` $kind $input attr-dict `:` type($result)";
}

def Ein_BinaryOp : Ein_Op<"binary", [Pure, InferTypeOpAdaptor]> {
  let summary = "element-wise function of two tensors with NumPy broadcasting";
  let description = [{
    Both operands have the same element type (the front end promotes first);
    comparisons give `i1`.
  }];
  let arguments = (ins Ein_BinaryKindAttr:$kind, Ein_Tensor:$lhs, Ein_Tensor:$rhs);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "`` $kind $lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(BinaryKind kind, ::mlir::Type lhs, ::mlir::Type rhs);
    static bool isComparison(BinaryKind kind) { return kind >= BinaryKind::lt && kind <= BinaryKind::ne; }
  }];
}

def Ein_WhereOp : Ein_Op<"where", [Pure, InferTypeOpAdaptor]> {
  let summary = "torch.where(condition, a, b) with broadcasting";
  let arguments = (ins Ein_Tensor:$condition, Ein_Tensor:$on_true, Ein_Tensor:$on_false);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type condition, ::mlir::Type onTrue, ::mlir::Type onFalse);
  }];
}

def Ein_CastOp : Ein_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "element type conversion (bool and integers to float)";
  let arguments = (ins Ein_Tensor:$input);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Ein_SoftmaxOp : Ein_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "torch.softmax along `axis`";
  let arguments = (ins Ein_Tensor:$input, I64Attr:$axis);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input `,` `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ein_ReduceOp : Ein_Op<"reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "sum, mean, max, min, prod, var and std over axes";
  let description = [{
    `correction` is the divisor offset of var/std: 1 for the unbiased estimate
    (torch.std's default), 0 for the biased one.
  }];
  let arguments = (ins Ein_Tensor:$input, Ein_ReduceKindAttr:$kind, DenseI64ArrayAttr:$axes,
                       BoolAttr:$keepdim, DefaultValuedAttr<I64Attr, "0">:$correction);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "`` $kind $input `,` `axes` `=` $axes attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, ::llvm::ArrayRef<int64_t> axes, bool keepdim, int64_t correction);
  }];
}

def Ein_MatmulOp : Ein_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "NumPy matmul, the `@` operator";
  let arguments = (ins Ein_Tensor:$lhs, Ein_Tensor:$rhs);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType> inferResultType(::mlir::Type lhs, ::mlir::Type rhs);
  }];
}

def Ein_LinearOp : Ein_Op<"linear", [Pure, InferTypeOpAdaptor]> {
  let summary = "torch.nn.functional.linear: x @ weight^T + bias";
  let arguments = (ins Ein_Tensor:$input, Ein_Tensor:$weight, Optional<Ein_Tensor>:$bias);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, ::mlir::Type weight, ::mlir::Type bias);
  }];
}

def Ein_LayerNormOp : Ein_Op<"layernorm", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "torch.nn.functional.layer_norm over the last axis";
  let description = [{
    `variant` says how the centred values are scaled: `variance` is
    torch's (x - mean) / sqrt(var + eps) with the biased variance;
    `unbiased_std` is the hand-written (x - mean) / (std + eps) with std's
    n - 1 divisor, which ein-fuse-layernorm recognises; `rms` is RMSNorm,
    x / sqrt(mean(x^2) + eps) with no centring and no bias. A `residual` is
    added to the input first: the norm is of `input + residual`.
  }];
  let arguments = (ins Ein_Tensor:$input, Optional<Ein_Tensor>:$residual, Optional<Ein_Tensor>:$weight, Optional<Ein_Tensor>:$bias,
                       F64Attr:$eps,
                       DefaultValuedAttr<Ein_LayerNormVariantAttr, "::ein::ir::LayerNormVariant::variance">:$variant);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input (`residual` $residual^)? (`weight` $weight^)? (`bias` $bias^)? `eps` `=` $eps attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, ::mlir::Type residual, ::mlir::Type weight, ::mlir::Type bias);
  }];
}

def Ein_AttentionOp : Ein_Op<"attention", [Pure, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention, found by ein-fuse-attention";
  let description = [{
    `out[b.., i, e] = sum_j softmax_j(mask(scale * sum_d q[b.., i, d] k[b.., j, d])) v[b.., j, e]`
    with q `[B.., I, D]`, k `[B.., J, D]`, v `[B.., J, E]` and the mask
    broadcastable to `[B.., I, J]` (`mask_kind` says how it applies). A row
    whose scores are all -inf gives NaN, as softmax does.

    `causal_positions = P` makes it causal, aligned bottom-right: the I
    queries are P positions (I a multiple of P, several query heads of one
    key head stacked in front), query i being position `i mod P` of the
    last P of the J keys' positions, and it sees key j only where
    `j <= i mod P + J - P`. With I = J = P that is `is_causal` in PyTorch;
    with J > P the queries are a chunk after J - P cached keys.

    `softcap = c > 0` caps the scaled scores as `c * tanh(s / c)` before the
    mask (Gemma 2's attn_logit_softcapping, FlashAttention's softcap).
  }];
  let arguments = (ins Ein_Tensor:$query, Ein_Tensor:$key, Ein_Tensor:$value, Optional<Ein_Tensor>:$mask,
                       F64Attr:$scale,
                       DefaultValuedAttr<Ein_MaskKindAttr, "::ein::ir::MaskKind::none">:$mask_kind,
                       DefaultValuedAttr<F64Attr, "0.0">:$mask_fill,
                       OptionalAttr<Ein_SizesAttr>:$causal_positions,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `scale` `=` $scale attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type query, ::mlir::Type key, ::mlir::Type value, ::mlir::Type mask, MaskKind maskKind);
  }];
}

def Ein_TalkingHeadsAttentionOp : Ein_Op<"talking_heads_attention", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "attention with heads mixed before and after the softmax (Shazeer et al. 2020)";
  let description = [{
    q `[B.., H, I, D]`, k `[B.., H, J, D]`, v `[B.., H, J, E]`; the result is
    `[B.., H, I, E]`. Scores `scale * q.k` are mixed over heads by `pre_mix`
    `[H, H]` (`s'[g] = sum_h pre_mix[g, h] s[h] + pre_bias[g]`), masked as
    `mask_kind` says (mask broadcastable to `[B.., H, I, J]`), put through the
    softmax over J, mixed by `post_mix` and `post_bias` alike, and used to
    weight v. Each mix and bias is optional.
  }];
  let arguments = (ins Ein_Tensor:$query, Ein_Tensor:$key, Ein_Tensor:$value, Optional<Ein_Tensor>:$pre_mix,
                       Optional<Ein_Tensor>:$pre_bias, Optional<Ein_Tensor>:$post_mix,
                       Optional<Ein_Tensor>:$post_bias, Optional<Ein_Tensor>:$mask, F64Attr:$scale,
                       DefaultValuedAttr<Ein_MaskKindAttr, "::ein::ir::MaskKind::none">:$mask_kind,
                       DefaultValuedAttr<F64Attr, "0.0">:$mask_fill);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`pre_mix` $pre_mix^)? (`pre_bias` $pre_bias^)? (`post_mix` $post_mix^)?
    (`post_bias` $post_bias^)? (`mask` $mask^)? `scale` `=` $scale attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type query, ::mlir::Type key, ::mlir::Type value, ::mlir::Type preMix,
        ::mlir::Type preBias, ::mlir::Type postMix, ::mlir::Type postBias, ::mlir::Type mask, MaskKind maskKind);
  }];
}

def Ein_EmbeddingOp : Ein_Op<"embedding", [Pure, InferTypeOpAdaptor]> {
  let summary = "torch.nn.functional.embedding: rows of `table` picked by integer ids";
  let arguments = (ins Ein_Tensor:$ids, Ein_Tensor:$table);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType> inferResultType(::mlir::Type ids, ::mlir::Type table);
  }];
}

def Ein_ConcatOp : Ein_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "torch.cat along `axis`";
  let arguments = (ins Variadic<Ein_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "`(` $inputs `)` `axis` `=` $axis attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType> inferResultType(::mlir::TypeRange inputs, int64_t axis);
  }];
}

def Ein_WindowsOp : Ein_Op<"windows", [Pure, InferTypeOpAdaptor]> {
  let summary = "sliding windows over the last axes (torch's Tensor.unfold, im2col)";
  let description = [{
    Over the last n = size(window) axes of the input, of sizes L1..Ln:
    result[..., o1..on, k1..kn] = input[..., o1 * s1 + k1 * d1, ..., on * sn + kn * dn]
    with strides s and dilations d, for every window that lies inside the
    input: oi < floor((Li - di * (wi - 1) - 1) / si) + 1. Windows may overlap;
    a convolution is this op and a contraction with the kernel.
  }];
  let arguments = (ins Ein_Tensor:$input, DenseI64ArrayAttr:$window, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$dilations);
  let results = (outs Ein_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape rule: the result type from the operands and attributes, or
    // why they admit none. inferReturnTypes, the verifier and MLIRGen use it.
    static ::ein::EquationResult<::mlir::RankedTensorType>
    inferResultType(::mlir::Type input, ::llvm::ArrayRef<int64_t> window, ::llvm::ArrayRef<int64_t> strides,
                    ::llvm::ArrayRef<int64_t> dilations);
    // The extent of window `i` in the input: d * (w - 1) + 1.
    static int64_t span(int64_t window, int64_t dilation) { return dilation * (window - 1) + 1; }
  }];
}

#endif // EIN_OPS_TD
