// A minimal protocol buffers encoder (https://protobuf.dev/programming-guides/encoding/): the
// wire types the Perfetto trace uses, appended to a string. A nested message is built in its own
// ProtoWriter and added whole (length-delimited), so nothing is patched after the fact.
#ifndef CUFLIGHT_REPORT_TRACE_PROTO_WRITER_H_
#define CUFLIGHT_REPORT_TRACE_PROTO_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace cuflight::trace {

class ProtoWriter {
 public:
  // Wire types (encoding guide, "Message Structure").
  static constexpr uint32_t kVarint = 0;
  static constexpr uint32_t kFixed64 = 1;
  static constexpr uint32_t kLengthDelimited = 2;

  // uint32, uint64, int32 and int64 fields, bool and enum values: varint. A negative int32 or
  // int64 is the 10-byte two's complement varint, as protobuf encodes it.
  void Varint(uint32_t field, uint64_t value) {
    Reserve(20);
    Tag(field, kVarint);
    Raw(value);
  }
  void Int(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  // fixed64 (little-endian 8 bytes).
  void Fixed64(uint32_t field, uint64_t value) {
    Reserve(18);
    Tag(field, kFixed64);
    std::memcpy(buf_.data() + size_, &value, 8);  // x86-64 and aarch64 Linux are little-endian
    size_ += 8;
  }
  // double: fixed64 holding the IEEE 754 bits.
  void Double(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    Fixed64(field, bits);
  }
  // string and bytes: length-delimited.
  void String(uint32_t field, std::string_view value) {
    Reserve(20 + value.size());
    Tag(field, kLengthDelimited);
    Raw(value.size());
    if (!value.empty()) std::memcpy(buf_.data() + size_, value.data(), value.size());
    size_ += value.size();
  }
  void Message(uint32_t field, const ProtoWriter& message) { String(field, message.bytes()); }

  std::string_view bytes() const { return {buf_.data(), size_}; }
  bool empty() const { return size_ == 0; }
  void Clear() { size_ = 0; }

 private:
  // Room for `n` more bytes; the buffer only grows (a writer is reused per packet).
  void Reserve(size_t n) {
    if (size_ + n > buf_.size()) buf_.resize(std::max(buf_.size() * 2, size_ + n + 256));
  }
  void Tag(uint32_t field, uint32_t wire_type) { Raw((uint64_t{field} << 3) | wire_type); }
  // At most 10 bytes; Reserve has made room.
  void Raw(uint64_t v) {
    char* p = buf_.data() + size_;
    while (v >= 0x80) {
      *p++ = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    size_ = static_cast<size_t>(p - buf_.data());
  }

  std::vector<char> buf_;
  size_t size_ = 0;
};

}  // namespace cuflight::trace

#endif  // CUFLIGHT_REPORT_TRACE_PROTO_WRITER_H_
