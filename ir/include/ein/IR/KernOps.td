#ifndef KERN_OPS_TD
#define KERN_OPS_TD

include "ein/IR/KernDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"

defvar Kern_Tensor = AnyStaticShapeTensor;

def Kern_GemmOp : Kern_Op<"gemm", [Pure]> {
  let summary = "batched strided GEMM with a fused epilogue";
  let description = [{
    `C[b.., m, n] = alpha * sum_k A[b.., m, k] * B[b.., k, n] + bias[b.., m, n]`,
    then `activation`. The views of `a`, `b` and `bias` are indexed
    [batch..., m, k], [batch..., k, n] and [batch..., m, n]; `c` places the
    product in the result buffer.
  }];
  let arguments = (ins Kern_Tensor:$a, Kern_Tensor:$b, Optional<Kern_Tensor>:$bias,
                       DenseI64ArrayAttr:$batch, I64Attr:$m, I64Attr:$n, I64Attr:$k,
                       Kern_ViewAttr:$a_view, Kern_ViewAttr:$b_view, Kern_ViewAttr:$c_view,
                       OptionalAttr<Kern_ViewAttr>:$bias_view,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                       DefaultValuedAttr<Kern_ActivationAttr, "::ein::kern::Activation::none">:$activation);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$a `,` $b (`,` $bias^)? attr-dict `:` functional-type(operands, $result)";
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

def Kern_YieldOp : Kern_Op<"yield", [Pure, Terminator, HasParent<"ElementwiseOp">]> {
  let summary = "the result element of an elementwise body";
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

def Kern_SoftmaxOp : Kern_Op<"softmax", [Pure]> {
  let summary = "softmax over the last axis of `shape`";
  let description = [{
    `x_view` and `y_view` map the iteration space `shape` (softmax axis last)
    onto the input and the result buffer.
  }];
  let arguments = (ins Kern_Tensor:$x, DenseI64ArrayAttr:$shape, Kern_ViewAttr:$x_view,
                       Kern_ViewAttr:$y_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Kern_ReduceOp : Kern_Op<"reduce", [Pure]> {
  let summary = "reduction of the trailing `reduced_rank` axes of `shape`";
  let arguments = (ins Kern_Tensor:$x, DenseI64ArrayAttr:$shape, I64Attr:$reduced_rank,
                       Kern_ReduceKindAttr:$kind, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$kind $x attr-dict `:` type($x) `->` type($result)";
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
  let arguments = (ins Kern_Tensor:$x, DenseI64ArrayAttr:$shape, Kern_ViewAttr:$x_view);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Kern_ConcatOp : Kern_Op<"concat", [Pure]> {
  let summary = "joins tensors along one axis";
  let description = [{
    Part `i` has the result's shape except `sizes[i]` along `axis`; it is read
    from `inputs[i]` through `input_views[i]` and written into the result at
    the running offset along `axis`. The runtime runs one copy per part.
  }];
  let arguments = (ins Variadic<Kern_Tensor>:$inputs, ArrayAttr:$input_views, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Kern_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

#endif // KERN_OPS_TD
