// DecompressFile (logstore/files/zstd_file.h), which decodes a segment's blocks straight into the
// buffer its sink reads (zstd's buffer-less API), against zstd's own streaming decoder
// (ZSTD_decompressStream, the reference): the same bytes, in order, for frames of every window
// size ZSTD_decompressStream accepts; the same refusals for what it refuses (a truncated frame,
// a changed checksum, a window over ZSTD_WINDOWLOG_LIMIT_DEFAULT, bytes that are no frame).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "temp_dir.h"
#include "zstd_file.h"

namespace cuflight::logstore {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test_support::TempDir;

struct Decoded {
  bool ok = false;
  std::string bytes;
  std::string error;
};

void Write(const fs::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Decoded ThroughDecompressFile(const fs::path& file) {
  Decoded d;
  size_t chunks = 0;
  d.ok = DecompressFile(
      file,
      [&](std::string_view chunk) {
        EXPECT_FALSE(chunk.empty());
        EXPECT_LE(chunk.size(), size_t{ZSTD_BLOCKSIZE_MAX});  // "a few hundred KiB" at most
        ++chunks;
        d.bytes.append(chunk);
      },
      &d.error);
  return d;
}

// The reference: ZSTD_decompressStream, fed the whole file, every byte it gives appended; ok when
// it ends at a frame boundary without an error.
Decoded ThroughZstdStream(std::string_view compressed) {
  Decoded d;
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::vector<char> out(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  size_t ret = 0;
  for (;;) {
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    ret = ZSTD_decompressStream(dctx.get(), &o, &in);
    if (ZSTD_isError(ret)) {
      d.error = ZSTD_getErrorName(ret);
      return d;
    }
    d.bytes.append(out.data(), o.pos);
    if (in.pos == in.size && o.pos < o.size) break;
  }
  d.ok = ret == 0;
  return d;
}

// Log-like text: lines with changing digits and repeated names, `bytes` long.
std::string LogText(size_t bytes) {
  std::string s;
  uint64_t x = 88172645463325252u;  // xorshift64, any seed
  while (s.size() < bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s += R"({"type":"kernel_time","version":1,"ts_ns":)" + std::to_string(x % 1'000'000'007) +
         R"(,"stream":)" + std::to_string(x % 17) + ",\"start_ns\":" + std::to_string(x >> 3) +
         "}\n";
  }
  s.resize(bytes);
  return s;
}

std::string Compress(std::string_view plain, int level, int window_log, bool checksum) {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, checksum ? 1 : 0);
  if (window_log > 0) ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_windowLog, window_log);
  std::string out(ZSTD_compressBound(plain.size()), '\0');
  const size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), plain.data(), plain.size());
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

// A skippable frame (zstd's format: magic 0x184D2A50..5F, little-endian; a 4-byte size; content).
std::string Skippable(uint8_t variant, std::string_view content) {
  std::string s = {static_cast<char>(0x50 + variant), 0x2A, 0x4D, 0x18};
  const auto n = static_cast<uint32_t>(content.size());
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return s + std::string(content);
}

TEST(LogstoreZstdTest, EveryWindowSizeGivesTheBytesCompressedInOrder) {
  TempDir dir;
  // 3 MiB: many 128 KiB blocks. A 1 KiB window wraps the round buffer at nearly every block; a
  // 1 MiB window, or level 9's own (a few MiB, as the content's size caps it), holds several
  // blocks between wraps; level 1 with its own window is how the collector compresses.
  // 3 MiB and a part block: a frame whose content size is said and fits the round buffer ends in
  // a short block after the last full one, not at the buffer's start.
  const std::string plain = LogText((3 << 20) + 12'345);
  struct Case {
    int level;
    int window_log;
  };
  for (const Case c : {Case{1, 0}, Case{3, 10}, Case{3, 17}, Case{9, 0}, Case{1, 20}, Case{1, 23}}) {
    SCOPED_TRACE(testing::Message() << "level " << c.level << " windowLog " << c.window_log);
    const std::string z = Compress(plain, c.level, c.window_log, true);
    const fs::path file = dir.path() / "a.jsonl.zst";
    Write(file, z);
    const Decoded d = ThroughDecompressFile(file);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_TRUE(d.bytes == plain);
  }
}

TEST(LogstoreZstdTest, FramesAndSkippableFramesFollowEachOther) {
  TempDir dir;
  const std::string a = LogText(300'000);
  const std::string b = LogText(1'000) + "second frame\n";
  // An empty frame, a frame without checksum, skippable frames of 0 bytes and of more than one
  // read of the file (1 MiB) between them.
  const std::string z = Compress("", 1, 0, true) + Compress(a, 1, 0, false) + Skippable(0, "") +
                        Skippable(15, std::string(1'500'000, 'x')) + Compress(b, 3, 0, true);
  const fs::path file = dir.path() / "a.jsonl.zst";
  Write(file, z);
  const Decoded reference = ThroughZstdStream(z);
  ASSERT_TRUE(reference.ok) << reference.error;
  ASSERT_TRUE(reference.bytes == a + b);
  const Decoded d = ThroughDecompressFile(file);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_TRUE(d.bytes == a + b);
}

TEST(LogstoreZstdTest, ATruncatedFrameIsSaidAfterWhatCameBeforeIt) {
  TempDir dir;
  const std::string plain = LogText(1 << 20);
  const std::string z = Compress(plain, 1, 0, true);
  // Cut in the middle of a block, in the checksum (its last 4 bytes), in a second frame's header
  // (its first 5 bytes are the magic and the header's first byte), and in a skippable frame.
  for (const std::string& cut :
       {z.substr(0, z.size() / 2), z.substr(0, z.size() - 2), z + z.substr(0, 3),
        z + Skippable(1, "abcdef").substr(0, 10)}) {
    SCOPED_TRACE(cut.size());
    const fs::path file = dir.path() / "cut.jsonl.zst";
    Write(file, cut);
    const Decoded reference = ThroughZstdStream(cut);
    EXPECT_FALSE(reference.ok);  // ZSTD_decompressStream does not end at a frame boundary
    const Decoded d = ThroughDecompressFile(file);
    EXPECT_FALSE(d.ok);
    EXPECT_EQ(d.error, file.native() + " ends inside a zstd frame (truncated)");
    EXPECT_TRUE(plain.starts_with(d.bytes.substr(0, std::min(d.bytes.size(), plain.size()))));
    EXPECT_EQ(d.bytes.size(), reference.bytes.size());
  }
}

TEST(LogstoreZstdTest, AChangedChecksumIsRefused) {
  TempDir dir;
  const std::string plain = LogText(200'000);
  std::string z = Compress(plain, 1, 0, true);
  z.back() = static_cast<char>(z.back() ^ 0x01);  // the frame's last 4 bytes are its checksum
  const fs::path file = dir.path() / "sum.jsonl.zst";
  Write(file, z);
  const Decoded reference = ThroughZstdStream(z);
  ASSERT_FALSE(reference.ok);
  const Decoded d = ThroughDecompressFile(file);
  EXPECT_FALSE(d.ok);
  // zstd's message for ZSTD_error_checksum_wrong, as ZSTD_decompressStream says it.
  EXPECT_EQ(d.error, "zstd decompression of " + file.native() + " failed: " + reference.error);
  EXPECT_THAT(d.error, HasSubstr("checksum"));
}

TEST(LogstoreZstdTest, AWindowLargerThanZstdsStreamAcceptsIsRefused) {
  TempDir dir;
  // A frame by hand (RFC 8878, 3.1.1): magic; Frame_Header_Descriptor 0 (no content size, no
  // checksum, not single-segment); Window_Descriptor exponent 18, mantissa 0: 2^(10 + 18) = 2^28
  // bytes, over ZSTD_WINDOWLOG_LIMIT_DEFAULT (27); then one last raw block of one byte (header
  // Last_Block 1, Block_Type 0, Block_Size 1: 0x09 0x00 0x00) holding 'x'.
  const std::string frame("\x28\xB5\x2F\xFD\x00\x90\x09\x00\x00x", 10);
  // Exponent 17 (2^27) is accepted: the same frame decodes to "x".
  std::string accepted = frame;
  accepted[5] = static_cast<char>(17 << 3);
  ASSERT_TRUE(ThroughZstdStream(accepted).ok);
  const fs::path ok_file = dir.path() / "ok.jsonl.zst";
  Write(ok_file, accepted);
  const Decoded ok = ThroughDecompressFile(ok_file);
  ASSERT_TRUE(ok.ok) << ok.error;
  EXPECT_EQ(ok.bytes, "x");

  const Decoded reference = ThroughZstdStream(frame);
  ASSERT_FALSE(reference.ok);
  const fs::path file = dir.path() / "wide.jsonl.zst";
  Write(file, frame);
  const Decoded d = ThroughDecompressFile(file);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error, "zstd decompression of " + file.native() + " failed: " + reference.error);
  EXPECT_TRUE(d.bytes.empty());
}

TEST(LogstoreZstdTest, BytesThatAreNoFrameAreRefusedWithZstdsWords) {
  TempDir dir;
  const std::string z = Compress(LogText(10'000), 1, 0, true) + "not zstd at all";
  const fs::path file = dir.path() / "tail.jsonl.zst";
  Write(file, z);
  const Decoded reference = ThroughZstdStream(z);
  ASSERT_FALSE(reference.ok);
  const Decoded d = ThroughDecompressFile(file);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error, "zstd decompression of " + file.native() + " failed: " + reference.error);
  EXPECT_EQ(d.bytes, reference.bytes);
}

}  // namespace
}  // namespace cuflight::logstore
