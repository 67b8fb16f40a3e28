// Where `cuflight run` finds the injected library: beside the cuflight executable, as the build
// and an install lay them out.
#ifndef CUFLIGHT_CLI_INJECT_LOCATOR_H_
#define CUFLIGHT_CLI_INJECT_LOCATOR_H_

#include <filesystem>
#include <vector>

namespace cuflight::cli {

inline constexpr const char* kInjectLibraryName = "libcuflight_inject.so";

// The places searched for a cuflight executable at `exe` (<dir>/<name>), in order:
//   <dir>/libcuflight_inject.so               a flat layout
//   <dir>/../lib/libcuflight_inject.so        the build tree (bin/, lib/) and a <prefix> install
//   <dir>/../lib/cuflight/libcuflight_inject.so   a <prefix>/lib/cuflight install
// Paths are lexically normalised, not resolved.
std::vector<std::filesystem::path> InjectLibraryCandidates(const std::filesystem::path& exe);

// The first candidate that is a regular file (following links), as an absolute path; empty when
// none is. `exe` is this process's executable (/proc/self/exe resolved) when empty. Fills
// *searched with every candidate tried, for the error line.
std::filesystem::path FindInjectLibrary(const std::filesystem::path& exe,
                                        std::vector<std::filesystem::path>* searched);

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_INJECT_LOCATOR_H_
