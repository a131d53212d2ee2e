// The runtime's error type. Every fallible call returns a Status or a
// StatusOr<T>; nothing throws across the API.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace ein {

enum class StatusCode {
  Ok = 0,
  InvalidArgument,  // the caller passed something wrong (input shape, option, name)
  InvalidArtifact,  // the artifact is malformed or inconsistent
  OutOfRange,       // a value read at run time is outside its allowed range (e.g. a gather id)
  NotFound,         // no input, output or file of that name
  Unimplemented,    // valid, but not supported by this build (e.g. the CUDA device)
  Internal,         // a bug in the runtime
  IoError,          // the file system failed
  ResourceExhausted,  // memory could not be allocated
  Busy,               // a single-threaded object (a Session) was called from two threads at once
};

// "invalid argument", "invalid artifact", ...
const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }
  // "invalid artifact: step 3 (gemm at model.ein:4:7): ..."
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

inline Status okStatus() { return Status(); }

// A value or the error that prevented it.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "a StatusOr needs a value or an error");
    if (status_.ok()) status_ = Status(StatusCode::Internal, "StatusOr built from an ok Status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }

  // Only valid when ok().
  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ein
