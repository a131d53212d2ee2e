// The built-ins of decoders written from PyTorch code:
// scaled_dot_product_attention (causal and grouped-query attention included)
// and append and keep, which write a key/value cache kept in the session.
#include <cmath>

#include "compiler/mlirgen/generator.hpp"

namespace ein::mlirgen::detail {

// torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, causal,
// scale, softcap): q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]. A
// bool mask keeps where true, a float one is added; both broadcast to
// [..., L, S]. Query heads (axis -3) may be a multiple of the key heads
// (grouped-query attention): each group of query heads shares one key head,
// read in place by the fused op, never repeated. `causal` is aligned
// bottom-right: the L queries are the last L of the S positions (a chunk
// after S - L cached keys), so query l sees keys up to l + S - L.
// softcap = c caps the scaled scores as c * tanh(s / c) before the mask
// (Gemma 2's attn_logit_softcapping; FlashAttention's softcap).
EValue Generator::callScaledDotProductAttention(const ast::Call &call, Scope &scope) {
  Location at = loc(call.loc);
  const std::string name = "scaled_dot_product_attention()";
  Arguments args = bindArguments(call, {"query", "key", "value", "mask", "causal", "scale", "softcap"}, 3, false);
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
  const double softcap = args.get("softcap") ? numberArgument(args.get("softcap"), scope, 0, name + " softcap") : 0.0;
  if (!(softcap >= 0.0) || std::isinf(softcap))
    fail(args.get("softcap")->loc, name + " softcap must be 0 (none) or a positive number, got " + formatNumber(softcap));
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

  // Grouped-query attention is written as Hugging Face's repeat_kv: each key
  // and value head repeated for its group of query heads. ein-fuse-attention
  // turns the repeats back into reads in place (no copies).
  if (group > 1) {
    k = rearrange(at, k, "... h s e -> ... (h g) s e", {{"g", group}}, call.loc);
    v = rearrange(at, v, "... h s e -> ... (h g) s e", {{"g", group}}, call.loc);
  }
  auto type = inferred(ir::AttentionOp::inferResultType(q.getType(), k.getType(), v.getType(),
                                                        mask ? mask.getType() : Type(), maskKind),
                       at, name + " ");
  ir::SizesAttr causalPositions = causal ? ir::SizesAttr::get(&context, {queries}) : nullptr;
  mlir::Value result = builder.create<ir::AttentionOp>(
      at, type, q, k, v, mask, builder.getF64FloatAttr(scale), ir::MaskKindAttr::get(&context, maskKind),
      builder.getF64FloatAttr(-std::numeric_limits<double>::infinity()), causalPositions,
      builder.getF64FloatAttr(softcap));
  return EValue{Tensor{result}};
}

}  // namespace ein::mlirgen::detail

namespace ein::mlirgen::detail {

EValue Generator::callAppend(const ast::Call &call, Scope &scope) { return writeState(call, scope, false); }

EValue Generator::callKeep(const ast::Call &call, Scope &scope) { return writeState(call, scope, true); }

// append() and keep(): both write x into a state along an axis, append at the
// session's position on every run, keep from row 0 at a sequence's first run.
EValue Generator::writeState(const ast::Call &call, Scope &scope, bool firstRun) {
  const std::string builtin = firstRun ? "keep" : "append";
  Location at = loc(call.loc);
  Arguments args = bindArguments(call, {"state", "x", "axis"}, 3, false);
  EValue target = evaluate(*args.get("state"), scope);
  auto *stateTensor = std::get_if<Tensor>(&target.value);
  auto stateOp = stateTensor ? stateTensor->value.getDefiningOp<ir::StateOp>() : nullptr;
  if (!stateOp)
    fail(args.get("state")->loc, builtin + "() writes to session state (declared with `state`), not to " +
                                     kindName(target));
  const std::string name = stateOp.getName().str();
  if (position.empty())
    fail(at, firstRun ? "keep() writes at a sequence's first run, the session's position 0: declare the position "
                        "(position past = 0..N)"
                      : "append() writes at the session's position: declare it (position past = 0..N)");
  if (!appendedStates.insert(name).second)
    fail(at, "state \"" + name + "\" is written twice (append or keep); a run writes each state once");
  // Rows of another float type are stored as the state's (as PyTorch's
  // `cache[..., past:past + t] = x` casts into the cache's dtype).
  mlir::Value x = cast(at, floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, builtin + "() argument 'x'"),
                       mlir::cast<RankedTensorType>(stateOp.getType()).getElementType());
  ein::Shape stateShape = shapeOf(stateOp), xShape = shapeOf(x);
  if (xShape.size() != stateShape.size())
    fail(args.get("x")->loc, builtin + "() x " + ein::formatShape(xShape) + " and the state \"" + name + "\" " +
                                 ein::formatShape(stateShape) + " differ in rank");
  const int64_t axis = axesArgument(*args.get("axis"), scope, static_cast<int64_t>(stateShape.size()))[0];
  for (size_t d = 0; d < stateShape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && xShape[d] != stateShape[d])
      fail(args.get("x")->loc, builtin + "() x " + ein::formatShape(xShape) + " differs from the state \"" + name +
                                   "\" " + ein::formatShape(stateShape) + " on axis " + std::to_string(d));
  const ein::Size rows = xShape[axis], offset = firstRun ? ein::Size(0) : ein::Size::dim(position);
  if (firstRun) {
    requireSizes({ein::SizeCheck::LessEqual, rows, stateShape[axis],
                  "state \"" + name + "\" holds " + stateShape[axis].str() + " rows on axis " + std::to_string(axis) +
                      ": keep() writes " + rows.str() + " rows there"},
                 at);
  } else {
    if (advance && rows != *advance)
      fail(args.get("x")->loc, "append() adds " + rows.str() + " rows here and " + advance->str() + " at " +
                                   ir::locationText(advanceAt, "?") + "; every append of a run adds the same rows");
    if (!advance) {
      advance = rows;
      advanceAt = at;
    }
    requireSizes({ein::SizeCheck::LessEqual, offset + rows, stateShape[axis],
                  "state \"" + name + "\" holds " + stateShape[axis].str() + " rows on axis " + std::to_string(axis) +
                      ": " + position + " + " + rows.str() + " must not exceed them (reset the session)"},
                 at);
  }
  ein::Shape resultShape = stateShape;
  resultShape[axis] = offset + rows;
  auto type = ir::sizedTensorType(resultShape, builder.getF32Type());
  return EValue{Tensor{builder.create<ir::AppendOp>(at, type, stateOp, x, builder.getI64IntegerAttr(axis),
                                                    ir::SizesAttr::get(&context, {offset}),
                                                    firstRun ? builder.getUnitAttr() : nullptr)}};
}

}  // namespace ein::mlirgen::detail
