// A strict parser of the Prometheus text exposition format 0.0.4, written for the tests from
// the format's specification (not from the code under test): it rejects what Prometheus would
// reject and a few things Prometheus tolerates but a well-formed exporter never writes.
//
// Checked: every line is "# HELP", "# TYPE" or a sample; names and label names are valid; label
// values use only the escapes \\ \" \n; every family has HELP then TYPE before its samples;
// samples are grouped under their family (name, or name_bucket/_sum/_count for histograms and
// summaries); no family appears twice; no series appears twice; the text ends in '\n'.
#ifndef CUFLIGHT_TESTS_METRICS_EXPOSITION_PARSER_H_
#define CUFLIGHT_TESTS_METRICS_EXPOSITION_PARSER_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuflight::collector::testing {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;  // with any suffix (_bucket, _sum, _count)
  Labels labels;     // unescaped values
  double value = 0;
};

struct Family {
  std::string name;
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::string help;  // unescaped
  std::vector<Sample> samples;
};

struct Exposition {
  std::vector<Family> families;

  const Family* FindFamily(std::string_view name) const;
  // The value of the sample with exactly this name and these labels.
  std::optional<double> Value(std::string_view name, const Labels& labels = {}) const;
  // Every sample with this name (any labels).
  std::vector<const Sample*> SamplesNamed(std::string_view name) const;
};

// Parses `text`; on failure returns false and sets *error to "line N: what".
bool ParseExposition(std::string_view text, Exposition* out, std::string* error);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_METRICS_EXPOSITION_PARSER_H_
