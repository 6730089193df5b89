// trace_buffer.h — the device side of a profiling trace (kernels/sm90/trace.cuh): a zeroed buffer
// of TraceRecord[CTAs][roles][slots] handed to the kernel in GdpaParams::trace, and written to an
// int32 .npy of shape [CTAs, roles, slots, 4] after the launch. Used by the sm90 forward
// (kFwdTrace) and backward (kBwdTrace) launchers.
#pragma once
#include <string>

#include "driver.h"

namespace gdpa {

class TraceBuffer {
 public:
  TraceBuffer() = default;
  TraceBuffer(std::string path, int ctas, int roles, int slots);
  bool on() const { return !path_.empty(); }
  // Zeroes the records (unused ones stay zero) and returns the pointer for GdpaParams::trace.
  void* arm(CUstream stream);
  // Profiling only: waits for the stream, so a traced run's timing includes the wait.
  void save(CUstream stream) const;

 private:
  std::string path_;
  int ctas_ = 0, roles_ = 0, slots_ = 0;
  DeviceBuffer words_;
};

}  // namespace gdpa
