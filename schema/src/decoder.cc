#include "cuflight/schema/decoder.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuflight::schema {
namespace {

using nlohmann::json;

// Integer ranges, the same as the $defs of schema/v1/common.schema.json.
struct IntRange {
  int64_t lo;
  uint64_t hi;
};
constexpr IntRange kUint64{0, std::numeric_limits<uint64_t>::max()};
constexpr IntRange kUint32{0, std::numeric_limits<uint32_t>::max()};
constexpr IntRange kInt32{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
constexpr IntRange kCount32{0, std::numeric_limits<int32_t>::max()};
constexpr IntRange kCount64{0, std::numeric_limits<int64_t>::max()};
constexpr IntRange kDeviceOrUnknown{-1, std::numeric_limits<int32_t>::max()};
constexpr IntRange kCarveout{-1, 100};
constexpr IntRange kSignal{1, 64};  // Linux signal numbers, real-time ones included

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr size_t kMaxExcerpt = 48;
constexpr size_t kMaxMessage = 240;

// An integral JSON number: -magnitude when negative, else magnitude. JSON Schema counts a number
// with a zero fraction (2.0) as an integer, so the decoder does too.
struct Integral {
  bool negative = false;
  uint64_t magnitude = 0;
};

enum class IntegralKind { kOk, kNotInteger, kTooLarge };

IntegralKind ToIntegral(const json& v, Integral* out) {
  switch (v.type()) {
    case json::value_t::number_unsigned:
      *out = {false, v.get<uint64_t>()};
      return IntegralKind::kOk;
    case json::value_t::number_integer: {
      const auto i = v.get<int64_t>();
      *out = {i < 0, i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i)};
      return IntegralKind::kOk;
    }
    case json::value_t::number_float: {
      const auto d = v.get<double>();
      if (!std::isfinite(d) || std::trunc(d) != d) return IntegralKind::kNotInteger;
      if (std::fabs(d) >= 18446744073709551616.0) return IntegralKind::kTooLarge;  // 2^64
      *out = {d < 0, static_cast<uint64_t>(std::fabs(d))};
      return IntegralKind::kOk;
    }
    default:
      return IntegralKind::kNotInteger;
  }
}

bool InRange(const Integral& x, const IntRange& r) {
  if (x.negative) return r.lo < 0 && x.magnitude <= 0 - static_cast<uint64_t>(r.lo);
  return x.magnitude <= r.hi && (r.lo <= 0 || x.magnitude >= static_cast<uint64_t>(r.lo));
}

// `x` must be in the range of T.
template <class T>
T ValueOf(const Integral& x) {
  if (x.negative) return static_cast<T>(static_cast<int64_t>(0 - x.magnitude));
  return static_cast<T>(x.magnitude);
}

std::string RangeText(const char* what, const IntRange& r) {
  return std::string(what) + " in [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]";
}

// A bound for messages: 0 rather than 0.0.
std::string NumberText(double d) {
  if (std::trunc(d) == d && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d));
  return json(d).dump();
}

// A short ASCII rendering of `v` for messages.
std::string Excerpt(const json& v) {
  std::string text;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    text = json(s.substr(0, kMaxExcerpt)).dump(-1, ' ', true, json::error_handler_t::replace);
  } else if ((v.is_array() || v.is_object()) && v.size() > 8) {
    return std::string(v.is_array() ? "an array of " : "an object of ") + std::to_string(v.size()) +
           " items";
  } else {
    text = v.dump(-1, ' ', true, json::error_handler_t::replace);
  }
  if (text.size() > kMaxExcerpt) {
    text.resize(kMaxExcerpt - 3);
    text += "...";
  }
  return text;
}

// Reads the fields of one JSON object into a DecodeResult. The first failure is recorded in the
// result; every later read is a no-op.
class Reader {
 public:
  Reader(const json& object, std::string_view prefix, DecodeResult* result)
      : object_(object), prefix_(prefix), result_(result) {}

  bool ok() const { return result_->reason == Reason::kOk; }

  template <class T>
  void Int(const char* key, const IntRange& range, T* out) {
    if (const json* v = Get(key)) ReadInt(key, *v, range, "an integer", out);
  }

  // JSON null reads as `null_value`.
  template <class T>
  void IntOrNull(const char* key, const IntRange& range, T null_value, T* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (v->is_null()) {
      *out = null_value;
      return;
    }
    ReadInt(key, *v, range, "an integer or null", out);
  }

  // Absent: *out keeps its value.
  template <class T>
  void OptionalInt(const char* key, const IntRange& range, T* out) {
    const json* v = Find(key);
    if (v != nullptr && ok()) ReadInt(key, *v, range, "an integer", out);
  }

  // Absent: *out is reset.
  template <class T>
  void OptionalInt(const char* key, const IntRange& range, std::optional<T>* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) {
      out->reset();
      return;
    }
    T value{};
    ReadInt(key, *v, range, "an integer", &value);
    *out = value;
  }

  // Absent or JSON null: `null_value`.
  template <class T>
  void OptionalIntOrNull(const char* key, const IntRange& range, T null_value, T* out) {
    const json* v = Find(key);
    if (!ok()) return;
    if (v == nullptr || v->is_null()) {
      *out = null_value;
      return;
    }
    ReadInt(key, *v, range, "an integer or null", out);
  }

  // Absent: false.
  void Bool(const char* key, bool* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(Reason::kWrongType, key, "must be a boolean", v);
    *out = v->get<bool>();
  }

  void OptionalBool(const char* key, bool* out) {
    const json* v = Find(key);
    if (!ok()) return;
    if (v == nullptr) {
      *out = false;
      return;
    }
    if (!v->is_boolean()) return Fail(Reason::kWrongType, key, "must be a boolean", v);
    *out = v->get<bool>();
  }

  // An object of strings; absent: empty. The members come out sorted by name (the JSON object's
  // order here), a repeated name with its last value.
  void OptionalStringMap(const char* key, std::vector<std::pair<std::string, std::string>>* out) {
    const json* v = Find(key);
    if (!ok()) return;
    out->clear();
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an object of strings";
    if (!v->is_object()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->reserve(v->size());
    for (const auto& [name, value] : v->items()) {
      if (!value.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      out->emplace_back(name, value.get_ref<const std::string&>());
    }
  }

  void OptionalOccupancySource(const char* key, OccupancySource* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<OccupancySource> s =
        OccupancySourceFromName(v->get_ref<const std::string&>());
    if (!s) return Fail(Reason::kOutOfRange, key, "must be one of driver, engine", v);
    *out = *s;
  }

  void OptionalTimingStoppedReason(const char* key, TimingStoppedReason* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<TimingStoppedReason> r =
        TimingStoppedReasonFromName(v->get_ref<const std::string&>());
    if (!r) return Fail(Reason::kOutOfRange, key, "must be one of records_stopped, unavailable", v);
    *out = *r;
  }

  void OneLostReason(const char* key, LostReason* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<LostReason> r = LostReasonFromName(v->get_ref<const std::string&>());
    if (!r) {
      return Fail(Reason::kOutOfRange, key, "must be one of disconnected, collector_shutdown", v);
    }
    *out = *r;
  }

  void OneStallState(const char* key, StallState* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<StallState> state = StallStateFromName(v->get_ref<const std::string&>());
    if (!state) return Fail(Reason::kOutOfRange, key, "must be one of stalled, resolved", v);
    *out = *state;
  }

  // An array of objects, each read by `read(Reader&, T*)` with the prefix "<prefix>: <key>[i]",
  // in order; the first fault of any of them is the line's.
  template <class T, class ReadItem>
  void Objects(const char* key, std::vector<T>* out, ReadItem read) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of objects";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      if (!item.is_object()) return Fail(Reason::kWrongType, key, kWhat, v);
      const std::string prefix = std::string(prefix_) + ": " + key + "[" + std::to_string(i) + "]";
      Reader nested(item, prefix, result_);
      read(nested, &out->emplace_back());
      if (!ok()) return;
    }
  }

  template <class T>
  void IntOrNull(const char* key, const IntRange& range, std::optional<T>* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (v->is_null()) {
      out->reset();
      return;
    }
    T value{};
    ReadInt(key, *v, range, "an integer or null", &value);
    *out = value;
  }

  void Number(const char* key, double lo, double hi, double* out) {
    if (const json* v = Get(key)) ReadNumber(key, *v, lo, hi, out);
  }

  // Absent: *present = false.
  void OptionalNumber(const char* key, double lo, double hi, double* out, bool* present) {
    const json* v = Find(key);
    *present = v != nullptr;
    if (v != nullptr && ok()) ReadNumber(key, *v, lo, hi, out);
  }

  void String(const char* key, std::string* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    *out = v->get_ref<const std::string&>();
  }

  void Strings(const char* key, std::vector<std::string>* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of strings";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (const json& item : *v) {
      if (!item.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      out->push_back(item.get_ref<const std::string&>());
    }
  }

  // Absent: empty.
  void OptionalStrings(const char* key, std::vector<std::string>* out) {
    const json* v = Find(key);
    if (!ok()) return;
    out->clear();
    if (v == nullptr) return;
    Strings(key, out);
  }

  void Ids(const char* key, std::vector<uint64_t>* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of unsigned integers";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (const json& item : *v) {
      Integral x;
      const IntegralKind kind = ToIntegral(item, &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, key, kWhat, v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint64)) {
        return Fail(Reason::kOutOfRange, key,
                    "must be an array of " + RangeText("integers", kUint64), v);
      }
      out->push_back(ValueOf<uint64_t>(x));
    }
  }

  void Dim(const char* key, Dim3* out) {
    if (const json* v = Get(key)) ReadDim(key, *v, out);
  }

  void OptionalDim(const char* key, std::optional<Dim3>* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) {
      out->reset();
      return;
    }
    ReadDim(key, *v, &out->emplace());
  }

  void OneResource(const char* key, Resource* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<Resource> r = ResourceFromName(v->get_ref<const std::string&>());
    if (!r) return Fail(Reason::kOutOfRange, key, "must be one of " + ResourceList(), v);
    *out = *r;
  }

  void ResourceSet(const char* key, ResourceMask* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of resource names";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    ResourceMask mask = 0;
    for (const json& item : *v) {
      if (!item.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      const std::optional<Resource> r = ResourceFromName(item.get_ref<const std::string&>());
      if (!r) return Fail(Reason::kOutOfRange, key, "must hold only " + ResourceList(), v);
      if (mask & MaskOf(*r)) return Fail(Reason::kOutOfRange, key, "must not repeat a resource", v);
      mask = static_cast<ResourceMask>(mask | MaskOf(*r));
    }
    *out = mask;
  }

  // `key` must be present when `trigger` is (JSON Schema dependentRequired).
  void RequiredWith(const char* key, const char* trigger) {
    if (ok() && Find(trigger) != nullptr && Find(key) == nullptr) {
      Fail(Reason::kMissingField, key,
           std::string("is required when \"") + trigger + "\" is present", nullptr);
    }
  }

  // `version`: an integer, equal to kSchemaVersion.
  void Version() {
    const json* v = Get("version");
    if (v == nullptr) return;
    Integral x;
    const IntegralKind kind = ToIntegral(*v, &x);
    if (kind == IntegralKind::kNotInteger) {
      return Fail(Reason::kWrongType, "version", "must be an integer", v);
    }
    if (kind == IntegralKind::kTooLarge || x.negative ||
        x.magnitude != static_cast<uint64_t>(kSchemaVersion)) {
      SetError(Reason::kUnsupportedVersion, std::string(prefix_) + ": version " + Excerpt(*v) +
                                                " is not supported (this build reads version " +
                                                std::to_string(kSchemaVersion) + ")");
    }
  }

  void SetError(Reason reason, std::string message) {
    result_->reason = reason;
    if (message.size() > kMaxMessage) {
      message.resize(kMaxMessage - 3);
      message += "...";
    }
    result_->message = std::move(message);
  }

 private:
  const json* Find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  // The field, or nullptr when it is missing (recorded) or an error is already recorded.
  const json* Get(const char* key) {
    if (!ok()) return nullptr;
    const json* v = Find(key);
    if (v == nullptr) Fail(Reason::kMissingField, key, "is missing", nullptr);
    return v;
  }

  void Fail(Reason reason, const char* key, std::string_view what, const json* got) {
    std::string message = std::string(prefix_) + ": field \"" + key + "\" ";
    message += what;
    if (got != nullptr) message += ", got " + Excerpt(*got);
    SetError(reason, std::move(message));
  }

  template <class T>
  void ReadInt(const char* key, const json& v, const IntRange& range, const char* what, T* out) {
    Integral x;
    const IntegralKind kind = ToIntegral(v, &x);
    if (kind == IntegralKind::kNotInteger) {
      return Fail(Reason::kWrongType, key, std::string("must be ") + what, &v);
    }
    if (kind == IntegralKind::kTooLarge || !InRange(x, range)) {
      return Fail(Reason::kOutOfRange, key, "must be " + RangeText("an integer", range), &v);
    }
    *out = ValueOf<T>(x);
  }

  void ReadNumber(const char* key, const json& v, double lo, double hi, double* out) {
    if (v.is_number()) {
      const auto d = v.get<double>();
      if (d >= lo && d <= hi) {
        *out = d;
        return;
      }
    }
    const std::string what =
        hi == kInfinity ? "must be a number >= " + NumberText(lo)
                        : "must be a number in [" + NumberText(lo) + ", " + NumberText(hi) + "]";
    Fail(v.is_number() ? Reason::kOutOfRange : Reason::kWrongType, key, what, &v);
  }

  void ReadDim(const char* key, const json& v, Dim3* out) {
    constexpr const char* kWhat = "must be an array of 3 unsigned integers";
    if (!v.is_array() || v.size() != 3) return Fail(Reason::kWrongType, key, kWhat, &v);
    uint32_t xyz[3] = {};
    for (size_t i = 0; i < 3; ++i) {
      Integral x;
      const IntegralKind kind = ToIntegral(v[i], &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, key, kWhat, &v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint32)) {
        return Fail(Reason::kOutOfRange, key,
                    "must be an array of 3 " + RangeText("integers", kUint32), &v);
      }
      xyz[i] = ValueOf<uint32_t>(x);
    }
    *out = {xyz[0], xyz[1], xyz[2]};
  }

  static std::string ResourceList() {
    std::string list;
    for (int i = 0; i < kResourceCount; ++i) {
      if (i > 0) list += ", ";
      list += ResourceName(static_cast<Resource>(i));
    }
    return list;
  }

  const json& object_;
  std::string_view prefix_;
  DecodeResult* result_;
};

void Read(Reader& r, OwnedProcessStartEvent* e) {
  r.String("exe", &e->exe);
  r.Strings("argv", &e->argv);
  r.String("hostname", &e->hostname);
  r.Int("start_ns", kCount64, &e->start_ns);
  r.String("cuflight_version", &e->cuflight_version);
  r.Int("cuda_driver_version", kCount32, &e->cuda_driver_version);
  r.Int("cupti_version", kCount32, &e->cupti_version);
  r.OptionalInt("ppid", kCount32, &e->ppid);
  r.OptionalIntOrNull("uid", kUint32, int64_t{-1}, &e->uid);
  r.OptionalStringMap("config", &e->config);
  r.OptionalInt("instance_id", kUint64, &e->instance_id);
  r.OptionalInt("pid_ns", kUint64, &e->pid_ns);
  r.OptionalStrings("truncated", &e->truncated);
}

void Read(Reader& r, OwnedDeviceEvent* e) {
  r.Int("device", kCount32, &e->device);
  r.String("name", &e->name);
  r.String("uuid", &e->uuid);
  r.Int("cc_major", kCount32, &e->cc_major);
  r.Int("cc_minor", kCount32, &e->cc_minor);
  r.Int("sm_count", kCount32, &e->sm_count);
  r.Int("max_threads_per_block", kCount32, &e->max_threads_per_block);
  r.Int("max_threads_per_sm", kCount32, &e->max_threads_per_sm);
  r.Int("max_blocks_per_sm", kCount32, &e->max_blocks_per_sm);
  r.Int("regs_per_sm", kCount32, &e->regs_per_sm);
  r.Int("regs_per_block", kCount32, &e->regs_per_block);
  r.Int("smem_per_sm", kCount64, &e->smem_per_sm);
  r.Int("smem_per_block", kCount64, &e->smem_per_block);
  r.Int("smem_per_block_optin", kCount64, &e->smem_per_block_optin);
  r.Int("reserved_smem_per_block", kCount64, &e->reserved_smem_per_block);
  r.Int("warp_size", kCount32, &e->warp_size);
  r.Int("max_cluster_size", kCount32, &e->max_cluster_size);
  r.OptionalBool("recovered", &e->recovered);
}

void Read(Reader& r, OwnedKernelEvent* e) {
  r.Int("tid", kCount32, &e->tid);
  r.Int("device", kCount32, &e->device);
  r.Int("context", kUint64, &e->context);
  r.Int("stream", kUint64, &e->stream);
  r.Int("correlation_id", kUint64, &e->correlation_id);
  r.String("api", &e->api);
  r.String("name", &e->name);
  r.String("demangled", &e->demangled);
  r.Dim("grid", &e->grid);
  r.Dim("block", &e->block);
  r.OptionalDim("cluster", &e->cluster);
  r.Int("num_regs", kCount32, &e->num_regs);
  r.Int("static_shared_bytes", kCount64, &e->static_shared_bytes);
  r.Int("dyn_shared_bytes", kCount64, &e->dyn_shared_bytes);
  r.Int("local_bytes", kCount64, &e->local_bytes);
  r.Int("const_bytes", kCount64, &e->const_bytes);
  r.Int("max_threads_per_block", kCount32, &e->max_threads_per_block);
  r.Int("carveout", kCarveout, &e->carveout);
  r.OptionalBool("cooperative", &e->cooperative);
  r.OptionalInt("graph_id", kUint64, &e->graph_id);
  r.OptionalInt("graph_node_id", kUint64, &e->graph_node_id);
  r.RequiredWith("graph_node_id", "graph_id");
  r.RequiredWith("graph_id", "graph_node_id");
  OccupancyFields& o = e->occupancy;
  r.Int("max_active_blocks", kCount32, &o.max_active_blocks);
  r.Int("active_warps", kCount32, &o.active_warps);
  r.Int("max_warps", kCount32, &o.max_warps);
  r.Number("occupancy", 0, 1, &o.occupancy);
  r.Number("reg_occupancy", 0, 1, &o.reg_occupancy);
  r.Number("smem_occupancy", 0, 1, &o.smem_occupancy);
  r.Number("warp_occupancy", 0, 1, &o.warp_occupancy);
  r.Number("block_occupancy", 0, 1, &o.block_occupancy);
  r.Number("barrier_occupancy", 0, 1, &o.barrier_occupancy);
  r.OptionalNumber("cluster_occupancy", 0, 1, &o.cluster_occupancy, &o.has_cluster);
  r.RequiredWith("cluster", "cluster_occupancy");
  r.OneResource("limiting_resource", &o.limiting_resource);
  r.ResourceSet("limiting_resources", &o.limiting_resources);
  r.Int("allocated_regs_per_block", kCount32, &o.allocated_regs_per_block);
  r.Int("allocated_smem_per_block", kCount64, &o.allocated_smem_per_block);
  r.Number("waves", 0, kInfinity, &o.waves);
  r.Number("tail_utilization", 0, 1, &o.tail_utilization);
  r.IntOrNull("regs_for_next_block", kCount32, int32_t{-1}, &o.regs_for_next_block);
  r.IntOrNull("smem_for_next_block", kCount64, int64_t{-1}, &o.smem_for_next_block);
  r.Int("best_block_size", kCount32, &o.best_block_size);
  r.OptionalOccupancySource("occupancy_source", &e->occupancy_source);
  r.OptionalInt("engine_max_active_blocks", kCount32, &e->engine_max_active_blocks);
  r.OptionalBool("recovered", &e->recovered);
}

void Read(Reader& r, OwnedKernelTimeEvent* e) {
  r.Int("correlation_id", kUint64, &e->correlation_id);
  r.Int("device", kCount32, &e->device);
  r.Int("context", kUint64, &e->context);
  r.Int("stream", kUint64, &e->stream);
  r.Int("start_ns", kUint64, &e->start_ns);
  r.Int("end_ns", kUint64, &e->end_ns);
  r.Int("duration_ns", kUint64, &e->duration_ns);
  r.OptionalInt("graph_id", kUint64, &e->graph_id);
  r.OptionalInt("graph_node_id", kUint64, &e->graph_node_id);
  r.RequiredWith("graph_node_id", "graph_id");
  r.RequiredWith("graph_id", "graph_node_id");
}

void Read(Reader& r, OwnedApiErrorEvent* e) {
  r.String("api", &e->api);
  r.Int("code", kInt32, &e->code);
  r.String("error_name", &e->error_name);
  r.String("message", &e->message);
  r.Int("device", kDeviceOrUnknown, &e->device);
  r.Int("context", kUint64, &e->context);
  r.Int("stream", kUint64, &e->stream);
  r.Ids("last_correlation_ids", &e->last_correlation_ids);
}

// Counters added to stats, process_end and process_crash in a minor version: optional, 0 when
// absent.
template <class E>
void ReadLaunchCounters(Reader& r, E* e) {
  r.OptionalInt("launches", kUint64, &e->launches);
  r.OptionalInt("filtered", kUint64, &e->filtered);
  r.OptionalInt("dropped_ring_full", kUint64, &e->dropped_ring_full);
  r.OptionalInt("dropped_disconnected", kUint64, &e->dropped_disconnected);
  r.OptionalInt("dropped_backpressure", kUint64, &e->dropped_backpressure);
  r.OptionalInt("timing_dropped", kUint64, &e->timing_dropped);
  r.OptionalInt("occupancy_disagreements", kUint64, &e->occupancy_disagreements);
  r.OptionalInt("api_errors_routine", kUint64, &e->api_errors_routine);
  r.OptionalInt("api_errors_suppressed", kUint64, &e->api_errors_suppressed);
  r.OptionalInt("timing_stopped", kUint64, &e->timing_stopped);
  r.OptionalTimingStoppedReason("timing_stopped_reason", &e->timing_stopped_reason);
}

void Read(Reader& r, OwnedStatsEvent* e) {
  r.Int("emitted", kUint64, &e->emitted);
  r.Int("dropped", kUint64, &e->dropped);
  r.Int("ring_capacity", kUint64, &e->ring_capacity);
  r.Int("interval_ns", kCount64, &e->interval_ns);
  ReadLaunchCounters(r, e);
  r.OptionalInt("ring_high_water", kUint64, &e->ring_high_water);
  r.OptionalInt("cpu_ns", kUint64, &e->cpu_ns);
}

void Read(Reader& r, OwnedProcessEndEvent* e) {
  r.IntOrNull("exit_code", kInt32, &e->exit_code);
  r.Int("emitted", kUint64, &e->emitted);
  r.Int("dropped", kUint64, &e->dropped);
  ReadLaunchCounters(r, e);
}

void Read(Reader& r, OwnedProcessLostEvent* e) {
  r.IntOrNull("last_seq", kUint64, &e->last_seq);
  r.OneLostReason("reason", &e->reason);
  r.Int("events_stored", kUint64, &e->events_stored);
  r.Int("events_lost", kUint64, &e->events_lost);
  r.OptionalInt("events_recovered", kUint64, &e->events_recovered);
}

void Read(Reader& r, OwnedProcessCrashEvent* e) {
  r.Int("signal", kSignal, &e->signal);
  r.String("signal_name", &e->signal_name);
  r.Int("code", kInt32, &e->code);
  r.Int("addr", kUint64, &e->addr);
  r.Int("tid", kInt32, &e->tid);
  r.Bool("app_handler", &e->app_handler);
  r.Int("emitted", kUint64, &e->emitted);
  r.Int("dropped", kUint64, &e->dropped);
  ReadLaunchCounters(r, e);
}

void Read(Reader& r, OwnedStallLaunch* l) {
  r.Int("correlation_id", kUint64, &l->correlation_id);
  r.String("name", &l->name);
  r.String("demangled", &l->demangled);
  r.Dim("grid", &l->grid);
  r.Dim("block", &l->block);
  r.Number("occupancy", 0, 1, &l->occupancy);
  r.Int("age_ms", kCount64, &l->age_ms);
}

void Read(Reader& r, OwnedStallStream* s) {
  r.Int("device", kCount32, &s->device);
  r.Int("context", kUint64, &s->context);
  r.Int("stream", kUint64, &s->stream);
  r.Int("waiting_ms", kCount64, &s->waiting_ms);
  r.Int("unfinished", kCount64, &s->unfinished);
  r.Objects("launches", &s->launches, [](Reader& nested, OwnedStallLaunch* l) { Read(nested, l); });
}

void Read(Reader& r, OwnedStallEvent* e) {
  r.OneStallState("state", &e->state);
  r.Int("stall_ms", kCount64, &e->stall_ms);
  r.Int("stalled_ms", kCount64, &e->stalled_ms);
  r.Int("completed", kUint64, &e->completed);
  r.Int("streams_stalled", kCount32, &e->streams_stalled);
  r.Objects("streams", &e->streams, [](Reader& nested, OwnedStallStream* s) { Read(nested, s); });
}

template <class T>
void ReadEvent(Reader& r, const Header& header, OwnedEvent* out) {
  T& e = out->emplace<T>();
  e.header = header;
  Read(r, &e);
}

// nlohmann's parse error text without its "[json.exception...] " tag, with non-ASCII bytes
// (from the input) replaced by '?'.
std::string ParseErrorText(const char* what) {
  std::string_view text(what);
  if (const size_t tag_end = text.find("] "); tag_end != std::string_view::npos) {
    text.remove_prefix(tag_end + 2);
  }
  std::string out = "malformed JSON: ";
  for (const char c : text.substr(0, kMaxMessage)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7F) ? '?' : c;
  }
  return out;
}

// Limits nlohmann does not enforce: no NUL byte anywhere (its lexer reads one as the end of the
// input and would accept `{...}\0garbage`), arrays and objects nested at most kMaxNestingDepth
// deep. Returns the problem, or nullptr. Brackets inside strings do not count; on a line that is
// not JSON the count may be off, but such a line is malformed either way.
const char* CheckLimits(std::string_view line) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\0') return "NUL byte";
    if (in_string) {
      if (c == '\\') {
        ++i;
        if (i < line.size() && line[i] == '\0') return "NUL byte";
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNestingDepth) return "nested too deep";
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return nullptr;
}

void DecodeInto(std::string_view line, DecodeResult* result) {
  if (const char* problem = CheckLimits(line)) {
    result->reason = Reason::kMalformedJson;
    result->message = std::string("malformed JSON: ") + problem;
    return;
  }
  json doc;
  try {
    doc = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double
    result->reason = Reason::kMalformedJson;
    result->message = ParseErrorText(e.what());
    return;
  }
  if (!doc.is_object()) {
    result->reason = Reason::kNotAnObject;
    result->message = std::string("event is not a JSON object, got ") + doc.type_name();
    return;
  }

  std::string type_name;
  Reader(doc, "event", result).String("type", &type_name);
  if (!result->ok()) return;
  const std::optional<EventType> type = EventTypeFromName(type_name);
  Reader r(doc, type ? EventTypeName(*type) : "event", result);
  r.Version();
  Header header;
  r.Int("ts_ns", kCount64, &header.ts_ns);
  r.Int("pid", kCount32, &header.pid);
  r.Int("seq", kUint64, &header.seq);
  if (!r.ok()) return;
  result->header = header;
  if (!type) {
    r.SetError(Reason::kUnknownType, "event: unknown type " + Excerpt(json(type_name)));
    return;
  }

  switch (*type) {
    case EventType::kProcessStart:
      return ReadEvent<OwnedProcessStartEvent>(r, header, &result->event);
    case EventType::kDevice:
      return ReadEvent<OwnedDeviceEvent>(r, header, &result->event);
    case EventType::kKernel:
      return ReadEvent<OwnedKernelEvent>(r, header, &result->event);
    case EventType::kKernelTime:
      return ReadEvent<OwnedKernelTimeEvent>(r, header, &result->event);
    case EventType::kApiError:
      return ReadEvent<OwnedApiErrorEvent>(r, header, &result->event);
    case EventType::kStats:
      return ReadEvent<OwnedStatsEvent>(r, header, &result->event);
    case EventType::kProcessEnd:
      return ReadEvent<OwnedProcessEndEvent>(r, header, &result->event);
    case EventType::kProcessLost:
      return ReadEvent<OwnedProcessLostEvent>(r, header, &result->event);
    case EventType::kProcessCrash:
      return ReadEvent<OwnedProcessCrashEvent>(r, header, &result->event);
    case EventType::kStall:
      return ReadEvent<OwnedStallEvent>(r, header, &result->event);
  }
}

}  // namespace

DecodeResult Decode(std::string_view line) noexcept {
  DecodeResult result;
  try {
    DecodeInto(line, &result);
  } catch (const std::bad_alloc&) {
    result.reason = Reason::kInternalError;
    result.message = "out of memory";  // fits the small-string buffer: no allocation
  } catch (...) {
    result.reason = Reason::kInternalError;
    result.message = "internal error";
  }
  return result;
}

}  // namespace cuflight::schema
