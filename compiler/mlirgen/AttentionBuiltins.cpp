// scaled_dot_product_attention: attention as one op, causal and
// grouped-query attention included, for decoders written from PyTorch code.
#include <cmath>

#include "mlirgen/Generator.h"

namespace ein::mlirgen::detail {

// torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, causal,
// scale): q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]. A
// bool mask keeps where true, a float one is added; both broadcast to
// [..., L, S]. Query heads (axis -3) may be a multiple of the key heads
// (grouped-query attention): each group of query heads shares one key head,
// read in place, never repeated. `causal` is aligned bottom-right: the L
// queries are the last L of the S positions (a chunk after S - L cached
// keys), so query l sees keys up to l + S - L.
EValue Generator::callScaledDotProductAttention(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string name = "scaled_dot_product_attention()";
  Arguments args = bindArguments(call, {"query", "key", "value", "mask", "causal", "scale"}, 3, false);
  auto operand = [&](const char *param) {
    return floatTensor(evaluate(*args.get(param), scope), args.get(param)->loc, name + " argument '" + param + "'");
  };
  mlir::Value q = operand("query"), k = operand("key"), v = operand("value");
  ein::Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  const size_t rank = qs.size();
  if (rank < 2) fail(args.get("query")->loc, name + " query must be [..., L, E], got " + ein::formatShape(qs));
  if (ks.size() != rank || vs.size() != rank)
    fail(at, name + " query " + ein::formatShape(qs) + ", key " + ein::formatShape(ks) + " and value " +
                 ein::formatShape(vs) + " must have the same rank");
  const ein::Size queries = qs[rank - 2], keys = ks[rank - 2], features = qs[rank - 1];
  if (ks[rank - 1] != features)
    fail(at, name + " query features " + features.str() + " and key features " + ks[rank - 1].str() + " differ");
  if (vs[rank - 2] != keys)
    fail(at, name + " key length " + keys.str() + " and value length " + vs[rank - 2].str() + " differ");
  ein::Shape qBatch(qs.begin(), qs.end() - 2), kBatch(ks.begin(), ks.end() - 2), vBatch(vs.begin(), vs.end() - 2);
  if (kBatch != vBatch)
    fail(at, name + " key " + ein::formatShape(ks) + " and value " + ein::formatShape(vs) + " batch axes differ");

  // Grouped-query attention: query heads = group * key heads.
  int64_t group = 1;
  if (qBatch != kBatch) {
    bool grouped = rank >= 3;
    for (size_t axis = 0; grouped && axis + 3 < rank; ++axis) grouped = qBatch[axis] == kBatch[axis];
    std::optional<int64_t> queryHeads = grouped ? qBatch[rank - 3].constant() : std::nullopt;
    std::optional<int64_t> keyHeads = grouped ? kBatch[rank - 3].constant() : std::nullopt;
    if (!queryHeads || !keyHeads || *keyHeads <= 0 || *queryHeads % *keyHeads != 0)
      fail(at, name + " query " + ein::formatShape(qs) + " and key " + ein::formatShape(ks) +
                   " batch axes differ (grouped-query attention needs query heads, axis -3, a multiple of key heads)");
    group = *queryHeads / *keyHeads;
  }

  double scale = 0;
  if (args.get("scale")) {
    scale = numberArgument(args.get("scale"), scope, 0, name + " scale");
  } else {
    std::optional<int64_t> width = features.constant();
    if (!width || *width <= 0) fail(at, name + " needs scale= when the feature size " + features.str() + " is not a constant");
    scale = 1.0 / std::sqrt(static_cast<double>(*width));
  }
  const bool causal = boolArgument(args.get("causal"), scope, false, "causal");
  if (causal)
    requireSizes({ein::SizeCheck::LessEqual, queries, keys,
                  name + " causal needs at least as many keys as queries (" + queries.str() + " <= " + keys.str() + ")"},
                 at);

  // The mask over the scores [..query batch, L, S].
  mlir::Value mask;
  auto maskKind = ir::MaskKind::none;
  if (args.get("mask")) {
    mask = tensorArgument(call, scope, args, "mask");
    ein::Shape scores = qBatch;
    scores.insert(scores.end(), {queries, keys});
    auto broadcast = ein::broadcastShapes(shapeOf(mask), scores);
    if (ein::failed(broadcast) || std::get<ein::Shape>(broadcast) != scores)
      fail(args.get("mask")->loc, name + " mask " + shapeString(typeOf(mask)) + " does not broadcast to the scores " +
                                      ein::formatShape(scores));
    if (elementType(mask).isInteger(1)) {
      maskKind = ir::MaskKind::keep;
    } else {
      mask = floatTensor(EValue{Tensor{mask}}, args.get("mask")->loc, name + " mask");
      maskKind = ir::MaskKind::add;
    }
  }

  // Groups of query heads become one key head's queries: [.., g, (r l), e].
  const ast::SourceLoc &where = call.loc;
  if (group > 1) {
    q = rearrange(at, q, "... (g r) l e -> ... g (r l) e", {{"r", group}}, where);
    if (mask) {
      ein::Shape ms = shapeOf(mask);
      bool perHead = ms.size() >= 3 && ms[ms.size() - 3] != 1;
      if (perHead) {
        mask = rearrange(at, mask, "... (g r) l s -> ... g (r l) s", {{"r", group}}, where);
      } else {
        // One mask for every head: r copies stacked along the queries.
        llvm::SmallVector<mlir::Value> copies(static_cast<size_t>(group), mask);
        auto type = inferred(ir::ConcatOp::inferResultType(mlir::ValueRange(copies).getTypes(), ms.size() - 2), at);
        mask = builder.create<ir::ConcatOp>(at, type, copies, builder.getI64IntegerAttr(int64_t(ms.size()) - 2));
      }
    }
  }
  auto type = inferred(ir::AttentionOp::inferResultType(q.getType(), k.getType(), v.getType(),
                                                        mask ? mask.getType() : Type(), maskKind),
                       at, name + " ");
  ir::SizesAttr causalPositions = causal ? ir::SizesAttr::get(&context, {queries}) : nullptr;
  mlir::Value result = builder.create<ir::AttentionOp>(
      at, type, q, k, v, mask, builder.getF64FloatAttr(scale), ir::MaskKindAttr::get(&context, maskKind),
      builder.getF64FloatAttr(-std::numeric_limits<double>::infinity()), causalPositions);
  if (group > 1) result = rearrange(at, result, "... g (r l) e -> ... (g r) l e", {{"r", group}}, where);
  return EValue{Tensor{result}};
}

}  // namespace ein::mlirgen::detail
