// libFuzzer target: the safetensors reader on arbitrary bytes. A file either
// fails with a message or every entry it lists can be read in full.
#include <cstddef>
#include <cstdint>

#include "compiler/weights/safetensors.hpp"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(reinterpret_cast<const char *>(data), size),
                                                     "fuzz.safetensors");
  auto file = ein::weights::SafetensorsFile::fromBuffer(std::move(buffer), "fuzz.safetensors");
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const ein::weights::TensorEntry &entry : file->entries()) {
    // Only the entries' own bytes are touched: every entry fits the data block.
    llvm::ArrayRef<uint8_t> bytes = file->bytes(entry);
    if (bytes.size() != entry.end - entry.begin) __builtin_trap();
    if (ein::weights::isFloatingPoint(entry.dtype)) {
      auto values = file->toF32(entry);
      if (!values) llvm::consumeError(values.takeError());
      else if (values->size() != static_cast<size_t>(entry.numElements())) __builtin_trap();
    }
    (void)entry.numElements();
    (void)entry.typeString();
  }
  return 0;
}
