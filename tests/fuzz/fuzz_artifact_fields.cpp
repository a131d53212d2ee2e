// libFuzzer target with a structure-aware mutator: instead of flipping bytes
// (which mostly breaks FlatBuffers verification, the loader's first gate),
// it walks the artifact with the schema's reflection data and overwrites one
// scalar field or vector element -- a shape entry, a stride, an offset, the
// arena size, a kernel's key count, an opcode -- with a value that tends to
// break sizes: 0, 1, -1, powers of two around 2^31, 2^32 and 2^62, the
// extremes of its type, or a neighbour of the old value. The buffer stays a
// valid FlatBuffer, so every mutation reaches the semantic checks.
#include <cstring>
#include <random>

#include "artifact_target.hpp"
#include "ein/schema/ein_artifact_bfbs_generated.h"
#include "ein/schema/ein_artifact_generated.h"
#include "flatbuffers/reflection.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

struct Slot {
  uint8_t *address;
  reflection::BaseType type;
};

const reflection::Schema &schema() {
  static const reflection::Schema *parsed = reflection::GetSchema(ein::schema::ModelBinarySchema::data());
  return *parsed;
}

bool isScalar(reflection::BaseType type) { return type >= reflection::UType && type <= reflection::Double; }

void collectTable(const reflection::Object &object, flatbuffers::Table *table, std::vector<Slot> &slots, int depth);

void collectStruct(const reflection::Object &object, uint8_t *base, std::vector<Slot> &slots) {
  for (const reflection::Field *field : *object.fields()) {
    reflection::BaseType type = field->type()->base_type();
    if (isScalar(type)) slots.push_back({base + field->offset(), type});
    else if (type == reflection::Obj)
      collectStruct(*schema().objects()->Get(field->type()->index()), base + field->offset(), slots);
  }
}

void collectTable(const reflection::Object &object, flatbuffers::Table *table, std::vector<Slot> &slots, int depth) {
  if (depth > 8) return;
  const reflection::Schema &s = schema();
  for (const reflection::Field *field : *object.fields()) {
    if (!table->CheckField(field->offset())) continue;  // absent: no bytes to overwrite
    const reflection::Type &type = *field->type();
    auto *address = table->GetAddressOf(field->offset());
    switch (type.base_type()) {
      case reflection::Obj: {
        const reflection::Object &child = *s.objects()->Get(type.index());
        if (child.is_struct()) collectStruct(child, address, slots);
        else collectTable(child, flatbuffers::GetFieldT(*table, *field), slots, depth + 1);
        break;
      }
      case reflection::Union: {
        // The tag may itself have been mutated to no member (the loader
        // refuses that): only a known member is walked.
        const reflection::Field *tagField =
            object.fields()->LookupByKey((field->name()->str() + flatbuffers::UnionTypeFieldSuffix()).c_str());
        if (!tagField) break;
        auto tag = flatbuffers::GetFieldI<uint8_t>(*table, *tagField);
        const reflection::EnumVal *member = s.enums()->Get(type.index())->values()->LookupByKey(tag);
        if (!member || !member->union_type() || member->union_type()->base_type() != reflection::Obj) break;
        collectTable(*s.objects()->Get(member->union_type()->index()), flatbuffers::GetFieldT(*table, *field), slots,
                     depth + 1);
        break;
      }
      case reflection::Vector: {
        auto *vector = flatbuffers::GetFieldAnyV(*table, *field);
        reflection::BaseType element = type.element();
        uint8_t *data = vector->Data();
        if (isScalar(element)) {
          size_t width = flatbuffers::GetTypeSize(element);
          for (size_t i = 0; i < vector->size(); ++i) slots.push_back({data + i * width, element});
        } else if (element == reflection::Obj) {
          const reflection::Object &child = *s.objects()->Get(type.index());
          for (size_t i = 0; i < vector->size(); ++i) {
            if (child.is_struct()) {
              collectStruct(child, data + i * child.bytesize(), slots);
            } else {
              auto *offset = data + i * sizeof(flatbuffers::uoffset_t);
              collectTable(child, reinterpret_cast<flatbuffers::Table *>(offset + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(offset)), slots, depth + 1);
            }
          }
        }
        break;
      }
      default:
        if (isScalar(type.base_type())) slots.push_back({address, type.base_type()});
        break;
    }
  }
}

int64_t interestingValue(std::mt19937_64 &random, int64_t old) {
  static const int64_t kValues[] = {0, 1, 2, 3, -1, 7, 16, 63, 64, 255, 256, 4096, 65535, 65536,
                                    int64_t{1} << 31, (int64_t{1} << 31) - 1, int64_t{1} << 32,
                                    (int64_t{1} << 32) - 1, int64_t{1} << 40, int64_t{1} << 62,
                                    INT64_MAX, INT64_MIN};
  switch (random() % 4) {
    // Neighbours wrap around, as they would in the field's own width.
    case 0: return static_cast<int64_t>(static_cast<uint64_t>(old) + random() % 5 - 2);
    case 1: return static_cast<int64_t>(static_cast<uint64_t>(old) * 2);
    default: return kValues[random() % (sizeof kValues / sizeof kValues[0])];
  }
}

void store(const Slot &slot, int64_t value, std::mt19937_64 &random) {
  switch (slot.type) {
    case reflection::Float: {
      static const float kFloats[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 1e38f, 1e-45f};
      float f = kFloats[random() % (sizeof kFloats / sizeof kFloats[0])];
      std::memcpy(slot.address, &f, sizeof f);
      return;
    }
    case reflection::Double: {
      double d = static_cast<double>(value);
      std::memcpy(slot.address, &d, sizeof d);
      return;
    }
    default: {
      size_t width = flatbuffers::GetTypeSize(slot.type);
      std::memcpy(slot.address, &value, width);  // little-endian: the low bytes
      return;
    }
  }
}

int64_t load(const Slot &slot) {
  if (slot.type == reflection::Float || slot.type == reflection::Double) return 0;
  int64_t value = 0;
  std::memcpy(&value, slot.address, flatbuffers::GetTypeSize(slot.type));
  return value;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize, unsigned int seed) {
  std::mt19937_64 random(seed);
  // Now and then a raw byte mutation, for damage the fields cannot express.
  if (random() % 16 == 0) return LLVMFuzzerMutate(data, size, maxSize);
  const size_t prefix = sizeof(flatbuffers::uoffset_t);
  if (size < prefix + 8) return LLVMFuzzerMutate(data, size, maxSize);
  flatbuffers::uoffset_t flatbufferBytes;
  std::memcpy(&flatbufferBytes, data, prefix);
  if (flatbufferBytes > size - prefix) return LLVMFuzzerMutate(data, size, maxSize);
  flatbuffers::Verifier verifier(data, flatbufferBytes + prefix);
  if (!ein::schema::VerifySizePrefixedModelBuffer(verifier)) return LLVMFuzzerMutate(data, size, maxSize);
  auto *root = const_cast<flatbuffers::Table *>(
      reinterpret_cast<const flatbuffers::Table *>(ein::schema::GetSizePrefixedModel(data)));
  std::vector<Slot> slots;
  collectTable(*schema().root_table(), root, slots, 0);
  if (slots.empty()) return LLVMFuzzerMutate(data, size, maxSize);
  int mutations = 1 + static_cast<int>(random() % 3);
  for (int i = 0; i < mutations; ++i) {
    const Slot &slot = slots[random() % slots.size()];
    store(slot, interestingValue(random, load(slot)), random);
  }
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ein::fuzz::loadAndRun(data, size);
  return 0;
}
