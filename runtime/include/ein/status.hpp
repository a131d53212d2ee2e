// The runtime's error type: every fallible call returns a Status or a
// StatusOr<T>; nothing throws across the API.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace ein {

enum class StatusCode { Ok, InvalidArgument, InvalidArtifact, OutOfRange, NotFound, Unimplemented, IoError, Internal };

const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return {}; }
  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
  T &value() { return *value_; }
  const T &value() const { return *value_; }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ein
