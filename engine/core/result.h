// Result<T>: a value or an error message that names the file, node or line at fault.
//
//   Result<Graph> r = lower(doc);
//   if (!r) { std::cerr << r.error().message << "\n"; return 1; }
//   Graph& g = *r;
//
// No exception crosses a layer: functions that can fail on user input return this.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "engine/core/check.h"

namespace mls {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT
  explicit operator bool() const { return v_.index() == 0; }
  bool ok() const { return v_.index() == 0; }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& value() {
    MLS_CHECK(ok(), "Result::value() on an error");
    return std::get<0>(v_);
  }
  const T& value() const {
    MLS_CHECK(ok(), "Result::value() on an error");
    return std::get<0>(v_);
  }
  const Error& error() const {
    MLS_CHECK(!ok(), "Result::error() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), failed_(true) {}  // NOLINT
  explicit operator bool() const { return !failed_; }
  bool ok() const { return !failed_; }
  const Error& error() const {
    MLS_CHECK(failed_, "Result<void>::error() on success");
    return err_;
  }

 private:
  Error err_;
  bool failed_ = false;
};

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

// An error about a file, named first: "data/x.npy: truncated header".
inline Error file_error(const std::string& path, const std::string& what) {
  return make_error(path + ": " + what);
}

}  // namespace mls
