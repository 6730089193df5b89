// bwd_config.h — tile shapes, shared-memory plan and the fp32 dQ accumulator layout of the Hopper
// backward (gdpa_bwd.cu, dq_convert.cu), shared with the host launcher (host/sm90_bwd.cpp), which
// must request the same shared memory, build the tile list with the same BlockN and size the
// accumulator and the semaphores with the same formulas. Compiles under g++, nvcc and NVRTC.
#pragma once
#include "../common/enums.h"
#include "../common/masks.cuh"
#include "../common/portability.h"

namespace gdpa::sm90 {

// Ablation switches of the backward kernel (template argument FLAGS). 64 bits wide: bits 0-7 and
// 13-30 were all taken by the thirty-fourth session (8-12 carry the activation mix, act_mix.h), so
// new switches take bits 31 and up; the host's -1 ("the defaults") stays out of reach.
enum BwdFlags : long long {
  // dQ of step t is multiplied during step t + 1 (its dS exchange is waited on a step later), so
  // the two consumer warpgroups may drift about half a step apart and one's activation overlaps
  // the other's GEMMs. Off: dQ(t) right after dS(t) is exchanged, the warpgroups run in lockstep.
  kBwdDeferDq = 1,
  // Not an ablation but a specialisation the host adds when logit_scale == 1 (the common case):
  // the activation's argument is the accumulator itself, one multiply per score less.
  kBwdUnitLogitScale = 2,
  // GELU tanh forms in bf16: P^T = round(2 f), one multiply per score fewer, dV halved once in the
  // epilogue (bit-identical gradients; the forward's kFwdHalfFold).
  kBwdHalfFold = 4,
  // Deterministic mode only (the host clears it otherwise): the last contributor of each dQ block
  // in the fixed KV order does not add its part into the fp32 accumulator but finishes the block:
  // the TMA unit brings the partial sum of the earlier contributors into shared memory, and the
  // consumer warpgroup adds it to its accumulator, scales, rounds and stores the io-dtype dQ rows.
  // dq_convert then only writes zeros for blocks nobody wrote. Off: every contributor adds,
  // dq_convert converts all.
  // The host's default keeps it only where it pays (kBwdDqFinishMaxMeanLenK below).
  kBwdDqFinish = 8,
  // The two consumer warpgroups take turns issuing their GEMM batches (the forward's pingpong):
  // each step has two batches per warpgroup (S^T and dP^T; then dV, dK and the dQ job), and a
  // warpgroup issues a batch only in its turn, so the tensor cores run one warpgroup's batch while
  // the other computes P^T and dS^T, instead of interleaving both warpgroups' wgmmas so that both
  // wait for them and then both compute at once.
  kBwdPingpong = 16,
  // Chosen by the host where every sequence has two KV tiles (128 < Lk <= 256) and no mask
  // (bwd_pair_eligible): the grid runs in clusters of two CTAs, and the two KV tiles of one
  // (sequence, KV head) run side by side, one per CTA, over the same query steps. Each dQ block
  // then has exactly these two contributors, and they finish it without the fp32 accumulator:
  // the CTA of rank 0 copies its part of each job straight into rank 1's shared memory
  // (distributed shared memory: a bulk copy completing on a remote mbarrier), and rank 1 finishes
  // the block as the last contributor does with kBwdDqFinish. No semaphores, no partial sums
  // through L2, no dq_convert pass. Needs kBwdDqFinish (the finishing code). Rank 1 then runs
  // 0.4-1.0k cycles a step behind rank 0 and sets the pace; two ways to share its finishing with
  // rank 0 lost: each rank finishing half of every block (0.92-0.95x, eighth session) and the
  // ranks finishing every other job one job late (0.84-0.86x, thirty-fourth; the finisher's own
  // part then makes a round trip through shared memory, PERF_NOTES).
  kBwdPair = 32,
  // A dQ block the kernel finishes (kBwdDqFinish, kBwdPair) whose 64 rows all lie inside the
  // sequence leaves by one TMA store, issued by the dQ writer warp from the consumer's staging
  // buffer, instead of the consumer warpgroup's 128 threads copying its rows after a second
  // warpgroup barrier. The finishing warpgroup (rank 1 of a pair, the last contributor otherwise)
  // is the slower side of every pair step; this takes a barrier and the row copy off its path.
  kBwdDqTmaStore = 64,
  // Not an optimization: a profiling variant whose roles write event timestamps for the first CTAs
  // into GdpaParams::trace (kernels/sm90/trace.cuh; registry name sm90-bwd-trace).
  kBwdTrace = 128,
  // The dQ job goes first in the warpgroup's second GEMM batch, in its own commit group, and is
  // handed over to the writer (staged, or the block finished) while dV and dK still run, instead of
  // after all three (trace: the hand-over is 0.6-1.8k cycles of a 4.7-5.9k step, in series).
  // D = 128 only (the host clears it at D = 64, where the kernel would ignore it). The host's
  // default keeps it with the ordered finish (no pairs), where the hand-over waits for the
  // earlier contributors' partial sum (1.03-1.04x at s = 0.5, L = 512, tenth session), and on the
  // accumulator path where the writer fences the staged job (kBwdDqFenceAtWriter): 1.03-1.04x
  // at self s = 1 L >= 512 and 1.02-1.03x at s = 0.5 L = 2048 (twenty-sixth session), where it
  // had measured 0.96-0.99x while every consumer thread still fenced its staging stores. Off
  // with pairs (0.96-0.99x; host/sm90_bwd.cpp); re-measured on the v27 pairs (thirty-fifth
  // session, explicit flags, `ab-pair-dq-first-*`): L = 256 0.991-0.996x, cross L = 512 / 1024 /
  // 2048 0.974-0.976 / 0.968-0.971 / 0.966x.
  // Bit 13: bits 8..12 carry the activation mix (act_mix.h).
  kBwdDqFirst = 1 << 13,
  // Without kBwdDqFinish (so without pairs): a consumer's dQ jobs alternate between its staging
  // buffer and its partial-sum buffer, which nothing else uses during the steps there, so the
  // consumer stages job k + 1 while the writer may still wait for the semaphore of job k's block
  // (the deterministic KV order) and add it, instead of waiting for that job's read at every
  // hand-over (trace: 0.2k cycles of a 4.8k step at self L = 2048). The kernel ignores it with
  // kBwdDqFinish, whose partial sums use that buffer; the host clears it there.
  kBwdDqTwoStage = 1 << 14,
  // S^T and dP^T in two commit groups: P^T and act'(S^T) are computed once S^T has landed, while
  // the dP^T product still runs, and dS^T = act' dP^T after it (same operations, same bits).
  // The host's default keeps it where dQ is finished in the kernel (pairs, the ordered finish):
  // 1.03-1.04x on cross Lk = 256 at Lq = 512..2048, 1.00x at L = 256, 1.013-1.016x at s = 0.5
  // L = 256, against 0.98-1.01x on the accumulator path's sets (interleaved timing, two rounds
  // each; host/sm90_bwd.cpp). Only where bwd_early_act_fits.
  kBwdEarlyAct = 1 << 15,
  // Accumulator path (kBwdDqTwoStage) only: the tile's dK leaves through this warpgroup's halves
  // of the two dS^T exchange buffers (its 64 key rows of each, one 64-column panel per buffer, the
  // layout a TMA store box reads), free once the tile's last dQ jobs have read them, instead of
  // through dV's buffer after dV's store has read it. The next tile's start already waits for
  // the epilogue's stores to read their buffers (kBwdDqTwoStage), which covers these before the
  // next dS^T store. Same bits. Interleaved rounds against the same flags without it: self s = 1
  // L = 512 / 1024 1.03 / 1.01x, 1.00x at L = 2048 and s = 0.5; with the finish (pairs, the
  // ordered finish, where dK would skip the wait for the writer instead) 0.99-1.00x and 0.965x, so the
  // kernel takes it with kBwdDqTwoStage only and the host clears it elsewhere.
  kBwdDkInDs = 1 << 16,
  // kBwdPair only: rank 0's consumers alternate their dQ jobs between the staging buffer and the
  // partial-sum buffer (rank 0 receives nothing), as kBwdDqTwoStage does on the accumulator path,
  // so that a consumer stages its next job while rank 1 has not yet read its previous copy.
  // Without it every rank-0 hand-over waits for rank 1 to read the previous job: the loop
  // "stage, copy, rank 1 reads, buffer back, stage" set the pair's pace (trace at cross L = 1024:
  // rank 0 waited about 1k cycles a step for its buffer, rank 1 0.4k for the copy; moving rank 1's
  // release later by a few hundred cycles cost 7-11 %). Interleaved against the same kernel
  // without it: 1.04x at L = 256, 1.00-1.01x on the cross sets at Lq >= 512.
  kBwdPairTwoStage = 1 << 17,
  // With kBwdPairTwoStage, rank 0's epilogue stages dV in its warpgroup's halves of the two dS^T
  // buffers (free once this CTA's last dQ jobs have read them) instead of in the next job's buffer,
  // whose previous job rank 1 may not have read yet; dK then goes to that buffer alone. A late
  // rank 0 at a tile boundary delays rank 1 too (it needs rank 0's first copy of the next tile):
  // 1.06x at L = 256, 1.04 / 1.02 / 1.02x at cross Lq = 512 / 1024 / 2048 (interleaved). The same
  // staging on rank 1 (dK alone after the writer's last store) measured 0.99-1.01x: not taken.
  kBwdPairDvInDs = 1 << 18,
  // Unordered mode only (the host clears it in the deterministic mode, with kBwdDqFinish and with
  // pairs): a consumer adds its dQ job into the fp32 accumulator straight from its registers with
  // vector reductions (red.global.add.v4.f32: register group q of thread tid is float4 [q][tid] of the
  // block, so a warp's instruction covers 512 contiguous bytes), instead of staging it in shared
  // memory for the writer's bulk reduce. The trace put that hand-over at about 0.7k cycles of a
  // 4.8k-cycle step (self L = 2048), in series in the warpgroup's chain; the reductions are issued
  // and not waited for. The writer still answers the staging barriers, so the buffers' phases and
  // the dK / dV epilogue that reuses them are unchanged.
  kBwdDqRed = 1 << 19,
  // dV, dK and finished dQ blocks are staged with stmatrix.x4 (epilogue.cuh store_pairs),
  // a quarter of the shared stores of one 4-byte store per packed pair; the same bytes in the same
  // swizzled places, so the same bits. The forward's kFwdStmatrixO. Interleaved against the kernel
  // without it: 1.005-1.018x on the cross sets, 1.01x at s = 0.5 L = 256, 0.995-1.004x on the
  // accumulator path's sets, where it is kept for one staging form.
  kBwdStmatrix = 1 << 20,
  // Each step's dS^T half is published into its buffer with stmatrix.x4 (4 per thread instead of
  // 16 4-byte stores), on the warpgroup's way from the activation to the dS^T arrival. Where dQ
  // is finished in the kernel (pairs, the ordered finish) 1.010-1.019x on the cross sets and at
  // L = 256; on the accumulator path 0.98-0.99x (self s = 1 L = 1024 / 2048, s = 0.5 L = 2048,
  // three rounds), so the host's default takes it with kBwdDqFinish only. Why the accumulator path
  // loses was not measured.
  kBwdStmatrixDs = 1 << 21,
  // A KV tile whose keys end in its first half (Lk - n0 <= 64, the last tile of a sequence with
  // Lk % 128 in 1..64): the second consumer warpgroup, all of whose keys lie past the end, issues
  // no S^T, dP^T, dV or dK product and computes no activation. It still takes its turns, releases
  // its slots and runs its dQ jobs (they need all 128 keys of dS^T), and writes its half of each
  // dS^T buffer as zeros at the tile's first two steps (afterwards nothing overwrites them inside
  // the tile). The keys' products are exact zeros either way, so dQ keeps its bits. The forward's
  // kFwdSkipEmptyHalf for keys. The host keeps it only where some sequence has such a tile.
  kBwdSkipEmptyHalf = 1 << 22,
  // Every role reads a work tile from the host's record (BwdTileRecord) instead of deriving it
  // from the tile list and the offsets (two dependent loads and the mask's query range): the
  // trace put 0.9-1.2k cycles of each tile boundary before a consumer had its tile. The host's
  // default: where dQ is finished in the kernel, and on the deterministic accumulator path where
  // it measured faster (kBwdAccRecordsMaxMeanLenK below).
  kBwdTileRecords = 1 << 23,
  // A dQ job staged for the writer (its bulk reduce or copy, a finished block's TMA store, a pair's
  // copy to rank 1) is published by the consumers' plain dq_full arrival, and the writer's lane 0
  // issues the generic -> async proxy fence after its wait, instead of every consumer thread after
  // its stores. ptxas turns fence.proxy.async into MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S, and the
  // MEMBAR makes each thread wait until its stores have reached shared memory, which the other
  // warpgroup's wgmma operand reads keep busy. The PTX memory model orders a generic write before
  // an async-proxy access by a proxy fence anywhere on the causality path between them (store,
  // release, acquire, fence, access), so the one fence in the issuing thread suffices.
  // Interleaved against the same kernels without it: 1.005-1.02x on the accumulator path (self
  // s = 1 L >= 512, s = 0.5 L = 512 / 1024); the cluster pairs 0.96x at L = 256 and 0.98-0.99x on
  // the longer cross sets, why not known (not the MEMBAR waiting for the issuing lane's own bulk
  // copies: the fence in another lane of the warp cost the pairs 2-3 %, twenty-seventh session).
  // The host's default takes it without kBwdDqFinish only. Same bits.
  kBwdDqFenceAtWriter = 1 << 24,
  // The same for the dS^T exchange: each warpgroup publishes its half by arrival only, and every
  // reader fences once after its ds_full wait, before the dQ wgmma (async proxy) reads the buffer.
  // Interleaved, six rounds: the pair sets 1.003-1.017x, the accumulator path 0.99-1.01x (0.2 %
  // in the mean). On for every problem. Same bits.
  kBwdDsFenceAtReader = 1 << 25,
  // Deterministic accumulator path only (no kBwdDqFinish, no pairs): the dQ conversion runs
  // beside the backward instead of after it. The host leaves a few SMs out of the persistent grid
  // and launches gdpa_bwd_dq_follow (dq_follow.cu) behind it with programmatic stream
  // serialization; each backward CTA allows that launch at its start (griddepcontrol), so the
  // follower's CTAs are placed only once every backward CTA is resident, on the SMs left free.
  // They walk the dQ blocks in the order their last adds land (the host's list, sorted by the
  // tile list entry of each block's last contributor), wait for each block's semaphore to show
  // every add, and convert it: reading it from L2 soon after its last add, instead of the whole
  // fp32 accumulator from DRAM in a pass after the kernel, at the price of the SMs left out.
  // Same arithmetic as dq_convert, so the same bits. Nothing in the backward waits for it.
  // Interleaved against the pass (twenty-eighth session): 1.015-1.043x at self s = 1 L >= 512,
  // 1.026-1.042x at s = 0.5 L >= 512. How many SMs: host/sm90_bwd.cpp sm90_bwd_follow_sms.
  kBwdDqFollow = 1 << 26,
  // Accumulator path with kBwdDkInDs and kBwdDeferDq only: a tile's dV is staged in this
  // warpgroup's own 64 rows of the V tile, which nothing reads after its own last dP^T product, at
  // the start of the tile's deferred last dQ job (before its wait for the other warpgroup's last
  // dS^T, where the leading warpgroup waits anyway), instead of after that job in the dQ staging
  // buffer of its next job, which it may take only once the writer has read the job before (in the
  // deterministic order that add waits for other CTAs' adds of the same block: the trace put 1.98k
  // cycles on "dV staged and stored" of a 2.8k-cycle epilogue at self s = 1 L = 512). K and V then
  // go back to the producer before the dQ hand-over (K once the dQ product is done, V once dV's
  // store has read its rows), and the producer loads the next tile's K before its V. Same bits.
  // Five placements that lost are in PERF_NOTES (thirty-second session); V given back any later
  // than this leaves the next tile waiting for it (its load takes about 1.8k cycles).
  kBwdDvInV = 1 << 27,
  // With kBwdTileRecords, each consumer thread loads field lane % 16 of the NEXT tile's record at
  // the end of the current tile's steps, and the next tile's top gathers the fields by shuffles
  // (the forward's kFwdRecordLanes). The trace puts 0.8-1.0k cycles of each tile start before the
  // scalars are in, with K and V already there; loaded in the tail, the record arrives under the
  // tail and the epilogue, and its one register lives only there, not through the steps (the
  // twenty-fifth session's load a tile ahead cost the long sets 1 % and spilled in three
  // check-matrix kernels). Same bits. Interleaved, explicit flags, two rounds in both orders
  // (thirty-third session, `ab-rlanes-*`): the ordered finish at s = 0.5 L = 256 (2-3 steps a
  // tile) 1.016 / 1.018x; the accumulator path at self s = 1 L = 512 / 1024 1.002-1.004 /
  // 1.005-1.006x and the pairs (self and cross L = 256, cross L = 512) 0.997-1.006x, inside the
  // noise; on the v27 pairs at L = 256 (thirty-fifth session, `ab-pair-rlanes-*`) 0.993-0.998x.
  // The host sets it by default with the ordered finish only (host/sm90_bwd.cpp); it is not in
  // kBwdDefaultFlags, so explicit flags take it only when asked.
  kBwdRecordLanes = 1 << 28,
  // kBwdPair, rank 1: the dK / dV epilogue's TMA stores out of the staging buffer are waited for
  // (their read of it) where that buffer is next written, at the next tile's first finished dQ
  // block, instead of at the epilogue's end before the next tile may start. The trace puts 4.4k
  // cycles of rank 1's 5.4k-cycle epilogue at self s = 1 L = 256 on dK and the stores' read, and
  // staging dK through the partial buffer instead (its release to rank 0 after the read) changed
  // nothing (0.98-1.00x, thirty-fourth session): the wait for the read itself is what costs. Same
  // bits. Interleaved against the same kernel without it, both orders (thirty-fourth session,
  // `ab-late-wait-*`): self s = 1 and cross L = 256 (4 steps per KV tile) 1.021-1.027x, cross
  // L = 512 0.998 / 1.002x, L = 1024 / 2048 0.990-0.991 / 0.982-0.985x, where the next tile's
  // first block waiting for the stores costs more than the epilogue saves. The host sets it by
  // default up to kBwdPairLateStoreWaitMaxStepsPerTile; it is not in kBwdDefaultFlags.
  kBwdPairLateStoreWait = 1 << 29,
  // With kBwdPairLateStoreWait and kBwdDeferDq: rank 1's epilogue stages dV in the warpgroup's
  // halves of the dS^T buffers (free once both warpgroups' last dQ jobs have read them) and dK
  // alone in the staging buffer, so that dK no longer waits for dV's store to have read their
  // shared buffer (about 2k cycles at L = 256); the next tile's first dS^T store (its first step,
  // which has no dQ job) then waits for the stores' read as well. Same bits. Interleaved against
  // kBwdPairLateStoreWait alone, both orders (thirty-fourth session, `ab-rank1-dv-in-ds-*`): self
  // s = 1 L = 256 1.022 / 1.021x, cross L = 256 1.021 / 1.023x. The host sets it with the late
  // wait at D = 128 (at D = 64 ptxas spills 4 bytes with it; not measured there); it is not in
  // kBwdDefaultFlags.
  kBwdPairRank1DvInDs = 1 << 30,
  // kBwdPair with kBwdDeferDq: rank 0 too ends its epilogue without waiting for its dK / dV
  // stores' read; the next tile's first step (no dQ job) waits for it before its first dS^T store,
  // which comes before any write of rank 0's buffers (dV in the dS^T halves, dK in its next job's
  // staging buffer, written at the next hand-over). Rank 1's first copy of each tile comes from
  // rank 0, so rank 0's tile start is on the pair's path too. Same bits. Interleaved, explicit
  // flags 3803611263 against the v26 default, both orders (thirty-fifth session,
  // `ab-rank0-late-wait-*`): self s = 1 L = 256 1.016 / 1.024x, cross L = 256 1.032 / 1.031x; on
  // the longer cross sets' pairs (without rank 1's late wait, `ab-rank0-late-long-*`) L = 512 /
  // 1024 / 2048 0.996-0.997 / 0.993-0.994 / 0.991-0.993x. The host sets it with kBwdPairRank1DvInDs's
  // rule (the late wait, D = 128; D = 64 spills 4 bytes); it is not in kBwdDefaultFlags.
  kBwdPairRank0LateStoreWait = 1LL << 31,
  // Built in the thirty-fifth session, in the default since the thirty-sixth: with kBwdDeferDq,
  // a tile's dV and dK accumulators are initialised by the first k16 slice of the first step's
  // dV and dK wgmmas (scale-d 0, an immediate: that step is its own instantiation, the one
  // without a dQ job) instead of being zeroed by 128 moves per thread at the tile's top, which
  // the trace puts in the 290-370 cycles between the record's read and the K / V waits. A warpgroup whose keys all lie
  // past the sequence's end (kBwdSkipEmptyHalf, no dV / dK wgmmas) still zeroes them. The same
  // values, except that an all-zero dV / dK sum may come out as -0 instead of +0. 128 SASS
  // instructions fewer. Interleaved, both orders: by explicit flags (`ab-init-acc-*`) self s = 1
  // L = 512 / 1024 1.014-1.018 / 1.014-1.015x, the pairs at L = 256 0.960-0.964x, cross L >= 512
  // 0.983-1.002x; as a default on the accumulator path against the kernel without it
  // (`ablation-first-step-init-acc-*`) self s = 1 L = 512 / 1024 / 2048 1.016-1.017 /
  // 1.012-1.016 / 0.998-0.999x, s = 0.5 L = 512 / 1024 / 2048 1.002-1.005 / 1.000 / 1.001x.
  // `gdpa check` passed with it on the ordered finish and on the pair cases (thirty-fifth
  // session) and on the accumulator path (explicit flags 4563394645, thirty-sixth: 31 / 31), its
  // GPU test passes, the sanitizers are clean. On the H200 of the thirty-sixth session, as the
  // default against its ablation: 1.004 / 1.006x and 1.008 / 1.010x at L = 512 / 1024
  // interleaved, 1.012-1.045x and 1.025-1.027x timed alone (`alone-init-acc-*`). The host sets it
  // on the accumulator path where the tile records are read; it is not in kBwdDefaultFlags.
  kBwdFirstStepInitAcc = 1LL << 32,
  kBwdDefaultFlags = kBwdDeferDq | kBwdHalfFold | kBwdDqFinish | kBwdPingpong | kBwdDqTmaStore | kBwdDqFirst |
                     kBwdDqTwoStage | kBwdEarlyAct | kBwdDkInDs | kBwdPairTwoStage |
                     kBwdPairDvInDs | kBwdDqRed | kBwdStmatrix | kBwdStmatrixDs | kBwdSkipEmptyHalf | kBwdTileRecords |
                     kBwdDqFenceAtWriter | kBwdDsFenceAtReader | kBwdDqFollow | kBwdDvInV,
  kBwdAllFlags = kBwdDeferDq | kBwdUnitLogitScale | kBwdHalfFold | kBwdDqFinish | kBwdPingpong | kBwdPair |
                 kBwdDqTmaStore | kBwdTrace | kBwdDqFirst | kBwdDqTwoStage | kBwdEarlyAct | kBwdDkInDs |
                 kBwdPairTwoStage | kBwdPairDvInDs | kBwdDqRed | kBwdStmatrix | kBwdStmatrixDs | kBwdSkipEmptyHalf |
                 kBwdTileRecords | kBwdDqFenceAtWriter | kBwdDsFenceAtReader | kBwdDqFollow | kBwdDvInV |
                 kBwdRecordLanes | kBwdPairLateStoreWait | kBwdPairRank1DvInDs | kBwdPairRank0LateStoreWait |
                 kBwdFirstStepInitAcc,
};

// Where the kernel takes kBwdEarlyAct (and the host keeps the bit): D = 128 and the activations
// for which ptxas (13.0, sm_90a) keeps P^T, act' and the in-flight dP^T next to dK and dV with
// neither spills nor serialized wgmmas. At D = 128 gelu (erf), gelu_tanh (accurate tanh) and
// fast_gelu_bf16 spilled 16-40 bytes with it, gelu_poly and gelu_taylor6 spilled 8-16 bytes inside
// the step loop with the ordered finish, and hardswish serialized every wgmma; at D = 64
// (where ptxas already injects a warpgroup.arrive) the identity serialized, and nothing there was
// measured.
GDPA_HD constexpr bool bwd_early_act_fits(int head_dim, int act) {
  return head_dim == 128 && (act == kIdentity || act == kFastGelu || act == kRelu || act == kReluSquare ||
                             act == kLeakyRelu || act == kSilu || act == kFastSilu);
}

// kBwdDqFinish by default only while the mean KV length is at most this (one and a half KV tiles).
// Measured on the seed's sets (H200, same calls; where no cluster pairs apply, which take every
// sequence with two KV tiles): the ordered finish 1.03x over the accumulator path at a mean Lk of
// 128 (s = 0.5, L = 256: one contributor per query tile, the separate dq_convert pass a large share
// of a short kernel), 0.94x at 256 (s = 0.5, L = 512; `ab-finish-threshold2-*`), and 0.93-0.98x at
// 512 and more, where the last contributor's consumers wait for the earlier contributors' partial
// sum with a step of slack. Until the eleventh session the limit was 384 (the finish 1.0x at 256):
// two staging buffers and acquire / release semaphores made the accumulator path the faster one
// there. Means between 128 and 256 were not measured. Explicit flags (Sm90Options::bwd_flags) are
// used as given.
constexpr int kBwdDqFinishMaxMeanLenK = 192;

// What the flags make of the dQ path, one definition for every role of the kernel that needs it
// (the consumers and the writer must agree): the partial-sum buffer is the second staging buffer
// only without the finish, and a job is added from the registers only where nothing finishes it.
GDPA_HD constexpr bool bwd_dq_two_stage(long long flags) { return (flags & kBwdDqTwoStage) && !(flags & kBwdDqFinish); }
// kBwdDvInV: where the kernel takes it, with kBwdDkInDs and kBwdDeferDq (dV is staged during the
// tile's deferred last dQ job; the host clears it elsewhere); the producer and the consumers must
// agree, since it moves V's release and the order of the K / V loads.
GDPA_HD constexpr bool bwd_dv_in_v(long long flags) {
  return (flags & kBwdDvInV) && (flags & kBwdDkInDs) && (flags & kBwdDeferDq) && bwd_dq_two_stage(flags);
}
GDPA_HD constexpr bool bwd_dq_red(long long flags) { return (flags & kBwdDqRed) && !(flags & kBwdDqFinish); }

// kBwdDqRed (unordered mode) by default only from this mean KV length. Against the unordered mode
// without it, interleaved, two rounds (sixteenth session, `ab-dq-red-*`): 1.05-1.06x at self s = 1
// L = 512 / 1024 / 2048 (mean Lk 512 .. 2048), 1.02x / 1.03-1.05x at s = 0.5 L = 1024 / 2048 (512 /
// 1024), but 0.97-0.98x at s = 0.5 L = 512 (mean Lk 256) and 0.97-1.01x at s = 0.5 L = 256 (128).
constexpr int kBwdDqRedMinMeanLenK = 384;

// kBwdDvInV by default only up to this mean KV length. Interleaved against the same kernel without
// it, two rounds in both orders (thirty-second session, `ab-dvinv2d-*`): self s = 1 L = 512 / 1024
// 1.038-1.045 / 1.007-1.009x, s = 0.5 L = 512 / 1024 / 2048 (mean Lk about 256 / 512 / 1024)
// 1.034-1.039 / 1.031-1.033 / 1.022x. At self s = 1 L = 2048 (32 steps per tile, where a tile's end
// weighs least) every earlier placement lost 0.3-2 % (`results/dv-in-v-forms/`), and this one
// measured 0.995 / 1.000x (thirty-third session, explicit flags, `ab-dvinv2d-l2048-*`). With the
// tile records and the first step's accumulator initialisation beside it, the L = 1024 sets'
// kernel, it gains there too: 1.018-1.019x at L = 2048 against the kernel with none of the three
// (thirty-sixth session, `ab-l2048-rec-init-*`), while records and initialisation without it lost
// (0.993-0.995x). So the limit is 2048, the longest mean measured; means between 1024 and 2048
// were not measured.
constexpr int kBwdDvInVMaxMeanLenK = 2048;

// kBwdTileRecords on the accumulator path by default only up to this mean KV length, and only where
// no KV tile has an empty half (host/sm90_bwd.cpp). Interleaved against the tile list and offsets
// on the kernels with kBwdDvInV, two rounds in both orders (thirty-third session, `ab-accrec-*`):
// self s = 1 L = 512 / 1024 1.017-1.025 / 1.021-1.022x, L = 2048 0.997-1.000x; s = 0.5 L = 512 /
// 1024 / 2048 (every kernel there carries the empty-half path) 1.006 / 1.002-1.003 / 0.993x. The
// twenty-fifth and twenty-ninth sessions had measured 0.98-1.00x on this path before dV moved into
// V's rows. Why the s = 0.5 sets do not gain is not known; with kBwdFirstStepInitAcc as well they
// measured 1.000-1.006 / 0.989-0.991 / 0.976-0.978x (thirty-sixth session, `ab-s05-rec-init-*`).
// At L = 2048 the three together (records, dV in V's rows, the first step's initialisation) gain
// 1.018-1.019x (kBwdDvInVMaxMeanLenK), so the limit is 2048, as that one's.
constexpr int kBwdAccRecordsMaxMeanLenK = 2048;

// kBwdPair by default only where the mean query length is at least this (four steps per KV tile).
// Measured on the seed's sets (H200, against the same kernel without pairs): cross Lk = 256 at
// Lq = 512 / 1024 / 2048 1.04 / 1.11 / 1.18x, where each KV tile runs 8-32 steps and rank 0 stays
// ahead of rank 1 without waiting. At L = 256 (4 steps per tile) pairs were 0.99-1.00x while rank
// 1's consumers still copied the finished rows themselves after the writer's answer to each job's
// announcement; with both gone (kBwdDqTmaStore) 1.05x (self s = 1 and cross L = 256,
// `ab-pair-l256-*`). At a mean of 128 (two steps per tile: the seed's s = 0.5 L = 256 with its
// dense 256 keys, Lq uniform in [1, 256]) pairs measured 1.019-1.020x against the accumulator path
// with the follower, and the in-kernel finish without pairs 0.89x (thirty-eighth session,
// interleaved, both orders, `s05d-bwd-l256-*`). Shorter query sets were not measured, so the rule
// stops there.
constexpr int kBwdPairMinMeanLenQ = 128;

// The ordered finish (kBwdDqFinish without pairs, no mask) runs without kBwdDeferDq by default
// only up to this many query steps per KV tile on average (group x mean Lq / 64). Measured
// (twenty-second session, interleaved, both orders; `ab-nodefer-*`): undeferred over deferred
// 1.072-1.077x at s = 0.5 L = 256 (about 2 steps per tile), and on cross sets with every Lk = 128
// 1.00 / 0.95-0.96 / 0.94 / 0.93x at Lq = 256 / 512 / 1024 / 2048 (4 to 32 steps per tile). Pairs
// (0.76x) and the accumulator path (0.97x at s = 0.5 L = 512) keep the deferral anyway.
constexpr int kBwdUndeferredMaxStepsPerTile = 3;

// kBwdPairLateStoreWait by default only up to this many query steps per KV tile on average (group x
// mean Lq / 64): measured faster at 4 (self s = 1 and cross L = 256, 1.021-1.027x), even at 8
// (cross L = 512), slower from 16 (kBwdPairLateStoreWait). Means between 4 and 8 were not measured.
constexpr int kBwdPairLateStoreWaitMaxStepsPerTile = 6;

constexpr int kBwdConsumerWarpgroups = 2;
constexpr int kBwdBlockM = 64;                           // query rows per inner step
constexpr int kBwdBlockN = 64 * kBwdConsumerWarpgroups;  // key rows per CTA tile, 64 per consumer
constexpr int kBwdThreads = 128 * (1 + kBwdConsumerWarpgroups);
// Everything the backward's roles need about one KV tile, computed on the host (host/sm90_bwd.cpp
// backward_records) from the tile list, the offsets and the mask (kBwdTileRecords): one 64-byte
// record instead of a chain of dependent loads (tile -> cu_seqlens) at each tile's start. With
// kBwdPair, entry e of the tile list has two records, 2 e + cluster rank. Padded to 64 bytes: a
// record is three aligned 16-byte loads and never straddles a cache line.
struct BwdTileRecord {
  int batch, kv_head;
  int n0;         // sequence-local first key of the tile (BlockN * KV tile index)
  int k_row;      // global row of key n0 in the packed K / V / dK / dV
  int q_seq_row;  // global row of the sequence's first query (cu_seqlens_q[b])
  int len_q, len_k;
  int m_begin, m_end;  // query tiles [m_begin, m_end) whose rows can see some key of the tile
  int steps;           // group * (m_end - m_begin); 0: dK = dV = 0 and no loads at all
  int pad[6];
};
static_assert(sizeof(BwdTileRecord) == 64, "three aligned 16-byte loads per record");

// KV tile n0 / BlockN of sequence b (kv head `kv_head`, its keys from global row k_begin, its
// queries from q_begin), as a record: the host's (backward_records) and the kernel's own
// derivation without kBwdTileRecords (bwd_common.cuh bwd_tile) are this one function. The query
// tiles are those whose rows see some key of [n0, min(n0 + BlockN, Lk)): the relation the
// scheduler uses for the tile's work, so all agree on the step count.
GDPA_HD BwdTileRecord bwd_tile_record(int mask, int b, int kv_head, int n0, int k_begin, int len_k, int q_begin,
                                      int len_q, int window_left, int window_right, int group) {
  BwdTileRecord t{};
  t.batch = b;
  t.kv_head = kv_head;
  t.n0 = n0;
  t.len_k = len_k;
  t.k_row = k_begin + n0;
  t.q_seq_row = q_begin;
  t.len_q = len_q;
  int lo, hi;
  mask_query_range(mask, n0, n0 + kBwdBlockN < len_k ? n0 + kBwdBlockN : len_k, len_q, len_k, window_left,
                   window_right, &lo, &hi);
  if (hi > lo) {
    t.m_begin = lo / kBwdBlockM;
    t.m_end = (hi + kBwdBlockM - 1) / kBwdBlockM;
  } else {
    t.m_begin = t.m_end = 0;
  }
  t.steps = (t.m_end - t.m_begin) * group;
  return t;
}

constexpr int kBwdQStages = 2;   // Q + dO ring depth
constexpr int kBwdDsStages = 2;  // dS^T exchange buffers (see bwd_consumer.cuh, "dS exchange")

// dQ is produced in jobs of 64 query rows x 64 head-dim columns: one m64n64 wgmma accumulator of
// one consumer warpgroup, 4096 floats, reduced into global memory by one 16 KB bulk add.
constexpr int kBwdDqCols = 64;
constexpr int kBwdDqJobFloats = kBwdBlockM * kBwdDqCols;
constexpr int kBwdDqJobBytes = kBwdDqJobFloats * 4;

// ---- the fp32 dQ accumulator ------------------------------------------------------------------
// Not a plain [total_q, Hq, D] tensor: FA3's blocked layout, so each job is ONE contiguous bulk
// reduce and no job ever touches another sequence's rows.
//   * Query tiles get "slots": sequence b's tile m is slot dq_slot_begin(cu_q[b], b) + m. Adding
//     BlockM * b before dividing gives every sequence room for ceil(Lq / BlockM) slots (proof in
//     dq_num_slots), at the price of at most one unused slot per sequence.
//   * Block (slot, head h, column chunk c) is kBwdDqJobFloats floats at
//     ((slot * Hq + h) * (D / 64) + c) * 4096, stored in the order the consumer's wgmma
//     accumulator holds them: thread `tid` (0..127 of the warpgroup) keeps register r (0..31) at
//     float index dq_frag_index(tid, r), which is element (dq_frag_row, dq_frag_col) of the tile.
//     Registers 4k..4k+3 are one float4 at [k][tid]: conflict-free 16-byte shared-memory stores.
//   * The deterministic mode's semaphore of (slot, h) is semaphores[slot * Hq + h].
// dq_convert.cu reads the blocks back, scales and writes the io-dtype dQ rows of each sequence.
GDPA_HD int dq_slot_begin(int cu_seqlens_q_b, int b) { return (cu_seqlens_q_b + kBwdBlockM * b) / kBwdBlockM; }

// Slots of a batch: sequence b owns [dq_slot_begin(cu_q[b], b), + ceil(Lq(b) / 64)), and that end is
// <= dq_slot_begin(cu_q[b + 1], b + 1) = floor((x + Lq + 64) / 64) with x = cu_q[b] + 64 b, because
// floor(x / 64 + Lq / 64 + 1) >= floor(x / 64) + floor(Lq / 64) + 1 >= floor(x / 64) + ceil(Lq / 64).
// So the slot ranges are disjoint and all lie below the value for b = batch.
GDPA_HD long long dq_num_slots(int total_q, int batch) { return dq_slot_begin(total_q, batch); }

// Index of the (slot, head) block: its semaphore in the deterministic mode, and the first factor of
// its accumulator offset.
GDPA_HD long long dq_block_index(long long slot, int head, int heads_q) { return slot * heads_q + head; }

// Float offset of column chunk `chunk` of block `block` (= dq_block_index) in the accumulator.
GDPA_HD long long dq_chunk_offset(long long block, int chunk, int head_dim) {
  return (block * (head_dim / kBwdDqCols) + chunk) * (long long)kBwdDqJobFloats;
}

GDPA_HD long long dq_block_offset(long long slot, int head, int heads_q, int chunk, int head_dim) {
  return dq_chunk_offset(dq_block_index(slot, head, heads_q), chunk, head_dim);
}

// The m64nN wgmma accumulator layout (PTX ISA; kernels/sm90/fragments.cuh): warp w = tid / 32,
// g = lane / 4, t = lane % 4; register r holds row 16 w + g + 8 ((r / 2) % 2), column 8 (r / 4) +
// 2 t + r % 2.
GDPA_HD int dq_frag_row(int tid, int r) { return 16 * (tid >> 5) + ((tid & 31) >> 2) + 8 * ((r >> 1) & 1); }
GDPA_HD int dq_frag_col(int tid, int r) { return 8 * (r >> 2) + 2 * (tid & 3) + (r & 1); }
GDPA_HD int dq_frag_index(int tid, int r) { return (r >> 2) * 512 + tid * 4 + (r & 3); }

// ---- the follower's list (kBwdDqFollow) ---------------------------------------------------------
// One item per (query tile, head) dQ block of the batch (host/sm90_bwd_dq_plan.cpp), in the order
// the follower converts them: its accumulator block and semaphore (dq_block_index), the global row
// of its first query, its head and rows inside the sequence, and the number of KV tiles that add
// to it (the semaphore's final value; 0: nobody adds, the rows are zeros).
struct DqConvertItem {
  int block;      // dq_block_index(slot, head, heads_q)
  int row0;       // global row of the block's first query
  int head_rows;  // head * 128 + rows (1..64 rows inside the sequence)
  int count;      // contributions: the semaphore's final value
};
static_assert(sizeof(DqConvertItem) == 16, "one 16-byte load per item");
GDPA_HD constexpr int dq_item_head_rows(int head, int rows) { return head * 128 + rows; }
GDPA_HD constexpr int dq_item_head(int head_rows) { return head_rows >> 7; }
GDPA_HD constexpr int dq_item_rows(int head_rows) { return head_rows & 127; }

// The conversions' shapes (dq_convert.cu, dq_follow.cu, dq_rows.cuh): 128 converting threads (the
// consumer warpgroup's fragment layout) and a staging tile of 64 rows of 64 io values (128 bytes)
// plus 16 bytes each: the fragment-order stores hit all 32 banks (row * 36 + 4k + t words: 4g + t
// differ across a warp), and rows stay 16-byte aligned for the row-order reads.
constexpr int kConvertThreads = 128;
constexpr int kConvertRowBytes = 144;
constexpr int kConvertTileBytes = kBwdBlockM * kConvertRowBytes;
// The follower (dq_follow.cu): a loader warp and the converting threads; dynamic shared memory for
// a ring of kFollowStages 16 KB chunks, the staging tile, the ring's full / empty barriers and the
// chunk each slot holds: 73 KB (the host asks the occupancy API how many CTAs fit an SM).
constexpr int kFollowStages = 4;
constexpr int kFollowThreads = 32 + kConvertThreads;
constexpr int kFollowRingBytes = kFollowStages * kBwdDqJobBytes;
constexpr int kFollowSmemBytes = kFollowRingBytes + kConvertTileBytes + 2 * kFollowStages * 8 + kFollowStages * 4;

// ---- masking of a transposed (keys x queries) fragment ----------------------------------------
// The queries i that key j may pair with form one interval [*lo, *lo + *count): exactly the i with
// mask_allowed(mask, i, j, Lq, Lk, left, right) (kernels/common/masks.cuh; d0 = Lk - Lq):
//   causal: i >= j - d0;  window: j - d0 - right <= i <= j - d0 + left (an unbounded side is < 0);
//   always 0 <= i < Lq, and no i at all when j >= Lk.
// A masked block then costs one subtract and one unsigned compare per element instead of the
// whole predicate. Window sides are assumed below 2^30 (mask_allowed overflows there as well).
GDPA_HD void bwd_query_interval(int mask_kind, int key, int len_q, int len_k, int window_left, int window_right,
                                int* lo, int* count) {
  const int rel = key - (len_k - len_q);  // the query on the key's diagonal
  int a = 0, b = len_q;                   // [a, b)
  if (mask_kind == 1 /* kMaskCausal */) a = rel > a ? rel : a;
  if (mask_kind == 2 /* kMaskWindow */) {
    if (window_right >= 0) a = rel - window_right > a ? rel - window_right : a;
    if (window_left >= 0) b = rel + window_left + 1 < b ? rel + window_left + 1 : b;
  }
  if (key < 0 || key >= len_k || b < a) b = a;
  *lo = a;
  *count = b - a;
}

// ---- kBwdTrace: the events the roles record (trace.cuh; records are TraceRecord, params.h) --------
enum BwdTraceEvent : unsigned {
  // Consumer warpgroups (roles 0 and 1), per step unless noted.
  kTrTileStart = 1,  // K and V of the work tile have arrived (once per tile)
  kTrQdoReady,       // Q and dO of the step have arrived
  kTrTurnA,          // the warpgroup holds its turn for S^T and dP^T
  kTrADone,          // S^T and dP^T complete
  kTrDsPublished,    // P^T, dS^T formed and our dS^T half published for the dQ jobs
  kTrTurnB,          // the dQ job's dS^T is complete and the warpgroup holds its turn for dV, dK, dQ
  kTrBDone,          // dV, dK and the dQ job complete
  kTrDqHanded,       // the dQ job handed to the writer (or finished)
  kTrLastDqHanded,   // the tile's deferred last dQ job handed over (once per tile)
  kTrEpilogueEnd,    // dK and dV staged and their TMA stores issued (once per tile)
  kTrDqBufferFree,   // in the hand-over: the writer has read our previous job (dq_empty)
  kTrPartialIn,      // in the hand-over of a finished job: the earlier part is in (pair: the copy)
  kTrActComputed,    // P^T and dS^T computed (and masked), before the wait for a dS^T buffer
  kTrDqJobDone,      // kBwdDqFirst: the dQ job complete (dV, dK still running), its hand-over next
  kTrDvOut,          // epilogue: dV staged and its TMA store issued (once per tile)
  kTrTileRead,       // the tile's scalars read from the tile list, before its K / V waits (once per tile)
  kTrKIn,            // the tile's K has arrived (once per tile)
  kTrVIn,            // then its V (once per tile); kTrTileStart follows the two-buffer path's barrier
  kTrLoopTop,        // the work-tile loop's iteration begins, before the record is read (once per tile)
  kTrRecordIn,       // the tile's record is in registers, before the empty test and the dK / dV zeroing
  // Producer (role 2).
  kTrLoadKv = 32,  // K and V of a tile issued (their slots were free)
  kTrLoadQdo,      // Q and dO of a step issued (their ring slot was free)
  // The dQ writer records nothing: on 24 registers a tracer makes it spill. Its back-pressure shows
  // in the consumers' kTrBDone -> kTrDqHanded (the wait for the staging buffer is in between).
};

constexpr int kBwdTraceCtas = 8;
constexpr int kBwdTraceRoles = 3;
constexpr int kBwdTraceSlots = 4096;  // records per (CTA, role); later events are dropped

// ---- shared memory ------------------------------------------------------------------------------
// Byte offsets inside the 1024-byte aligned dynamic shared memory. Every 128B-swizzled operand
// starts on a 1024-byte boundary (the swizzle repeats every 8 rows x 128 bytes and the wgmma
// descriptors assume base offset 0).
//   K, V        [BlockN keys][D] each, as D/64 panels of [BlockN][128 B] (TMA boxes of 64 columns)
//   Q, dO       kBwdQStages tiles of [BlockM][D] each, panels of [BlockM][128 B]
//   dS^T        kBwdDsStages tiles of [BlockN keys][BlockM queries]: 64 queries = one 128-byte row
//   dQ staging  one 16 KB job buffer per consumer warpgroup (read by the bulk reduce; at the end of
//               a work tile it also stages the warpgroup's dK block with kBwdDqFinish, and dV and
//               dK on rank 1 of a pair, for their TMA stores, epilogue.cuh)
//   dQ partial  one 16 KB buffer per consumer warpgroup: the accumulator's partial sum of a block
//               the warpgroup finishes (kBwdDqFinish; with kBwdPair: the partner's part), or, with
//               kBwdDqTwoStage, every other dQ job of the warpgroup; and at a work tile's end, where
//               nothing else needs it, the staged dV block, and without kBwdDqFinish dK after it,
//               for their TMA stores (bwd_consumer.cuh, the epilogue). At D = 128 this uses up the 227 KB.
struct BwdSmemPlan {
  int kv_bytes, q_bytes, ds_bytes;
  int k_off, v_off, q_off, do_off, ds_off, dq_off, partial_off, bar_off, total;
};

GDPA_HD constexpr BwdSmemPlan bwd_smem_plan(int head_dim) {
  BwdSmemPlan s{};
  s.kv_bytes = kBwdBlockN * head_dim * 2;
  s.q_bytes = kBwdBlockM * head_dim * 2;
  s.ds_bytes = kBwdBlockN * kBwdBlockM * 2;
  s.k_off = 0;
  s.v_off = s.k_off + s.kv_bytes;
  s.q_off = s.v_off + s.kv_bytes;
  s.do_off = s.q_off + kBwdQStages * s.q_bytes;
  s.ds_off = s.do_off + kBwdQStages * s.q_bytes;
  s.dq_off = s.ds_off + kBwdDsStages * s.ds_bytes;
  s.partial_off = s.dq_off + kBwdConsumerWarpgroups * kBwdDqJobBytes;
  s.bar_off = s.partial_off + kBwdConsumerWarpgroups * kBwdDqJobBytes;
  // k, v and each Q/dO stage: a full/empty pair; each dS buffer: a full/empty pair; per consumer
  // warpgroup two dQ full/empty pairs (one per buffer of kBwdDqTwoStage), two announcement
  // barriers, a partial-sum barrier and the kBwdPair full/empty pair; then two 40-byte dQ job
  // headers per consumer warpgroup (bwd_common.cuh, DqJobHeader).
  s.total = s.bar_off + 8 * (2 * (2 + kBwdQStages) + 2 * kBwdDsStages + 9 * kBwdConsumerWarpgroups) +
            2 * 40 * kBwdConsumerWarpgroups;
  return s;
}

// Dynamic shared memory to request: the plan plus slack to align the base to 1024 bytes (the
// runtime only guarantees 16-byte alignment of dynamic shared memory).
GDPA_HD constexpr int bwd_smem_request(int head_dim) { return bwd_smem_plan(head_dim).total + 1024; }

}  // namespace gdpa::sm90
