// Writing the Prometheus text exposition format 0.0.4: metric families (HELP and TYPE lines)
// and samples with escaped label values.
#ifndef CUFLIGHT_METRICS_EXPOSITION_H_
#define CUFLIGHT_METRICS_EXPOSITION_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace cuflight::collector {

struct Label {
  std::string_view name;   // a valid label name, written as is
  std::string_view value;  // any UTF-8 text, escaped when written
};

// Appends `value` escaped for a label value: backslash, double quote and line feed become
// \\, \" and \n.
void AppendEscapedLabelValue(std::string* out, std::string_view value);
// Appends `text` escaped for a HELP line: backslash and line feed become \\ and \n.
void AppendEscapedHelp(std::string* out, std::string_view text);
// Appends `value` as the shortest decimal that reads back as the same double ("0.5", "1e-09"),
// or "+Inf", "-Inf", "NaN".
void AppendDouble(std::string* out, double value);

// Appends families and samples to a string the caller owns.
class ExpositionWriter {
 public:
  explicit ExpositionWriter(std::string* out) : out_(out) {}

  // "# HELP name help" and "# TYPE name type"; `type` is counter, gauge, histogram or summary.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // One sample line: name{labels} value. `name` includes any suffix (_bucket, _sum, _count).
  // A label whose value is empty is left out: Prometheus treats an empty value as no label
  // (the data model: "a label with an empty label value is considered equivalent to a label
  // that does not exist"), so writing it would only cost bytes.
  void Sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
    Sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  void Sample(std::string_view name, std::initializer_list<Label> labels, int64_t value) {
    Sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  void Sample(std::string_view name, std::initializer_list<Label> labels, double value) {
    Sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  void Sample(std::string_view name, std::span<const Label> labels, uint64_t value);
  void Sample(std::string_view name, std::span<const Label> labels, int64_t value);
  void Sample(std::string_view name, std::span<const Label> labels, double value);

 private:
  void Begin(std::string_view name, std::span<const Label> labels);

  std::string* out_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_EXPOSITION_H_
