#include "loader/artifact_bytes.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/aligned_buffer.hpp"

namespace ein::detail {
namespace {

Status ioError(const std::string &path, const char *what) {
  return Status(StatusCode::IoError, path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<ArtifactBytes> mapFileReadOnly(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status(StatusCode::NotFound, path + ": no such file");
    return ioError(path, "cannot open");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    Status status = ioError(path, "cannot stat");
    ::close(fd);
    return status;
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status(StatusCode::IoError, path + ": not a regular file");
  }
  auto size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return Status(StatusCode::InvalidArtifact, path + ": the file is empty");
  }
  // Read-only and private: the weights are used in place and can never be
  // written through this mapping.
  void *address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  Status mapError = address == MAP_FAILED ? ioError(path, "cannot map") : Status();
  ::close(fd);  // the mapping keeps its own reference to the file
  if (!mapError.ok()) return mapError;
  ArtifactBytes bytes;
  bytes.owner = std::shared_ptr<const void>(address, [size](const void *mapped) {
    ::munmap(const_cast<void *>(mapped), size);
  });
  bytes.data = static_cast<const std::byte *>(address);
  bytes.size = size;
  return bytes;
}

void populateMapping(const ArtifactBytes &bytes) {
#ifdef MADV_POPULATE_READ
  ::madvise(const_cast<std::byte *>(bytes.data), bytes.size, MADV_POPULATE_READ);
#endif
}

StatusOr<ArtifactBytes> copyToAlignedMemory(const void *data, size_t size) {
  if (!data && size) return Status(StatusCode::InvalidArgument, "no artifact bytes (null pointer)");
  StatusOr<AlignedBuffer> buffer = AlignedBuffer::allocate(size, "the artifact");
  if (!buffer.ok()) return buffer.status();
  if (size) std::memcpy(buffer->data(), data, size);
  ArtifactBytes bytes;
  bytes.data = buffer->data();
  bytes.size = size;
  bytes.owner = std::make_shared<AlignedBuffer>(std::move(buffer).value());
  return bytes;
}

}  // namespace ein::detail
