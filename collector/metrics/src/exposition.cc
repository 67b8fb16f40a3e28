#include "exposition.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace cuflight::collector {

void AppendEscapedLabelValue(std::string* out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendEscapedHelp(std::string* out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendDouble(std::string* out, double value) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) {
    out->append("NaN");  // unreachable: 32 bytes hold any shortest double
    return;
  }
  out->append(buf, end);
}

void ExpositionWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_->append("# HELP ").append(name).push_back(' ');
  AppendEscapedHelp(out_, help);
  out_->append("\n# TYPE ").append(name).push_back(' ');
  out_->append(type).push_back('\n');
}

void ExpositionWriter::Begin(std::string_view name, std::span<const Label> labels) {
  out_->append(name);
  bool first = true;
  for (const Label& label : labels) {
    if (label.value.empty()) continue;
    out_->push_back(first ? '{' : ',');
    first = false;
    out_->append(label.name).append("=\"");
    AppendEscapedLabelValue(out_, label.value);
    out_->push_back('"');
  }
  if (!first) out_->push_back('}');
  out_->push_back(' ');
}

void ExpositionWriter::Sample(std::string_view name, std::span<const Label> labels,
                              uint64_t value) {
  Begin(name, labels);
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;  // 24 bytes hold any uint64_t
  out_->append(buf, end).push_back('\n');
}

void ExpositionWriter::Sample(std::string_view name, std::span<const Label> labels,
                              int64_t value) {
  Begin(name, labels);
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;  // 24 bytes hold any int64_t
  out_->append(buf, end).push_back('\n');
}

void ExpositionWriter::Sample(std::string_view name, std::span<const Label> labels,
                              double value) {
  Begin(name, labels);
  AppendDouble(out_, value);
  out_->push_back('\n');
}

}  // namespace cuflight::collector
