#include "ein/status.hpp"

namespace ein {

const char *statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::Ok: return "ok";
    case StatusCode::InvalidArgument: return "invalid argument";
    case StatusCode::InvalidArtifact: return "invalid artifact";
    case StatusCode::OutOfRange: return "out of range";
    case StatusCode::NotFound: return "not found";
    case StatusCode::Unimplemented: return "unimplemented";
    case StatusCode::Internal: return "internal error";
    case StatusCode::IoError: return "I/O error";
    case StatusCode::ResourceExhausted: return "resource exhausted";
    case StatusCode::Busy: return "busy";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (ok()) return "ok";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

}  // namespace ein
