// Acknowledgements, the collector -> producer direction of the wire (docs/protocol.md).
//
// One ack is one line `{"type":"ack","seq":N}\n`: every event of the producer process with a seq
// at most N that reached the collector is stored. Acks are cumulative; a producer discards what
// they cover and retransmits the rest after a reconnect.
#ifndef CUFLIGHT_SCHEMA_ACK_H_
#define CUFLIGHT_SCHEMA_ACK_H_

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cuflight::schema {

// Longest ack line: the fixed text plus 20 digits of a uint64 and the newline.
inline constexpr size_t kMaxAckLineBytes = 48;

// The one-number control lines (ack, yield): `prefix` (`{"type":"ack","seq":`), the number in
// decimal, `}` and a newline. Writes one into buf and returns its length, or 0 if cap is too small.
// Allocation-free.
inline size_t EncodeNumberLine(std::string_view prefix, uint64_t value, char* buf,
                               size_t cap) noexcept {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  if (ec != std::errc()) return 0;
  const size_t n_digits = static_cast<size_t>(end - digits);
  const size_t total = prefix.size() + n_digits + 2;
  if (cap < total) return 0;
  size_t pos = 0;
  for (char c : prefix) buf[pos++] = c;
  for (size_t i = 0; i < n_digits; ++i) buf[pos++] = digits[i];
  buf[pos++] = '}';
  buf[pos++] = '\n';
  return pos;
}

// Parses one line (with or without its trailing "\n" or "\r\n") in exactly the form
// EncodeNumberLine writes with `prefix` (no leading zero, no sign, no blank); nullopt for anything
// else. Allocation-free.
inline std::optional<uint64_t> ParseNumberLine(std::string_view prefix,
                                               std::string_view line) noexcept {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() < prefix.size() + 2 || line.substr(0, prefix.size()) != prefix ||
      line.back() != '}') {
    return std::nullopt;
  }
  std::string_view digits = line.substr(prefix.size(), line.size() - prefix.size() - 1);
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

inline constexpr std::string_view kAckPrefix = R"({"type":"ack","seq":)";

// Writes the ack line for `seq` (with its '\n') into buf; returns its length, or 0 if cap is too
// small. Allocation-free.
inline size_t EncodeAck(uint64_t seq, char* buf, size_t cap) noexcept {
  return EncodeNumberLine(kAckPrefix, seq, buf, cap);
}

// Parses one ack line (with or without its trailing "\n" or "\r\n") in exactly the form EncodeAck
// writes; nullopt for anything else. Allocation-free.
inline std::optional<uint64_t> ParseAck(std::string_view line) noexcept {
  return ParseNumberLine(kAckPrefix, line);
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_ACK_H_
