#include "habitat/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "habitat/input_limits.h"

namespace habitat {
namespace {

// Closes the descriptor however the read ends.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string too_large_message(const std::string& path, const std::string& what, uint64_t cap,
                              const std::string& basis, uint64_t size) {
  // A value that reads the file: the next whole GiB above the file (or twice the cap).
  const uint64_t need = size > cap ? size : 2 * cap;
  const uint64_t gib = (need >> 30) + 1;
  return what + " '" + path + "' holds " +
         (size > cap ? format_bytes(size) : "more than " + format_bytes(cap)) +
         ", more than the cap on input files (" + format_bytes(cap) + ", " + basis +
         "): if the memory is there, set HABITAT_MAX_INPUT_BYTES=" + std::to_string(gib) +
         "G to read it";
}

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const auto fail = [&](int err) {
    return std::system_error(err != 0 ? err : EIO, std::generic_category(),
                             "cannot read " + what + " '" + path + "'");
  };
  std::string basis = "the caller's cap";
  if (max_bytes == 0) {
    const InputLimits limits = input_limits();
    max_bytes = limits.max_bytes;
    basis = limits.bytes_basis;
  }
  // O_NONBLOCK: opening a FIFO with no writer must not block before it is refused below.
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw fail(errno);
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) throw fail(errno);
  if (S_ISDIR(info.st_mode)) throw fail(EISDIR);
  if (!S_ISREG(info.st_mode)) {
    throw InputLimitError("cannot read " + what + " '" + path + "': it is " +
                          kind_of(info.st_mode) +
                          ", not a regular file; save its contents to a file and give that");
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes)
    throw InputLimitError(too_large_message(path, what, max_bytes, basis, size));
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (true) {
    if (done == text.size()) {  // the file grew since fstat: read on, within the cap
      if (text.size() >= max_bytes + 1) break;
      text.resize(std::min<uint64_t>(max_bytes + 1, text.size() + (uint64_t{1} << 20)));
    }
    const ssize_t n = ::read(file.fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail(errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done > max_bytes) throw InputLimitError(too_large_message(path, what, max_bytes, basis, 0));
  text.resize(done);
  return text;
}

}  // namespace habitat
