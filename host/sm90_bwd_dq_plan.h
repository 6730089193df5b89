// sm90_bwd_dq_plan.h — the order in which the follower converts the backward's dQ blocks
// (kBwdDqFollow, kernels/sm90/bwd_config.h; kernels/sm90/dq_follow.cu gdpa_bwd_dq_follow).
#pragma once
#include <vector>

#include "../kernels/common/params.h"
#include "../kernels/sm90/bwd_config.h"
#include "problem.h"

namespace gdpa {

// Every (query tile, head) dQ block of `p` once, with the number of KV tiles that add to it (the
// relation the writer's semaphore count uses: bwd_consumer.cuh job_header), sorted by the position in
// `tiles` (the list the persistent grid walks in rounds) of its last contributor in KV order, the
// tile whose add completes the block; blocks nobody adds to come first. The follower's CTAs take
// the items from one counter in this order, so they wait for blocks roughly in the order the
// backward finishes them.
// Throws std::logic_error if a contributing KV tile is missing from `tiles`.
std::vector<sm90::DqConvertItem> dq_follow_items(const ProblemDesc& p, const std::vector<WorkTile>& tiles);

}  // namespace gdpa
