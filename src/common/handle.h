// Owners of OS handles: a file descriptor and a C stream, closed when their owner goes, on
// every path out (a throwing upload, an early return). Code that holds a handle holds one of
// these or an Asio object (sockets, descriptors); ::close() and std::fclose() appear only here
// and inside the file classes of fileio.h.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <utility>

namespace npm {

class UniqueFd {
public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Hands the descriptor over (to an Asio object, or to another owner).
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
// A C stream that is closed with its owner.
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace npm
