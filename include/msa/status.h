// Status: how every library entry point reports failure. The library never exits or aborts on user input;
// it returns a Status whose message names the field, the value and the rule that was broken.
#ifndef MSA_STATUS_H_
#define MSA_STATUS_H_

#include <string>
#include <utility>

namespace msa {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // the caller's config, shapes or data break a rule
  kUnsupported,      // valid, but this backend or precision cannot run it
  kOutOfMemory,
  kDeviceError,
  kIoError,  // a file could not be opened, read or written
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }
inline Status Unsupported(std::string message) { return Status(StatusCode::kUnsupported, std::move(message)); }
inline Status IoError(std::string message) { return Status(StatusCode::kIoError, std::move(message)); }

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define MSA_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::msa::Status msa_status_ = (expr);        \
    if (!msa_status_.ok()) return msa_status_; \
  } while (false)

}  // namespace msa

#endif  // MSA_STATUS_H_
