#include "inject_locator.h"

#include <system_error>

namespace cuflight::cli {

std::vector<std::filesystem::path> InjectLibraryCandidates(const std::filesystem::path& exe) {
  const std::filesystem::path dir = exe.parent_path();
  return {
      (dir / kInjectLibraryName).lexically_normal(),
      (dir / ".." / "lib" / kInjectLibraryName).lexically_normal(),
      (dir / ".." / "lib" / "cuflight" / kInjectLibraryName).lexically_normal(),
  };
}

std::filesystem::path FindInjectLibrary(const std::filesystem::path& exe,
                                        std::vector<std::filesystem::path>* searched) {
  std::error_code ec;
  std::filesystem::path self = exe;
  if (self.empty()) {
    self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
  }
  for (const std::filesystem::path& candidate : InjectLibraryCandidates(self)) {
    if (searched != nullptr) searched->push_back(candidate);
    if (std::filesystem::is_regular_file(candidate, ec)) {
      return std::filesystem::absolute(candidate, ec);
    }
  }
  return {};
}

}  // namespace cuflight::cli
