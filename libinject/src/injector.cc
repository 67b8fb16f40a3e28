#include "injector.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cuflight/base/tsc_clock.h"
#include "cuflight/spill/spill_writer.h"
#include "config_table.h"
#include "cuflight/transport/collector_path.h"
#include "device_identity.h"
#include "driver_queries.h"
#include "log.h"

namespace cuflight::inject {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kFunctionTableCapacity = 1 << 16;
constexpr size_t kActivityBufferCount = 8;
constexpr size_t kActivityBufferBytes = 1 << 20;
constexpr auto kExitFlushLimit = std::chrono::seconds(1);
// The black box's journal holds at most this many records (176 bytes each) whose events the
// transport has not written yet; a larger ring's backlog beyond it is not recoverable.
constexpr size_t kMaxJournal = size_t{1} << 16;

// CUpti_SubscriberParams as CUPTI 13.2 extended it: `allowMultipleSubscribers` asks CUPTI to let
// this subscriber coexist with others ("Enabling Multiple Subscribers": the first subscriber's
// setting holds for all). The 13.0 headers' struct ends before it.
struct SubscriberParamsV2 {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
};
// From this version cuptiSubscribe_v2 belongs to the versioned family that must not be mixed with
// the unversioned activity API; before it (CUPTI 12.6 to 13.1) it only names the subscriber and
// reports the holder of a refused subscription.
constexpr uint32_t kCuptiVersionWithSubscriberScopedApi = 130200;
// The first CUPTI whose cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) cannot
// deadlock: the CUPTI release notes, "Updates in CUDA 13.0 Update 1", Resolved Issues: "Fixed a
// potential deadlock that could occur while disabling the activity kind
// CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL using the API cuptiActivityDisable"; cupti_version.h:
// "v130001 : CUDA Toolkit 13.0 Update 1". The sampled policy disables it at every window's end.
constexpr uint32_t kCuptiVersionSafeKernelDisable = 130001;

spdlog::level::level_enum ToSpdlog(env::LogLevel level) {
  switch (level) {
    case env::LogLevel::kTrace:
      return spdlog::level::trace;
    case env::LogLevel::kDebug:
      return spdlog::level::debug;
    case env::LogLevel::kInfo:
      return spdlog::level::info;
    case env::LogLevel::kWarn:
      return spdlog::level::warn;
    case env::LogLevel::kError:
      return spdlog::level::err;
    case env::LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

std::string CuptiError(const CuptiApi& cupti, CUptiResult result) {
  const char* text = nullptr;
  if (cupti.GetResultString != nullptr && cupti.GetResultString(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

}  // namespace

Injector& Injector::Instance() noexcept {
  // Never destroyed: CUPTI callbacks and atexit handlers may run during static destruction.
  static Injector* instance = new Injector();
  return *instance;
}

void Injector::Initialize() noexcept {
  bool expected = false;
  if (!initialized_.compare_exchange_strong(expected, true)) return;
  try {
    if (!InitializeOrExplain()) return;
  } catch (const std::exception& e) {
    Log().error("set-up failed ({}); the application runs without cuflight", e.what());
  } catch (...) {
    Log().error("set-up failed; the application runs without cuflight");
  }
}

bool Injector::InitializeOrExplain() noexcept {
  env::ParsedConfig parsed = env::ParseConfig([](const char* name) { return std::getenv(name); },
                                              transport::DefaultCollectorPath());
  config_ = std::move(parsed.config);
  // Which device UUIDs the environment names as MIG instances, before any device is read.
  RememberMigNames([](const char* name) { return std::getenv(name); });
  SetLogLevel(ToSpdlog(config_.log_level));
  for (const std::string& warning : parsed.warnings) Log().warn("{}", warning);

  std::string error;
  if (!LoadDriverApi(&driver_, &error)) {
    Log().error("{}; the application runs without cuflight", error);
    return false;
  }
  std::string cupti_path;
  if (!LoadCuptiApi(&cupti_, &cupti_path, &error)) {
    Log().error("{}; the application runs without cuflight", error);
    return false;
  }
  Log().debug("libcupti from {}", cupti_path);
  int driver_version = 0;
  if (driver_.DriverGetVersion(&driver_version) == CUDA_SUCCESS) driver_version_ = driver_version;
  cupti_.GetVersion(&cupti_version_);
  if (config_.timing != env::TimingPolicy::kOff &&
      cupti_version_ > kCuptiApiVersionNewestKnownLayout) {
    // A kernel record layout past CUpti_ActivityKernel13 (cupti_api.h, KernelRecordVersion):
    // its fields may have moved, and none is read at a guessed offset.
    Log().warn(
        "libcupti at {} has API version {}, newer than the newest kernel record layout this "
        "build knows (CUDA 13.4's CUpti_ActivityKernel13, API version {}): kernel timing and "
        "graph-node events are off, stalls are seen from synchronising calls only; launches are "
        "still recorded",
        cupti_path, cupti_version_, kCuptiApiVersionNewestKnownLayout);
    config_.timing = env::TimingPolicy::kOff;
  } else if (config_.timing != env::TimingPolicy::kOff &&
             cupti_version_ < kCuptiApiVersionForActivityLayout) {
    // Activity records are read with the CUDA 13 layout (CUpti_ActivityKernel10); an older
    // libcupti writes another one. Launch callbacks do not depend on it.
    Log().warn(
        "libcupti at {} has API version {}, older than CUDA 13's ({}): kernel timing and "
        "graph-node events are off, stalls are seen from synchronising calls only; launches are "
        "still recorded",
        cupti_path, cupti_version_, kCuptiApiVersionForActivityLayout);
    config_.timing = env::TimingPolicy::kOff;
  } else if (config_.timing == env::TimingPolicy::kSampled &&
             cupti_version_ < kCuptiVersionSafeKernelDisable) {
    // process_start's config then says "all": what this process does.
    Log().warn("libcupti at {} has API version {}, before CUDA 13.0 Update 1 ({}), whose "
               "cuptiActivityDisable of kernel records may deadlock: CUFLIGHT_TIMING=sampled "
               "falls back to all (every launch timed)",
               cupti_path, cupti_version_, kCuptiVersionSafeKernelDisable);
    config_.timing = env::TimingPolicy::kAll;
  }
  const bool timing = config_.timing != env::TimingPolicy::kOff;

  std::vector<std::string> filter_warnings;
  filter_ = std::make_unique<env::NameFilter>(env::NameFilter::Make(config_, &filter_warnings));
  for (const std::string& warning : filter_warnings) Log().warn("{}", warning);
  functions_ = std::make_unique<FunctionTable>(kFunctionTableCapacity);
  devices_ = std::make_unique<DeviceTable>();
  if (timing) {
    activity_ = std::make_unique<ActivityBuffers>(kActivityBufferCount, kActivityBufferBytes);
  }

  // Taking turns with other CUPTI tools (cupti_yield.h): CUFLIGHT_YIELD=start, or a trigger file
  // that exists now, leaves CUPTI alone from the start.
  CuptiYield::Options yield_options;
  yield_options.start_hold = std::chrono::milliseconds(config_.yield_ms);
  if (config_.yield.starts_with('/')) yield_options.trigger_file = config_.yield;
  yield_options.start_yielded = config_.yield == "start" ||
                                (!yield_options.trigger_file.empty() &&
                                 access(yield_options.trigger_file.c_str(), F_OK) == 0);
  CuptiYield::Hooks yield_hooks;
  yield_hooks.release = [this] { ReleaseCupti(); };
  yield_hooks.take = [this] { return TakeCupti(); };
  yield_ = std::make_unique<CuptiYield>(std::move(yield_options), std::move(yield_hooks),
                                        std::chrono::steady_clock::now());
  const bool start_yielded = yield_->gated();

  // The pipeline exists before the subscription (a callback may come as soon as it is made),
  // but its thread starts only after the subscription and the activity set-up: it calls CUPTI
  // (cuptiActivityFlushAll) from its first step, and this thread may be inside cuInit.
  Pipeline* pipeline = MakePipeline(/*with_activity=*/timing, /*start=*/false);
  if (pipeline == nullptr) {
    Log().error("cannot set up the event pipeline; the application runs without cuflight");
    return false;
  }
  if (start_yielded) {
    // The sender thread subscribes later (CuptiYield); process_start names no API family.
    Log().info("CUFLIGHT_YIELD={}: CUPTI left to other tools from the start; cuflight tries to "
               "take it {}",
               config_.yield,
               config_.yield == "start" ? "in " + std::to_string(config_.yield_ms) + " ms"
                                        : "once " + config_.yield + " is gone");
  } else {
    if (!Subscribe()) return false;  // Subscribe explains
    pipeline->sender->SetCuptiActivityApi(subscriber_scoped_ ? kActivityApiSubscriber
                                                             : kActivityApiGlobal);
    if (timing && !EnableTiming()) {
      // Stalls are then seen from synchronising calls only (stall_tracker.h, point 10).
      pipeline->sender->SetTimingUnavailable();
    }
  }
  if (!pipeline->sender->Start()) {
    if (cupti_.Unsubscribe != nullptr && subscriber_ != nullptr) cupti_.Unsubscribe(subscriber_);
    pipeline->ring->Close();  // a launch that got in meanwhile does not wait
    Log().error("cannot start the sender thread; the application runs without cuflight");
    return false;
  }
  if (config_.crash_handler && !InstallCrashHandlers(&Injector::ReportCrash, kUrgentFlushWaitNs)) {
    Log().warn("cannot install the fatal-signal handlers; a crash will show as process_lost");
  }
  std::atexit([] { Instance().OnExit(); });
  pthread_atfork([] { Instance().OnForkPrepare(); }, [] { Instance().OnForkParent(); },
                 [] { Instance().OnForkChild(); });
  Log().info("recording kernel launches to {}", config_.collector_path);
  return true;
}

void Injector::ReleaseCupti() noexcept {
  if (cupti_.Unsubscribe != nullptr && subscriber_ != nullptr) {
    const CUptiResult result = cupti_.Unsubscribe(subscriber_);
    if (result != CUPTI_SUCCESS) {
      Log().warn("cuptiUnsubscribe failed ({}) while yielding CUPTI", CuptiError(cupti_, result));
    }
  }
  subscriber_ = nullptr;
  Log().info("CUPTI handed over: launches are not recorded until cuflight takes it back");
}

CUptiResult Injector::TakeCupti() noexcept {
  // No callback comes until EnableCallbacks below: by then the tables are current and the gate is
  // open, so no launch is seen half-way.
  if (!Subscribe(/*quiet=*/true, /*enable_callbacks=*/false)) {
    return last_subscribe_ != CUPTI_SUCCESS ? last_subscribe_ : CUPTI_ERROR_UNKNOWN;
  }
  Pipeline* pipeline = pipeline_.load(std::memory_order_acquire);
  // Teardowns and attribute changes made while unsubscribed were not seen (recorder.h).
  if (pipeline != nullptr && pipeline->recorder != nullptr) pipeline->recorder->ForgetAfterYield();
  if (config_.timing != env::TimingPolicy::kOff && activity_ != nullptr && !EnableTiming() &&
      pipeline != nullptr) {
    pipeline->sender->SetTimingUnavailable();
  }
  yield_->OpenGate();
  EnableCallbacks();
  return CUPTI_SUCCESS;
}

bool Injector::Subscribe(bool quiet, bool enable_callbacks) noexcept {
  const spdlog::level::level_enum refused = quiet ? spdlog::level::debug : spdlog::level::err;
  CUptiResult result;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  // One API family throughout (CUPTI docs, "V1 to V2 API Migration": mixing them returns
  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): with the subscriber-scoped activity API,
  // cuptiSubscribe_v2 allowing other subscribers; otherwise cuptiSubscribe, or before 13.2
  // cuptiSubscribe_v2 without the multi-subscriber member for the holder's name.
  subscriber_scoped_ = UsesSubscriberActivityApi(cupti_, cupti_version_, driver_version_);
  if (!subscriber_scoped_ &&
      UsesSubscriberActivityApi(cupti_, cupti_version_, kDriverVersionMultiSubscriber)) {
    Log().log(quiet ? spdlog::level::debug : spdlog::level::info, "libcupti {} has multi-subscriber tracing, the driver (CUDA {}) does not (it needs "
               "r610, CUDA 13.3, or later): the unversioned CUPTI API, one tracing tool at a time",
               cupti_version_, driver_version_);
  }
  if (cupti_.SubscribeV2 != nullptr &&
      (subscriber_scoped_ || cupti_version_ < kCuptiVersionWithSubscriberScopedApi)) {
    SubscriberParamsV2 params{};
    params.subscriberName = "cuflight";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
    if (subscriber_scoped_) {
      params.structSize = offsetof(SubscriberParamsV2, allowMultipleSubscribers) + 1;
      params.allowMultipleSubscribers = 1;
    } else {
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    }
    result = cupti_.SubscribeV2(&subscriber_, &Injector::Callback, this,
                                reinterpret_cast<CUpti_SubscriberParams*>(&params));
    if (subscriber_scoped_ && (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
                               result == CUPTI_ERROR_NOT_SUPPORTED)) {
      // Multi-subscriber tracing refused (a driver older than r610 that the version check did not
      // catch, or a tool already subscribed with the unversioned API: "V1 to V2 API Migration").
      // The unversioned family then, as a CUPTI 13.2 or earlier client: cuptiSubscribe succeeds
      // when no other tool holds CUPTI, and fails with
      // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (reported below) when one does. A refused
      // cuptiSubscribe_v2 made no subscriber, so there is none to unsubscribe.
      Log().log(quiet ? spdlog::level::debug : spdlog::level::info, "cuptiSubscribe_v2 refused multiple subscribers ({}): the unversioned CUPTI API, "
                 "one tracing tool at a time",
                 CuptiError(cupti_, result));
      subscriber_scoped_ = false;
      subscriber_ = nullptr;
      result = cupti_.Subscribe(&subscriber_, &Injector::Callback, this);
    }
  } else {
    result = cupti_.Subscribe(&subscriber_, &Injector::Callback, this);
  }
  last_subscribe_ = result;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    Log().log(refused, "another CUPTI tool{}{} already holds the CUPTI subscriber; the application runs "
                "without cuflight",
                holder[0] != '\0' ? " (" : "", holder[0] != '\0' ? std::string(holder) + ")" : "");
    return false;
  }
  if (result != CUPTI_SUCCESS) {
    Log().log(refused, "cuptiSubscribe failed ({}); the application runs without cuflight",
                CuptiError(cupti_, result));
    return false;
  }
  if (enable_callbacks) EnableCallbacks();
  return true;
}

void Injector::EnableCallbacks() noexcept {
  // The calls CUFLIGHT_API_ERRORS asks for (driver_queries.h): the needed ones always, the whole
  // domain less the high-rate calls by default, or all of it.
  DriverSubscription subscription = DriverSubscription::kNeeded;
  if (config_.api_errors == env::ApiErrors::kDefault) subscription = DriverSubscription::kDefault;
  if (config_.api_errors == env::ApiErrors::kAll) subscription = DriverSubscription::kAll;
  if (!EnableDriverCallbacks(subscription, subscriber_, cupti_.EnableDomain,
                             cupti_.EnableCallback)) {
    Log().warn("cannot enable every driver API callback; api_error events cover launches and "
               "synchronising calls only (as CUFLIGHT_API_ERRORS=launches)");
  }
}

bool Injector::EnableTiming() noexcept {
  CUptiResult result;
  if (subscriber_scoped_) {
    // This subscriber's own buffers and kinds: other tools' subscribers keep theirs
    // ("Per-Subscriber Activity Management"). Predefined records (no CUpti_ActivityConfig).
    cupti_.activity_subscriber = subscriber_;  // before a buffer can complete
    result = cupti_.ActivityRegisterCallbacksV2(subscriber_, &Injector::BufferRequestedV2,
                                                &Injector::BufferCompletedV2);
    if (result == CUPTI_SUCCESS && config_.timing == env::TimingPolicy::kAll) {
      result = cupti_.ActivityEnableV2(subscriber_, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr);
    }
  } else {
    if (cupti_.ActivitySetAttribute != nullptr) {
      // The pool's buffers are all zero when handed out (ActivityBuffers): CUPTI need not zero
      // each one on the thread that asked for it. (A uint8_t, set before the first request.)
      uint8_t zeroed = 1;
      size_t size = sizeof(zeroed);
      const CUptiResult set = cupti_.ActivitySetAttribute(
          CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &zeroed);
      if (set != CUPTI_SUCCESS) {
        Log().debug("CUPTI zeroes each activity buffer itself ({})", CuptiError(cupti_, set));
      }
    }
    result = cupti_.ActivityRegisterCallbacks(&Injector::BufferRequested,
                                              &Injector::BufferCompleted);
    if (result == CUPTI_SUCCESS && config_.timing == env::TimingPolicy::kAll) {
      result = cupti_.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
  }
  // Sampled: kernel records are enabled by the sender thread, window by window (TimingWindows);
  // its first window opens before process_start.
  // Synchronization records (stall detection's other sign of progress) are enabled by the sender
  // thread only while a stall needs them (StallTracker design point 8): CUPTI makes one for every
  // stream and event query the application polls with.
  if (result != CUPTI_SUCCESS) {
    Log().warn("kernel timing unavailable ({}{}); kernel events are still recorded, without GPU "
               "times; stalls are seen from synchronising calls only",
               CuptiError(cupti_, result),
               result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                   ? ": another CUPTI tool holds activity tracing"
                   : "");
    return false;
  }
  return true;
}

Injector::Pipeline* Injector::MakePipeline(bool with_activity, bool start) noexcept {
  try {
    auto pipeline = std::make_unique<Pipeline>();
    ProcessFacts facts = ReadProcessFacts();
    MakeRing(pipeline.get(), facts.pid);
    const bool sampled = with_activity && config_.timing == env::TimingPolicy::kSampled;
    if (sampled) {
      TimingWindowOptions windows;
      windows.window = std::chrono::milliseconds(config_.timing_window_ms);
      windows.period = std::chrono::milliseconds(config_.timing_period_ms);
      windows.new_configs = config_.timing_new_configs;
      pipeline->windows = std::make_unique<TimingWindows>(windows, &cupti_);
    }
    RecorderOptions options;
    options.blackbox = pipeline->blackbox.get();
    if (sampled) options.timing_window = pipeline->windows->state();
    options.sample_every = config_.sample_every;
    options.on_full = config_.on_full;
    options.api_errors = config_.api_errors != env::ApiErrors::kOff;
    Pipeline* target = pipeline.get();
    options.on_sticky_error = [target] {
      if (target->sender != nullptr) target->sender->FlushNow(kUrgentFlushWaitNs);
    };
    if (filter_ != nullptr && filter_->active()) {
      const env::NameFilter* filter = filter_.get();
      options.accept = [filter](std::string_view demangled, std::string_view mangled) {
        return filter->Accept(demangled, mangled);
      };
    }
    pipeline->recorder = std::make_unique<Recorder>(&driver_, &cupti_, pipeline->ring.get(),
                                                    functions_.get(), devices_.get(),
                                                    std::move(options));
    SenderThreadOptions sender_options;
    sender_options.transport.socket_path = config_.collector_path;
    sender_options.transport.trusted_collector_uid = config_.collector_uid;
    sender_options.transport.warn = [](std::string_view message) { Log().warn("{}", message); };
    sender_options.transport.buffer_bytes = config_.buffer_bytes;
    // The preamble also holds the kernel configurations described so far (config_table.h): room
    // for ConfigTable::kMaxConfigs of them at about 1 KiB each (a CUTLASS-length name makes a
    // kernel_config of 1.3 KiB), beyond process_start and the device events.
    sender_options.transport.preamble_bytes = (64 << 10) + ConfigTable::kMaxConfigs * 1024;
    sender_options.transport.max_preamble_lines = 256 + ConfigTable::kMaxConfigs;
    sender_options.transport.flush_interval = std::chrono::milliseconds(config_.flush_ms);
    sender_options.stats_interval = std::chrono::milliseconds(config_.stats_ms);
    sender_options.on_full = config_.on_full;
    sender_options.timing = with_activity;
    sender_options.intern_configs = config_.intern_configs;
    // A fork()ed child's pipeline has no activity: nothing of it is timed.
    sender_options.timing_policy = with_activity ? config_.timing : env::TimingPolicy::kOff;
    sender_options.windows = pipeline->windows.get();
    // Only the process that subscribed yields (a fork()ed child's pipeline starts at once).
    sender_options.yield = start ? nullptr : yield_.get();
    sender_options.kernel_disable_safe = cupti_version_ >= kCuptiVersionSafeKernelDisable;
    // Without activity (timing off, a fork()ed child) stalls are seen from synchronising calls.
    sender_options.stall_threshold = std::chrono::milliseconds(config_.stall_ms);
    sender_options.api_error_history = static_cast<int>(config_.api_error_history);
    sender_options.driver = &driver_;
    sender_options.callback_names = &cupti_;
    sender_options.blackbox = pipeline->blackbox.get();
    if (pipeline->blackbox != nullptr) {
      sender_options.transport.pass_fd = pipeline->blackbox->fd();
    }
    if (!config_.spill_dir.empty()) {
      // One writer per process (a fork()ed child makes its own, under its own pid).
      spill::SpillWriterOptions spill;
      spill.dir = config_.spill_dir;
      spill.host = facts.hostname;
      spill.exe = facts.exe;
      spill.pid = facts.pid;
      spill.start_ns = facts.start_ns;
      spill.instance_id = facts.instance_id;
      spill.owner = "u" + std::to_string(geteuid());  // the uid SO_PEERCRED reports
      spill.rotate_bytes = config_.spill_rotate_bytes;
      spill.max_bytes = config_.spill_max_bytes;
      spill.warn = [](std::string_view message) { Log().warn("spill: {}", message); };
      sender_options.transport.spill = std::make_shared<spill::SpillWriter>(std::move(spill));
    }
    facts.cuda_driver_version = driver_version_;
    facts.cupti_version = static_cast<int32_t>(cupti_version_);
    // A fork()ed child's pipeline comes after the subscription; the first one's family is set
    // once Subscribe has decided it (SetCuptiActivityApi).
    if (start) facts.cupti_activity_api = subscriber_scoped_ ? kActivityApiSubscriber : kActivityApiGlobal;
    facts.config = Describe(config_);
    ReadAttribution(&facts, config_.attribution_env);
    try {
      BoundProcessFacts(&facts);  // a process_start line of at most kMaxProcessStartBytes
    } catch (...) {
    }
    pipeline->sender = std::make_unique<SenderThread>(
        std::move(sender_options), std::move(facts), pipeline->ring.get(),
        pipeline->recorder.get(), functions_.get(), devices_.get(),
        with_activity ? activity_.get() : nullptr, with_activity ? &cupti_ : nullptr);
    if (start && !pipeline->sender->Start()) return nullptr;
    Pipeline* raw = pipeline.release();  // lives until the process ends
    pipeline_pid_.store(static_cast<int>(getpid()), std::memory_order_release);
    pipeline_.store(raw, std::memory_order_release);
    return raw;
  } catch (...) {
    return nullptr;
  }
}

void Injector::MakeRing(Pipeline* pipeline, int32_t pid) {
  const size_t capacity = std::bit_ceil(
      std::clamp<size_t>(config_.ring_slots, LaunchRing::kMinCapacity, LaunchRing::kMaxCapacity));
  // The black box is passed to the collector over its Unix socket; a TCP collector cannot
  // receive it.
  if (config_.blackbox && !config_.collector_path.starts_with("tcp:")) {
    blackbox::RegionOptions region;
    region.ring_capacity = static_cast<uint32_t>(capacity);
    region.journal_capacity = static_cast<uint32_t>(std::min<size_t>(capacity, kMaxJournal));
    region.pid = pid;
    std::string error;
    pipeline->blackbox = blackbox::RegionWriter::Create(region, &error);
    if (pipeline->blackbox == nullptr) {
      Log().warn(
          "no black box ({}): events recorded and not yet sent when the process is killed "
          "are lost",
          error);
    }
  }
  if (pipeline->blackbox != nullptr) {
    pipeline->ring = std::make_unique<LaunchRing>(
        capacity,
        LaunchRing::Storage{pipeline->blackbox->ring_control(), pipeline->blackbox->ring_slots()});
  } else {
    pipeline->ring = std::make_unique<LaunchRing>(capacity);
  }
}

Injector::Pipeline* Injector::PipelineForThisProcess() noexcept {
  Pipeline* pipeline = pipeline_.load(std::memory_order_acquire);
  if (pipeline != nullptr) return pipeline;
  if (exiting_.load(std::memory_order_acquire)) return nullptr;
  // A fork()ed child launching kernels: its own pipeline, connection and pid (slow path, once).
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  pipeline = pipeline_.load(std::memory_order_acquire);
  if (pipeline != nullptr) return pipeline;
  return MakePipeline(/*with_activity=*/false, /*start=*/true);
}

void Injector::Callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const void* data) {
  auto* self = static_cast<Injector*>(userdata);
  if (const CuptiYield* yield = self->yield_.get(); yield != nullptr && yield->gated())
      [[unlikely]] {
    // Yielding CUPTI (cupti_yield.h): nothing is recorded; a launch is counted once, at its exit.
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && LaunchApiOf(cbid) && data != nullptr &&
        static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT) {
      self->yield_->CountLaunch();
    }
    return;
  }
  Pipeline* pipeline = self->pipeline_.load(std::memory_order_acquire);
  if (pipeline == nullptr) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !LaunchApiOf(cbid)) return;
    pipeline = self->PipelineForThisProcess();
    if (pipeline == nullptr) return;
  }
  pipeline->recorder->OnCallback(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
}

void Injector::BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Injector& self = Instance();
  if (self.activity_ == nullptr) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    return;
  }
  self.activity_->Request(buffer, size, max_records);
}

void Injector::BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid_size) {
  Injector& self = Instance();
  if (self.activity_ != nullptr) self.activity_->Complete(context, stream_id, buffer, valid_size);
}

void Injector::BufferRequestedV2(uint8_t** buffer, size_t* size, size_t* max_records, void*) {
  BufferRequested(buffer, size, max_records);
}

void Injector::BufferCompletedV2(uint8_t* buffer, size_t, size_t valid_size, void*) {
  // No context or stream: ActivityBuffers reads the subscriber's dropped-record count.
  Injector& self = Instance();
  if (self.activity_ != nullptr) self.activity_->Complete(buffer, valid_size);
}

void Injector::OnExit() noexcept {
  exiting_.store(true, std::memory_order_release);
  Pipeline* pipeline = pipeline_.load(std::memory_order_acquire);
  if (pipeline == nullptr ||
      pipeline_pid_.load(std::memory_order_acquire) != static_cast<int>(getpid())) {
    return;
  }
  // At most kExitFlushLimit in all, whatever CUPTI does: the sender thread does the forced
  // activity flush and the final sends, and Stop stops waiting for it at the deadline.
  const Clock::time_point deadline = Clock::now() + kExitFlushLimit;
  pipeline->ring->Close();  // a producer blocked on a full ring (on_full=block) gives up
  if (!pipeline->sender->Stop(deadline)) {
    if (pipeline->sender->abandoned()) {
      Log().warn(
          "exit: the sender thread did not finish within 1 s ({}); exiting without "
          "waiting for it, process_end not sent",
          pipeline->sender->abandoned_in_flush()
              ? "a CUPTI activity flush did not return"
              : "it had not reached its last sends: not scheduled in time, or a step "
                "took longer");
    } else {
      Log().warn("exit: {} events were not acknowledged by the collector at {} within 1 s",
                 pipeline->sender->transport().unacked_lines(), config_.collector_path);
    }
  }
  // cuptiFinalize is not called. cupti_activity.h recommends calling it from the exit callsite of
  // a driver or runtime API callback, or else after the client has synchronized CUDA and flushed
  // the activity buffers itself; at exit neither holds (other threads may still be inside CUDA
  // calls), and the process's end releases CUPTI anyway.
}

bool Injector::ReportCrash(const CrashInfo& crash, int64_t wait_ns) noexcept {
  Injector& self = Instance();
  if (self.exiting_.load(std::memory_order_acquire)) return false;
  Pipeline* pipeline = self.pipeline_.load(std::memory_order_acquire);
  if (pipeline == nullptr ||
      self.pipeline_pid_.load(std::memory_order_acquire) != static_cast<int>(getpid())) {
    return false;
  }
  return pipeline->sender->FlushForCrash(crash, wait_ns);
}

// fork() from any thread of the application. Every lock the child may take is held by the
// forking thread across the fork, always in this order: the pipeline's, the function table's, the
// device table's; then the sender's socket lock, so that the child knows the parent's socket (it
// closes it). No code holds one of them while taking another in another order, and each is
// held only for short work that never waits on the forking thread, so prepare waits at most for
// those (the sender thread included) to finish theirs. The logger's lock is not taken (a thread
// may hold it while stderr blocks): the child makes it anew. The stream tables belong to the
// parent's recorder, which the child never uses.
void Injector::OnForkPrepare() noexcept {
  pipeline_mu_.lock();
  if (functions_ != nullptr) functions_->BeforeFork();
  if (devices_ != nullptr) devices_->BeforeFork();
  if (Pipeline* p = pipeline_.load(std::memory_order_acquire); p != nullptr && p->sender) {
    p->sender->BeforeFork();
  }
}

void Injector::OnForkParent() noexcept {
  if (Pipeline* p = pipeline_.load(std::memory_order_acquire); p != nullptr && p->sender) {
    p->sender->AfterForkInParent();
  }
  if (devices_ != nullptr) devices_->AfterForkInParent();
  if (functions_ != nullptr) functions_->AfterForkInParent();
  pipeline_mu_.unlock();
}

void Injector::OnForkChild() noexcept {
  // Only this thread exists in the child: the parent's sender thread and socket are not ours.
  // Set the parent's pipeline aside (never destroyed: its thread object must not be joined) and
  // let the first launch in the child build a fresh one with the child's pid. The parent's
  // socket is closed here, so the collector sees the parent's stream end when the parent does.
  Pipeline* parent = pipeline_.exchange(nullptr, std::memory_order_acq_rel);
  if (parent != nullptr) {
    parent->sender->CloseSocketAfterFork();
    if (parent->blackbox != nullptr) parent->blackbox->CloseAfterFork();
    parent->previous = inherited_;
    inherited_ = parent;
  }
  pipeline_pid_.store(0, std::memory_order_release);
  ResetCrashStateAfterFork();
  // The locks held by this thread since OnForkPrepare are made anew rather than unlocked (the
  // child's thread is not their owner).
  new (&pipeline_mu_) std::mutex();
  if (devices_ != nullptr) devices_->AfterForkInChild();
  if (functions_ != nullptr) functions_->AfterForkInChild();
  base::EventClock().AfterForkInChild();
  ThisThread::AfterForkInChild();  // the thread id cached was the parent thread's
  ResetLogAfterFork();
}

}  // namespace cuflight::inject
