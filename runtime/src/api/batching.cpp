#include "ein/batching.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ein {
namespace {

int dimIndex(const std::vector<DimInfo> &dims, std::string_view name) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].name == name) return static_cast<int>(i);
  return -1;
}

StatusOr<BatchedTensor> batchedTensor(const TensorInfo &info, const std::vector<DimInfo> &dims, const char *kind) {
  if (info.dtype == DType::BF16)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} \"{}\" is bf16, which a server's clients cannot send or read; serve f32 inputs and "
                              "outputs (a bf16 artifact computes in bf16 all the same)",
                              kind, info.name));
  BatchedTensor tensor{info.name, info.dtype, {}, {}, info.upperBound};
  for (size_t axis = 1; axis < info.shape.size(); ++axis) {
    std::string_view expression = axis < info.dims.size() ? std::string_view(info.dims[axis]) : std::string_view();
    int dim = expression.empty() ? -1 : dimIndex(dims, expression);
    if (!expression.empty() && dim < 0)
      return Status(StatusCode::InvalidArgument,
                    fmt::format("{} \"{}\" has an axis sized \"{}\"; a served model sizes its axes by a constant or "
                                "by one ranged dim",
                                kind, info.name, expression));
    tensor.sizes.push_back(dim < 0 ? info.shape[axis] : -1);
    tensor.dims.push_back(dim);
  }
  return tensor;
}

std::string shapeText(const BatchSignature &signature, const BatchedTensor &tensor) {
  std::vector<std::string> axes{signature.dims[signature.batchDim].name};
  for (size_t axis = 0; axis < tensor.sizes.size(); ++axis)
    axes.push_back(tensor.dims[axis] < 0 ? std::to_string(tensor.sizes[axis]) : signature.dims[tensor.dims[axis]].name);
  return fmt::format("{}[{}]", dtypeName(tensor.dtype), fmt::join(axes, ", "));
}

// The first id of an i32/i64 input outside [0, bound), if any.
template <typename Id>
const Id *idOutside(const void *data, size_t bytes, int64_t bound) {
  const Id *ids = static_cast<const Id *>(data);
  const Id *end = ids + bytes / sizeof(Id);
  const Id *bad = std::find_if(ids, end, [&](Id id) { return id < 0 || static_cast<int64_t>(id) >= bound; });
  return bad == end ? nullptr : bad;
}

int64_t product(std::span<const int64_t> values) {
  return std::accumulate(values.begin(), values.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

StatusOr<BatchSignature> BatchSignature::create(const Model &model, std::span<const std::string> padDims) {
  return create(model.dims(), model.inputs(), model.outputs(), padDims);
}

StatusOr<BatchSignature> BatchSignature::create(const std::vector<DimInfo> &dims, std::span<const TensorInfo> inputs,
                                                std::span<const TensorInfo> outputs,
                                                std::span<const std::string> padDims) {
  BatchSignature signature;
  signature.dims = dims;
  std::vector<std::string> firstAxes;
  for (std::span<const TensorInfo> list : {inputs, outputs})
    for (const TensorInfo &info : list) {
      std::string first = info.shape.empty()                        ? std::string("(a scalar)")
                          : info.dims.empty() || info.dims[0].empty() ? std::to_string(info.shape[0])
                                                                      : info.dims[0];
      if (std::find(firstAxes.begin(), firstAxes.end(), first) == firstAxes.end()) firstAxes.push_back(first);
    }
  int batch = firstAxes.size() == 1 ? dimIndex(signature.dims, firstAxes[0]) : -1;
  if (batch < 0) {
    std::vector<std::string> ranged;
    for (const DimInfo &dim : signature.dims) ranged.push_back(dim.name);
    return Status(StatusCode::InvalidArgument,
                  fmt::format("a served model needs a batch dim: a ranged dim that sizes the first axis of every input "
                              "and output (here the first axes are [{}], ranged dims [{}])",
                              fmt::join(firstAxes, ", "), fmt::join(ranged, ", ")));
  }
  signature.batchDim = batch;
  signature.padded.assign(signature.dims.size(), false);
  for (const std::string &name : padDims) {
    int dim = dimIndex(signature.dims, name);
    if (dim < 0 || dim == batch) {
      std::vector<std::string> others;
      for (const DimInfo &info : signature.dims)
        if (info.name != signature.dims[batch].name) others.push_back(info.name);
      return Status(StatusCode::InvalidArgument,
                    fmt::format("cannot pad dim \"{}\": the ranged dims besides the batch dim \"{}\" are [{}]", name,
                                signature.dims[batch].name, fmt::join(others, ", ")));
    }
    signature.padded[dim] = true;
  }
  for (const TensorInfo &info : inputs) {
    auto tensor = batchedTensor(info, signature.dims, "input");
    if (!tensor.ok()) return tensor.status();
    signature.inputs.push_back(std::move(tensor).value());
  }
  for (const TensorInfo &info : outputs) {
    auto tensor = batchedTensor(info, signature.dims, "output");
    if (!tensor.ok()) return tensor.status();
    signature.outputs.push_back(std::move(tensor).value());
  }
  return signature;
}

StatusOr<std::vector<int64_t>> checkRequest(const BatchSignature &signature, std::span<const InputTensor> inputs) {
  auto invalid = [](std::string message) { return Status(StatusCode::InvalidArgument, std::move(message)); };
  for (const InputTensor &input : inputs) {
    bool known = std::any_of(signature.inputs.begin(), signature.inputs.end(),
                             [&](const BatchedTensor &tensor) { return tensor.name == input.name; });
    if (!known) {
      std::vector<std::string> names;
      for (const BatchedTensor &tensor : signature.inputs) names.push_back(tensor.name);
      return invalid(fmt::format("unknown input \"{}\"; the model takes [{}]", input.name, fmt::join(names, ", ")));
    }
  }
  std::vector<int64_t> values(signature.dims.size(), -1);
  std::vector<std::string> readAt(signature.dims.size());
  for (const BatchedTensor &tensor : signature.inputs) {
    auto found = std::find_if(inputs.begin(), inputs.end(), [&](const InputTensor &in) { return in.name == tensor.name; });
    if (found == inputs.end()) return invalid(fmt::format("input \"{}\" is missing", tensor.name));
    if (std::count_if(inputs.begin(), inputs.end(), [&](const InputTensor &in) { return in.name == tensor.name; }) > 1)
      return invalid(fmt::format("input \"{}\" is given twice", tensor.name));
    const InputTensor &input = *found;
    auto mismatch = [&] {
      return invalid(fmt::format("input \"{}\" expects {}, got {}[{}]", tensor.name, shapeText(signature, tensor),
                                 elementTypeName(input.dtype), fmt::join(input.shape, ", ")));
    };
    if (input.dtype != elementType(tensor.dtype) || input.shape.size() != 1 + tensor.sizes.size()) return mismatch();
    for (size_t axis = 0; axis < input.shape.size(); ++axis) {
      int dim = axis == 0 ? signature.batchDim : tensor.dims[axis - 1];
      int64_t size = input.shape[axis];
      if (dim < 0) {
        if (size != tensor.sizes[axis - 1]) return mismatch();
        continue;
      }
      const DimInfo &info = signature.dims[dim];
      if (size < info.min || size > info.max)
        return invalid(fmt::format("input \"{}\" axis {} is {}, but {} ranges over {}..{}", tensor.name, axis, size,
                                   info.name, info.min, info.max));
      if (values[dim] >= 0 && values[dim] != size)
        return invalid(fmt::format("input \"{}\" axis {} is {}, but {} = {} (from {})", tensor.name, axis, size,
                                   info.name, values[dim], readAt[dim]));
      if (values[dim] < 0) {
        values[dim] = size;
        readAt[dim] = fmt::format("input \"{}\" axis {}", tensor.name, axis);
      }
    }
    uint64_t expected = dtypeBytes(tensor.dtype, static_cast<uint64_t>(product(input.shape)));
    if (input.bytes != expected || (expected > 0 && input.data == nullptr))
      return invalid(fmt::format("input \"{}\" holds {} bytes; its shape [{}] takes {}", tensor.name, input.bytes,
                                 fmt::join(input.shape, ", "), expected));
    if (tensor.idBound > 0) {
      int64_t bad = 0;
      bool outside = false;
      if (tensor.dtype == DType::I32) {
        if (const int32_t *id = idOutside<int32_t>(input.data, input.bytes, tensor.idBound)) outside = true, bad = *id;
      } else if (tensor.dtype == DType::I64) {
        if (const int64_t *id = idOutside<int64_t>(input.data, input.bytes, tensor.idBound)) outside = true, bad = *id;
      }
      if (outside)
        return Status(StatusCode::OutOfRange, fmt::format("input \"{}\" holds id {}, outside [0, {})", tensor.name,
                                                          bad, tensor.idBound));
    }
  }
  return values;
}

std::vector<std::vector<size_t>> planRuns(const BatchSignature &signature,
                                          std::span<const std::vector<int64_t>> requestDims, double maxPadding) {
  const int batch = signature.batchDim;
  auto paddedSize = [&](const std::vector<int64_t> &dims) {
    int64_t size = 1;
    for (size_t d = 0; d < dims.size(); ++d)
      if (signature.padded[d]) size *= std::max<int64_t>(dims[d], 0);
    return size;
  };
  // Groups: requests equal in every dim that is neither the batch dim nor padded.
  std::map<std::vector<int64_t>, std::vector<size_t>> groups;
  for (size_t index = 0; index < requestDims.size(); ++index) {
    std::vector<int64_t> key;
    for (size_t d = 0; d < requestDims[index].size(); ++d)
      if (static_cast<int>(d) != batch && !signature.padded[d]) key.push_back(requestDims[index][d]);
    groups[key].push_back(index);
  }
  struct Run {
    std::vector<size_t> members;
    int64_t rows = 0, real = 0;
    std::vector<int64_t> longest;  // per dim, the largest member value
    int64_t cost(const BatchSignature &sig) const {
      int64_t size = rows;
      for (size_t d = 0; d < longest.size(); ++d)
        if (sig.padded[d]) size *= std::max<int64_t>(longest[d], 0);
      return size;
    }
  };
  std::vector<Run> runs;
  for (auto &[key, members] : groups) {
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return paddedSize(requestDims[a]) > paddedSize(requestDims[b]);
    });
    bool open = false;
    for (size_t index : members) {
      const std::vector<int64_t> &dims = requestDims[index];
      int64_t rows = dims[batch], real = rows * paddedSize(dims);
      if (open) {
        Run &run = runs.back();
        std::vector<int64_t> widest = run.longest;
        for (size_t d = 0; d < dims.size(); ++d) widest[d] = std::max(widest[d], dims[d]);
        int64_t padded = (run.rows + rows) * paddedSize(widest);
        if (run.rows + rows <= signature.maxBatch() &&
            static_cast<double>(padded) <= maxPadding * static_cast<double>(run.real + real)) {
          run.members.push_back(index);
          run.rows += rows;
          run.real += real;
          run.longest = std::move(widest);
          continue;
        }
      }
      runs.push_back(Run{{index}, rows, real, dims});
      open = true;
    }
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [&](const Run &a, const Run &b) { return a.cost(signature) < b.cost(signature); });
  std::vector<std::vector<size_t>> planned;
  for (Run &run : runs) planned.push_back(std::move(run.members));
  return planned;
}

std::vector<int64_t> mergedDims(const BatchSignature &signature, std::span<const std::vector<int64_t>> memberDims) {
  std::vector<int64_t> dims(signature.dims.size(), -1);
  for (const std::vector<int64_t> &member : memberDims)
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = std::max(dims[d], member[d]);
  dims[signature.batchDim] = 0;
  for (const std::vector<int64_t> &member : memberDims) dims[signature.batchDim] += member[signature.batchDim];
  return dims;
}

std::vector<int64_t> batchedShape(const BatchedTensor &tensor, std::span<const int64_t> dims, int64_t rows) {
  std::vector<int64_t> shape{rows};
  for (size_t axis = 0; axis < tensor.sizes.size(); ++axis)
    shape.push_back(tensor.dims[axis] < 0 ? tensor.sizes[axis] : dims[tensor.dims[axis]]);
  return shape;
}

void copyBlock(const std::byte *from, std::span<const int64_t> fromShape, int64_t fromRow, std::byte *to,
               std::span<const int64_t> toShape, int64_t toRow, std::span<const int64_t> extent,
               size_t elementBytes) {
  const size_t rank = extent.size();
  if (rank == 0) {
    std::memcpy(to, from, elementBytes);
    return;
  }
  // Strides in bytes; the innermost axis is copied whole, in one memcpy per row.
  std::vector<size_t> fromStride(rank), toStride(rank);
  fromStride[rank - 1] = toStride[rank - 1] = elementBytes;
  for (size_t axis = rank - 1; axis > 0; --axis) {
    fromStride[axis - 1] = fromStride[axis] * static_cast<size_t>(fromShape[axis]);
    toStride[axis - 1] = toStride[axis] * static_cast<size_t>(toShape[axis]);
  }
  from += static_cast<size_t>(fromRow) * fromStride[0];
  to += static_cast<size_t>(toRow) * toStride[0];
  const size_t innerBytes = static_cast<size_t>(extent[rank - 1]) * elementBytes;
  const int64_t outer = product(extent.first(rank - 1));
  if (innerBytes == 0 || outer == 0) return;
  std::vector<int64_t> index(rank - 1, 0);
  for (int64_t block = 0; block < outer; ++block) {
    size_t fromOffset = 0, toOffset = 0;
    for (size_t axis = 0; axis + 1 < rank; ++axis) {
      fromOffset += static_cast<size_t>(index[axis]) * fromStride[axis];
      toOffset += static_cast<size_t>(index[axis]) * toStride[axis];
    }
    std::memcpy(to + toOffset, from + fromOffset, innerBytes);
    for (size_t axis = rank - 1; axis-- > 0;) {  // next index, last axis fastest
      if (++index[axis] < extent[axis]) break;
      index[axis] = 0;
    }
  }
}

}  // namespace ein
