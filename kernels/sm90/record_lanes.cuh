// record_lanes.cuh — a work tile's host record spread over a warp's lanes: lane l holds int field
// l % FIELDS of record `index` (one register per thread; every lane of a warp reads the same
// FIELDS * 4 bytes, one L2 request). Both Hopper kernels load the next tile's record this way
// before it is needed and gather the fields by shuffles where that tile starts (kFwdRecordLanes,
// kBwdRecordLanes): a record loaded where it is needed costs the warp its whole L2 latency, since
// ptxas moves the fields into uniform registers right after the load.
#pragma once
#include "../../ptx/common.cuh"

namespace gdpa::sm90 {

template <int FIELDS>
__device__ __forceinline__ int record_field_of_lane(const void* records, int index) {
  static_assert(FIELDS > 0 && FIELDS <= 32 && (FIELDS & (FIELDS - 1)) == 0, "a power of two, at most a warp");
  return static_cast<const int*>(records)[FIELDS * index + (ptx::lane_id() & (FIELDS - 1))];
}

}  // namespace gdpa::sm90
