// A strict reader of the .npy format
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// magic, version, header length, a Python-literal dict with exactly 'descr',
// 'fortran_order' and 'shape', and data whose length the shape fixes.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string_view>

#include "ein/npy.hpp"
#include "file_kind.hpp"
#include "npy_descr.hpp"
#include "util/limits.hpp"

namespace ein::npy {
namespace {

constexpr size_t kMaxRank = 64;  // NumPy's own limit
constexpr unsigned __int128 kMaxBytes = uint64_t{1} << 62;

// Parses the header dict, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Status parse(std::string &descr, bool &fortranOrder, std::vector<int64_t> &shape) {
    skipSpaces();
    if (!consume('{')) return error("the header is not a dict");
    std::set<std::string> seen;
    while (true) {
      skipSpaces();
      if (consume('}')) break;
      std::string key;
      if (!quoted(key)) return error("expected a quoted key");
      if (!seen.insert(key).second) return error("key '" + key + "' appears twice");
      skipSpaces();
      if (!consume(':')) return error("expected ':' after '" + key + "'");
      skipSpaces();
      if (key == "descr") {
        if (!quoted(descr)) return error("'descr' must be a string (structured dtypes are not supported)");
      } else if (key == "fortran_order") {
        if (consumeWord("True")) fortranOrder = true;
        else if (consumeWord("False")) fortranOrder = false;
        else return error("'fortran_order' must be True or False");
      } else if (key == "shape") {
        Status status = tuple(shape);
        if (!status.ok()) return status;
      } else {
        return error("unexpected key '" + key + "'");
      }
      skipSpaces();
      if (consume(',')) continue;
      skipSpaces();
      if (consume('}')) break;
      return error("expected ',' or '}' after '" + key + "'");
    }
    for (const char *key : {"descr", "fortran_order", "shape"})
      if (!seen.count(key)) return error(std::string("the header lacks '") + key + "'");
    // Padding: spaces, then the newline that ends every header.
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
    if (at_ + 1 != text_.size() || text_[at_] != '\n') return error("the header must end with spaces and a newline");
    return Status();
  }

 private:
  Status error(const std::string &what) const {
    return Status(StatusCode::InvalidArgument, "malformed header at byte " + std::to_string(at_) + ": " + what);
  }
  void skipSpaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t')) ++at_;
  }
  bool consume(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool quoted(std::string &out) {
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return false;
    char quote = text_[at_];
    size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return false;
    out = std::string(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return true;
  }
  // "()", "(5,)", "(2, 3)" or "(2, 3,)": non-negative integers.
  Status tuple(std::vector<int64_t> &shape) {
    if (!consume('(')) return error("'shape' must be a tuple");
    shape.clear();
    skipSpaces();
    if (consume(')')) return Status();
    while (true) {
      skipSpaces();
      size_t start = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      if (at_ == start) return error("a shape entry must be a non-negative integer");
      if (at_ - start > 18) return error("a shape entry is too large");
      int64_t size = 0;
      for (size_t i = start; i < at_; ++i) size = size * 10 + (text_[i] - '0');
      if (shape.size() == kMaxRank) return error("the shape has more than 64 axes");
      shape.push_back(size);
      skipSpaces();
      bool comma = consume(',');
      skipSpaces();
      if (consume(')')) {
        if (shape.size() == 1 && !comma) return error("a one-element shape is written '(n,)'");
        return Status();
      }
      if (!comma) return error("expected ',' or ')' in the shape");
    }
  }

  std::string_view text_;
  size_t at_ = 0;
};

Status elementTypeOf(const std::string &descr, ElementType &type) {
  // NumPy writes one-byte types as '|i1' but accepts '<i1'.
  const std::string canonical = descr.size() == 3 && descr[2] == '1' && descr[0] == '<' ? "|" + descr.substr(1) : descr;
  if (std::optional<ElementType> known = typeOfDescr(canonical)) {
    type = *known;
    return Status();
  }
  if (!descr.empty() && descr[0] == '>')
    return Status(StatusCode::Unimplemented, "big-endian data ('" + descr + "') is not supported; save it as '<" +
                                                 descr.substr(1) + "' (arr.astype(arr.dtype.newbyteorder('<')))");
  return Status(StatusCode::Unimplemented,
                "dtype '" + descr + "' is not supported (supported: " + supportedDescrs() + ")");
}

uint32_t readLittleEndian(const uint8_t *bytes, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i) value |= uint32_t{bytes[i]} << (8 * i);
  return value;
}

}  // namespace

StatusOr<Array> parse(std::span<const uint8_t> bytes, const std::string &name) {
  auto fail = [&](const Status &status) { return Status(status.code(), name + ": " + status.message()); };
  auto malformed = [&](const std::string &why) {
    return Status(StatusCode::InvalidArgument, name + ": not a valid .npy file: " + why);
  };
  static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 6 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    // A file of another kind says what it is (an artifact, a model's text).
    const FileKind kind = sniffFileKind(bytes.first(std::min<size_t>(bytes.size(), 4096)));
    if (kind != FileKind::Unknown && !bytes.empty())
      return Status(StatusCode::InvalidArgument,
                    name + ": not a .npy file: the file is " + describeFileKind(kind) + " (save arrays with numpy.save)");
    return malformed("it lacks the \\x93NUMPY magic");
  }
  if (bytes.size() < 10) return malformed("the file ends inside the preamble");
  uint8_t major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    return malformed("unknown format version " + std::to_string(major) + "." + std::to_string(minor));
  // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one.
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t start = 8 + lengthBytes;
  if (bytes.size() < start) return malformed("the file ends inside the header length");
  size_t headerLength = readLittleEndian(bytes.data() + 8, lengthBytes);
  if (headerLength > bytes.size() - start)
    return malformed("the header claims " + std::to_string(headerLength) + " bytes but only " +
                     std::to_string(bytes.size() - start) + " follow");
  std::string_view header(reinterpret_cast<const char *>(bytes.data() + start), headerLength);

  std::string descr;
  bool fortranOrder = false;
  Array array;
  Status status = HeaderParser(header).parse(descr, fortranOrder, array.shape);
  if (!status.ok()) return malformed(status.message());
  status = elementTypeOf(descr, array.type);
  if (!status.ok()) return fail(status);
  if (fortranOrder)
    return fail(Status(StatusCode::Unimplemented,
                       "Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)"));

  // The runtime's element limit, zeros aside: an empty array may not carry
  // sizes whose product overflows wherever its element count is computed.
  if (!detail::checkedElementCount(array.shape)) return malformed("the shape has more than 2^40 elements");
  unsigned __int128 dataBytes = ein::elementSize(array.type);
  for (int64_t size : array.shape) {
    dataBytes *= static_cast<uint64_t>(size);
    if (dataBytes > kMaxBytes) return malformed("the shape is too large");
  }
  size_t dataStart = start + headerLength;
  if (dataBytes != bytes.size() - dataStart) {
    std::string shape;
    for (int64_t size : array.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
    return malformed("shape (" + shape + ") of " + numpyName(array.type) + " needs " +
                     std::to_string(static_cast<uint64_t>(dataBytes)) + " bytes of data, but the file has " +
                     std::to_string(bytes.size() - dataStart));
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart), bytes.end());
  return array;
}

StatusOr<Array> read(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(StatusCode::NotFound, path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) return Status(StatusCode::IoError, path + ": read failed");
  return parse(bytes, path);
}

}  // namespace ein::npy
