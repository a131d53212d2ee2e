#ifndef KERN_DIALECT_TD
#define KERN_DIALECT_TD

include "ir/ein/ein_base.td"
include "ir/kern/kern_steps.td"
include "mlir/IR/EnumAttr.td"

def Kern_Dialect : Dialect {
  let name = "kern";
  let summary = "Kernel-level IR: one op per runtime kernel call";
  let description = [{
    Every op is one call of a runtime kernel. An op's result is a fresh dense
    row-major buffer; operands are read through strided views
    (`#kern.view<offset, [strides]>`, in elements), so permutations, slices and
    head splits need no copies. Sizes, strides and offsets are ein::Size: a
    constant prints as an integer, a size over ranged dims as its quoted text
    (`#kern.view<0, ["t*384", 384, 1]>`, `m = #ein.sizes<"b*t">`). The
    serializer maps these ops one to one onto the artifact's steps.
  }];
  let cppNamespace = "::ein::kern";
  let useDefaultAttributePrinterParser = 1;
  // Views and sizes are built of ein's #ein.sizes.
  let dependentDialects = ["::ein::ir::EinDialect"];
}

class Kern_Op<string mnemonic, list<Trait> traits = []> :
    Op<Kern_Dialect, mnemonic, traits> {
  // The op's own step in the artifact (kern_steps.td); none when empty.
  dag step = (fields);
  // The step's member number in the artifact's Kernel union: 1, 2, ... in
  // the order steps were added; never reused or changed.
  int stepNumber = 0;
  // The step table's comment in the schema: what the kernel computes.
  string stepDoc = "";
  // Writer expressions for fields without accessors of their name.
  dag stepWrites = (writes);
  // Statements the writer runs before the fields' expressions (`$_op`).
  code stepWritePrologue = "";
  // Products of sizes the loader bounds before it decodes the views.
  list<StepSpaceCheck> stepSpaceChecks = [];
  // Reads the loader bounds by the tensors read (after the views).
  list<StepReadBound> stepReadBounds = [];
  // Whether the runtime's struct of the step adds members of its own to the
  // decoded fields (runtime/src/program/program.hpp); else it is generated.
  bit hasRuntimeMembers = 0;
  // Whether the loader runs hand-written checks across the step's fields
  // after decoding them: `decode<Table>` in runtime/src/loader/step_decoder.cpp.
  bit hasStepChecks = 0;
}

def Kern_ViewAttr : AttrDef<Kern_Dialect, "View"> {
  let mnemonic = "view";
  let summary = "a strided window onto a buffer, in elements";
  let parameters = (ins "::ein::ir::SizesAttr":$offsetSize, "::ein::ir::SizesAttr":$strideSizes);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    static ViewAttr get(::mlir::MLIRContext *context, const ::ein::Size &offset, const ::ein::Shape &strides);
    ::ein::Size getOffset() const;
    ::ein::Shape getStrides() const;
  }];
}

def Kern_Activation : I32EnumAttr<"Activation", "GEMM epilogue activation", [
  I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"relu", 1>, I32EnumAttrCase<"gelu", 2>,
  I32EnumAttrCase<"gelu_tanh", 3>, I32EnumAttrCase<"silu", 4>
]> {
  let cppNamespace = "::ein::kern";
  let genSpecializedAttr = 0;
}
def Kern_ActivationAttr : EnumAttr<Kern_Dialect, Kern_Activation, "activation">;

def Kern_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kernel", [
  I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>, I32EnumAttrCase<"max", 2>,
  I32EnumAttrCase<"min", 3>, I32EnumAttrCase<"prod", 4>
]> {
  let cppNamespace = "::ein::kern";
  let genSpecializedAttr = 0;
}
def Kern_ReduceKindAttr : EnumAttr<Kern_Dialect, Kern_ReduceKind, "reduce">;

def Kern_MaskKind : I32EnumAttr<"MaskKind", "attention mask", [
  I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"add", 1>, I32EnumAttrCase<"keep", 2>, I32EnumAttrCase<"drop", 3>
]> {
  let cppNamespace = "::ein::kern";
  let genSpecializedAttr = 0;
}
def Kern_MaskKindAttr : EnumAttr<Kern_Dialect, Kern_MaskKind, "mask_kind">;

def Kern_LayerNormVariant : I32EnumAttr<"LayerNormVariant", "layer norm divisor", [
  I32EnumAttrCase<"variance", 0>, I32EnumAttrCase<"unbiased_std", 1>, I32EnumAttrCase<"rms", 2>
]> {
  let cppNamespace = "::ein::kern";
  let genSpecializedAttr = 0;
}
def Kern_LayerNormVariantAttr : EnumAttr<Kern_Dialect, Kern_LayerNormVariant, "layernorm_variant">;

#endif // KERN_DIALECT_TD
