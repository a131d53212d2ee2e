#ifndef EIN_BASE_TD
#define EIN_BASE_TD

// The ein dialect itself and what the kern dialect shares with it (the sizes
// of tensors over ranged dims), apart from the ein enums so that including
// this file generates nothing twice.

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/TensorEncoding.td"

def Ein_Dialect : Dialect {
  let name = "ein";
  let summary = "The ein model language as tensor operations";
  let description = [{
    Operations at the level of the `.ein` language: einsum, einops rearrange,
    softmax, element-wise arithmetic with NumPy broadcasting, linear layers and
    parameters. A tensor's sizes are constants or, for ranged dims
    (`dim t = 1..512`), sizes over dims that the `#ein.dims` encoding gives
    (`tensor<?x?x384xf32, #ein.dims<"b, t + 1">>`); every verifier re-derives
    the result type from its operands with the same rules the front end uses.
  }];
  let cppNamespace = "::ein::ir";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    // Parameter values bound on demand (ParamOp::bindOnDemand): what makes
    // each, by its resource's key.
    ::llvm::StringMap<std::function<::mlir::FailureOr<::mlir::AsmResourceBlob>()>> valueMakers;
  }];
}

class Ein_Op<string mnemonic, list<Trait> traits = []> :
    Op<Ein_Dialect, mnemonic, traits>;

// A list of ein::Size in canonical text ("b, t + 1"): a slice's offsets and
// sizes, and the encoding of every tensor type whose shape depends on ranged
// dims, where it lists the sizes of the dynamic axes in order. Constant sizes
// stay in the type's static shape, so a tensor with no ranged dim has no
// encoding, and types compare equal exactly when their sizes do.
def Ein_SizesAttr : AttrDef<Ein_Dialect, "Sizes", [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "sizes";
  let summary = "sizes over ranged dims";
  let parameters = (ins StringRefParameter<"sizes, comma-separated">:$text);
  let assemblyFormat = "`<` $text `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static SizesAttr get(::mlir::MLIRContext *context, const ::ein::Shape &sizes);
    ::ein::Shape sizes() const;
  }];
}

// A ranked tensor whose dynamic axes (if any) an #ein.sizes encoding sizes.
def Ein_SizedTensor : Type<And<[AnyRankedTensor.predicate, CPred<"::ein::ir::isSizedTensor($_self)">]>,
                           "ranked tensor with known sizes", "::mlir::RankedTensorType">;

#endif // EIN_BASE_TD
