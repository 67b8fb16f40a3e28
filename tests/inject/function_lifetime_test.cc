// The function table under code that comes and goes (JIT compilers, runtime fusion, NVRTC: modules
// and libraries loaded and unloaded for hours) and under CUkernels launched on several devices.
// The fake driver plays the driver; the test plays the sender thread (drains the ring, then
// FunctionTable::Reclaim).
#include <gtest/gtest.h>

#include <new>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "event_builder.h"
#include "inject_test_support.h"

namespace cuflight::inject::testing {
namespace {

constexpr const char* kMangled = "_Z6kernelPfi";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

CUmodule Mod(uint64_t v) { return reinterpret_cast<CUmodule>(static_cast<uintptr_t>(v)); }
CUlibrary Lib(uint64_t v) { return reinterpret_cast<CUlibrary>(static_cast<uintptr_t>(v)); }
CUcontext Ctx(uint64_t v) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(v)); }
CUkernel Ker(uint64_t v) { return reinterpret_cast<CUkernel>(static_cast<uintptr_t>(v)); }

// A driver call's exit callback, with its result, made on a thread whose current context is
// `context`.
void Fire(Harness& h, CUpti_CallbackId cbid, const void* params, CUresult result = CUDA_SUCCESS,
          uint64_t context = kContext) {
  Callback cb(params, nullptr, 0, context);
  cb.result = result;
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb.data);
}

void LaunchIn(Harness& h, uint64_t function, uint64_t stream, uint64_t context,
              uint32_t correlation_id = 1) {
  cuLaunchKernel_params p{Fn(function), 1, 1, 1, 128, 1, 1, 0, St(stream), nullptr, nullptr};
  Callback cb(&p, kMangled, correlation_id, context);
  h.recorder->OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                         &cb.data);
}

std::vector<LaunchRecord> Drain(LaunchRing& ring) {
  std::vector<LaunchRecord> out;
  LaunchRecord r;
  while (ring.TryPop(&r)) out.push_back(r);
  return out;
}

long ResidentBytes() {
  long pages = 0;
  long resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(FunctionTable, ARetiredFunctionIsFreedOnlyWhenNoLaunchAndNoRecordCanSeeIt) {
  FunctionTable table(64);
  LaunchRing ring(16);
  FunctionTable::Slot* slot = table.FindOrClaim(0x1000, 0, kContext);
  ASSERT_NE(slot, nullptr);
  auto info = std::make_unique<FunctionInfo>();
  info->handle = 0x1000;
  info->device = 0;
  info->module = 0xA;
  const FunctionInfo* published = table.Publish(slot, std::move(info), 0);
  ASSERT_NE(published, nullptr);
  EXPECT_EQ(table.live_infos(), 1u);

  // A launch holds it and puts a record of it in the ring; the module is unloaded meanwhile.
  {
    FunctionTable::Pin pin = table.Acquire(0x1000, 0);
    ASSERT_EQ(pin.info(), published);
    EXPECT_EQ(pin.ordinal(), 0u);
    EXPECT_EQ(table.Remove(FunctionTable::Owner::kModule, 0xB), 0u);  // another module
    EXPECT_EQ(table.Remove(FunctionTable::Owner::kModule, 0xA), 1u);
    EXPECT_EQ(table.Find(0x1000, 0), nullptr);  // gone for every later launch
    table.Reclaim(ring);
    EXPECT_EQ(table.live_infos(), 1u) << "freed under a launch that holds it";
    LaunchRecord record;
    record.function = pin.info();
    ASSERT_TRUE(ring.TryPush(record));
  }
  table.Reclaim(ring);  // no launch in flight now, but the record is not handled yet
  EXPECT_EQ(table.live_infos(), 1u) << "freed while a ring record points at it";
  LaunchRecord popped;
  ASSERT_TRUE(ring.TryPop(&popped));
  EXPECT_EQ(popped.function, published);
  table.Reclaim(ring);
  EXPECT_EQ(table.live_infos(), 0u);
  EXPECT_EQ(table.retired(), 0u);

  // The handle comes back for another function: a fresh entry, counted from its first launch.
  FunctionTable::Slot* again = table.FindOrClaim(0x1000, 0, kContext);
  ASSERT_NE(again, nullptr);
  FunctionTable::Pin pin = table.Acquire(0x1000, 0);
  EXPECT_EQ(pin.any_info(), nullptr);
  EXPECT_EQ(pin.ordinal(), 0u);
  EXPECT_EQ(table.TotalLaunches(), 2u);
}

TEST(FunctionTable, SlotsOfRemovedEntriesAreReusedWithoutGrowth) {
  // 64 slots (the minimum), 100,000 functions one after the other: only reuse makes room.
  FunctionTable table(64);
  LaunchRing ring(16);
  for (uint64_t i = 0; i < 100000; ++i) {
    const uint64_t handle = 0x100000 + i * 0x80;
    ASSERT_NE(table.FindOrClaim(handle, 0, kContext), nullptr) << i;
    auto info = std::make_unique<FunctionInfo>();
    info->handle = handle;
    info->device = 0;
    info->context = 0xC000 + i;
    ASSERT_NE(table.Publish(table.Find(handle, 0), std::move(info), 0), nullptr);
    { FunctionTable::Pin pin = table.Acquire(handle, 0); }
    EXPECT_EQ(table.Remove(FunctionTable::Owner::kContext, 0xC000 + i), 1u);
    table.Reclaim(ring);
  }
  EXPECT_EQ(table.live_infos(), 0u);
  EXPECT_EQ(table.live_entries(), 0u);
  EXPECT_EQ(table.TotalLaunches(), 100000u);
}

TEST(FunctionTable, InvalidateAllMakesEveryLaunchReadAgainAndRetiresTheOldInfos) {
  // What a fork()ed child does (AfterForkInChild), without the table's mutex.
  FunctionTable table(64);
  LaunchRing ring(16);
  for (uint64_t handle : {0x1000, 0x2000}) {
    auto info = std::make_unique<FunctionInfo>();
    info->handle = handle;
    info->device = 0;
    ASSERT_NE(table.Publish(table.FindOrClaim(handle, 0, kContext), std::move(info), 0), nullptr);
  }
  table.FindOrClaim(0x3000, 0, kContext);  // never read: nothing to invalidate
  table.InvalidateAll();
  for (uint64_t handle : {0x1000, 0x2000}) {
    FunctionTable::Pin pin = table.Acquire(handle, 0);
    EXPECT_EQ(pin.info(), nullptr);
    ASSERT_NE(pin.any_info(), nullptr);
    EXPECT_EQ(pin.any_info()->handle, handle);
  }
  EXPECT_EQ(table.Acquire(0x3000, 0).any_info(), nullptr);
  auto fresh = std::make_unique<FunctionInfo>();
  fresh->handle = 0x1000;
  fresh->device = 0;
  const FunctionInfo* published = table.Publish(table.Find(0x1000, 0), std::move(fresh), 0);
  EXPECT_EQ(table.Acquire(0x1000, 0).info(), published);
  EXPECT_EQ(table.retired(), 1u);  // the stale one, freed once nothing can see it
  table.Reclaim(ring);
  EXPECT_EQ(table.retired(), 0u);
  EXPECT_EQ(table.live_infos(), 2u);
}

TEST(FunctionLifetime, AMillionLoadLaunchUnloadCyclesKeepMemoryBoundedAndLoseNothing) {
  // Each cycle loads a module with one function, launches it once and unloads the module, as a
  // JIT compiler does. Half the cycles reuse one of four handles (an allocator gives freed
  // addresses back), half get a new one; each cycle's function has other registers, so a stale
  // FunctionInfo would show. The sender's part: records handled at once, Reclaim every 100
  // cycles.
  const int cycles = kSanitized ? 100000 : 1000000;
  const int warm_up = cycles / 10;
  Harness h(1024);
  long rss_after_warm_up = 0;
  int reads = 0;
  size_t most_infos = 0;
  size_t most_retired = 0;
  for (int i = 0; i < cycles; ++i) {
    const uint64_t handle = i % 2 == 0 ? 0x700000 + static_cast<uint64_t>((i / 2) % 4) * 0x40
                                       : 0x10000000 + static_cast<uint64_t>(i) * 0x100;
    const uint64_t module = 0x900000 + static_cast<uint64_t>(i);
    FakeFunction f;
    f.num_regs = 16 + 8 * (i % 7);
    f.module = module;
    h.fake.functions[handle] = f;
    LaunchIn(h, handle, kStream, kContext, static_cast<uint32_t>(i));
    LaunchRecord record;
    ASSERT_TRUE(h.ring->TryPop(&record)) << i;
    ASSERT_EQ(record.function->handle, handle) << i;
    ASSERT_EQ(record.function->num_regs, f.num_regs) << i;
    cuModuleUnload_params unload{Mod(module)};
    Fire(h, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &unload);
    h.fake.functions.erase(handle);
    reads += h.fake.function_reads[handle];  // the fake's own bookkeeping stays small
    h.fake.function_reads.erase(handle);
    if (i % 100 == 99) h.functions.Reclaim(*h.ring);
    most_infos = std::max(most_infos, h.functions.live_infos());
    most_retired = std::max(most_retired, h.functions.retired());
    if (i == warm_up) rss_after_warm_up = ResidentBytes();
  }
  h.functions.Reclaim(*h.ring);
  const long rss_end = ResidentBytes();
  std::printf("RSS after %d cycles: %ld KiB; after %d: %ld KiB (growth %ld KiB); at most %zu "
              "FunctionInfos alive, %zu retired\n",
              warm_up + 1, rss_after_warm_up / 1024, cycles, rss_end / 1024,
              (rss_end - rss_after_warm_up) / 1024, most_infos, most_retired);
  EXPECT_EQ(h.recorder->untracked(), 0u);
  EXPECT_EQ(h.recorder->unresolved(), 0u);
  EXPECT_EQ(h.ring->dropped(), 0u);
  EXPECT_EQ(h.functions.TotalLaunches(), static_cast<uint64_t>(cycles));
  // Every function was read exactly once.
  EXPECT_EQ(reads, cycles);
  // Between two Reclaims at most 100 functions are retired, plus the one being launched.
  EXPECT_LE(most_infos, 101u);
  EXPECT_LE(most_retired, 100u);
  EXPECT_EQ(h.functions.live_infos(), 0u);
  EXPECT_EQ(h.functions.live_entries(), 0u);
  if (!kSanitized) {
    // Before, every cycle kept a FunctionInfo (about 200 bytes with its names and allocator
    // overhead): 900,000 cycles would have grown by over 170 MiB.
    EXPECT_LT(rss_end - rss_after_warm_up, 4L << 20);
  }
}

TEST(FunctionLifetime, AnUnrelatedUnloadRereadsNoHotFunction) {
  // Eight hot functions of module A are launched in a loop while module B is loaded, launched and
  // unloaded 200 times (its function at the same address each time).
  Harness h;
  constexpr uint64_t kModuleA = 0xA000;
  constexpr uint64_t kB = 0x5000;
  std::vector<uint64_t> hot;
  for (uint64_t i = 0; i < 8; ++i) {
    hot.push_back(0x1000 + i * 0x40);
    FakeFunction f;
    f.module = kModuleA;
    h.fake.functions[hot.back()] = f;
  }
  for (uint64_t round = 0; round < 200; ++round) {
    for (uint64_t f : hot) LaunchIn(h, f, kStream, kContext);
    FakeFunction b;
    b.module = 0xB000 + round;
    b.num_regs = 40 + static_cast<int>(round % 3);
    h.fake.functions[kB] = b;
    LaunchIn(h, kB, kStream, kContext);
    cuModuleUnload_params unload{Mod(b.module)};
    Fire(h, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &unload);
    h.fake.functions.erase(kB);
    const std::vector<LaunchRecord> records = Drain(*h.ring);
    ASSERT_EQ(records.size(), 9u);
    EXPECT_EQ(records.back().function->num_regs, b.num_regs);
    h.functions.Reclaim(*h.ring);
  }
  for (uint64_t f : hot) EXPECT_EQ(h.fake.function_reads[f], 1) << std::hex << f;
  EXPECT_EQ(h.fake.function_reads[kB], 200);  // one read per load
  // A failed unload frees nothing.
  cuModuleUnload_params failed{Mod(kModuleA)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &failed, CUDA_ERROR_INVALID_VALUE);
  for (uint64_t f : hot) LaunchIn(h, f, kStream, kContext);
  for (uint64_t f : hot) EXPECT_EQ(h.fake.function_reads[f], 1) << std::hex << f;
  // Its successful unload does (the driver would give the handles out again).
  cuModuleUnload_params unload{Mod(kModuleA)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &unload);
  for (uint64_t f : hot) LaunchIn(h, f, kStream, kContext);
  for (uint64_t f : hot) EXPECT_EQ(h.fake.function_reads[f], 2) << std::hex << f;
}

TEST(FunctionLifetime, AContextTeardownDropsOnlyThatContextsFunctions) {
  // "The lifetime of the module corresponds to the lifetime of the context it was loaded in"
  // (cuda.h:17309, cuFuncGetModule).
  Harness h;
  constexpr uint64_t kOther = 0xC1;
  h.fake.context_device[kOther] = 0;
  h.fake.functions[0x1000] = FakeFunction{};  // in kContext
  h.fake.functions[0x2000] = FakeFunction{};  // in kOther
  LaunchIn(h, 0x1000, 0, kContext);
  LaunchIn(h, 0x2000, 0, kOther);
  auto reads = [&] { return h.fake.function_reads[0x1000] + 10 * h.fake.function_reads[0x2000]; };
  ASSERT_EQ(reads(), 11);

  cuCtxDestroy_v2_params destroy{Ctx(kOther)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, &destroy, CUDA_ERROR_INVALID_CONTEXT);
  LaunchIn(h, 0x1000, 0, kContext);
  LaunchIn(h, 0x2000, 0, kOther);
  EXPECT_EQ(reads(), 11) << "a failed cuCtxDestroy freed nothing";

  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, &destroy);
  LaunchIn(h, 0x1000, 0, kContext);
  LaunchIn(h, 0x2000, 0, kOther);
  EXPECT_EQ(reads(), 21) << "only the destroyed context's function is read again";

  // The primary context: cuDevicePrimaryCtxRetain returned kContext for device 0. "The context is
  // automatically reset once the last reference to it is released" (cuda.h:5903): a release that
  // leaves it active (cuDevicePrimaryCtxGetState, cuda.h:6044: 1 = active) frees nothing.
  CUcontext primary = Ctx(kContext);
  cuDevicePrimaryCtxRetain_params retain{&primary, 0};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, &retain);
  h.fake.primary_active[0] = 1;
  cuDevicePrimaryCtxRelease_v2_params release{0};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, &release);
  LaunchIn(h, 0x1000, 0, kContext);
  LaunchIn(h, 0x2000, 0, kOther);
  EXPECT_EQ(reads(), 21);
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, &release,
       CUDA_ERROR_INVALID_CONTEXT);
  h.fake.primary_active[0] = 0;  // (a failed release leaves it as it was; here: inactive anyway)
  LaunchIn(h, 0x1000, 0, kContext);
  EXPECT_EQ(reads(), 21) << "a failed release freed nothing";
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, &release);
  LaunchIn(h, 0x1000, 0, kContext);
  LaunchIn(h, 0x2000, 0, kOther);
  EXPECT_EQ(reads(), 22) << "the last release freed the primary context's function only";
  int kernels = 0;
  for (const LaunchRecord& r : Drain(*h.ring)) kernels += r.kind == RecordKind::kLaunch ? 1 : 0;
  EXPECT_EQ(kernels, 11);
}

TEST(FunctionLifetime, ALibraryUnloadDropsItsKernelsAndTheirFunctions) {
  Harness h;
  constexpr uint64_t kKernel = 0x7000;
  constexpr uint64_t kF = 0x1000;  // the kernel's CUfunction in kContext
  constexpr uint64_t kLibrary = 0x4000;
  FakeFunction f;
  f.module = 0x4100;  // the library's module in kContext (cuLibraryGetModule)
  h.fake.functions[kF] = f;
  h.fake.kernels[kKernel].library = kLibrary;
  h.fake.kernels[kKernel].functions[0] = kF;
  LaunchIn(h, kKernel, 0, kContext);
  LaunchIn(h, kF, 0, kContext);  // the CUfunction launched itself (driver API)
  EXPECT_EQ(h.fake.KernelReads(kKernel, 0), 1);
  EXPECT_EQ(h.fake.function_reads[kF], 1);

  cuLibraryUnload_params other{Lib(0x4444)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, &other);
  LaunchIn(h, kKernel, 0, kContext);
  LaunchIn(h, kF, 0, kContext);
  EXPECT_EQ(h.fake.KernelReads(kKernel, 0), 1);
  EXPECT_EQ(h.fake.function_reads[kF], 1);

  cuLibraryUnload_params unload{Lib(kLibrary)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, &unload);
  LaunchIn(h, kKernel, 0, kContext);
  LaunchIn(h, kF, 0, kContext);
  EXPECT_EQ(h.fake.KernelReads(kKernel, 0), 2);
  EXPECT_EQ(h.fake.function_reads[kF], 2);
  EXPECT_EQ(Drain(*h.ring).size(), 6u);
}

TEST(FunctionLifetime, AttributeChangesRaceLaunchesAndReclamationSafely) {
  // One thread launches a function, another sets an attribute the FunctionInfo holds to another
  // value every few launches (each set: one re-read, one FunctionInfo retired), a third plays the
  // sender thread: handles every record (reads its FunctionInfo) and reclaims. Under
  // AddressSanitizer a FunctionInfo freed too early is a use-after-free here.
  RecorderOptions options;
  options.on_full =
      env::OnFull::kBlock;  // the launches wait for the sender: every record is handled
  Harness h(256, options);
  constexpr uint64_t kF = 0x1000;
  FakeFunction f;
  f.num_regs = 72;
  h.fake.functions[kF] = f;  // the fake is used by the launching thread only
  constexpr int kSets = 2000;
  constexpr int kLaunchesPerSet = kSanitized ? 10 : 50;
  std::atomic<int> launched{0};
  std::atomic<bool> launching{true};
  std::atomic<uint64_t> handled{0};
  std::atomic<uint64_t> wrong{0};
  std::thread sender([&] {
    LaunchRecord r;
    auto drain = [&] {
      while (h.ring->TryPop(&r)) {
        if (r.function->num_regs != 72 || r.function->handle != kF) wrong.fetch_add(1);
        handled.fetch_add(1);
      }
      h.functions.Reclaim(*h.ring);
    };
    while (launching.load(std::memory_order_acquire)) drain();
    drain();
  });
  std::thread setter([&] {
    // The function has no required cluster width (0); setting 2 changes what it holds.
    cuFuncSetAttribute_params set{Fn(kF), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2};
    for (int k = 1; k <= kSets; ++k) {
      while (launched.load(std::memory_order_acquire) < k * kLaunchesPerSet) {
        std::this_thread::yield();
      }
      Fire(h, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute, &set);
    }
  });
  constexpr int kLaunches = (kSets + 1) * kLaunchesPerSet;
  for (int i = 0; i < kLaunches; ++i) {
    LaunchIn(h, kF, kStream, kContext, static_cast<uint32_t>(i));
    launched.store(i + 1, std::memory_order_release);
  }
  setter.join();
  launching.store(false, std::memory_order_release);
  sender.join();
  h.functions.Reclaim(*h.ring);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(handled.load(), static_cast<uint64_t>(kLaunches));
  EXPECT_EQ(h.recorder->unresolved(), 0u);  // a launch racing a set still reads the function
  EXPECT_EQ(h.ring->dropped(), 0u);
  EXPECT_EQ(h.recorder->untracked(), 0u);
  const int reads = h.fake.function_reads[kF];
  std::printf("%d launches, %d sets, %d reads of the function\n", kLaunches, kSets, reads);
  // The launch after a set reads the driver again; sets that land between the same two launches
  // (the setter thread was late) cost one read together.
  EXPECT_GT(reads, 1);
  EXPECT_LE(reads, kSets + 1);
  // Every replaced FunctionInfo was freed: only the published one is left.
  EXPECT_EQ(h.functions.retired(), 0u);
  EXPECT_EQ(h.functions.live_infos(), 1u);
}

// Two devices of different architectures: device 0 an H100 (sm_90), device 1 an A100 (sm_80),
// each with a context and a stream of it. A CUkernel has a CUfunction compiled for each.
struct TwoDevices {
  static constexpr uint64_t kCtx0 = kContext;
  static constexpr uint64_t kCtx1 = 0xC1;
  static constexpr uint64_t kStream0 = 0x50;
  static constexpr uint64_t kStream1 = 0x51;
  static constexpr uint64_t kKernel = 0x7000;
  static constexpr uint64_t kF0 = 0x1000;  // the kernel's CUfunction in kCtx0
  static constexpr uint64_t kF1 = 0x2000;  // in kCtx1
  static constexpr uint32_t kCtx1Id = 5;   // CUPTI's id of kCtx1 (cuptiGetContextId)
  Harness h;

  TwoDevices() {
    h.fake.devices[1] = occupancy::FindDevicePreset("a100")->limits;
    h.fake.context_device[kCtx1] = 1;
    h.fake.context_ids[kCtx1] = kCtx1Id;
    h.fake.stream_context[kStream0] = kCtx0;
    h.fake.stream_context[kStream1] = kCtx1;
    FakeFunction on0;
    on0.num_regs = 64;
    on0.static_smem = 1024;
    FakeFunction on1;
    on1.num_regs = 128;
    on1.static_smem = 2048;
    h.fake.functions[kF0] = on0;
    h.fake.functions[kF1] = on1;
    h.fake.kernels[kKernel].functions = {{0, kF0}, {1, kF1}};
    h.fake.current_device = 0;  // kCtx0 is current on the launching thread
  }

  LaunchRecord Launch(uint64_t stream, uint64_t current = kCtx0) {
    LaunchIn(h, kKernel, stream, current);
    std::vector<LaunchRecord> records = Drain(*h.ring);
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? LaunchRecord{} : records[0];
  }
};

TEST(FunctionPerDevice, ACuKernelUsesTheAttributesOfTheDeviceOfItsStream) {
  // "the context to launch the kernel on will either be taken from the specified stream hStream
  // or the current context in case of NULL stream" (cuda.h:17494-17496, cuLaunchKernel).
  TwoDevices t;
  const LaunchRecord on1 = t.Launch(TwoDevices::kStream1);  // kCtx0 current, stream of kCtx1
  EXPECT_EQ(on1.device, 1);
  EXPECT_EQ(on1.context, TwoDevices::kCtx1Id);
  ASSERT_NE(on1.function, nullptr);
  EXPECT_EQ(on1.function->num_regs, 128);
  EXPECT_EQ(on1.function->static_smem, 2048);
  const LaunchRecord on0 = t.Launch(TwoDevices::kStream0);
  EXPECT_EQ(on0.device, 0);
  EXPECT_EQ(on0.function->num_regs, 64);
  EXPECT_EQ(on0.function->static_smem, 1024);
  // The NULL stream: the current context's device.
  const LaunchRecord null_on1 = t.Launch(0, TwoDevices::kCtx1);
  EXPECT_EQ(null_on1.device, 1);
  EXPECT_EQ(null_on1.function->num_regs, 128);
  EXPECT_EQ(t.h.fake.KernelReads(TwoDevices::kKernel, 0), 1);
  EXPECT_EQ(t.h.fake.KernelReads(TwoDevices::kKernel, 1), 1);

  // The stream's context is asked once; a destroyed stream's handle is asked about again.
  const int queries = t.h.fake.stream_context_queries;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(t.Launch(TwoDevices::kStream1).device, 1);
  EXPECT_EQ(t.h.fake.stream_context_queries, queries);
  cuStreamDestroy_v2_params destroy{St(TwoDevices::kStream1)};
  Fire(t.h, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, &destroy);
  t.h.fake.stream_context[TwoDevices::kStream1] = TwoDevices::kCtx0;  // the handle, reused
  const LaunchRecord reused = t.Launch(TwoDevices::kStream1);
  EXPECT_EQ(reused.device, 0);
  EXPECT_EQ(reused.function->num_regs, 64);
  EXPECT_EQ(t.h.fake.stream_context_queries, queries + 1);

  // Occupancy follows: 128 registers on the A100 and 64 on the H100 are different limits.
  EventBuilder builder;
  schema::KernelEvent event0;
  schema::KernelEvent event1;
  ASSERT_TRUE(builder.BuildKernel(on0, *t.h.devices.Get(0), &event0));
  ASSERT_TRUE(builder.BuildKernel(on1, *t.h.devices.Get(1), &event1));
  FakeFunction f0 = t.h.fake.functions[TwoDevices::kF0];
  FakeFunction f1 = t.h.fake.functions[TwoDevices::kF1];
  EXPECT_EQ(event0.occupancy.max_active_blocks,
            ReferenceBlocks(t.h.fake.devices[0], f0, 128, 0));
  EXPECT_EQ(event1.occupancy.max_active_blocks,
            ReferenceBlocks(t.h.fake.devices[1], f1, 128, 0));
}

TEST(FunctionPerDevice, KernelSetAttributeAppliesToItsDeviceAndFuncSetAttributeOverridesIt) {
  // cuda.h:8340 (cuKernelSetAttribute): "sets the value of a specified attribute attrib on the
  // kernel kernel for the requested device dev".
  // cuda.h:8346-8349: "Note that attributes set using ::cuFuncSetAttribute() will override the
  // attribute set by this API irrespective of whether the call to ::cuFuncSetAttribute() is made
  // before or after this API call. However, ::cuKernelGetAttribute() will always return the
  // attribute value set by this API."
  // cuda.h:8113-8114 (cuKernelGetFunction): "Returns in \p pFunc the handle of the function for the
  // requested kernel \p kernel and the current context."
  TwoDevices t;
  t.Launch(TwoDevices::kStream0);  // kCtx0 current: the kernel's CUfunction there is kF0
  t.Launch(TwoDevices::kStream1);
  auto kernel_set = [&](CUfunction_attribute attribute, int value, int device) {
    t.h.fake.KernelSetAttribute(attribute, value, TwoDevices::kKernel, device);
    cuKernelSetAttribute_params p{attribute, value, Ker(TwoDevices::kKernel), device};
    Fire(t.h, CUPTI_DRIVER_TRACE_CBID_cuKernelSetAttribute, &p);
  };
  auto func_set = [&](uint64_t function, CUfunction_attribute attribute, int value) {
    t.h.fake.FuncSetAttribute(function, attribute, value);
    cuFuncSetAttribute_params p{Fn(function), attribute, value};
    Fire(t.h, CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute, &p);
  };
  constexpr auto kDynSmem = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  constexpr auto kCarveout = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;

  kernel_set(kDynSmem, 100000, 1);
  EXPECT_EQ(t.Launch(TwoDevices::kStream1).func_max_dyn_smem, 100000);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_max_dyn_smem, 48 * 1024) << "device 1 only";

  // On device 0: cuFuncSetAttribute on the kernel's CUfunction there, then cuKernelSetAttribute:
  // the former holds whatever the order.
  func_set(TwoDevices::kF0, kDynSmem, 80000);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_max_dyn_smem, 80000);
  kernel_set(kDynSmem, 60000, 0);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_max_dyn_smem, 80000);
  EXPECT_EQ(t.Launch(TwoDevices::kStream1).func_max_dyn_smem, 100000);
  // The other order, for the carveout.
  kernel_set(kCarveout, 25, 0);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_carveout, 25);
  func_set(TwoDevices::kF0, kCarveout, 75);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_carveout, 75);
  kernel_set(kCarveout, 10, 0);
  EXPECT_EQ(t.Launch(TwoDevices::kStream0).func_carveout, 75);

  // A re-read (a cluster attribute set to a new value) keeps the override: cuKernelGetAttribute
  // reports the kernel's own values (60000), the CUfunction's still win.
  kernel_set(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, 0);
  const LaunchRecord reread = t.Launch(TwoDevices::kStream0);
  EXPECT_TRUE(reread.function->non_portable_cluster_allowed);
  EXPECT_EQ(reread.function->max_dyn_smem, 60000);
  EXPECT_EQ(reread.func_max_dyn_smem, 80000);
  EXPECT_EQ(reread.func_carveout, 75);
  EXPECT_EQ(t.h.fake.KernelReads(TwoDevices::kKernel, 0), 2);
  EXPECT_EQ(t.h.fake.KernelReads(TwoDevices::kKernel, 1), 1);
}

TEST(EventBuilder, AFreedFunctionsAddressReusedByAnotherFunctionIsNotACacheHit) {
  // The occupancy cache is keyed by FunctionInfo::id: a FunctionInfo built where a freed one was
  // (same address) describes another function and must not get its cached result.
  Harness h;
  EventBuilder builder;
  const occupancy::DeviceLimits& limits = h.fake.devices[0];
  FakeFunction light;
  light.num_regs = 32;
  FakeFunction heavy;
  heavy.num_regs = 255;
  auto fill = [](FunctionInfo* info, const FakeFunction& f) {
    info->attributes_ok = true;
    info->num_regs = f.num_regs;
    info->max_threads_per_block = f.max_threads_per_block;
    info->max_dyn_smem = f.max_dyn_smem;
  };
  h.fake.functions[0x1000] = FakeFunction{};
  LaunchIn(h, 0x1000, kStream, kContext);  // reads device 0
  ASSERT_NE(h.devices.Get(0), nullptr);
  auto storage = std::make_unique<FunctionInfo>();
  fill(storage.get(), light);
  LaunchRecord record;
  record.function = storage.get();
  record.block[0] = 256;
  record.grid[0] = 132;
  schema::KernelEvent event;
  ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  EXPECT_EQ(event.occupancy.max_active_blocks, ReferenceBlocks(limits, light, 256, 0));
  storage->~FunctionInfo();  // a new function at the same address
  new (storage.get()) FunctionInfo();
  fill(storage.get(), heavy);
  ASSERT_TRUE(builder.BuildKernel(record, *h.devices.Get(0), &event));
  EXPECT_EQ(event.occupancy.max_active_blocks, ReferenceBlocks(limits, heavy, 256, 0));
  ASSERT_NE(ReferenceBlocks(limits, light, 256, 0), ReferenceBlocks(limits, heavy, 256, 0));
}

// A thread's launch place (launch_place.h) keeps what its last launch's context and stream
// resolved to. A stream destroyed and its handle reused for a stream of another context must give
// the new context's device, CUPTI ids and SM count, whichever thread destroyed it. What each
// answer must be comes from the fake driver and CUPTI: cuStreamGetCtx answers stream_context
// ("the context that was active in the calling thread when the stream was created",
// cuda.h:15139), cuCtxGetDevResource context_sms and cuGreenCtxGetDevResource green_sms (the
// smCount of the partition), cuptiGetContextId / cuptiGetStreamIdEx context_ids / stream_ids.
struct ReusedStream {
  static constexpr uint64_t kGreen = 0x6E;     // a green context of device 0, 16 SMs
  static constexpr uint32_t kFirstId = 21;     // CUPTI's id of the first stream of the handle
  static constexpr uint32_t kSecondId = 22;    // and of the second
  TwoDevices t;

  ReusedStream() {
    t.h.fake.context_sms[TwoDevices::kCtx1] = 54;  // an MPS-like share of the A100's 108
    t.h.fake.stream_ids[TwoDevices::kStream1] = kFirstId;
    t.h.fake.green_sms[kGreen] = 16;
  }
  // cuStreamDestroy of kStream1 succeeded; the driver then makes a stream of the green context of
  // device 0 (its context is kCtx0's equivalent, cuda.h: cuStreamGetCtx of a green context's
  // stream) with the same handle, and CUPTI gives it another id.
  void DestroyAndReuse(Harness& h) {
    cuStreamDestroy_v2_params destroy{St(TwoDevices::kStream1)};
    Fire(h, CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, &destroy);
    h.fake.stream_context[TwoDevices::kStream1] = TwoDevices::kCtx0;
    h.fake.stream_green[TwoDevices::kStream1] = kGreen;
    h.fake.stream_ids[TwoDevices::kStream1] = kSecondId;
  }
};

void ExpectFirstStream(const LaunchRecord& r) {
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.context, TwoDevices::kCtx1Id);
  EXPECT_EQ(r.stream, ReusedStream::kFirstId);
  EXPECT_EQ(r.sm_count, 54u);
}
void ExpectSecondStream(const LaunchRecord& r) {
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.context, kContextId);
  EXPECT_EQ(r.stream, ReusedStream::kSecondId);
  EXPECT_EQ(r.sm_count, 16u);
}

TEST(LaunchPlace, AStreamHandleReusedInAnotherContextGivesThatContextsDeviceIdsAndSmCount) {
  ReusedStream r;
  // kCtx0 current, the CUkernel on kStream1: every launch has the same place.
  for (int i = 0; i < 5; ++i) ExpectFirstStream(r.t.Launch(TwoDevices::kStream1));
  const int stream_queries = r.t.h.fake.stream_context_queries;
  const int resource_queries = r.t.h.fake.resource_queries;
  for (int i = 0; i < 5; ++i) ExpectFirstStream(r.t.Launch(TwoDevices::kStream1));
  EXPECT_EQ(r.t.h.fake.stream_context_queries, stream_queries);  // nothing asked again
  EXPECT_EQ(r.t.h.fake.resource_queries, resource_queries);

  r.DestroyAndReuse(r.t.h);
  for (int i = 0; i < 3; ++i) ExpectSecondStream(r.t.Launch(TwoDevices::kStream1));
  EXPECT_EQ(r.t.h.fake.stream_context_queries, stream_queries + 1);  // asked once more
}

TEST(LaunchPlace, AStreamDestroyedOnAnotherThreadIsNotTakenFromTheLaunchingThreadsPlace) {
  ReusedStream r;
  std::atomic<int> step{0};
  std::vector<LaunchRecord> first;
  std::vector<LaunchRecord> second;
  std::thread launcher([&] {
    for (int i = 0; i < 3; ++i) {
      LaunchIn(r.t.h, TwoDevices::kKernel, TwoDevices::kStream1, TwoDevices::kCtx0);
    }
    for (const LaunchRecord& rec : Drain(*r.t.h.ring)) first.push_back(rec);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    LaunchIn(r.t.h, TwoDevices::kKernel, TwoDevices::kStream1, TwoDevices::kCtx0);
    for (const LaunchRecord& rec : Drain(*r.t.h.ring)) second.push_back(rec);
  });
  while (step.load() != 1) std::this_thread::yield();
  r.DestroyAndReuse(r.t.h);  // on this thread: the launcher's place is its own
  step.store(2);
  launcher.join();
  ASSERT_EQ(first.size(), 3u);
  for (const LaunchRecord& rec : first) ExpectFirstStream(rec);
  ASSERT_EQ(second.size(), 1u);
  ExpectSecondStream(second[0]);
}

TEST(LaunchPlace, AContextTeardownMakesEveryPlaceStale) {
  ReusedStream r;
  ExpectFirstStream(r.t.Launch(TwoDevices::kStream1));
  // kCtx1 destroyed; its handle comes back as a context of device 0 with a stream of the same
  // handle as before, limited to 40 SMs, that CUPTI names anew.
  cuCtxDestroy_v2_params destroy{Ctx(TwoDevices::kCtx1)};
  Fire(r.t.h, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, &destroy);
  r.t.h.fake.context_device[TwoDevices::kCtx1] = 0;
  r.t.h.fake.context_ids[TwoDevices::kCtx1] = 9;
  r.t.h.fake.context_sms[TwoDevices::kCtx1] = 40;
  r.t.h.fake.stream_ids[TwoDevices::kStream1] = ReusedStream::kSecondId;
  const LaunchRecord after = r.t.Launch(TwoDevices::kStream1);
  EXPECT_EQ(after.device, 0);
  EXPECT_EQ(after.context, 9u);
  EXPECT_EQ(after.stream, ReusedStream::kSecondId);
  EXPECT_EQ(after.sm_count, 40u);
}

TEST(LaunchPlace, ARecorderMadeAfterAnotherDiedNeverTakesItsPlace) {
  // The same thread, context and stream handle in two recorders one after the other (a fork
  // child's, or a test's, may lie at the dead one's address): the second one's tables answer.
  constexpr uint64_t kFunction = 0x1000;
  {
    Harness first;
    first.fake.functions[kFunction] = FakeFunction{};
    first.fake.stream_context[kStream] = kContext;
    LaunchIn(first, kFunction, kStream, kContext);
    const std::vector<LaunchRecord> records = Drain(*first.ring);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].device, 0);
    EXPECT_EQ(records[0].stream, kStreamId);
  }
  Harness second;
  second.fake.devices[1] = occupancy::FindDevicePreset("a100")->limits;
  second.fake.context_device[kContext] = 1;  // the same handle, another device
  second.fake.context_ids[kContext] = 8;
  second.fake.stream_ids[kStream] = 30;
  second.fake.functions[kFunction] = FakeFunction{};
  second.fake.stream_context[kStream] = kContext;
  LaunchIn(second, kFunction, kStream, kContext);
  const std::vector<LaunchRecord> records = Drain(*second.ring);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].device, 1);
  EXPECT_EQ(records[0].context, 8u);
  EXPECT_EQ(records[0].stream, 30u);
}

TEST(LaunchPlace, AFunctionUnloadedAndLoadedAgainAtItsAddressIsReadAgainThroughTheHint) {
  // The thread's function hint names the slot of its last function. That function's module is
  // unloaded and another module's function comes at the same address (cuModuleUnload: "Unloads a
  // module", its functions with it; the driver may give an address out again): its launch must
  // carry the new function's attributes, read once; launches of another function in between
  // must name their own.
  Harness h;
  constexpr uint64_t kFunction = 0x1000;
  constexpr uint64_t kOther = 0x2000;
  FakeFunction first;
  first.module = 0xA000;
  first.num_regs = 32;
  FakeFunction other;
  other.module = 0xB000;
  other.num_regs = 96;
  h.fake.functions[kFunction] = first;
  h.fake.functions[kOther] = other;
  for (int i = 0; i < 3; ++i) LaunchIn(h, kFunction, kStream, kContext);
  std::vector<LaunchRecord> records = Drain(*h.ring);
  ASSERT_EQ(records.size(), 3u);
  for (const LaunchRecord& r : records) EXPECT_EQ(r.function->num_regs, 32);

  cuModuleUnload_params unload{Mod(first.module)};
  Fire(h, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &unload);
  FakeFunction second;
  second.module = 0xC000;
  second.num_regs = 64;
  h.fake.functions[kFunction] = second;
  for (int round = 0; round < 2; ++round) {
    LaunchIn(h, kFunction, kStream, kContext);
    LaunchIn(h, kOther, kStream, kContext);
    LaunchIn(h, kFunction, kStream, kContext);
    LaunchIn(h, kFunction, kStream, kContext);
    records = Drain(*h.ring);
    ASSERT_EQ(records.size(), 4u);
    EXPECT_EQ(records[0].function->num_regs, 64);
    EXPECT_EQ(records[1].function->num_regs, 96);
    EXPECT_EQ(records[2].function->num_regs, 64);
    EXPECT_EQ(records[3].function->num_regs, 64);
    h.functions.Reclaim(*h.ring);  // the unloaded entry's slot becomes reusable
  }
  EXPECT_EQ(h.fake.function_reads[kFunction], 2);  // once per load
  EXPECT_EQ(h.fake.function_reads[kOther], 1);
  EXPECT_EQ(h.functions.TotalLaunches(), 11u);
}

}  // namespace
}  // namespace cuflight::inject::testing
