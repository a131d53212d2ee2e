// libFuzzer target: the .npy reader on arbitrary bytes. A file either fails
// with a Status or gives an array whose data holds exactly its elements;
// converting and re-serialising it must then round-trip.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ein/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto array = ein::npy::parse(std::span<const uint8_t>(data, size), "fuzz.npy");
  if (!array.ok()) return 0;
  const ein::npy::Array &parsed = array.value();
  int64_t count = parsed.numElements();
  if (count < 0 || parsed.data.size() != static_cast<size_t>(count) * ein::elementSize(parsed.type))
    __builtin_trap();
  if (ein::npy::toDouble(parsed).size() != static_cast<size_t>(count)) __builtin_trap();
  std::vector<uint8_t> written = ein::npy::serialize(parsed);
  auto again = ein::npy::parse(written, "round-trip.npy");
  if (!again.ok() || again.value().shape != parsed.shape || again.value().data != parsed.data) __builtin_trap();
  return 0;
}
