// test_trace_tool.cpp — experiments/trace_bwd.py against a synthetic kBwdTrace buffer whose phases
// are known, written in the layout the launcher writes (bwd_config.h BwdTraceRecord, int32 .npy).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../host/compile.h"
#include "../../host/npy.h"
#include "../../kernels/sm90/bwd_config.h"

namespace {

using namespace gdpa::sm90;

struct Phase {
  unsigned event;
  int cycles;  // since the previous event
};

// CTAs 0 and 1, both consumer warpgroups: three work tiles of four steps with fixed phase lengths,
// then the tail, the epilogue and a wait before the next tile. Timer ns = cycles / 2 (2 GHz).
std::vector<int32_t> synthetic_trace(const std::vector<Phase>& step, int tail, int epilogue, int gap) {
  std::vector<int32_t> words(size_t(kBwdTraceCtas) * kBwdTraceRoles * kBwdTraceSlots * 4, 0);
  for (int cta = 0; cta < 2; ++cta) {
    for (int role = 0; role < 2; ++role) {
      int32_t* rec = words.data() + size_t(cta * kBwdTraceRoles + role) * kBwdTraceSlots * 4;
      long long cycles = 1000;
      int n = 0, s = 0;
      auto put = [&](unsigned event, int st) {
        rec[4 * n] = int32_t(uint32_t(cycles));
        rec[4 * n + 1] = int32_t(uint32_t(cycles >> 32));
        rec[4 * n + 2] = int32_t(event | unsigned(st) << 8);
        rec[4 * n + 3] = int32_t(uint32_t(cycles / 2));
        ++n;
      };
      for (int tile = 0; tile < 3; ++tile) {
        put(kTrTileStart, s);
        for (int k = 0; k < 4; ++k, ++s)
          for (const Phase& p : step) {
            cycles += p.cycles;
            put(p.event, s);
          }
        cycles += tail;
        put(kTrLastDqHanded, s - 1);
        cycles += epilogue * 3 / 8;  // dV staged and stored
        put(kTrDvOut, s - 1);
        cycles += epilogue - epilogue * 3 / 8;
        put(kTrEpilogueEnd, s - 1);
        cycles += gap;
      }
    }
  }
  return words;
}

// Runs experiments/trace_bwd.py on a synthetic trace; its printout ("" where python3 is missing).
std::string run_trace_tool(const std::vector<Phase>& step) {
  if (std::system("python3 -c pass > /dev/null 2>&1") != 0) return "";
  const std::vector<int32_t> words = synthetic_trace(step, 400, 800, 300);
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string npy = (dir / "gdpa-trace-tool-test.npy").string();
  const std::string out = (dir / "gdpa-trace-tool-test.txt").string();
  gdpa::save_npy(npy, words.data(), {kBwdTraceCtas, kBwdTraceRoles, kBwdTraceSlots, 4});
  const std::string cmd =
      "python3 '" + gdpa::source_root() + "/experiments/trace_bwd.py' '" + npy + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  std::filesystem::remove(npy);
  std::filesystem::remove(out);
  return rc == 0 ? text.str() : "trace_bwd.py failed:\n" + text.str();
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
  CHECK(s.find("both stores read 500") != std::string::npos);
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
