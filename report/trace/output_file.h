// Where an export's bytes go: a file written through a temporary name and renamed into place
// when complete (so a failed export leaves no half trace), compressed by the name's last suffix
// (".gz": gzip, ".zst": zstd), or standard output ("-", uncompressed). Buffered; one thread.
#ifndef CUFLIGHT_REPORT_TRACE_OUTPUT_FILE_H_
#define CUFLIGHT_REPORT_TRACE_OUTPUT_FILE_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace cuflight::trace {

enum class Compression { kNone, kGzip, kZstd };

// ".gz" -> kGzip, ".zst" -> kZstd, else kNone (by the end of `path`).
Compression CompressionOf(std::string_view path);

class OutputFile {
 public:
  OutputFile();
  ~OutputFile();  // an output not closed is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Opens `path` ("-": `out`, never compressed). False with *error ("<path>: cannot write:
  // <reason>").
  bool Open(const std::string& path, std::ostream& out, std::string* error);
  // Appends bytes. False once a write has failed (Close says why).
  bool Write(std::string_view bytes);
  // Flushes, ends the compressed stream and renames the file into place. False with *error.
  bool Close(std::string* error);

  uint64_t bytes_in() const { return bytes_in_; }     // before compression
  uint64_t bytes_out() const { return bytes_out_; }   // written to the file

 private:
  struct Impl;
  bool Flush();

  std::unique_ptr<Impl> impl_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_OUTPUT_FILE_H_
