#include "pid_rewrite.h"

#include <cstddef>
#include <vector>

namespace cuflight::collector {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  size_t pos() const { return i_; }
  bool AtEnd() const { return i_ >= s_.size(); }
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void SkipSpace() {
    while (i_ < s_.size() && IsSpace(s_[i_])) ++i_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++i_;
    return true;
  }

  // A string at the cursor; *decoded gets its value when every escape stands for an ASCII
  // character (enough to compare against "pid"), else a value that matches no ASCII name.
  bool String(std::string* decoded) {
    SkipSpace();
    if (Peek() != '"') return false;
    ++i_;
    decoded->clear();
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        decoded->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          int code = 0;
          for (int k = 0; k < 4; ++k) {
            const int h = HexValue(s_[i_++]);
            if (h < 0) return false;
            code = code * 16 + h;
          }
          decoded->push_back(code < 0x80 ? static_cast<char>(code) : '\x80');
          break;
        }
        case 'b':
          decoded->push_back('\b');
          break;
        case 'f':
          decoded->push_back('\f');
          break;
        case 'n':
          decoded->push_back('\n');
          break;
        case 'r':
          decoded->push_back('\r');
          break;
        case 't':
          decoded->push_back('\t');
          break;
        default:
          decoded->push_back(e);
          break;  // " \ /
      }
    }
    return false;
  }

  // Skips one JSON value of any kind.
  bool Value() {
    SkipSpace();
    const char c = Peek();
    std::string ignored;
    if (c == '"') return String(&ignored);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      if (Consume(close)) return true;
      while (true) {
        if (c == '{') {
          if (!String(&ignored) || !Consume(':')) return false;
        }
        if (!Value()) return false;
        if (Consume(close)) return true;
        if (!Consume(',')) return false;
      }
    }
    // Number or literal: up to the next structural character or space.
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && !IsSpace(s_[i_])) {
      ++i_;
    }
    return i_ > start;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

bool RewritePid(std::string_view line, int32_t pid, std::string* out) {
  Scanner scan(line);
  if (!scan.Consume('{')) return false;
  // [begin, end) of each top-level "pid" value.
  std::vector<std::pair<size_t, size_t>> spans;
  if (!scan.Consume('}')) {
    std::string key;
    while (true) {
      if (!scan.String(&key) || !scan.Consume(':')) return false;
      scan.SkipSpace();
      const size_t begin = scan.pos();
      if (!scan.Value()) return false;
      if (key == "pid") spans.emplace_back(begin, scan.pos());
      if (scan.Consume('}')) break;
      if (!scan.Consume(',')) return false;
    }
  }
  if (spans.empty()) return false;
  const std::string value = std::to_string(pid);
  out->clear();
  out->reserve(line.size() + spans.size() * value.size());
  size_t copied = 0;
  for (const auto& [begin, end] : spans) {
    out->append(line.substr(copied, begin - copied));
    out->append(value);
    copied = end;
  }
  out->append(line.substr(copied));
  return true;
}

}  // namespace cuflight::collector
