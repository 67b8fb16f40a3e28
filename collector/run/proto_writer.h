// A minimal protocol buffers encoder (https://protobuf.dev/programming-guides/encoding/): the
// wire types the Perfetto trace uses, appended to a string. A nested message is built in its own
// ProtoWriter and added whole (length-delimited), so nothing is patched after the fact.
#ifndef CUFLIGHT_COLLECTOR_RUN_PROTO_WRITER_H_
#define CUFLIGHT_COLLECTOR_RUN_PROTO_WRITER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cuflight::run {

class ProtoWriter {
 public:
  // Wire types (encoding guide, "Message Structure").
  static constexpr uint32_t kVarint = 0;
  static constexpr uint32_t kFixed64 = 1;
  static constexpr uint32_t kLengthDelimited = 2;

  // uint32, uint64, int32 and int64 fields, bool and enum values: varint. A negative int32 or
  // int64 is the 10-byte two's complement varint, as protobuf encodes it.
  void Varint(uint32_t field, uint64_t value) {
    Tag(field, kVarint);
    Raw(value);
  }
  void Int(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  // fixed64 (little-endian 8 bytes).
  void Fixed64(uint32_t field, uint64_t value) {
    Tag(field, kFixed64);
    char bytes[8];
    std::memcpy(bytes, &value, 8);  // x86-64 and aarch64 Linux are little-endian
    buf_.append(bytes, 8);
  }
  // double: fixed64 holding the IEEE 754 bits.
  void Double(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    Fixed64(field, bits);
  }
  // string and bytes: length-delimited.
  void String(uint32_t field, std::string_view value) {
    Tag(field, kLengthDelimited);
    Raw(value.size());
    buf_.append(value.data(), value.size());
  }
  void Message(uint32_t field, const ProtoWriter& message) { String(field, message.buf_); }

  const std::string& bytes() const { return buf_; }
  bool empty() const { return buf_.empty(); }
  void Clear() { buf_.clear(); }

 private:
  void Tag(uint32_t field, uint32_t wire_type) { Raw((uint64_t{field} << 3) | wire_type); }
  void Raw(uint64_t v) {
    char bytes[10];
    size_t n = 0;
    while (v >= 0x80) {
      bytes[n++] = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    bytes[n++] = static_cast<char>(v);
    buf_.append(bytes, n);
  }

  std::string buf_;
};

}  // namespace cuflight::run

#endif  // CUFLIGHT_COLLECTOR_RUN_PROTO_WRITER_H_
