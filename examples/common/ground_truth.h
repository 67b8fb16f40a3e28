// Ground truth for the example programs: what the CUDA runtime and NVIDIA's reference occupancy
// calculator say about each launch configuration a program uses, printed as one JSON line on
// stdout per configuration, for scripts/gpu_check/compare.py to hold cuflight's kernel events
// against.
//
// 1. max_active_blocks is the driver's answer (cudaOccupancyMaxActiveBlocksPerMultiprocessor or
//    cuOccupancyMaxActiveBlocksPerMultiprocessor), for the function and the configuration.
// 2. limiting_resource comes from cuda_occupancy.h: cudaOccMaxActiveBlocksPerMultiprocessor's
//    cudaOccResult.limitingFactors, with cudaOccDeviceProp filled from cudaGetDeviceProperties,
//    cudaOccFuncAttributes from the function's attributes (as the header's own conversion from
//    cudaFuncAttributes does: opt-in limit, one block barrier) and cudaOccDeviceState from the
//    function's preferred carveout. Bits are mapped to cuflight's names and ties go to the first
//    in cuflight's order: registers, shared_mem, warps, blocks, barriers (docs/occupancy.md).
//    reference_max_active_blocks is the reference's block count, printed so that a disagreement
//    between the driver and the reference shows in the ground truth itself.
// 3. Cluster launches also carry max_active_clusters (cudaOccupancyMaxActiveClusters) and
//    cluster_occupancy = min(1, clusters * cluster size * warps/block / (SMs * max warps/SM));
//    when it is below the per-SM occupancy the limit is "cluster", as cuflight defines it.
// 4. Without a CUDA device (or driver) a program prints "no CUDA device" on stderr and exits
//    kExitNoDevice (69, EX_UNAVAILABLE); a failed CUDA call prints the call and its error and
//    exits kExitCudaError (1).
//
// Line format (keys in this order; optional ones only when they apply):
//   {"kernel":"<mangled name>","grid":[x,y,z],"block":[x,y,z],"dyn_smem":N,"launches":N,
//    "max_active_blocks":N,"reference_max_active_blocks":N,"limiting_resource":"...",
//    "limiting_resources":[...],"carveout":N[,"cooperative":true][,"graph":true]
//    [,"cluster":[x,y,z],"max_active_clusters":N,"cluster_occupancy":F][,"api":"driver"]}
// `launches` counts executions: a kernel node of a graph replayed R times counts R, and such
// lines carry "graph":true (cuflight reports them as events with graph ids). A program may also
// print {"note":"..."} lines, which carry no expectation.
#ifndef CUFLIGHT_EXAMPLES_COMMON_GROUND_TRUTH_H_
#define CUFLIGHT_EXAMPLES_COMMON_GROUND_TRUTH_H_

#include <cuda.h>
#include <cuda_occupancy.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace example {

inline constexpr int kExitCudaError = 1;
inline constexpr int kExitNoDevice = 69;  // sysexits.h EX_UNAVAILABLE

[[noreturn]] inline void Fail(const char* what, const char* error, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, error);
  std::exit(kExitCudaError);
}

inline void CheckRuntime(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) Fail(what, cudaGetErrorString(e), file, line);
}

inline void CheckDriver(CUresult r, const char* what, const char* file, int line) {
  if (r != CUDA_SUCCESS) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "CUresult %d", static_cast<int>(r));
    Fail(what, buf, file, line);
  }
}

#define EX_CHECK(call) ::example::CheckRuntime((call), #call, __FILE__, __LINE__)
#define EX_CU_CHECK(call) ::example::CheckDriver((call), #call, __FILE__, __LINE__)

// Device 0's properties. Exits kExitNoDevice with one line on stderr when the runtime finds no
// device (no GPU, no driver, or a driver too old for this runtime).
inline cudaDeviceProp RequireDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    std::exit(kExitNoDevice);
  }
  cudaDeviceProp prop{};
  EX_CHECK(cudaGetDeviceProperties(&prop, 0));
  EX_CHECK(cudaSetDevice(0));
  return prop;
}

// One launch configuration of one function.
struct Config {
  dim3 grid;
  dim3 block;
  size_t dyn_smem = 0;
  long launches = 1;     // executions of this configuration
  bool cooperative = false;
  bool graph = false;    // executed as a kernel node of a CUDA graph
  dim3 cluster{0, 0, 0}; // x == 0: not a cluster launch
  bool driver_api = false;
};

// What the reference calculator needs about a function, read from the runtime or the driver.
struct FunctionFacts {
  std::string name;  // mangled
  cudaOccFuncAttributes attrs;
  int carveout = -1;
  int driver_max_active_blocks = 0;
  int max_active_clusters = 0;  // cluster launches only
};

inline FunctionFacts RuntimeFacts(const void* func, const Config& c) {
  FunctionFacts f;
  const char* name = nullptr;
  EX_CHECK(cudaFuncGetName(&name, func));
  f.name = name;
  cudaFuncAttributes attr{};
  EX_CHECK(cudaFuncGetAttributes(&attr, func));
  f.attrs = cudaOccFuncAttributes(attr);
  f.carveout = attr.preferredShmemCarveout;
  const int threads = static_cast<int>(c.block.x * c.block.y * c.block.z);
  EX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.driver_max_active_blocks, func, threads,
                                                         c.dyn_smem));
  if (c.cluster.x != 0) {
    cudaLaunchConfig_t config{};
    config.gridDim = c.grid;
    config.blockDim = c.block;
    config.dynamicSmemBytes = c.dyn_smem;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = c.cluster.x;
    attribute.val.clusterDim.y = c.cluster.y;
    attribute.val.clusterDim.z = c.cluster.z;
    config.attrs = &attribute;
    config.numAttrs = 1;
    EX_CHECK(cudaOccupancyMaxActiveClusters(&f.max_active_clusters, func, &config));
  }
  return f;
}

// Reference calculator inputs and answer for a function on device 0.
struct Reference {
  cudaOccResult result{};
  int blocks = 0;
};

inline Reference Compute(const cudaDeviceProp& prop, const FunctionFacts& f, const Config& c) {
  cudaOccDeviceProp occ_prop(prop);
  cudaOccDeviceState state;
  state.carveoutConfig = f.carveout;
  Reference r;
  const int threads = static_cast<int>(c.block.x * c.block.y * c.block.z);
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&r.result, &occ_prop, &f.attrs, &state, threads,
                                              c.dyn_smem) != CUDA_OCC_SUCCESS) {
    Fail("cudaOccMaxActiveBlocksPerMultiprocessor", "the reference rejected its input", __FILE__,
         __LINE__);
  }
  r.blocks = r.result.activeBlocksPerMultiprocessor;
  return r;
}

inline void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out->push_back('\\');
    out->push_back(ch);
  }
  out->push_back('"');
}

inline std::string Dim(const dim3& d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]";
}

// Prints the ground-truth line of one configuration (format in the file comment).
inline void Print(const cudaDeviceProp& prop, const FunctionFacts& f, const Config& c) {
  const Reference ref = Compute(prop, f, c);
  const cudaOccResult& res = ref.result;
  // cuflight's order. A bit whose own limit is above the final count is dropped: the reference
  // sets the first five bits before it lowers the count for block barriers (sm_90+).
  struct Named {
    const char* name;
    unsigned bit;
    int limit;
  };
  const Named order[] = {{"registers", OCC_LIMIT_REGISTERS, res.blockLimitRegs},
                         {"shared_mem", OCC_LIMIT_SHARED_MEMORY, res.blockLimitSharedMem},
                         {"warps", OCC_LIMIT_WARPS, res.blockLimitWarps},
                         {"blocks", OCC_LIMIT_BLOCKS, res.blockLimitBlocks},
                         {"barriers", OCC_LIMIT_BARRIERS, res.blockLimitBarriers}};
  std::string limiting;
  std::string all;
  for (const Named& n : order) {
    if ((res.limitingFactors & n.bit) == 0 || n.limit != ref.blocks) continue;
    if (limiting.empty()) limiting = n.name;
    if (!all.empty()) all += ",";
    all += std::string("\"") + n.name + "\"";
  }
  const int threads = static_cast<int>(c.block.x * c.block.y * c.block.z);
  if (threads > std::min(prop.maxThreadsPerBlock, f.attrs.maxThreadsPerBlock)) limiting = "warps";

  std::string cluster_fields;
  if (c.cluster.x != 0) {
    cluster_fields = ",\"cluster\":" + Dim(c.cluster);
    if (f.max_active_clusters > 0 && ref.blocks > 0) {
      const int warps_per_block = (threads + prop.warpSize - 1) / prop.warpSize;
      const int max_warps = prop.maxThreadsPerMultiProcessor / prop.warpSize;
      const double cluster_size = static_cast<double>(c.cluster.x) * c.cluster.y * c.cluster.z;
      const double cluster_occ =
          std::min(1.0, f.max_active_clusters * cluster_size * warps_per_block /
                            (static_cast<double>(prop.multiProcessorCount) * max_warps));
      const double occ = std::min(1.0, static_cast<double>(f.driver_max_active_blocks) *
                                           warps_per_block / max_warps);
      if (cluster_occ < occ) {
        limiting = "cluster";
        all = "\"cluster\"";
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6f", cluster_occ);
      cluster_fields += ",\"max_active_clusters\":" + std::to_string(f.max_active_clusters);
      cluster_fields += std::string(",\"cluster_occupancy\":") + buf;
    }
  }

  std::string line = "{\"kernel\":";
  AppendJsonString(&line, f.name);
  line += ",\"grid\":" + Dim(c.grid) + ",\"block\":" + Dim(c.block);
  line += ",\"dyn_smem\":" + std::to_string(c.dyn_smem);
  line += ",\"launches\":" + std::to_string(c.launches);
  line += ",\"max_active_blocks\":" + std::to_string(f.driver_max_active_blocks);
  line += ",\"reference_max_active_blocks\":" + std::to_string(ref.blocks);
  line += ",\"limiting_resource\":\"" + limiting + "\",\"limiting_resources\":[" + all + "]";
  line += ",\"carveout\":" + std::to_string(f.carveout);
  if (c.cooperative) line += ",\"cooperative\":true";
  if (c.graph) line += ",\"graph\":true";
  line += cluster_fields;
  if (c.driver_api) line += ",\"api\":\"driver\"";
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

// Ground truth for a runtime-API kernel: Print(prop, RuntimeFacts(func, c), c).
template <typename Kernel>
void PrintTruth(const cudaDeviceProp& prop, Kernel* kernel, const Config& c) {
  const void* func = reinterpret_cast<const void*>(kernel);
  Print(prop, RuntimeFacts(func, c), c);
}

// A {"note": ...} line: information without an expectation.
inline void PrintNote(const std::string& note) {
  std::string line = "{\"note\":";
  AppendJsonString(&line, note);
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace example

#endif  // CUFLIGHT_EXAMPLES_COMMON_GROUND_TRUTH_H_
