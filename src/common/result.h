// The one way a fallible function below the programs says that it failed: it returns a
// Result<T> — the value, or a one-line error that says what was wrong, ready to print
// ("FLOWSPEC ...: frame rate must be ...", "DCCP is not supported by this kernel").
//
//   Result<FlowSpec> parse(...);             return spec;  /  return Failure{"..."};
//   if (auto r = parse(...)) use(*r); else report(r.error());
//   Result<void> check(...);                 return {};    /  return Failure{"..."};
//
// Exceptions carry such a line only where a return value cannot travel: out of the middle
// of an operation that is abandoned as a whole (writing a file: FileError; socket set-up:
// TransportError) and up through the coroutines of the control layer (ControlError,
// ActiveError) to main(), which prints the line and exits non-zero. No empty-string-means-
// success, no bool& out-parameters, no errno left for the caller to read.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace npm {

// What a failed function returns (converts to any Result<T>).
struct Failure {
  std::string error;
};

template <class T>
class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}                  // NOLINT: a value is a success
  Result(Failure failure) : error_(std::move(failure.error)) {}  // NOLINT: so is a Failure

  explicit operator bool() const { return value_.has_value(); }
  bool ok() const { return value_.has_value(); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  // The error line (empty on success).
  const std::string& error() const { return error_; }

private:
  std::optional<T> value_;
  std::string error_;
};

template <>
class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Failure failure) : error_(std::move(failure.error)), failed_(true) {}  // NOLINT

  explicit operator bool() const { return !failed_; }
  bool ok() const { return !failed_; }
  const std::string& error() const { return error_; }

private:
  std::string error_;
  bool failed_ = false;
};

}  // namespace npm
