// The field tables (cuflight/schema/event_fields.h) against the JSON Schema files in schema/v1/,
// read here with nlohmann (member order kept): for every event type and every nested object, the
// same member names in the same order, the same required set, the JSON kind and range of each
// member, the enums, and the dependentRequired pairs. The tables drive the decoder and the
// validator, so a table that drifts from the schema fails here.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cuflight/schema/event_fields.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/occupancy_fields.h"

namespace cuflight::schema {
namespace {

using Json = nlohmann::ordered_json;

// One entry of a table, as data.
struct Row {
  std::string kind;  // F's kind, or "Requires" for R
  std::string name;
  std::string trigger;  // R only
  bool has_range = false;
  IntRange range{0, 0};
  bool has_bounds = false;
  double lo = 0;
  double hi = 0;
  std::string item;  // Objects: the $defs entry of the items ("stream", "launch")
};

struct Args {
  bool has_range = false;
  IntRange range{0, 0};
  bool has_bounds = false;
  double lo = 0;
  double hi = 0;
  std::string item;
};
Args MakeArgs() { return {}; }
Args MakeArgs(IntRange r) { return {true, r, false, 0, 0, ""}; }
Args MakeArgs(int lo, int hi) { return {false, {0, 0}, true, double{1} * lo, MaximumOf(hi), ""}; }
Args MakeArgs(StallStreamItem) { return {false, {0, 0}, false, 0, 0, "stream"}; }
Args MakeArgs(StallLaunchItem) { return {false, {0, 0}, false, 0, 0, "launch"}; }

Row FieldRow(const char* kind, const char* name, const Args& a) {
  return {kind, name, "", a.has_range, a.range, a.has_bounds, a.lo, a.hi, a.item};
}

Row RuleRow(const char* name, const char* trigger) {
  Row row;
  row.kind = "Requires";
  row.name = name;
  row.trigger = trigger;
  return row;
}

#define ROW_FIELD(kind, name, member, ...) rows.push_back(FieldRow(#kind, #name, MakeArgs(__VA_ARGS__)));
#define ROW_RULE(name, trigger) rows.push_back(RuleRow(#name, #trigger));
#define ROWS_OF(TABLE)                  \
  [] {                                  \
    std::vector<Row> rows;              \
    TABLE(ROW_FIELD, ROW_RULE)          \
    return rows;                        \
  }()

Json ReadSchema(const std::string& file) {
  std::ifstream in(std::string(CUFLIGHT_SCHEMA_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  return Json::parse(in);
}

// Follows $ref (to common.schema.json or to the file's own $defs) until a schema without one.
Json Resolve(const Json& schema, const Json& own) {
  static const Json common = ReadSchema("common.schema.json");
  Json s = schema;
  while (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const size_t hash = ref.find("#/$defs/");
    EXPECT_NE(hash, std::string::npos) << ref;
    const std::string def = ref.substr(hash + 8);
    const Json& file = ref.starts_with("common.schema.json") ? common
                       : hash == 0 && own.contains("$defs") && own["$defs"].contains(def)
                           ? own
                           : common;  // a `#/$defs/...` inside a common definition
    s = file["$defs"][def];
  }
  return s;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> EnumOf(const Json& s) {
  std::vector<std::string> names;
  for (const Json& v : s["enum"]) names.push_back(v.get<std::string>());
  return names;
}

void ExpectIntRange(const Json& s, const IntRange& r, const std::string& where) {
  ASSERT_TRUE(s.contains("minimum") && s.contains("maximum")) << where;
  EXPECT_EQ(s["minimum"].get<int64_t>(), r.lo) << where;
  EXPECT_EQ(s["maximum"].get<uint64_t>(), r.hi) << where;
}

void ExpectKind(const Row& row, const Json& property, const Json& own, const std::string& where) {
  const Json s = Resolve(property, own);
  std::string kind = row.kind;
  if (StartsWith(kind, "Optional")) kind = kind.substr(8);
  if (kind == "Int") {
    EXPECT_EQ(s["type"], "integer") << where;
    ExpectIntRange(s, row.range, where);
  } else if (kind == "IntOrNull") {
    EXPECT_EQ(s["type"], Json::parse(R"(["integer","null"])")) << where;
    ExpectIntRange(s, row.range, where);
  } else if (kind == "Number") {
    EXPECT_EQ(s["type"], "number") << where;
    EXPECT_EQ(s["minimum"].get<double>(), row.lo) << where;
    if (std::isinf(row.hi)) {
      EXPECT_FALSE(s.contains("maximum")) << where;
    } else {
      EXPECT_EQ(s["maximum"].get<double>(), row.hi) << where;
    }
  } else if (kind == "Bool") {
    EXPECT_EQ(s["type"], "boolean") << where;
  } else if (kind == "String") {
    EXPECT_EQ(s["type"], "string") << where;
  } else if (kind == "Strings") {
    EXPECT_EQ(s["type"], "array") << where;
    EXPECT_EQ(Resolve(s["items"], own)["type"], "string") << where;
  } else if (kind == "Ids") {
    EXPECT_EQ(s["type"], "array") << where;
    const Json item = Resolve(s["items"], own);
    EXPECT_EQ(item["type"], "integer") << where;
    ExpectIntRange(item, kUint64, where);
  } else if (kind == "Dim") {
    EXPECT_EQ(s["type"], "array") << where;
    EXPECT_EQ(s["minItems"], 3) << where;
    EXPECT_EQ(s["maxItems"], 3) << where;
    const Json item = Resolve(s["items"], own);
    EXPECT_EQ(item["type"], "integer") << where;
    ExpectIntRange(item, kUint32, where);
  } else if (kind == "OneResource" || kind == "ResourceSet") {
    std::vector<std::string> names;
    for (int i = 0; i < kResourceCount; ++i) {
      names.emplace_back(ResourceName(static_cast<Resource>(i)));
    }
    if (kind == "ResourceSet") {
      EXPECT_EQ(s["type"], "array") << where;
      EXPECT_EQ(s["uniqueItems"], true) << where;
      EXPECT_EQ(EnumOf(Resolve(s["items"], own)), names) << where;
    } else {
      EXPECT_EQ(EnumOf(s), names) << where;
    }
  } else if (kind == "StringMap") {
    EXPECT_EQ(s["type"], "object") << where;
    EXPECT_EQ(s["additionalProperties"]["type"], "string") << where;
  } else if (kind == "OccupancySource") {
    EXPECT_EQ(EnumOf(s), (std::vector<std::string>{
                             std::string(OccupancySourceName(OccupancySource::kDriver)),
                             std::string(OccupancySourceName(OccupancySource::kEngine))}))
        << where;
  } else if (kind == "TimingStoppedReason") {
    EXPECT_EQ(EnumOf(s),
              (std::vector<std::string>{
                  std::string(TimingStoppedReasonName(TimingStoppedReason::kRecordsStopped)),
                  std::string(TimingStoppedReasonName(TimingStoppedReason::kUnavailable))}))
        << where;
  } else if (kind == "TimingPolicy") {
    EXPECT_EQ(EnumOf(s), (std::vector<std::string>{
                             std::string(TimingPolicyName(TimingPolicy::kAll)),
                             std::string(TimingPolicyName(TimingPolicy::kSampled)),
                             std::string(TimingPolicyName(TimingPolicy::kOff))}))
        << where;
  } else if (kind == "OneLostReason") {
    std::vector<std::string> names;
    for (int i = 0; i < kLostReasonCount; ++i) {
      names.emplace_back(LostReasonName(static_cast<LostReason>(i)));
    }
    EXPECT_EQ(EnumOf(s), names) << where;
  } else if (kind == "OneStallState") {
    std::vector<std::string> names;
    for (int i = 0; i < kStallStateCount; ++i) {
      names.emplace_back(StallStateName(static_cast<StallState>(i)));
    }
    EXPECT_EQ(EnumOf(s), names) << where;
  } else if (kind == "Objects") {
    EXPECT_EQ(s["type"], "array") << where;
    EXPECT_EQ(s["items"]["$ref"], "#/$defs/" + row.item) << where;
  } else {
    ADD_FAILURE() << where << ": kind " << row.kind << " has no check here";
  }
}

// One table against one object schema (`object`: properties, required, dependentRequired).
// `skip`: properties not in the table (the header's).
void ExpectTable(const std::vector<Row>& rows, const Json& object, const Json& own,
                 const std::string& where, const std::set<std::string>& skip = {}) {
  std::vector<std::string> table_names;
  std::set<std::string> table_required;
  std::set<std::pair<std::string, std::string>> table_rules;
  for (const Row& row : rows) {
    if (row.kind == "Requires") {
      table_rules.insert({row.trigger, row.name});
      continue;
    }
    table_names.push_back(row.name);
    if (!StartsWith(row.kind, "Optional")) table_required.insert(row.name);
    ASSERT_TRUE(object["properties"].contains(row.name)) << where << "." << row.name;
    ExpectKind(row, object["properties"][row.name], own, where + "." + row.name);
  }
  std::vector<std::string> schema_names;
  for (const auto& [name, property] : object["properties"].items()) {
    if (!skip.contains(name)) schema_names.push_back(name);
  }
  EXPECT_EQ(table_names, schema_names) << where << ": names or order";
  std::set<std::string> schema_required;
  for (const Json& name : object.value("required", Json::array())) {
    if (!skip.contains(name.get<std::string>())) schema_required.insert(name.get<std::string>());
  }
  EXPECT_EQ(table_required, schema_required) << where << ": required";
  std::set<std::pair<std::string, std::string>> schema_rules;
  const Json dependent = object.value("dependentRequired", Json::object());
  for (const auto& [trigger, names] : dependent.items()) {
    for (const Json& name : names) schema_rules.insert({trigger, name.get<std::string>()});
  }
  EXPECT_EQ(table_rules, schema_rules) << where << ": dependentRequired";
}

TEST(EventFieldsTest, EveryTableMatchesItsSchemaFile) {
  const std::map<EventType, std::vector<Row>> tables = {
#define TABLE_ENTRY(type, TABLE) {EventType::type, ROWS_OF(TABLE)},
      CUFLIGHT_SCHEMA_EVENT_TABLES(TABLE_ENTRY)
#undef TABLE_ENTRY
  };
  ASSERT_EQ(tables.size(), static_cast<size_t>(kEventTypeCount));
  for (const auto& [type, rows] : tables) {
    const std::string name(EventTypeName(type));
    const Json file = ReadSchema(name + ".schema.json");
    EXPECT_EQ(file["properties"]["type"]["const"], name);
    ExpectTable(rows, file, file, name, {"type"});
  }
}

TEST(EventFieldsTest, StallObjectsMatchTheirDefinitions) {
  const Json file = ReadSchema("stall.schema.json");
  ExpectTable(ROWS_OF(CUFLIGHT_SCHEMA_STALL_STREAM), file["$defs"]["stream"], file,
              "stall.streams");
  ExpectTable(ROWS_OF(CUFLIGHT_SCHEMA_STALL_LAUNCH), file["$defs"]["launch"], file,
              "stall.launches");
}

TEST(EventFieldsTest, HeaderMatchesCommonHeader) {
  const Json common = ReadSchema("common.schema.json");
  ExpectTable(ROWS_OF(CUFLIGHT_SCHEMA_HEADER), common["$defs"]["header"], common, "header",
              {"type", "version"});
}

// The test itself: a row whose range differs from the file is caught (not only equal tables).
TEST(EventFieldsTest, ADifferentRangeIsCaught) {
  const Json file = ReadSchema("kernel.schema.json");
  Row row = FieldRow("Int", "carveout", MakeArgs(IntRange{-1, 99}));  // the file says 100
  EXPECT_NONFATAL_FAILURE(ExpectKind(row, file["properties"]["carveout"], file, "carveout"),
                          "carveout");
}

}  // namespace
}  // namespace cuflight::schema
