// What one wave of a launch is, and how many waves a grid makes: the one definition of the
// kernel event's `waves` and `tail_utilization`, for the occupancy engine, which computes them for
// every launch (occupancy::ComputeWaves), and for every reader of an interned launch, which
// computes them from its kernel_config's `wave_size` and the launch's grid (config_expander.h;
// docs/protocol.md, "Interned configurations").
//
// 1. A wave is every slot of the GPU (or of the launch's partition) that a unit of the grid can
//    be resident in at once: sm_count x max_active_blocks blocks, or, when the launch's clusters
//    bind (limiting_resource "cluster" and the driver's cuOccupancyMaxActiveClusters known),
//    max_active_clusters clusters. WaveShape says how many units one wave holds and which unit.
// 2. units = grid blocks (/ blocks per cluster, when the unit is the cluster); waves = units /
//    size; tail_utilization = (units mod size) / size, or 1 when the last wave is full. Both are
//    0 when the grid is unknown (a 0 dimension) or nothing can be resident (size 0).
// 3. Producer and reader get bit-identical doubles: both call WavesOf, one IEEE division of the
//    same two integers (tests/schema/waves_test.cc holds the expansion of a launch to the figures
//    the engine computed for it).
// 4. Pure arithmetic, constexpr, allocation-free: the sender thread calls it per launch.
#ifndef CUFLIGHT_SCHEMA_WAVES_H_
#define CUFLIGHT_SCHEMA_WAVES_H_

#include <cstdint>

namespace cuflight::schema {

// x * y * z, saturating at UINT64_MAX: the blocks of a grid, or of a cluster.
constexpr uint64_t DimCount(uint32_t x, uint32_t y, uint32_t z) {
  const uint64_t xy = uint64_t{x} * y;  // < 2^64: both factors < 2^32
  if (z != 0 && xy > UINT64_MAX / z) return UINT64_MAX;
  return xy * z;
}

// One wave of a launch (point 1).
struct WaveShape {
  uint64_t size = 0;      // units one wave holds; 0: nothing can be resident
  bool clusters = false;  // the unit is one of the launch's clusters; else a block

  bool operator==(const WaveShape&) const = default;
};

struct GridWaves {
  double waves = 0;             // units / size
  double tail_utilization = 0;  // fraction of the last wave's slots its units fill, (0, 1]

  bool operator==(const GridWaves&) const = default;
};

// The waves of a grid of `grid_blocks` blocks, in clusters of `cluster_blocks` blocks (used only
// when shape.clusters; 0 or 1: not a cluster launch), one wave being `shape` (point 2).
constexpr GridWaves WavesOf(uint64_t grid_blocks, uint64_t cluster_blocks, WaveShape shape) {
  uint64_t units = grid_blocks;
  if (shape.clusters && cluster_blocks > 1) units /= cluster_blocks;
  if (shape.size == 0 || units == 0) return {};
  const uint64_t rem = units % shape.size;
  return {static_cast<double>(units) / static_cast<double>(shape.size),
          rem == 0 ? 1.0 : static_cast<double>(rem) / static_cast<double>(shape.size)};
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_WAVES_H_
