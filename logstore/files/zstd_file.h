// zstd compression of closed log segments, and streaming decompression to read them back.
//
// Crash safety of CompressFileAtomically: the compressed bytes go to "<dst>.tmp", which is
// fsynced and then renamed to <dst> (and the directory fsynced), so <dst> either does not exist
// or is complete; the caller removes the plain source only after this returns true. A crash
// (even kill -9) at any moment therefore leaves the plain copy, the compressed copy, or both,
// complete, plus possibly a stale "<dst>.tmp" to delete.
#ifndef CUFLIGHT_LOGSTORE_FILES_ZSTD_FILE_H_
#define CUFLIGHT_LOGSTORE_FILES_ZSTD_FILE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "segment_file.h"

namespace cuflight::logstore {

// Compresses `src` into `dst` as one zstd frame with a content checksum, at `level` (zstd's
// scale, 1..19), through "<dst>.tmp" (in dst's directory) as described above. On failure (read,
// write, ENOSPC, a compression error) the temporary file is removed, `dst` is not created, and
// false is returned with *error set. Allocates its buffers per call; meant for a background
// thread. The FileAt form never follows a symbolic link (segment_file.h); the path form opens
// the files' directories by path.
bool CompressFileAtomically(const FileAt& src, const FileAt& dst, int level, std::string* error);
bool CompressFileAtomically(const std::filesystem::path& src, const std::filesystem::path& dst,
                            int level, std::string* error);

// Decompresses `src` (one or more zstd frames) and passes the output to `sink` in chunks of at
// most a few hundred KiB, in order. False with *error set when the file cannot be read, is not
// valid zstd, or ends inside a frame (what was decoded before has been passed to `sink`).
bool DecompressFile(const FileAt& src, const std::function<void(std::string_view)>& sink,
                    std::string* error);
bool DecompressFile(const std::filesystem::path& src,
                    const std::function<void(std::string_view)>& sink, std::string* error);

// The seq (SeqOfLine) of the last complete line of the compressed file `src` that contains a
// "seq" member, decompressing it as a stream (memory: one line plus zstd's window). nullopt when
// there is none or the file cannot be decompressed (*error is then set).
std::optional<uint64_t> LastSeqInZstdFile(const FileAt& src, std::string* error);

}  // namespace cuflight::logstore

#endif  // CUFLIGHT_LOGSTORE_FILES_ZSTD_FILE_H_
