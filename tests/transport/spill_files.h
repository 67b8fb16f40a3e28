// Reading spill directories back in the spill tests: the files a SpillWriter made, in the order
// their lines were written, and their lines.
#ifndef CUFLIGHT_TESTS_TRANSPORT_SPILL_FILES_H_
#define CUFLIGHT_TESTS_TRANSPORT_SPILL_FILES_H_

#include <string>
#include <vector>

namespace cuflight::transport::testing {

// Every line of the file at `path`, each with its '\n' (a last line without one is kept as is).
std::vector<std::string> ReadLines(const std::string& path);

// The names of the regular files in `dir` (no directory part), sorted.
std::vector<std::string> FileNames(const std::string& dir);

// The spill files of one stream in `date_dir` in write order: the segments <base>.<N>.jsonl by
// N, then the active file <base>.jsonl (if present). Names are parsed here independently of
// cuflight::schema: "<base>." followed by exactly six or more digits and ".jsonl".
std::vector<std::string> StreamFiles(const std::string& date_dir, const std::string& base);

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_SPILL_FILES_H_
