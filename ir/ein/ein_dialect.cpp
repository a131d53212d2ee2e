// The ein dialect, its attributes and the helpers over sized tensor types;
// the ops' shape rules and verifiers are in ein_ops.cpp.
#include "ir/ein/ein_dialect.hpp"

#include "ir/ein/equations.hpp"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace ein::ir;

#include "ir/ein/ein_ops_dialect.cpp.inc"
#include "ir/ein/ein_ops_enums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/ein/ein_ops_attrs.cpp.inc"
#define GET_OP_CLASSES
#include "ir/ein/ein_ops.cpp.inc"

void EinDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/ein/ein_ops_attrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/ein/ein_ops.cpp.inc"
      >();
}

namespace {

// The sizes of "b, t + 1, floordiv(t, 16)": split at the commas outside parentheses.
std::optional<ein::Shape> parseSizeList(llvm::StringRef text, std::string *error) {
  ein::Shape sizes;
  if (text.trim().empty()) return sizes;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c != ',' || depth != 0) continue;
    std::optional<ein::Size> size = ein::Size::parse(text.slice(start, i).trim().str(), error);
    if (!size) return std::nullopt;
    sizes.push_back(*size);
    start = i + 1;
  }
  return sizes;
}

std::string sizeListText(const ein::Shape &sizes) {
  std::string text;
  for (const ein::Size &size : sizes) text += (text.empty() ? "" : ", ") + size.str();
  return text;
}

}  // namespace

SizesAttr SizesAttr::get(MLIRContext *context, const ein::Shape &sizes) { return get(context, sizeListText(sizes)); }

ein::Shape SizesAttr::sizes() const { return parseSizeList(getText(), nullptr).value_or(ein::Shape{}); }

LogicalResult SizesAttr::verify(function_ref<InFlightDiagnostic()> emitError, llvm::StringRef text) {
  std::string message;
  std::optional<ein::Shape> sizes = parseSizeList(text, &message);
  if (!sizes) return emitError() << "malformed sizes: " << message;
  for (const ein::Size &size : *sizes)
    if (size.overflowed()) return emitError() << "a size overflows";
  return success();
}

LogicalResult SizesAttr::verifyEncoding(ArrayRef<int64_t> shape, Type, function_ref<InFlightDiagnostic()> emitError) const {
  ein::Shape sizes = this->sizes();
  size_t dynamic = llvm::count(shape, ShapedType::kDynamic);
  if (sizes.size() != dynamic)
    return emitError() << "#ein.sizes gives " << sizes.size() << " sizes for " << dynamic << " dynamic axes";
  for (const ein::Size &size : sizes)
    if (size.isConstant()) return emitError() << "constant size " << size.str() << " belongs in the static shape";
  return success();
}

bool ein::ir::isSizedTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) return false;
  if (tensor.hasStaticShape()) return !tensor.getEncoding();
  return isa_and_nonnull<SizesAttr>(tensor.getEncoding());
}

ein::Shape ein::ir::shapeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  ein::Shape symbolic;
  if (auto encoding = dyn_cast_or_null<SizesAttr>(tensor.getEncoding())) symbolic = encoding.sizes();
  ein::Shape shape;
  size_t next = 0;
  for (int64_t size : tensor.getShape()) {
    if (size != ShapedType::kDynamic)
      shape.push_back(size);
    else
      shape.push_back(next < symbolic.size() ? symbolic[next++] : ein::Size(0));
  }
  return shape;
}

namespace {
constexpr std::pair<ein::SizeCheck::Kind, llvm::StringLiteral> kCheckKinds[] = {
    {ein::SizeCheck::Equal, "equal"}, {ein::SizeCheck::LessEqual, "less_equal"}, {ein::SizeCheck::Divides, "divides"}};
}  // namespace

std::string ein::ir::locationText(Location loc, const std::string &fallback) {
  std::string text = fallback;
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" + std::to_string(file.getColumn());
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

ein::DimRanges ein::ir::dimRangesOf(Operation *op) {
  ein::DimRanges ranges;
  for (Operation *scope = op; scope; scope = scope->getParentOp()) {
    auto dims = scope->getAttrOfType<DictionaryAttr>("ein.dims");
    if (!dims) continue;
    for (NamedAttribute entry : dims)
      if (auto range = dyn_cast<DenseI64ArrayAttr>(entry.getValue()); range && range.size() == 2)
        ranges[entry.getName().str()] = {range[0], range[1]};
    break;
  }
  return ranges;
}

int64_t ein::ir::largestValue(const ein::Size &size, const ein::DimRanges &ranges) { return size.bounds(ranges).max; }

DictionaryAttr ein::ir::sizeCheckAttr(MLIRContext *context, const ein::SizeCheck &check, Location at) {
  Builder builder(context);
  llvm::StringRef kind;
  for (const auto &[candidate, name] : kCheckKinds)
    if (candidate == check.kind) kind = name;
  return builder.getDictionaryAttr({
      builder.getNamedAttr("kind", builder.getStringAttr(kind)),
      builder.getNamedAttr("lhs", SizesAttr::get(context, ein::Shape{check.lhs})),
      builder.getNamedAttr("rhs", SizesAttr::get(context, ein::Shape{check.rhs})),
      builder.getNamedAttr("message", builder.getStringAttr(check.message)),
      builder.getNamedAttr("location", at),
  });
}

std::optional<std::pair<ein::SizeCheck, Location>> ein::ir::sizeCheckOf(Attribute attr) {
  auto dictionary = dyn_cast<DictionaryAttr>(attr);
  if (!dictionary) return std::nullopt;
  auto kind = dictionary.getAs<StringAttr>("kind");
  auto lhs = dictionary.getAs<SizesAttr>("lhs"), rhs = dictionary.getAs<SizesAttr>("rhs");
  auto message = dictionary.getAs<StringAttr>("message");
  auto location = dictionary.getAs<LocationAttr>("location");
  if (!kind || !lhs || !rhs || !message || !location || lhs.sizes().size() != 1 || rhs.sizes().size() != 1)
    return std::nullopt;
  ein::SizeCheck check{ein::SizeCheck::Equal, lhs.sizes()[0], rhs.sizes()[0], message.str()};
  bool known = false;
  for (const auto &[candidate, name] : kCheckKinds)
    if (kind.getValue() == name) {
      check.kind = candidate;
      known = true;
    }
  if (!known) return std::nullopt;
  return std::make_pair(check, Location(location));
}

RankedTensorType ein::ir::sizedTensorType(const ein::Shape &shape, Type elementType) {
  SmallVector<int64_t> staticShape;
  ein::Shape dynamic;
  for (const ein::Size &size : shape) {
    std::optional<int64_t> constant = size.constant();
    staticShape.push_back(constant ? *constant : ShapedType::kDynamic);
    if (!constant) dynamic.push_back(size);
  }
  if (dynamic.empty()) return RankedTensorType::get(staticShape, elementType);
  return RankedTensorType::get(staticShape, elementType, SizesAttr::get(elementType.getContext(), dynamic));
}
