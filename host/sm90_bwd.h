// sm90_bwd.h — launcher of the Hopper backward kernels (kernels/sm90/gdpa_bwd.cu): dQ, dK, dV.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../kernels/sm90/bwd_config.h"
#include "compile.h"
#include "kernel_api.h"
#include "sm90.h"

namespace gdpa {

class Sm90Backward {
 public:
  virtual ~Sm90Backward() = default;
  // Untimed: compile, tile list, scratch (the fp32 dQ accumulator, semaphores).
  virtual void prepare(const ProblemDesc& p, const DeviceInfo& dev) = 0;
  // Enqueues the whole backward: zero dQ accumulator, main kernel, dQ conversion.
  virtual void run(const DeviceTensors& t, CUstream stream) = 0;
};

bool sm90_backward_supports(const ProblemDesc& p, std::string* why);
// The same, and whether the flags these options give for p can run it: explicit flags that ask for
// cluster pairs (kBwdPair) on a problem the pairs cannot take are refused here, with the reason,
// instead of failing in the kernel's compile.
bool sm90_backward_supports(const ProblemDesc& p, const Sm90Options& opt, std::string* why);
std::unique_ptr<Sm90Backward> make_sm90_backward(const Sm90Options& opt);
std::vector<KernelSource> sm90_backward_sources(const ProblemDesc& p, const Sm90Options& opt);

// Deterministic mode: reorders each (sequence, KV head)'s tiles into increasing KV index while
// keeping the positions the scheduling policy chose, so no CTA waits on a tile queued behind itself.
void sm90_bwd_order_for_determinism(std::vector<WorkTile>& tiles);

// kBwdPair (kernels/sm90/bwd_config.h) applies: head_dim 64 or 128, no mask, no shared KV, and every
// sequence has exactly two KV tiles (128 < Lk <= 256), so both run the same query steps.
bool sm90_bwd_pair_eligible(const ProblemDesc& p);
// Some KV tile has no key in its second half (a sequence with Lk % 128 in 1..64): kBwdSkipEmptyHalf
// has work to skip.
bool sm90_bwd_has_empty_half(const ProblemDesc& p);
// kBwdDqFollow: how many of the device's `sms` SMs the backward leaves to the dQ follower
// (Sm90Options::dq_follow_sms, or the default rule for the problem and its backward `tiles`).
int sm90_bwd_follow_sms(const ProblemDesc& p, const std::vector<WorkTile>& tiles, const Sm90Options& o, int sms);
// The list a pair launch walks: one entry per (sequence, KV head), its KV tile 0, in the policy's
// order; the cluster's CTA of rank r runs KV tile r of it.
std::vector<WorkTile> sm90_bwd_pair_items(const std::vector<WorkTile>& tiles);
// The backward's tile records (kernels/sm90/bwd_config.h BwdTileRecord) for the tile list the
// kernel walks; with `pair` two per entry, its KV tiles 0 and 1 (cluster ranks 0 and 1).
std::vector<sm90::BwdTileRecord> backward_records(const ProblemDesc& p, const std::vector<WorkTile>& tiles, bool pair);

}  // namespace gdpa
