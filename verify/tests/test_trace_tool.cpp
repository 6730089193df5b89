// test_trace_tool.cpp — experiments/trace_bwd.py and trace_fwd.py against synthetic kBwdTrace /
// kFwdTrace buffers whose phases are known, written in the layout the launchers write (params.h
// TraceRecord, int32 .npy).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../../host/npy.h"
#include "../../kernels/sm90/bwd_config.h"
#include "../../kernels/sm90/fwd_config.h"
#include "python_tools.h"

namespace {

using namespace gdpa::sm90;

struct Phase {
  unsigned event;
  int cycles;  // since the previous event
};

// Writes one recorder's records (params.h TraceRecord) into its slots: each put advances the SM
// clock by `after` cycles first. Timer ns = cycles / 2 (a 2 GHz clock).
struct RecordWriter {
  int32_t* rec;
  long long cycles;
  int n = 0;
  void put(unsigned event, int step, int after = 0) {
    cycles += after;
    rec[4 * n] = int32_t(uint32_t(cycles));
    rec[4 * n + 1] = int32_t(uint32_t(cycles >> 32));
    rec[4 * n + 2] = int32_t(event | unsigned(step) << 8);
    rec[4 * n + 3] = int32_t(uint32_t(cycles / 2));
    ++n;
  }
};

// CTAs 0 and 1, both consumer warpgroups: three work tiles of four steps with fixed phase lengths,
// then the tail, the epilogue and a wait before the next tile (in parts: a third to the tile's
// read, a third for K, a sixth for V, the rest to the start; with `loop_parts` the first third in
// its own parts: a fifth of it to the loop top, half for the record, the rest to the tile read).
// Timer ns = cycles / 2 (2 GHz).
std::vector<int32_t> synthetic_trace(const std::vector<Phase>& step, int tail, int epilogue, int gap,
                                     bool loop_parts = false) {
  std::vector<int32_t> words(size_t(kBwdTraceCtas) * kBwdTraceRoles * kBwdTraceSlots * 4, 0);
  for (int cta = 0; cta < 2; ++cta) {
    for (int role = 0; role < 2; ++role) {
      RecordWriter w{words.data() + size_t(cta * kBwdTraceRoles + role) * kBwdTraceSlots * 4, 1000};
      int s = 0;
      for (int tile = 0; tile < 3; ++tile) {
        if (tile > 0) {
          if (loop_parts) {
            w.put(kTrLoopTop, s, gap / 15);
            w.put(kTrRecordIn, s, gap / 6);
          }
          w.put(kTrTileRead, s, loop_parts ? gap / 3 - gap / 15 - gap / 6 : gap / 3);
          w.put(kTrKIn, s, gap / 3);
          w.put(kTrVIn, s, gap / 6);
          w.put(kTrTileStart, s, gap - gap / 3 - gap / 3 - gap / 6);
        } else {
          w.put(kTrTileStart, s);
        }
        for (int k = 0; k < 4; ++k, ++s)
          for (const Phase& p : step) w.put(p.event, s, p.cycles);
        w.put(kTrLastDqHanded, s - 1, tail);
        w.put(kTrDvOut, s - 1, epilogue * 3 / 8);  // dV staged and stored
        w.put(kTrEpilogueEnd, s - 1, epilogue - epilogue * 3 / 8);
      }
    }
  }
  return words;
}

// Runs experiments/<script> on a trace buffer of the given shape; its printout ("" where python3 is
// missing).
std::string run_trace_script(const std::string& script, const std::vector<int32_t>& words,
                             const std::vector<int64_t>& shape) {
  const std::string npy = (std::filesystem::temp_directory_path() / "gdpa-trace-tool-test.npy").string();
  gdpa::save_npy(npy, words.data(), shape);
  const std::string out = gdpa::run_experiment_script(script, "'" + npy + "'");
  std::filesystem::remove(npy);
  return out;
}

// The three-warpgroup form (kFwdThreeConsumers): CTA 0's three warpgroups, each `shift` cycles
// behind the previous one, through three tiles of ten blocks with fixed phases. A tile starts with
// block 0's QK^T: issued +100, S ready +300. Then each block: activation +1000, V_j and K_j+1
// arrived +50, PV_j and QK^T_j+1 issued +150, complete +300, which is S_j+1 ready (1500 a block).
std::vector<int32_t> synthetic_serial_trace(int shift) {
  std::vector<int32_t> words(size_t(kFwdTraceCtas) * 3 * kFwdTraceSlots * 4, 0);
  for (int role = 0; role < 3; ++role) {
    RecordWriter w{words.data() + size_t(role) * kFwdTraceSlots * 4, 100000 + role * shift};
    for (int tile = 0; tile < 3; ++tile) {
      w.put(kFtTileStart, 0);
      w.put(kFtTurn, 0);
      w.put(kFtQkIssued, 0, 100);
      for (int j = 0; j < 10; ++j) {
        w.put(kFtSReady, j, j == 0 ? 300 : 0);
        w.put(kFtActDone, j, 1000);
        w.put(kFtOperandsReady, j, 50);
        w.put(kFtPvIssued, j, 150);
        w.put(kFtPvDone, j, 300);
      }
    }
  }
  return words;
}

// Runs experiments/trace_bwd.py on a synthetic backward trace.
std::string run_trace_tool(const std::vector<Phase>& step, bool loop_parts = false) {
  return run_trace_script("trace_bwd.py", synthetic_trace(step, 400, 800, 300, loop_parts),
                          {kBwdTraceCtas, kBwdTraceRoles, kBwdTraceSlots, 4});
}

// A forward trace: CTA 0's two consumer warpgroups, warpgroup 1 running `shift` cycles behind
// warpgroup 0, each through three tiles of five key blocks (block 0, four inner steps, the
// finish) with the inner steps' phases fixed. Timer ns = cycles / 2 (2 GHz).
std::vector<int32_t> synthetic_fwd_trace(int shift) {
  std::vector<int32_t> words(size_t(kFwdTraceCtas) * kFwdConsumerWarpgroups * kFwdTraceSlots * 4, 0);
  for (int role = 0; role < 2; ++role) {
    RecordWriter w{words.data() + size_t(role) * kFwdTraceSlots * 4, 1000 + role * shift};
    for (int tile = 0; tile < 3; ++tile) {
      w.put(kFtTileStart, 0, 10);
      if (tile == 0) {  // later tiles' first QK^T rode in the previous finish
        w.put(kFtTurn, 0, 100);
        w.put(kFtIssued, 0, 300);
      }
      w.put(kFtSReady, 0, 250);
      w.put(kFtActDone, 0, 1200);
      for (int j = 1; j < 5; ++j) {
        w.put(kFtTurn, j, 100);
        w.put(kFtQkIssued, j, 300);
        w.put(kFtIssued, j, 500);
        w.put(kFtSReady, j, 250);
        w.put(kFtActDone, j, 1200);
        w.put(kFtPvDone, j, 100);
      }
      w.put(kFtTurn, 5, 100);
      w.put(kFtIssued, 5, 800);
      w.put(kFtLastPvDone, 5, 150);
      w.put(kFtEpilogueEnd, 5, 900);
    }
  }
  return words;
}

// A step's events up to the second turn, the same in both orders of the second GEMM batch:
// 50 + 30 + 600 + 400 + 100 + 100 = 1280 cycles, then `rest`.
std::vector<Phase> step_until_turn_b(const std::vector<Phase>& rest) {
  std::vector<Phase> step = {{kTrQdoReady, 50},    {kTrTurnA, 30},        {kTrADone, 600},
                             {kTrActComputed, 400}, {kTrDsPublished, 100}, {kTrTurnB, 100}};
  step.insert(step.end(), rest.begin(), rest.end());
  return step;
}

}  // namespace

TEST_CASE("trace_bwd.py: the phases of a step and the cost of a tile boundary from a known trace") {
  // 1280 + 900 + 80 + 120 = 2380 cycles a step.
  const std::string s =
      run_trace_tool(step_until_turn_b({{kTrBDone, 900}, {kTrDqBufferFree, 80}, {kTrDqHanded, 120}}));
  if (s.empty()) {
    MESSAGE("no python3 here: trace_bwd.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("4 recorders") != std::string::npos);
  CHECK(s.find("SM clock 2.000 GHz") != std::string::npos);
  CHECK(s.find("median: 2380 cycles") != std::string::npos);
  // Each tile: 4 steps, then tail + epilogue + gap = 1500 cycles beyond them.
  CHECK(s.find("beyond its steps 1500 cycles") != std::string::npos);
  CHECK(s.find("activation 500 = math 400 + dS^T buffer/store 100") != std::string::npos);
  CHECK(s.find("hand-over 200 = buffer free 80") != std::string::npos);
  CHECK(s.find("tail (deferred last dQ job) 400, dK/dV epilogue 800, then waiting for the next K/V 300") !=
        std::string::npos);
  CHECK(s.find("dV staged and stored 300, dK staged") != std::string::npos);
  CHECK(s.find("in parts: to the tile read 100, K in 100, V in 50, barrier 50\n") != std::string::npos);
  CHECK(s.find("stores read 500") != std::string::npos);
  // With the loop-top and record events, the first part in its own parts too.
  const std::string parts =
      run_trace_tool(step_until_turn_b({{kTrBDone, 900}, {kTrDqBufferFree, 80}, {kTrDqHanded, 120}}), true);
  CAPTURE(parts);
  CHECK(parts.find("in parts: to the tile read 100, K in 100, V in 50, barrier 50, of the first part: to the loop "
                   "top 20, record read 50, to the tile read after it 30") != std::string::npos);
}

TEST_CASE("trace_bwd.py: kBwdDqFirst's order, the hand-over inside the dV / dK batch") {
  // The dQ job completes 300 cycles into the batch, is handed over (80 + 120) while dV and dK run,
  // and they complete 500 cycles later: 1280 + 1000 = 2280 a step.
  const std::string s = run_trace_tool(step_until_turn_b(
      {{kTrDqJobDone, 300}, {kTrDqBufferFree, 80}, {kTrDqHanded, 120}, {kTrBDone, 500}}));
  if (s.empty()) return;
  CAPTURE(s);
  CHECK(s.find("median: 2280 cycles") != std::string::npos);
  CHECK(s.find("beyond its steps 1500 cycles") != std::string::npos);
  CHECK(s.find("hand-over 200 = buffer free 80") != std::string::npos);
  CHECK(s.find("dV + dK + dQ             1000") != std::string::npos);
  CHECK(s.find("dV + dK after it          500") != std::string::npos);
}

TEST_CASE("trace_fwd.py: the phases of an inner step and the warpgroups' turn lags from a known trace") {
  // Warpgroup 1 runs 1000 cycles behind warpgroup 0. A step (turn to turn) is 100 + 300 + 500 + 250
  // + 1200 + 100 = 2450 cycles. Warpgroup 1's turn comes 1000 + 100 - 900 = 200 cycles after
  // warpgroup 0 passed its own (turn + 800); warpgroup 0's next turn comes 2450 - 1000 - 800 = 650
  // cycles after warpgroup 1 passed. Their activations [1150, 2350) and [2150, 3350) past warpgroup
  // 0's turn share 200 of 1200 cycles.
  const std::string s = run_trace_script("trace_fwd.py", synthetic_fwd_trace(1000),
                                         {kFwdTraceCtas, kFwdConsumerWarpgroups, kFwdTraceSlots, 4});
  if (s.empty()) {
    MESSAGE("no python3 here: trace_fwd.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("2 recorders") != std::string::npos);
  CHECK(s.find("SM clock 2.000 GHz") != std::string::npos);
  CHECK(s.find("median: 2450 cycles") != std::string::npos);
  CHECK(s.find("wait turn         100") != std::string::npos);
  CHECK(s.find("issue             800") != std::string::npos);
  CHECK(s.find("issue QK        300") != std::string::npos);
  CHECK(s.find("issue PV        500") != std::string::npos);
  CHECK(s.find("S ready           250") != std::string::npos);
  CHECK(s.find("activation       1200") != std::string::npos);
  CHECK(s.find("PV done           100") != std::string::npos);
  CHECK(s.find("last PV 150, epilogue 900") != std::string::npos);
  // The next tile starts 10 cycles after the epilogue, its S is complete 250 later.
  CHECK(s.find("then the next tile's S 260 (of which to its start 10)") != std::string::npos);
  CHECK(s.find("warpgroup 0 took its turn 650 cycles") != std::string::npos);
  CHECK(s.find("warpgroup 1 took its turn 200 cycles") != std::string::npos);
  CHECK(s.find("other warpgroup's: 17 %") != std::string::npos);
}

TEST_CASE("trace_fwd.py: the three-warpgroup form's block phases, GEMM coverage and overlaps") {
  // Shifted by 500 cycles, each warpgroup has a GEMM outstanding during [1200, 1500) of its
  // 1500-cycle block; the three together cover 900 of every 1500 cycles (60 %), plus each tile's
  // first QK^T. A warpgroup's activation [0, 1000) shares [500, 1000) with the one ahead of it and
  // [0, 500) with the one behind: all of it. The ends of the trace, where fewer warpgroups run, and
  // the tile starts move both by a few points.
  const std::string s =
      run_trace_script("trace_fwd.py", synthetic_serial_trace(500), {kFwdTraceCtas, 3, kFwdTraceSlots, 4});
  if (s.empty()) return;
  CAPTURE(s);
  CHECK(s.find("3 recorders (three-warpgroup form)") != std::string::npos);
  CHECK(s.find("median: 1500 cycles") != std::string::npos);
  CHECK(s.find("first QK                400") != std::string::npos);
  CHECK(s.find("activation             1000") != std::string::npos);
  CHECK(s.find("V/K wait                 50") != std::string::npos);
  CHECK(s.find("issue                   150") != std::string::npos);
  CHECK(s.find("GEMMs                   300") != std::string::npos);
  auto percent_after = [&](const std::string& text) {
    const size_t at = s.find(text);
    return at == std::string::npos ? -1 : std::atoi(s.c_str() + at + text.size());
  };
  const int outstanding = percent_after("some GEMM outstanding during ");
  const int shared = percent_after("another warpgroup's: ");
  CHECK(outstanding >= 58);
  CHECK(outstanding <= 66);
  CHECK(shared >= 90);
  CHECK(shared <= 100);
}
