// The GGUF reader: files written by llama.cpp's own writer (the gguf package;
// gguf/make_gguf_fixtures.py) with every tensor type it reads, Llama files
// whose names and rotary row order must come back as Hugging Face's, and
// malformed files, each of which must give an error that names the file and
// the problem, never a crash.
#include "compiler/weights/gguf.hpp"

#include <gtest/gtest.h>

#include "compiler/weights/open_weights.hpp"
#include "weights_test_support.hpp"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using ein::weights::DType;
using ein::weights::GgmlType;
using ein::weights::GgufFile;
using ein::weights::TensorEntry;
using ein::weights::test::errorMessage;

namespace {

const fs::path kFixtures = EIN_GGUF_FIXTURES_DIR;
const fs::path kConformanceDir = EIN_CONFORMANCE_CASES_DIR;

std::optional<GgufFile> openValid(const fs::path &path) {
  llvm::Expected<GgufFile> file = GgufFile::open(path.string());
  if (!file) {
    ADD_FAILURE() << errorMessage(file.takeError());
    return std::nullopt;
  }
  return std::move(*file);
}

std::vector<float> floatsOf(const ein::weights::WeightsFile &file, const TensorEntry *entry) {
  if (!entry) {
    ADD_FAILURE() << "no such entry";
    return {};
  }
  llvm::Expected<std::vector<float>> values = file.toF32(*entry);
  if (!values) {
    ADD_FAILURE() << errorMessage(values.takeError());
    return {};
  }
  return std::move(*values);
}

// Equal bit for bit (NaNs included).
::testing::AssertionResult sameBits(const std::vector<float> &got, const std::vector<float> &expected) {
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << got.size() << " values, expected " << expected.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "value " << i << " is " << got[i] << ", expected " << expected[i];
  return ::testing::AssertionSuccess();
}

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// ---------------------------------------------------------------------------
// GGUF bytes built field by field (little-endian, as the test hosts are).

std::string u32(uint32_t value) { return std::string(reinterpret_cast<const char *>(&value), 4); }
std::string u64(uint64_t value) { return std::string(reinterpret_cast<const char *>(&value), 8); }
std::string text(std::string_view value) { return u64(value.size()) + std::string(value); }

// Metadata value types and ggml tensor types by number.
constexpr uint32_t kUint32 = 4, kFloat32 = 6, kString = 8, kArray = 9;
constexpr uint32_t kF32 = 0, kQ8_0 = 8;

// An encoded metadata entry: key, value type, value.
std::string entry(std::string_view key, uint32_t type, const std::string &value) { return text(key) + u32(type) + value; }
std::string stringEntry(std::string_view key, std::string_view value) { return entry(key, kString, text(value)); }

struct TensorInfo {
  std::string name;
  uint32_t type = kF32;
  std::vector<uint64_t> dims;  // innermost first
  uint64_t offset = 0;
};

// A valid file by default: a Llama with one F32 tensor "w" of shape [2, 4].
struct GgufSpec {
  uint32_t version = 3;
  std::vector<std::string> metadata = {stringEntry("general.architecture", "llama")};
  std::vector<TensorInfo> tensors = {{"w", kF32, {4, 2}, 0}};
  std::string data = std::string(32, '\0');
  uint64_t alignment = 32;  // the padding before the data (general.alignment is metadata's)
  std::optional<uint64_t> tensorCount, metadataCount;

  std::string bytes() const {
    std::string file = "GGUF" + u32(version) + u64(tensorCount.value_or(tensors.size())) +
                       u64(metadataCount.value_or(metadata.size()));
    for (const std::string &item : metadata) file += item;
    for (const TensorInfo &tensor : tensors) {
      file += text(tensor.name) + u32(static_cast<uint32_t>(tensor.dims.size()));
      for (uint64_t size : tensor.dims) file += u64(size);
      file += u32(tensor.type) + u64(tensor.offset);
    }
    file.append((alignment - file.size() % alignment) % alignment, '\0');
    return file + data;
  }
};

class GgufTempDirTest : public ein::weights::test::TempDirTest {
protected:
  // The error from opening `bytes`, which must not open, without the path
  // that prefixes it.
  std::string openError(const std::string &bytes) {
    fs::path path = write("bad.gguf", bytes);
    llvm::Expected<GgufFile> file = GgufFile::open(path.string());
    if (file) return "<opened without error>";
    std::string message = errorMessage(file.takeError());
    std::string prefix = path.string() + ": ";
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << "not prefixed with the path: " << message;
    return message.substr(std::min(message.size(), prefix.size()));
  }

  std::optional<GgufFile> openBytes(const std::string &bytes) { return openValid(write("good.gguf", bytes)); }
};

using GgufFiles = GgufTempDirTest;

// ---------------------------------------------------------------------------
// Every tensor type, against gguf-py's dequantization.

TEST(GgufTypes, EachTypeGivesTheValuesOfGgufPy) {
  std::optional<GgufFile> opened = openValid(kFixtures / "types.gguf");
  ASSERT_TRUE(opened);
  GgufFile &file = *opened;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.architecture(), "llama");

  struct Case {
    const char *name;
    GgmlType type;
    DType served;
    std::vector<int64_t> shape;
  };
  for (const Case &expected : {Case{"f16", GgmlType::F16, DType::F16, {3, 40}},
                               Case{"bf16", GgmlType::BF16, DType::BF16, {3, 40}},
                               Case{"q8_0", GgmlType::Q8_0, DType::F32, {4, 64}},
                               Case{"q4_0", GgmlType::Q4_0, DType::F32, {4, 64}},
                               Case{"q4_k", GgmlType::Q4_K, DType::F32, {3, 512}},
                               Case{"q6_k", GgmlType::Q6_K, DType::F32, {3, 512}}}) {
    SCOPED_TRACE(expected.name);
    const TensorEntry *entry = file.find(expected.name);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(file.stored(*entry).type, expected.type);
    EXPECT_EQ(entry->dtype, expected.served);
    EXPECT_EQ(entry->shape, expected.shape);
    // Half floats are served as stored; quantized tensors only as f32, and
    // say which quantization they are stored in.
    EXPECT_EQ(file.storedBytes(*entry).has_value(), expected.served != DType::F32);
    EXPECT_EQ(file.blockQuantization(*entry),
              expected.served == DType::F32 ? ein::weights::ggmlTypeName(static_cast<uint32_t>(expected.type)) : std::string());
    EXPECT_TRUE(sameBits(floatsOf(file, entry), floatsOf(file, file.find(std::string(expected.name) + ".expected"))));
  }

  // Dims are stored innermost first: ne = [4, 3, 2] is PyTorch's [2, 3, 4].
  const TensorEntry *f32 = file.find("f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(file.stored(*f32).dims, (std::vector<int64_t>{4, 3, 2}));
  std::vector<float> counting(24);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<float>(i) - 11.5f;
  EXPECT_TRUE(sameBits(floatsOf(file, f32), counting));
  ASSERT_TRUE(file.storedBytes(*f32).has_value());
  EXPECT_EQ(file.storedBytes(*f32)->size(), 24u * 4);
  EXPECT_EQ(file.blockQuantization(*f32), "");
}

TEST_F(GgufFiles, Version2ReadsAsVersion3) {
  std::string bytes = readFile(kFixtures / "types.gguf");
  ASSERT_EQ(bytes[4], 3);
  bytes[4] = 2;  // the two versions differ only for big-endian files
  std::optional<GgufFile> file = openBytes(bytes);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(file->entries().size(), 13u);
}

TEST(GgufTypes, Names) {
  EXPECT_EQ(ein::weights::ggmlTypeName(12), "Q4_K");
  EXPECT_EQ(ein::weights::ggmlTypeName(30), "BF16");
  EXPECT_EQ(ein::weights::ggmlTypeName(4), "4");  // removed from ggml long ago
}

// ---------------------------------------------------------------------------
// Llama: Hugging Face's names and row order.

// transformers' own weights (the llama_hf_tiny conformance case), written as
// convert_hf_to_gguf.py writes them: every tensor comes back bit for bit
// under its state_dict name.
TEST(GgufLlama, TheConformanceWeightsComeBackAsTheirSafetensors) {
  std::optional<GgufFile> opened = openValid(kFixtures / "llama_hf_tiny.gguf");
  ASSERT_TRUE(opened);
  GgufFile &gguf = *opened;
  auto safetensors = ein::weights::SafetensorsFile::open((kConformanceDir / "llama_hf_tiny" / "weights.safetensors").string());
  ASSERT_TRUE(static_cast<bool>(safetensors)) << errorMessage(safetensors.takeError());

  std::set<std::string> ggufNames, safetensorsNames;
  for (const TensorEntry &entry : gguf.entries()) ggufNames.insert(entry.name);
  for (const TensorEntry &entry : safetensors->entries()) safetensorsNames.insert(entry.name);
  EXPECT_EQ(ggufNames, safetensorsNames);
  for (const TensorEntry &expected : safetensors->entries()) {
    SCOPED_TRACE(expected.name);
    const TensorEntry *entry = gguf.find(expected.name);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->name, expected.name);
    EXPECT_EQ(entry->dtype, DType::F32);
    EXPECT_EQ(entry->shape, expected.shape);
    EXPECT_TRUE(sameBits(floatsOf(gguf, entry), floatsOf(*safetensors, &expected)));
  }
  // The permuted rows are made when read; the others are the file's bytes.
  const TensorEntry *query = gguf.find("model.layers.1.self_attn.q_proj.weight");
  const TensorEntry *key = gguf.find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_TRUE(query && key);
  EXPECT_EQ(gguf.stored(*query).name, "blk.1.attn_q.weight");
  EXPECT_EQ(gguf.stored(*query).permutedHeads, 4);
  EXPECT_EQ(gguf.stored(*key).permutedHeads, 2);
  EXPECT_FALSE(gguf.storedBytes(*query).has_value());
  EXPECT_TRUE(gguf.storedBytes(*gguf.find("model.layers.1.self_attn.v_proj.weight")).has_value());
}

// A tied model has no output.weight: lm_head.weight is the embedding's, and
// not a tensor of its own. Its q (F16) and k (Q8_0) rows come back in
// Hugging Face's order: the values of the fixture script's formulas.
TEST(GgufLlama, TiedEmbeddingsServeTheOutputProjection) {
  std::optional<GgufFile> opened = openValid(kFixtures / "llama_tied.gguf");
  ASSERT_TRUE(opened);
  GgufFile &file = *opened;
  std::set<std::string> names;
  for (const TensorEntry &entry : file.entries()) names.insert(entry.name);
  EXPECT_EQ(names, (std::set<std::string>{
                       "model.embed_tokens.weight", "model.norm.weight", "rope_freqs.weight",
                       "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                       "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                       "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                       "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                       "model.layers.0.mlp.down_proj.weight"}));

  const TensorEntry *output = file.find("lm_head.weight");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output, file.find("model.embed_tokens.weight"));
  EXPECT_EQ(output->shape, (std::vector<int64_t>{4, 32}));

  const TensorEntry *query = file.find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(query->dtype, DType::F16);
  EXPECT_EQ(query->shape, (std::vector<int64_t>{32, 32}));
  EXPECT_FALSE(file.storedBytes(*query).has_value());
  std::vector<float> expectedQuery(32 * 32);
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c) expectedQuery[r * 32 + c] = static_cast<float>(32 * r + c);
  EXPECT_TRUE(sameBits(floatsOf(file, query), expectedQuery));

  const TensorEntry *key = file.find("model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->dtype, DType::F32);
  EXPECT_EQ(key->shape, (std::vector<int64_t>{16, 32}));
  std::vector<float> expectedKey(16 * 32);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 32; ++c) expectedKey[r * 32 + c] = c == 0 ? 127.0f : static_cast<float>(r - c);
  EXPECT_TRUE(sameBits(floatsOf(file, key), expectedKey));

  // A name llama.cpp's Llama has no Hugging Face name for keeps its own.
  EXPECT_NE(file.find("rope_freqs.weight"), nullptr);
}

// An untied file serves its own output projection.
TEST(GgufLlama, AnUntiedFileServesItsOwnOutputProjection) {
  std::optional<GgufFile> file = openValid(kFixtures / "llama_hf_tiny.gguf");
  ASSERT_TRUE(file);
  const TensorEntry *output = file->find("lm_head.weight");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->name, "lm_head.weight");
  EXPECT_EQ(file->stored(*output).name, "output.weight");
}

TEST_F(GgufFiles, AnotherAlignmentIsHonoured) {
  GgufSpec spec;
  spec.metadata.push_back(entry("general.alignment", kUint32, u32(64)));
  spec.tensors = {{"a", kF32, {2}, 0}, {"b", kF32, {2}, 64}};
  spec.alignment = 64;
  spec.data = std::string(128, '\0');
  const float one = 1.0f, two = 2.0f;
  std::memcpy(spec.data.data() + 64, &one, 4);
  std::memcpy(spec.data.data() + 68, &two, 4);
  std::optional<GgufFile> file = openBytes(spec.bytes());
  ASSERT_TRUE(file);
  EXPECT_TRUE(sameBits(floatsOf(*file, file->find("b")), {1.0f, 2.0f}));
}

TEST_F(GgufFiles, NestedArraysAreRead) {
  GgufSpec spec;
  // [["a", "bc"], []]: an array of two arrays of strings.
  std::string inner = u32(kString) + u64(2) + text("a") + text("bc");
  std::string empty = u32(kString) + u64(0);
  spec.metadata.push_back(entry("nested", kArray, u32(kArray) + u64(2) + inner + empty));
  spec.metadata.push_back(entry("floats", kArray, u32(kFloat32) + u64(3) + std::string(12, '\0')));
  EXPECT_TRUE(openBytes(spec.bytes()));
}

TEST_F(GgufFiles, OpenWeightsFileTellsTheFormatByItsFirstBytes) {
  auto gguf = ein::weights::openWeightsFile((kFixtures / "llama_tied.gguf").string());
  ASSERT_TRUE(static_cast<bool>(gguf)) << errorMessage(gguf.takeError());
  EXPECT_NE(dynamic_cast<GgufFile *>(gguf->get()), nullptr);
  auto safetensors =
      ein::weights::openWeightsFile((kConformanceDir / "llama_hf_tiny" / "weights.safetensors").string());
  ASSERT_TRUE(static_cast<bool>(safetensors)) << errorMessage(safetensors.takeError());
  EXPECT_NE(dynamic_cast<ein::weights::SafetensorsFile *>(safetensors->get()), nullptr);

  fs::path textFile = write("model.ein", "dim n = 4\n");
  auto neither = ein::weights::openWeightsFile(textFile.string());
  ASSERT_FALSE(static_cast<bool>(neither));
  EXPECT_EQ(errorMessage(neither.takeError()),
            textFile.string() + ": the file is a text file, not a safetensors weights file");
  // A GGUF file's errors come from the GGUF reader.
  GgufSpec spec;
  spec.version = 7;
  auto bad = ein::weights::openWeightsFile(write("bad.gguf", spec.bytes()).string());
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(errorMessage(bad.takeError()),
            (dir / "bad.gguf").string() + ": GGUF version 7 is not supported (versions 2 and 3 are)");
}

// ---------------------------------------------------------------------------
// Malformed files: each gives its own message.

using MalformedGgufTest = GgufTempDirTest;

TEST_F(MalformedGgufTest, TheDefaultSpecIsValid) {
  std::optional<GgufFile> file = openBytes(GgufSpec().bytes());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->find("w")->shape, (std::vector<int64_t>{2, 4}));
}

TEST_F(MalformedGgufTest, NotAGgufFile) {
  EXPECT_EQ(openError("dim n = 4\n"), "the file is a text file, not a GGUF weights file (those start with \"GGUF\")");
  std::string bytes = GgufSpec().bytes();
  bytes[3] = 'X';
  EXPECT_EQ(openError(bytes),
            "the file is a binary file of unknown kind, not a GGUF weights file (those start with \"GGUF\")");
}

TEST_F(MalformedGgufTest, UnsupportedVersions) {
  GgufSpec spec;
  spec.version = 1;
  EXPECT_EQ(openError(spec.bytes()), "GGUF version 1 is not supported (versions 2 and 3 are)");
  spec.version = 4;
  EXPECT_EQ(openError(spec.bytes()), "GGUF version 4 is not supported (versions 2 and 3 are)");
  spec.version = 0x03000000;  // 3, written big-endian
  EXPECT_EQ(openError(spec.bytes()), "the file is a big-endian GGUF file; only little-endian ones are read");
}

// Every prefix of a valid file either fails with a message or, cut inside
// the padding after the last tensor, still holds every tensor's values.
TEST_F(MalformedGgufTest, EveryTruncationIsAnErrorOrHarmless) {
  const std::string bytes = readFile(kFixtures / "types.gguf");
  std::optional<GgufFile> whole = openBytes(bytes);
  ASSERT_TRUE(whole);
  int opened = 0;
  for (size_t length = 0; length < bytes.size(); ++length) {
    llvm::Expected<GgufFile> file = GgufFile::fromBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes.data(), length)), "cut.gguf");
    if (!file) {
      std::string message = errorMessage(file.takeError());
      EXPECT_EQ(message.rfind("cut.gguf: ", 0), 0u) << message;
      continue;
    }
    ++opened;
    for (const TensorEntry &entry : whole->entries())
      EXPECT_TRUE(sameBits(floatsOf(*file, file->find(entry.name)), floatsOf(*whole, &entry)))
          << entry.name << " in a prefix of " << length << " bytes";
  }
  EXPECT_LT(opened, 32);  // at most the last tensor's padding
  EXPECT_EQ(openError(bytes.substr(0, 8)), "the file ends (at 8 bytes) inside the tensor count");
  EXPECT_EQ(openError(bytes.substr(0, 40)),
            "the key of metadata entry 0 is 20 bytes long, past the end of the file (40 bytes)");
}

TEST_F(MalformedGgufTest, CountsBeyondTheFile) {
  GgufSpec spec;
  spec.metadataCount = uint64_t{1} << 62;
  EXPECT_EQ(openError(spec.bytes()), "the header counts 4611686018427387904 metadata entries, more than the rest of "
                                     "the file (" + std::to_string(spec.bytes().size() - 24) + " bytes) holds");
  spec = GgufSpec();
  spec.tensorCount = ~uint64_t{0};
  std::string message = openError(spec.bytes());
  EXPECT_EQ(message.rfind("the header counts 18446744073709551615 tensors, more than the rest of the file (", 0), 0u)
      << message;
}

TEST_F(MalformedGgufTest, StringsPastTheEnd) {
  GgufSpec spec;
  spec.metadata = {u64(uint64_t{1} << 40) + "general.architecture"};
  std::string bytes = spec.bytes();
  EXPECT_EQ(openError(bytes), "the key of metadata entry 0 is 1099511627776 bytes long, past the end of the file (" +
                                  std::to_string(bytes.size()) + " bytes)");
  spec = GgufSpec();
  spec.metadata = {text("general.architecture") + u32(kString) + u64(~uint64_t{0})};
  bytes = spec.bytes();
  EXPECT_EQ(openError(bytes), "the value of metadata \"general.architecture\" is 18446744073709551615 bytes long, past "
                              "the end of the file (" + std::to_string(bytes.size()) + " bytes)");
}

TEST_F(MalformedGgufTest, MetadataValues) {
  auto withEntry = [](const std::string &item) {
    GgufSpec spec;
    spec.metadata.push_back(item);
    return spec.bytes();
  };
  EXPECT_EQ(openError(withEntry(entry("odd", 13, u32(0)))),
            "metadata \"odd\" has value type 13, which GGUF does not define");
  EXPECT_EQ(openError(withEntry(entry("odd", kArray, u32(42) + u64(0)))),
            "metadata \"odd\" is an array of value type 42, which GGUF does not define");
  std::string bytes = withEntry(entry("big", kArray, u32(kUint32) + u64(uint64_t{1} << 61)));
  std::string message = openError(bytes);
  EXPECT_EQ(message.rfind("metadata \"big\" is an array of 2305843009213693952 UINT32 values, more than the rest of the "
                          "file (", 0), 0u) << message;
  std::string deep = u32(kString) + u64(0);
  for (int level = 0; level < 9; ++level) deep = u32(kArray) + u64(1) + deep;
  EXPECT_EQ(openError(withEntry(entry("deep", kArray, deep))), "metadata \"deep\" nests arrays more than 8 deep");
  EXPECT_EQ(openError(withEntry(stringEntry("general.architecture", "llama"))),
            "metadata \"general.architecture\" appears twice");
  EXPECT_EQ(openError(withEntry(entry("general.alignment", kUint32, u32(48)))),
            "metadata \"general.alignment\" is not a power of two");
  EXPECT_EQ(openError(withEntry(entry("general.alignment", kUint32, u32(0)))),
            "metadata \"general.alignment\" is not a power of two");
  EXPECT_EQ(openError(withEntry(stringEntry("general.alignment", "32"))),
            "metadata \"general.alignment\" is STRING, not an integer");
  // A scalar cut off by the end of the file.
  GgufSpec cut;
  cut.metadata.push_back(text("n") + u32(kUint32) + "\x01\x02");
  cut.tensors.clear();
  cut.data.clear();
  cut.alignment = 1;
  EXPECT_EQ(openError(cut.bytes()), "the file ends (at " + std::to_string(cut.bytes().size()) +
                                        " bytes) inside the value of metadata \"n\"");
}

TEST_F(MalformedGgufTest, Architectures) {
  GgufSpec spec;
  spec.metadata = {stringEntry("general.architecture", "gpt2")};
  EXPECT_EQ(openError(spec.bytes()), "GGUF architecture 'gpt2' is not supported; supported: llama");
  spec.metadata = {};
  EXPECT_EQ(openError(spec.bytes()), "the metadata has no \"general.architecture\" (the model's, which the tensor "
                                     "names follow; supported: llama)");
  spec.metadata = {entry("general.architecture", kUint32, u32(1))};
  EXPECT_EQ(openError(spec.bytes()), "metadata \"general.architecture\" is UINT32, not a string");
}

TEST_F(MalformedGgufTest, TensorInfos) {
  auto withTensor = [](TensorInfo tensor) {
    GgufSpec spec;
    spec.tensors = {std::move(tensor)};
    return spec.bytes();
  };
  EXPECT_EQ(openError(withTensor({"w", kF32, {1, 1, 1, 1, 1}, 0})), "tensor \"w\" has 5 dimensions; GGUF allows at most 4");
  EXPECT_EQ(openError(withTensor({"w", kF32, {uint64_t{1} << 63}, 0})),
            "tensor \"w\" has dimension 9223372036854775808 (sizes must be below 2^63)");
  EXPECT_EQ(openError(withTensor({"w", kF32, {uint64_t{1} << 30, uint64_t{1} << 30}, 0})),
            "tensor \"w\" has shape [1073741824, 1073741824] with more than 2^40 elements (the product of its "
            "nonzero sizes)");
  EXPECT_EQ(openError(withTensor({"blk.0.ffn_down.weight", 13, {256, 2}, 0})),
            "tensor \"blk.0.ffn_down.weight\" has type Q5_K, which is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K "
            "and Q6_K are)");
  EXPECT_EQ(openError(withTensor({"w", 99, {8}, 0})),
            "tensor \"w\" has type 99, which is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K are)");
  EXPECT_EQ(openError(withTensor({"w", kQ8_0, {48, 2}, 0})),
            "tensor \"w\" of type Q8_0 has rows of 48 elements, not a multiple of its blocks of 32");
  EXPECT_EQ(openError(withTensor({"w", kF32, {2}, 4})), "tensor \"w\" has offset 4, not a multiple of the alignment 32");
  EXPECT_EQ(openError(withTensor({"w", kF32, {8}, uint64_t{1} << 62})),
            "tensor \"w\" has offset 4611686018427387904, past the end of the file (" +
                std::to_string(withTensor({"w", kF32, {8}, 0}).size()) + " bytes)");
  // 32 bytes of data; the tensor needs 64 from offset 0, or 32 from offset 32.
  std::string message = openError(withTensor({"w", kF32, {8, 2}, 0}));
  EXPECT_EQ(message.rfind("tensor \"w\" (F32[2, 8], 64 bytes at offset 0) runs past the end of the data (32 bytes "
                          "from byte ", 0), 0u) << message;
  message = openError(withTensor({"w", kF32, {8}, 32}));
  EXPECT_EQ(message.rfind("tensor \"w\" (F32[8], 32 bytes at offset 32) runs past the end of the data", 0), 0u)
      << message;
}

TEST_F(MalformedGgufTest, TensorNames) {
  GgufSpec spec;
  spec.tensors = {{"w", kF32, {2}, 0}, {"w", kF32, {2}, 0}};
  EXPECT_EQ(openError(spec.bytes()), "tensor \"w\" appears twice");
  // Two names that both map to one Hugging Face name.
  spec.tensors = {{"output.weight", kF32, {2}, 0}, {"lm_head.weight", kF32, {2}, 0}};
  EXPECT_EQ(openError(spec.bytes()), "tensor \"lm_head.weight\" and tensor \"output.weight\" are both \"lm_head.weight\"");
  spec.tensors = {{std::string("w\0", 2), kF32, {2}, 0}};
  EXPECT_TRUE(openBytes(spec.bytes()));  // GGUF names are bytes; a NUL in one is only odd
}

TEST_F(MalformedGgufTest, RotaryHeads) {
  GgufSpec spec;
  spec.tensors = {{"blk.0.attn_q.weight", kF32, {2, 4}, 0}};
  EXPECT_EQ(openError(spec.bytes()), "the metadata has no \"llama.attention.head_count\", the heads of tensor "
                                     "\"blk.0.attn_q.weight\" (its rows are permuted over them)");
  spec.metadata.push_back(entry("llama.attention.head_count", kUint32, u32(4)));
  EXPECT_EQ(openError(spec.bytes()), "tensor \"blk.0.attn_q.weight\" has 4 rows, which 4 heads do not split into "
                                     "pairs of halves (its rows are permuted over them)");
  spec.metadata.back() = entry("llama.attention.head_count", kUint32, u32(2));
  std::optional<GgufFile> file = openBytes(spec.bytes());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->stored(*file->find("model.layers.0.self_attn.q_proj.weight")).permutedHeads, 2);
  // k's heads are head_count_kv's where the file has them.
  spec.tensors = {{"blk.0.attn_k.weight", kF32, {2, 4}, 0}};
  spec.metadata.push_back(entry("llama.attention.head_count_kv", kUint32, u32(0)));
  EXPECT_EQ(openError(spec.bytes()), "metadata \"llama.attention.head_count_kv\" is not a positive head count");
  spec.metadata.back() = entry("llama.attention.head_count_kv", kUint32, u32(1));
  file = openBytes(spec.bytes());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->stored(*file->find("model.layers.0.self_attn.k_proj.weight")).permutedHeads, 1);
  // Rows of no elements (a zero dimension) read as nothing to reorder.
  spec.tensors = {{"blk.0.attn_k.weight", kF32, {0, 4}, 0}};
  file = openBytes(spec.bytes());
  ASSERT_TRUE(file);
  const ein::weights::TensorEntry &empty = *file->find("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(file->stored(empty).permutedHeads, 1);
  llvm::Expected<std::vector<float>> values = file->toF32(empty);
  ASSERT_TRUE(static_cast<bool>(values));
  EXPECT_TRUE(values->empty());
}

TEST_F(MalformedGgufTest, DataStartPastTheEnd) {
  GgufSpec spec;
  spec.data.clear();
  std::string bytes = spec.bytes();
  bytes.resize(bytes.size() - 1);  // not even the padding is whole
  std::string message = openError(bytes);
  EXPECT_EQ(message.rfind("the tensor data would start at byte ", 0), 0u) << message;
}

}  // namespace
