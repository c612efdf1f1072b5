#include "habitat/file_io.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace habitat {

std::string read_file(const std::string& path, const std::string& what) {
  const auto fail = [&](int err) {
    return std::system_error(err != 0 ? err : EIO, std::generic_category(),
                             "cannot read " + what + " '" + path + "'");
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw fail(EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail(errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw fail(errno);
  return text.str();
}

}  // namespace habitat
