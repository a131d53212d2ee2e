// The .npy reader against valid files of every supported type and version,
// and against malformed ones; the writer round trip; the comparison helper.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "artifact_builder.hpp"
#include "ein/npy.hpp"

namespace ein::testing {
namespace {

// A file as NumPy writes it: magic, version, header length, header (padded
// with spaces to `align`, ending in '\n'), data.
std::vector<uint8_t> npyFile(const std::string &dict, const std::vector<uint8_t> &data, uint8_t major = 1,
                             size_t align = 64) {
  size_t lengthBytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + lengthBytes + header.size() + 1) % align != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  for (size_t i = 0; i < lengthBytes; ++i) bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

StatusOr<npy::Array> parse(const std::vector<uint8_t> &bytes) { return npy::parse(bytes, "test.npy"); }

void expectMalformed(const std::vector<uint8_t> &bytes, const std::string &fragment) {
  auto array = parse(bytes);
  ASSERT_FALSE(array.ok()) << "accepted; expected \"" << fragment << "\"";
  EXPECT_NE(array.status().message().find(fragment), std::string::npos) << array.status().message();
  EXPECT_EQ(array.status().message().rfind("test.npy: ", 0), 0u) << array.status().message();
}

TEST(Npy, ReadsEverySupportedTypeAndVersion) {
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  auto array = parse(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytesOf(f32)));
  ASSERT_TRUE(array.ok()) << array.status().toString();
  EXPECT_EQ(array->type, npy::ElementType::F32);
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(npy::toDouble(array.value()), (std::vector<double>{1.5, -2, 3.25, 0, 7, -0.5}));

  std::vector<double> f64 = {0.1, 1e300};
  for (uint8_t major : {1, 2, 3}) {
    auto wide = parse(npyFile("{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2,)}", bytesOf(f64), major));
    ASSERT_TRUE(wide.ok()) << "version " << int(major) << ": " << wide.status().toString();
    EXPECT_EQ(npy::toDouble(wide.value()), f64);
  }
  std::vector<int64_t> i64 = {-1, 1LL << 40};
  EXPECT_EQ(npy::toDouble(parse(npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", bytesOf(i64)))
                              .value()),
            (std::vector<double>{-1, double(1LL << 40)}));
  std::vector<int32_t> i32 = {7};
  EXPECT_EQ(parse(npyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", bytesOf(i32)))->type,
            npy::ElementType::I32);
  auto flags = parse(npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", {1, 0, 1}));
  EXPECT_EQ(npy::toDouble(flags.value()), (std::vector<double>{1, 0, 1}));
  // float16: 1.0, -2.0, +inf, smallest subnormal.
  std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x7c00, 0x0001};
  auto half = parse(npyFile("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", bytesOf(halves)));
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(npy::toDouble(half.value()), (std::vector<double>{1.0, -2.0, INFINITY, std::ldexp(1.0, -24)}));
  // A scalar and an empty array; headers aligned to 16 like old NumPy.
  auto scalar = parse(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", bytesOf(std::vector<float>{4}), 1, 16));
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  auto empty = parse(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", {}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->numElements(), 0);
}

TEST(Npy, RejectsMalformedFiles) {
  const std::vector<uint8_t> four(4, 0);
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  expectMalformed({0x80, 'N', 'U', 'M', 'P', 'Y'}, "lacks the \\x93NUMPY magic");
  // A file of another kind is named as such (a model's text given as an input).
  expectMalformed({'d', 'i', 'm', ' ', 'n', ' ', '=', ' ', '4', '\n'},
                  "not a .npy file: the file is a text file (save arrays with numpy.save)");
  expectMalformed({0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 10}, "ends inside the preamble");
  std::vector<uint8_t> v4 = npyFile(good, four);
  v4[6] = 4;
  expectMalformed(v4, "unknown format version 4.0");
  std::vector<uint8_t> longHeader = npyFile(good, four);
  longHeader[8] = 0xff;
  longHeader[9] = 0xff;
  expectMalformed(longHeader, "the header claims 65535 bytes but only");
  expectMalformed(npyFile("{'descr': '<f4', 'shape': (1,), }", four), "the header lacks 'fortran_order'");
  expectMalformed(npyFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", four),
                  "key 'descr' appears twice");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", four),
                  "unexpected key 'extra'");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", four),
                  "'fortran_order' must be True or False");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", four),
                  "a shape entry must be a non-negative integer");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1), }", four),
                  "a one-element shape is written '(n,)'");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }", four),
                  "expected ',' or ')' in the shape");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", four),
                  "the shape has more than 2^40 elements");
  // Regression (issue 17): an empty array whose other sizes multiply beyond
  // 64 bits needs no data, so the byte check passed it, and its element
  // count overflowed. Zeros aside, the element limit holds.
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 999999999999999999, 999999999999999999), }", {}),
                  "the shape has more than 2^40 elements");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048577, 0), }", {}),
                  "the shape has more than 2^40 elements");
  expectMalformed(npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", four),
                  "structured dtypes are not supported");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four),
                  "shape (2) of float32 needs 8 bytes of data, but the file has 4");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(5, 0)),
                  "needs 4 bytes of data, but the file has 5");
  std::vector<uint8_t> noNewline = npyFile(good, four);
  noNewline[noNewline.size() - 5] = ' ';
  expectMalformed(noNewline, "the header must end with spaces and a newline");
  expectMalformed(npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", four),
                  "Fortran-order arrays are not supported");
  expectMalformed(npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", four),
                  "big-endian data ('>f4') is not supported");
  expectMalformed(npyFile("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(8, 0)),
                  "dtype '<c8' is not supported");
}

TEST(Npy, EveryTruncationIsRejected) {
  std::vector<float> values(5, 1.0f);
  std::vector<uint8_t> file = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", bytesOf(values));
  for (size_t length = 0; length < file.size(); ++length)
    EXPECT_FALSE(npy::parse(std::span<const uint8_t>(file.data(), length), "cut.npy").ok()) << length;
  EXPECT_TRUE(parse(file).ok());
}

TEST(Npy, WriteThenReadRoundTripsEveryType) {
  std::string dir = temporaryDirectory("npy");
  std::vector<npy::Array> arrays = {
      {npy::ElementType::F32, {2, 3}, bytesOf(std::vector<float>{1, 2, 3, 4, 5, 6})},
      {npy::ElementType::F64, {1}, bytesOf(std::vector<double>{0.1})},
      {npy::ElementType::I32, {}, bytesOf(std::vector<int32_t>{-7})},
      {npy::ElementType::I64, {0}, {}},
      {npy::ElementType::Bool, {2, 1, 2}, {1, 0, 0, 1}},
      {npy::ElementType::F16, {1}, bytesOf(std::vector<uint16_t>{0x3c00})},
  };
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string path = dir + "/a" + std::to_string(i) + ".npy";
    ASSERT_TRUE(npy::write(path, arrays[i]).ok());
    auto read = npy::read(path);
    ASSERT_TRUE(read.ok()) << read.status().toString();
    EXPECT_EQ(read->type, arrays[i].type);
    EXPECT_EQ(read->shape, arrays[i].shape);
    EXPECT_EQ(read->data, arrays[i].data);
  }
  // NumPy aligns the data to 64 bytes; so does the writer.
  std::vector<uint8_t> bytes = npy::serialize(arrays[0]);
  EXPECT_EQ((bytes.size() - arrays[0].data.size()) % 64, 0u);
  EXPECT_FALSE(npy::write(dir + "/bad.npy", {npy::ElementType::F32, {3}, {0, 0, 0, 0}}).ok());
  EXPECT_EQ(npy::read(dir + "/missing.npy").status().code(), StatusCode::NotFound);
}

TEST(Npy, ReadsEveryIntegerWidth) {
  // NumPy's own headers for the integer types a tokenizer or a user may save.
  const std::string dir = ::testing::TempDir();
  for (auto [type, value] : {std::pair{npy::ElementType::I8, 1}, {npy::ElementType::I16, 2}, {npy::ElementType::U8, 3},
                             {npy::ElementType::U16, 4}, {npy::ElementType::U32, 5}, {npy::ElementType::U64, 6}}) {
    npy::Array array{type, {1}, std::vector<uint8_t>(ein::elementSize(type), 0)};
    array.data[0] = static_cast<uint8_t>(value);
    ASSERT_TRUE(npy::write(dir + "/ints.npy", array).ok()) << npy::numpyName(type);
    auto read = npy::read(dir + "/ints.npy");
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_EQ(read->type, type);
    EXPECT_EQ(npy::toDouble(*read), std::vector<double>{static_cast<double>(value)});
  }
  // bf16 has no .npy type: writing one is an error, not a file NumPy misreads.
  EXPECT_FALSE(npy::write(dir + "/bf16.npy", {npy::ElementType::BF16, {1}, {0, 0}}).ok());
}

TEST(Npy, CompareReportsTheWorstElement) {
  npy::Array expected{npy::ElementType::F64, {2, 3}, bytesOf(std::vector<double>{1, 2, 3, 4, 5, NAN})};
  npy::Array close{npy::ElementType::F32, {2, 3}, bytesOf(std::vector<float>{1, 2.0001f, 3, 4, 5, NAN})};
  npy::Comparison same = npy::compare(close, expected, 1e-3, 1e-3);
  EXPECT_TRUE(same.allClose);
  EXPECT_EQ(same.mismatches, 0u);

  npy::Array far{npy::ElementType::F32, {2, 3}, bytesOf(std::vector<float>{1, 2.5f, 3, 4, 9, 0})};
  npy::Comparison result = npy::compare(far, expected, 0.1, 0.0);
  EXPECT_FALSE(result.allClose);
  EXPECT_EQ(result.mismatches, 3u);
  EXPECT_EQ(result.worstIndex, 5u);  // NaN expected, 0 got: infinitely far
  EXPECT_EQ(result.worstPosition, (std::vector<int64_t>{1, 2}));
  EXPECT_NE(result.describe().find("element [1, 2] (flat 5)"), std::string::npos) << result.describe();
  EXPECT_NE(result.describe().find("3 of 6 elements differ"), std::string::npos) << result.describe();

  npy::Array finite{npy::ElementType::F32, {2, 3}, bytesOf(std::vector<float>{1, 2.5f, 3, 4, 9, NAN})};
  npy::Comparison worst = npy::compare(finite, expected, 0.1, 0.0);
  EXPECT_EQ(worst.worstIndex, 4u);  // |9 - 5| beats |2.5 - 2|
  EXPECT_EQ(worst.worstGot, 9.0);

  npy::Array reshaped{npy::ElementType::F32, {3, 2}, close.data};
  npy::Comparison shapes = npy::compare(reshaped, expected, 1, 1);
  EXPECT_FALSE(shapes.shapesMatch);
  EXPECT_EQ(shapes.describe(), "shape [3, 2] differs from the expected [2, 3]");
}

}  // namespace
}  // namespace ein::testing
