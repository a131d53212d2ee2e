// The safetensors reader: the shared conformance weights, hand-built files of
// every dtype, and malformed files, each of which must give an error that
// names the file and the problem, never a crash.
#include "compiler/weights/safetensors.hpp"

#include <gtest/gtest.h>

#include "weights_test_support.hpp"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;
using ein::weights::DType;
using ein::weights::SafetensorsFile;
using ein::weights::TensorEntry;
using ein::weights::test::errorMessage;
using ein::weights::test::littleEndianBytes;
using ein::weights::test::safetensorsBytes;

namespace {

const fs::path kConformanceDir = EIN_CONFORMANCE_CASES_DIR;

// Opens a file that must be valid; on an error, fails the test with the
// reader's message and returns nothing.
std::optional<SafetensorsFile> openValid(const fs::path &path) {
  llvm::Expected<SafetensorsFile> file = SafetensorsFile::open(path.string());
  if (!file) {
    ADD_FAILURE() << errorMessage(file.takeError());
    return std::nullopt;
  }
  return std::move(*file);
}

// The f32 values of a floating-point entry (empty, with a test failure, on an error).
std::vector<float> floatsOf(const SafetensorsFile &file, const TensorEntry *entry) {
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

class SafetensorsTempDirTest : public ein::weights::test::TempDirTest {
protected:
  // The error from opening `bytes`, which must not open.
  std::string openError(const std::string &bytes) {
    fs::path path = write("bad.safetensors", bytes);
    llvm::Expected<SafetensorsFile> file = SafetensorsFile::open(path.string());
    if (file) return "<opened without error>";
    std::string message = errorMessage(file.takeError());
    std::string prefix = path.string() + ": ";
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << "not prefixed with the path: " << message;
    return message.substr(std::min(message.size(), prefix.size()));
  }
};

// ---------------------------------------------------------------------------
// The conformance weights.

struct ExpectedEntry {
  std::string caseName;
  std::string tensor;
  std::vector<int64_t> shape;
  float first;  // the first and last values, read with Python's struct module
  float last;
};

class ConformanceEntryTest : public ::testing::TestWithParam<ExpectedEntry> {};

TEST_P(ConformanceEntryTest, MatchesTheModelDeclaration) {
  const ExpectedEntry &expected = GetParam();
  std::optional<SafetensorsFile> opened = openValid(kConformanceDir / expected.caseName / "weights.safetensors");
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  const TensorEntry *entry = file.find(expected.tensor);
  ASSERT_NE(entry, nullptr) << expected.tensor;
  EXPECT_EQ(entry->dtype, DType::F32);
  EXPECT_EQ(entry->shape, expected.shape);
  EXPECT_EQ(file.bytes(*entry).size(), static_cast<size_t>(entry->numElements()) * 4);
  llvm::Expected<std::vector<float>> values = file.toF32(*entry);
  ASSERT_TRUE(static_cast<bool>(values)) << errorMessage(values.takeError());
  ASSERT_EQ(values->size(), static_cast<size_t>(entry->numElements()));
  EXPECT_EQ(values->front(), expected.first);
  EXPECT_EQ(values->back(), expected.last);
}

// Shapes from the `param` declarations of each model.ein, with its dims
// substituted; the names inside blocks carry the namespace the loop gives them.
INSTANTIATE_TEST_SUITE_P(
    Conformance, ConformanceEntryTest,
    ::testing::Values(
        ExpectedEntry{"seed001_attention", "embed", {10, 16}, -1.2154461145401f, -0.5148446559906006f},
        ExpectedEntry{"seed003_encoder", "layers.0.mhsa.to_qvk.weight", {96, 32}, 0.05180489271879196f,
                      -0.15993282198905945f},
        ExpectedEntry{"seed003_encoder", "layers.1.linear.3.weight", {32, 64}, 0.16806480288505554f,
                      -0.04150420427322388f},
        ExpectedEntry{"seed003_encoder", "layers.1.norm_2.bias", {32}, 0.12316570430994034f,
                      0.052467044442892075f},
        ExpectedEntry{"vit_timm_tiny", "blocks.1.mlp.fc1.weight", {128, 64}, 0.05766672268509865f,
                      -0.062478207051754f},
        ExpectedEntry{"vit_timm_tiny", "blocks.0.attn.qkv.bias", {192}, 0.1554979532957077f,
                      0.1416545808315277f},
        ExpectedEntry{"vit_timm_tiny", "head.weight", {10, 64}, -0.08733225613832474f, -0.05367652699351311f},
        ExpectedEntry{"vit_timm_tiny", "cls_token", {1, 1, 64}, 0.002886607311666012f,
                      0.009101636707782745f}),
    [](const ::testing::TestParamInfo<ExpectedEntry> &info) {
      std::string name = info.param.caseName + "_" + info.param.tensor;
      for (char &c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// The `dim` sizes and the `param NAME: f32[...]` declarations of a model.ein,
// read with regular expressions: enough for the conformance models, whose
// shapes are dims, integers and products such as `3*h*dh`. A shape with
// other terms (a block's number argument `c`, `(2*ws - 1)`) is nullopt: it
// differs between the block's calls.
struct ModelDeclarations {
  std::map<std::string, int64_t> dims;
  std::vector<std::pair<std::string, std::optional<std::vector<int64_t>>>> params;
};

ModelDeclarations readDeclarations(const fs::path &model) {
  std::ifstream in(model);
  std::stringstream text;
  text << in.rdbuf();
  std::string source = text.str();
  ModelDeclarations declarations;
  std::regex dimLine(R"(^dim\s+(.*)$)"), dimBinding(R"(([A-Za-z_]\w*)\s*=\s*(\d+))");
  std::regex paramLine(R"(^\s*param\s+([\w.]+)\s*:\s*f32\[([^\]]*)\])");
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, dimLine)) {
      std::string bindings = match[1];
      for (std::sregex_iterator it(bindings.begin(), bindings.end(), dimBinding), end; it != end; ++it)
        declarations.dims[(*it)[1]] = std::stoll((*it)[2]);
    } else if (std::regex_search(line, match, paramLine)) {
      std::optional<std::vector<int64_t>> shape(std::in_place);
      std::stringstream sizes(match[2].str());
      for (std::string size; shape && std::getline(sizes, size, ',');) {
        int64_t product = 1;
        std::stringstream factors(size);
        for (std::string factor; shape && std::getline(factors, factor, '*');) {
          factor.erase(std::remove_if(factor.begin(), factor.end(), ::isspace), factor.end());
          if (std::all_of(factor.begin(), factor.end(), ::isdigit) && !factor.empty())
            product *= std::stoll(factor);
          else if (declarations.dims.count(factor))
            product *= declarations.dims.at(factor);
          else
            shape.reset();
        }
        if (shape) shape->push_back(product);
      }
      declarations.params.emplace_back(match[1], shape);
    }
  }
  return declarations;
}

std::vector<std::string> conformanceCases() {
  std::vector<std::string> cases;
  std::error_code error;
  if (!fs::is_directory(kConformanceDir, error)) return cases;
  for (const fs::directory_entry &entry : fs::directory_iterator(kConformanceDir))
    if (fs::exists(entry.path() / "weights.safetensors")) cases.push_back(entry.path().filename().string());
  std::sort(cases.begin(), cases.end());
  return cases;
}

class ConformanceFileTest : public ::testing::TestWithParam<std::string> {};

// Every declared parameter is in the file with its declared shape. A name
// declared inside a block (`p.fc1.weight`) is looked up by its suffix, since
// its full name depends on the namespace the caller passes.
TEST_P(ConformanceFileTest, HoldsEveryDeclaredParameter) {
  fs::path caseDir = kConformanceDir / GetParam();
  std::optional<SafetensorsFile> opened = openValid(caseDir / "weights.safetensors");
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  ModelDeclarations declarations = readDeclarations(caseDir / "model.ein");
  ASSERT_FALSE(declarations.params.empty());
  for (const auto &[name, shape] : declarations.params) {
    if (name.rfind("p.", 0) != 0) {
      const TensorEntry *entry = file.find(name);
      ASSERT_NE(entry, nullptr) << name;
      EXPECT_EQ(entry->dtype, DType::F32) << name;
      ASSERT_TRUE(shape) << name << ": a top-level parameter's shape is dims and integers";
      EXPECT_EQ(entry->shape, *shape) << name;
      continue;
    }
    std::string suffix = name.substr(1);  // ".fc1.weight"
    // Another parameter may share the suffix (".proj.weight" of a patch
    // embedding and of attention), so one match with the shape suffices
    // (any shape where the block's arguments give it).
    bool found = llvm::any_of(file.entries(), [&](const TensorEntry &entry) {
      return llvm::StringRef(entry.name).ends_with(suffix) && (!shape || entry.shape == *shape) &&
             entry.dtype == DType::F32;
    });
    EXPECT_TRUE(found) << "no f32 tensor of shape " << ::testing::PrintToString(shape) << " ends with " << suffix;
  }
}

// The files are dense: the entries tile the data block, and every value converts.
TEST_P(ConformanceFileTest, EntriesTileTheDataBlockAndConvert) {
  fs::path path = kConformanceDir / GetParam() / "weights.safetensors";
  std::optional<SafetensorsFile> opened = openValid(path);
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  uint64_t headerSize = 0;
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char *>(&headerSize), 8);
  uint64_t total = 0;
  for (const TensorEntry &entry : file.entries()) {
    total += entry.end - entry.begin;
    llvm::Expected<std::vector<float>> values = file.toF32(entry);
    ASSERT_TRUE(static_cast<bool>(values)) << errorMessage(values.takeError());
    for (float value : *values) ASSERT_TRUE(std::isfinite(value)) << entry.name;
  }
  EXPECT_EQ(total + 8 + headerSize, fs::file_size(path));
  EXPECT_EQ(file.metadata().at("format"), "pt");
}

INSTANTIATE_TEST_SUITE_P(Conformance, ConformanceFileTest, ::testing::ValuesIn(conformanceCases()));

TEST(ConformanceDir, HasTheSixCases) { EXPECT_GE(conformanceCases().size(), 6u); }

// ---------------------------------------------------------------------------
// Hand-built files.

using SafetensorsReaderTest = SafetensorsTempDirTest;

TEST_F(SafetensorsReaderTest, ConvertsEveryFloatEncoding) {
  std::string f16 = littleEndianBytes<uint16_t>({0x3c00, 0xc000, 0x3800, 0x0001, 0x7c00, 0x8000});
  std::string bf16 = littleEndianBytes<uint16_t>({0x3f80, 0xc0a0});
  std::string f64 = littleEndianBytes<double>({0.1, -3.0});
  std::string f32 = littleEndianBytes<float>({1.5f, -0.25f});
  size_t a = f16.size(), b = a + bf16.size(), c = b + f64.size(), d = c + f32.size();
  std::string header = R"({"__metadata__": {"format": "pt", "note": "hand-built"},)"
                       R"("half": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, )" + std::to_string(a) + R"(]},)"
                       R"("brain": {"dtype": "BF16", "shape": [2], "data_offsets": [)" + std::to_string(a) + ", " +
                       std::to_string(b) + R"(]},)"
                       R"("double": {"dtype": "F64", "shape": [2], "data_offsets": [)" + std::to_string(b) + ", " +
                       std::to_string(c) + R"(]},)"
                       R"("single": {"dtype": "F32", "shape": [1, 2], "data_offsets": [)" + std::to_string(c) + ", " +
                       std::to_string(d) + R"(]}})";
  std::optional<SafetensorsFile> opened = openValid(write("floats.safetensors", safetensorsBytes(header, f16 + bf16 + f64 + f32)));
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;

  ASSERT_EQ(file.entries().size(), 4u);
  EXPECT_EQ(file.entries()[0].name, "half");  // header order
  EXPECT_EQ(file.entries()[3].name, "single");
  EXPECT_EQ(file.metadata().at("note"), "hand-built");
  EXPECT_EQ(file.find("missing"), nullptr);

  const TensorEntry *half = file.find("half");
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->typeString(), "f16[2, 3]");
  std::vector<float> halfValues = floatsOf(file, half);
  EXPECT_EQ(halfValues, (std::vector<float>{1.0f, -2.0f, 0.5f, std::ldexp(1.0f, -24), INFINITY, -0.0f}));
  EXPECT_TRUE(std::signbit(halfValues[5]));

  EXPECT_EQ(floatsOf(file, file.find("brain")), (std::vector<float>{1.0f, -5.0f}));
  EXPECT_EQ(floatsOf(file, file.find("double")), (std::vector<float>{0.1f, -3.0f}));
  EXPECT_EQ(floatsOf(file, file.find("single")), (std::vector<float>{1.5f, -0.25f}));

  llvm::ArrayRef<uint8_t> raw = file.bytes(*file.find("brain"));
  EXPECT_EQ(std::string(raw.begin(), raw.end()), bf16);
}

TEST_F(SafetensorsReaderTest, ConvertsFloat8) {
  // e5m2 is the top byte of a binary16; e4m3fn has bias 7, max 448 and one NaN.
  std::string header = R"({"e5m2": {"dtype": "F8_E5M2", "shape": [3], "data_offsets": [0, 3]},)"
                       R"("e4m3": {"dtype": "F8_E4M3", "shape": [5], "data_offsets": [3, 8]}})";
  std::string data = "\x3c\xc0\x7c" "\x38\x7e\x01\xb0\x7f";
  std::optional<SafetensorsFile> opened = openValid(write("f8.safetensors", safetensorsBytes(header, data)));
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  EXPECT_EQ(floatsOf(file, file.find("e5m2")), (std::vector<float>{1.0f, -2.0f, INFINITY}));
  std::vector<float> e4m3 = floatsOf(file, file.find("e4m3"));
  ASSERT_EQ(e4m3.size(), 5u);
  EXPECT_EQ(std::vector<float>(e4m3.begin(), e4m3.begin() + 4), (std::vector<float>{1.0f, 448.0f, std::ldexp(1.0f, -9), -0.5f}));
  EXPECT_TRUE(std::isnan(e4m3[4]));
}

TEST_F(SafetensorsReaderTest, HalfNaNStaysNaN) {
  std::string header = R"({"n": {"dtype": "F16", "shape": [], "data_offsets": [0, 2]}})";
  std::optional<SafetensorsFile> opened = openValid(write("nan.safetensors", safetensorsBytes(header, littleEndianBytes<uint16_t>({0x7e00}))));
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  EXPECT_TRUE(std::isnan(floatsOf(file, file.find("n"))[0]));
}

TEST_F(SafetensorsReaderTest, AcceptsScalarsEmptyTensorsAndPaddedHeaders) {
  // The writer pads the header with spaces to align the data block.
  std::string header = R"({"scalar": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]},)"
                       R"("empty": {"dtype": "F32", "shape": [0, 7], "data_offsets": [8, 8]}}      )";
  std::optional<SafetensorsFile> opened = openValid(write("small.safetensors", safetensorsBytes(header, littleEndianBytes<int64_t>({-7}))));
  ASSERT_TRUE(opened);
  SafetensorsFile &file = *opened;
  const TensorEntry *scalar = file.find("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_EQ(scalar->numElements(), 1);
  EXPECT_EQ(scalar->typeString(), "i64[]");
  EXPECT_EQ(file.bytes(*scalar).size(), 8u);
  EXPECT_EQ(floatsOf(file, file.find("empty")).size(), 0u);
  EXPECT_TRUE(file.metadata().empty());

  // Integer weights are not silently turned into floats.
  llvm::Expected<std::vector<float>> converted = file.toF32(*scalar);
  ASSERT_FALSE(static_cast<bool>(converted));
  EXPECT_EQ(errorMessage(converted.takeError()),
            (dir / "small.safetensors").string() +
                ": tensor \"scalar\" is i64[], not a floating-point tensor");
}

TEST_F(SafetensorsReaderTest, MissingFileIsAnError) {
  llvm::Expected<SafetensorsFile> file = SafetensorsFile::open((dir / "absent.safetensors").string());
  ASSERT_FALSE(static_cast<bool>(file));
  EXPECT_EQ(errorMessage(file.takeError()).rfind((dir / "absent.safetensors").string() + ": cannot open: ", 0), 0u);
}

// ---------------------------------------------------------------------------
// Malformed files: each gives its own message.

using MalformedSafetensorsTest = SafetensorsTempDirTest;

std::string oneTensor(const std::string &fields) { return R"({"w": {)" + fields + "}}"; }

TEST_F(MalformedSafetensorsTest, TruncatedHeaderLength) {
  EXPECT_EQ(openError(""), "the file is 0 bytes, too short for the 8-byte header length");
  EXPECT_EQ(openError(std::string("\x10\x00\x00", 3)), "the file is 3 bytes, too short for the 8-byte header length");
}

TEST_F(MalformedSafetensorsTest, HeaderLengthPastEndOfFile) {
  std::string bytes = safetensorsBytes("{}");
  bytes[0] = 100;
  EXPECT_EQ(openError(bytes), "header length 100 runs past the end of the file (10 bytes)");
  EXPECT_EQ(openError(std::string(8, '\xff') + "{}"),
            "header length 18446744073709551615 runs past the end of the file (10 bytes)");
}

TEST_F(MalformedSafetensorsTest, HeaderIsNotJson) {
  std::string message = openError(safetensorsBytes(R"({"w": {"dtype": )"));
  EXPECT_EQ(message.rfind("header is not valid JSON: ", 0), 0u) << message;
  EXPECT_NE(message.find("parse error"), std::string::npos) << message;
}

TEST_F(MalformedSafetensorsTest, HeaderIsNotAnObject) {
  EXPECT_EQ(openError(safetensorsBytes("[1, 2]")), "header is JSON array, not an object");
  EXPECT_EQ(openError(safetensorsBytes(R"("weights")")), "header is JSON string, not an object");
}

TEST_F(MalformedSafetensorsTest, DuplicateName) {
  std::string entry = R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  EXPECT_EQ(openError(safetensorsBytes(R"({"w": )" + entry + R"(, "w": )" + entry + "}", std::string(4, '\0'))),
            "header names \"w\" twice");
}

TEST_F(MalformedSafetensorsTest, UnknownDType) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F9", "shape": [1], "data_offsets": [0, 4])"),
                                       std::string(4, '\0'))),
            "tensor \"w\" has unknown dtype \"F9\"");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "f32", "shape": [1], "data_offsets": [0, 4])"),
                                       std::string(4, '\0'))),
            "tensor \"w\" has unknown dtype \"f32\"");
}

TEST_F(MalformedSafetensorsTest, MissingOrMistypedFields) {
  EXPECT_EQ(openError(safetensorsBytes(R"({"w": [1]})")), "tensor \"w\" is described by array, not an object");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("shape": [1], "data_offsets": [0, 4])"))),
            "tensor \"w\" has no \"dtype\" string");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "data_offsets": [0, 4])"))),
            "tensor \"w\" has no \"shape\" array");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [1.5], "data_offsets": [0, 4])"))),
            "tensor \"w\" has a non-integer size 1.5 in its shape [1.5]");
  std::string needsOffsets = "tensor \"w\" needs \"data_offsets\" [begin, end] of two non-negative integers";
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [1])"))), needsOffsets);
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8])"))),
            needsOffsets);
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [-4, 0])"))),
            needsOffsets);
}

TEST_F(MalformedSafetensorsTest, NegativeShape) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0])"))),
            "tensor \"w\" has size -3 in its shape [2,-3] (sizes must be in [0, 2^63))");
  EXPECT_EQ(openError(safetensorsBytes(
                oneTensor(R"("dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 0])"))),
            "tensor \"w\" has size 9223372036854775808 in its shape [9223372036854775808] "
            "(sizes must be in [0, 2^63))");
}

TEST_F(MalformedSafetensorsTest, OffsetsPastTheEnd) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [16], "data_offsets": [0, 64])"),
                                       std::string(16, '\0'))),
            "tensor \"w\" has data_offsets [0, 64] past the end of the 16-byte data block");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [8, 4])"),
                                       std::string(16, '\0'))),
            "tensor \"w\" has data_offsets [8, 4] whose begin is past its end");
}

TEST_F(MalformedSafetensorsTest, SizeMismatch) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12])"),
                                       std::string(16, '\0'))),
            "tensor \"w\" has data_offsets [0, 12] but f32[2, 2] needs 16 bytes");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "BF16", "shape": [3], "data_offsets": [0, 4])"),
                                       std::string(16, '\0'))),
            "tensor \"w\" has data_offsets [0, 4] but bf16[3] needs 6 bytes");
}

TEST_F(MalformedSafetensorsTest, OverflowingShape) {
  // 2^62 * 8 elements * 4 bytes wraps to 0, which the offsets [0, 0] would match.
  EXPECT_EQ(openError(safetensorsBytes(
                oneTensor(R"("dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 0])"))),
            "tensor \"w\" has shape [4611686018427387904, 8] with more than 2^40 elements (the product of its "
            "nonzero sizes)");
}

// Regression (issue 17): an empty tensor whose other sizes multiply beyond 64
// bits needs 0 bytes, so the byte check passed it, and its element count
// overflowed (undefined behaviour) wherever it was computed.
TEST_F(MalformedSafetensorsTest, EmptyShapeWhoseProductOverflows) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(
                R"("dtype": "F32", "shape": [0, 4294967296, 4294967296], "data_offsets": [0, 0])"))),
            "tensor \"w\" has shape [0, 4294967296, 4294967296] with more than 2^40 elements (the product of its "
            "nonzero sizes)");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(
                R"("dtype": "BOOL", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0])"))),
            "tensor \"w\" has shape [4294967296, 4294967296, 0] with more than 2^40 elements (the product of its "
            "nonzero sizes)");
}

// The limit itself: 2^40 elements pass the count (and fail only on the
// bytes, which this file lacks), one more does not.
TEST_F(MalformedSafetensorsTest, ElementLimit) {
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "U8", "shape": [1048576, 1048576], "data_offsets": [0, 0])"))),
            "tensor \"w\" has data_offsets [0, 0] but u8[1048576, 1048576] needs 1099511627776 bytes");
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "U8", "shape": [1048576, 1048577], "data_offsets": [0, 0])"))),
            "tensor \"w\" has shape [1048576, 1048577] with more than 2^40 elements (the product of its nonzero "
            "sizes)");
  // An empty tensor within the limit is fine.
  EXPECT_EQ(openError(safetensorsBytes(oneTensor(R"("dtype": "F32", "shape": [0, 1048576], "data_offsets": [0, 0])"))),
            "<opened without error>");
}

TEST_F(MalformedSafetensorsTest, BadMetadata) {
  EXPECT_EQ(openError(safetensorsBytes(R"({"__metadata__": {"format": 1}})")),
            "\"__metadata__\" entry \"format\" is not a string");
  EXPECT_EQ(openError(safetensorsBytes(R"({"__metadata__": "pt"})")), "\"__metadata__\" is string, not an object");
}

// Every prefix of a real file and thousands of corrupted copies either open
// or give an error; none may crash or read outside the file (run under ASan
// to check the latter).
TEST_F(MalformedSafetensorsTest, TruncatedAndCorruptedFilesNeverCrash) {
  std::ifstream in(kConformanceDir / "seed001_attention" / "weights.safetensors", std::ios::binary);
  std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(original.size(), 300u);

  auto tryOpen = [](const std::string &bytes) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(bytes, "corrupt");
    llvm::Expected<SafetensorsFile> file = SafetensorsFile::fromBuffer(std::move(buffer), "corrupt.safetensors");
    if (!file) {
      EXPECT_EQ(errorMessage(file.takeError()).rfind("corrupt.safetensors: ", 0), 0u);
      return false;
    }
    for (const TensorEntry &entry : file->entries()) {
      EXPECT_LE(entry.end, bytes.size());
      if (ein::weights::isFloatingPoint(entry.dtype)) llvm::consumeError(file->toF32(entry).takeError());
    }
    return true;
  };

  int opened = 0;
  for (size_t length = 0; length < original.size(); ++length) opened += tryOpen(original.substr(0, length));
  EXPECT_EQ(opened, 0) << "a truncated file lost its data block yet opened";
  EXPECT_TRUE(tryOpen(original));

  std::mt19937 random(1234);
  uint64_t headerEnd = 8 + static_cast<uint8_t>(original[0]) + 256 * static_cast<uint8_t>(original[1]);
  std::uniform_int_distribution<size_t> position(0, headerEnd - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 5000; ++trial) {
    std::string corrupted = original;
    for (int flips = 0; flips < 3; ++flips) corrupted[position(random)] = static_cast<char>(byte(random));
    tryOpen(corrupted);
  }
}

// Tensors in the caller's memory (the Python package's arrays) are read in
// place and checked as a file's entries are.
TEST(SafetensorsInMemory, ReadsTensorsWhereTheyLie) {
  std::vector<float> weight{1.0f, -2.0f, 3.5f, 0.25f, 8.0f, -0.5f};
  std::vector<uint16_t> half{0x3c00, 0xc000};  // f16 1, -2
  auto bytesOf = [](const auto &values) {
    return llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(values.data()),
                                   values.size() * sizeof(values[0]));
  };
  llvm::Expected<SafetensorsFile> file = SafetensorsFile::fromTensors(
      {{"w", DType::F32, {2, 3}, bytesOf(weight)}, {"h", DType::F16, {2}, bytesOf(half)}}, "arrays");
  ASSERT_TRUE(static_cast<bool>(file)) << errorMessage(file.takeError());
  ASSERT_EQ(file->entries().size(), 2u);
  const TensorEntry *w = file->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->typeString(), "f32[2, 3]");
  EXPECT_EQ(file->bytes(*w).data(), reinterpret_cast<const uint8_t *>(weight.data())) << "copied, not read in place";
  EXPECT_EQ(floatsOf(*file, w), weight);
  EXPECT_EQ(floatsOf(*file, file->find("h")), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(file->find("h")->begin, 24u) << "offsets as if laid end to end";
}

TEST(SafetensorsInMemory, RefusesWhatAFileCouldNotHold) {
  std::vector<float> four(4, 1.0f);
  llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>(four.data()), 16);
  auto refused = [&](std::vector<ein::weights::TensorInMemory> tensors) {
    llvm::Expected<SafetensorsFile> file = SafetensorsFile::fromTensors(std::move(tensors), "arrays");
    EXPECT_FALSE(static_cast<bool>(file));
    return file ? std::string() : errorMessage(file.takeError());
  };
  EXPECT_EQ(refused({{"a", DType::F32, {4}, bytes}, {"a", DType::F32, {4}, bytes}}),
            "arrays: two tensors are named \"a\"");
  EXPECT_EQ(refused({{"a", DType::F32, {5}, bytes}}), "arrays: tensor \"a\" holds 16 bytes but f32[5] needs 20");
  EXPECT_EQ(refused({{"a", DType::F32, {-4}, bytes}}), "arrays: tensor \"a\" has size -4 in its shape [-4]");
  EXPECT_NE(refused({{"a", DType::F32, {1 << 30, 1 << 30, 4}, bytes}}).find("more than 2^40 elements"),
            std::string::npos);
  EXPECT_EQ(refused({{"__metadata__", DType::F32, {4}, bytes}}),
            "arrays: tensor \"__metadata__\" has the name of the format's metadata entry");
}

}  // namespace
