#ifndef EIN_DIALECT_TD
#define EIN_DIALECT_TD

include "ir/ein/ein_base.td"
include "mlir/IR/EnumAttr.td"

// These enum attributes print a space of their own before the case, so op
// formats begin with "`` $kind" (`ein.binary mul`, not `ein.binary  mul`).
def Ein_UnaryKind : I32EnumAttr<"UnaryKind", "element-wise function of one tensor", [
  I32EnumAttrCase<"neg", 0>, I32EnumAttrCase<"exp", 1>, I32EnumAttrCase<"log", 2>,
  I32EnumAttrCase<"sqrt", 3>, I32EnumAttrCase<"rsqrt", 4>, I32EnumAttrCase<"abs", 5>,
  I32EnumAttrCase<"relu", 6>, I32EnumAttrCase<"gelu", 7>, I32EnumAttrCase<"gelu_tanh", 8>,
  I32EnumAttrCase<"silu", 9>, I32EnumAttrCase<"sigmoid", 10>, I32EnumAttrCase<"tanh", 11>,
  I32EnumAttrCase<"logical_not", 12>, I32EnumAttrCase<"softplus", 13>,
  I32EnumAttrCase<"sin", 14>, I32EnumAttrCase<"cos", 15>, I32EnumAttrCase<"floor", 16>,
  I32EnumAttrCase<"ceil", 17>, I32EnumAttrCase<"trunc", 18>, I32EnumAttrCase<"round", 19>
]> {
  let cppNamespace = "::ein::ir";
  let genSpecializedAttr = 0;
}
def Ein_UnaryKindAttr : EnumAttr<Ein_Dialect, Ein_UnaryKind, "unary">;

def Ein_BinaryKind : I32EnumAttr<"BinaryKind", "element-wise function of two tensors", [
  I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"sub", 1>, I32EnumAttrCase<"mul", 2>,
  I32EnumAttrCase<"div", 3>, I32EnumAttrCase<"pow", 4>, I32EnumAttrCase<"maximum", 5>,
  I32EnumAttrCase<"minimum", 6>, I32EnumAttrCase<"lt", 7>, I32EnumAttrCase<"le", 8>,
  I32EnumAttrCase<"gt", 9>, I32EnumAttrCase<"ge", 10>, I32EnumAttrCase<"eq", 11>,
  I32EnumAttrCase<"ne", 12>, I32EnumAttrCase<"floordiv", 13>, I32EnumAttrCase<"mod", 14>
]> {
  let cppNamespace = "::ein::ir";
  let genSpecializedAttr = 0;
}
def Ein_BinaryKindAttr : EnumAttr<Ein_Dialect, Ein_BinaryKind, "binary">;

def Ein_ReduceKind : I32EnumAttr<"ReduceKind", "reduction over axes", [
  I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>, I32EnumAttrCase<"max", 2>,
  I32EnumAttrCase<"min", 3>, I32EnumAttrCase<"prod", 4>, I32EnumAttrCase<"var", 5>,
  I32EnumAttrCase<"std", 6>
]> {
  let cppNamespace = "::ein::ir";
  let genSpecializedAttr = 0;
}
def Ein_ReduceKindAttr : EnumAttr<Ein_Dialect, Ein_ReduceKind, "reduce">;

def Ein_LayerNormVariant : I32EnumAttr<"LayerNormVariant", "how a layer norm divides by the spread", [
  I32EnumAttrCase<"variance", 0>,      // (x - mean) / sqrt(var + eps), biased var (nn.LayerNorm)
  I32EnumAttrCase<"unbiased_std", 1>,  // (x - mean) / (std + eps), std with n - 1 (hand-written norms)
  I32EnumAttrCase<"rms", 2>            // x / sqrt(mean(x^2) + eps), no centring, no bias (RMSNorm)
]> {
  let cppNamespace = "::ein::ir";
  let genSpecializedAttr = 0;
}
def Ein_LayerNormVariantAttr : EnumAttr<Ein_Dialect, Ein_LayerNormVariant, "layernorm_variant">;

def Ein_MaskKind : I32EnumAttr<"MaskKind", "how attention scores are masked before the softmax", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"add", 1>,   // s + mask (float mask)
  I32EnumAttrCase<"keep", 2>,  // where(mask, s, fill)
  I32EnumAttrCase<"drop", 3>   // masked_fill(s, mask, fill)
]> {
  let cppNamespace = "::ein::ir";
  let genSpecializedAttr = 0;
}
def Ein_MaskKindAttr : EnumAttr<Ein_Dialect, Ein_MaskKind, "mask_kind">;

#endif // EIN_DIALECT_TD
