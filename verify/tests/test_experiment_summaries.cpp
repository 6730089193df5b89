// test_experiment_summaries.cpp — experiments/parity_summary.py and alone_summary.py against bench
// JSON whose numbers are known, named as experiments/parity.sh and alone_rounds.sh name theirs,
// traffic_summary.py against ncu CSV as experiments/traffic.sh keeps it, and lib.sh's check of
// kernel names before a script spends GPU time, and register_probe.sh against a register cut whose
// spills are certain.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../../host/compile.h"
#include "python_tools.h"

namespace {

namespace fs = std::filesystem;

struct Row {
  std::string set, kernel;
  double tflops, fraction_of_limit;
};

// One bench JSON holding the forward rows given (only the fields the summaries read).
void write_bench_json(const fs::path& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "{\"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i)
    f << (i ? ", " : "") << "{\"set\": \"" << rows[i].set << "\", \"kernel\": \"" << rows[i].kernel
      << "\", \"direction\": \"fwd\", \"tflops\": " << rows[i].tflops
      << ", \"fraction_of_limit\": " << rows[i].fraction_of_limit << "}";
  f << "]}\n";
}

// A fresh, empty folder under the system's temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("parity_summary.py: the ratios by each call's limits and by the spec's, and the verdict per L") {
  const fs::path dir = fresh_dir("gdpa-parity-summary-test");
  const std::string prefix = "parity-pairs-20990101-000000";
  auto put = [&](int round, const std::string& set, int length, double tflops, double fraction) {
    const std::string name = prefix + "-r" + std::to_string(round) + "-" + set + "-L" + std::to_string(length) +
                             "-GPU-20990101-00000" + std::to_string(round) + ".json";
    write_bench_json(dir / name, {{set + "-L" + std::to_string(length), "sm90", tflops, fraction}});
  };
  // L = 512, both rounds: own limits 0.70 / 0.80 = 0.875; spec (500 / 730) / (600 / 750) = 0.856.
  for (int r : {1, 2}) {
    put(r, "self-s1.0", 512, 600, 0.80);
    put(r, "self-s0.5", 512, 500, 0.70);
  }
  // L = 256: own 0.92 / 0.94 = 0.979; spec (340 / 365) / (510 / 547) = 0.999: met.
  put(1, "self-s1.0", 256, 510, 0.94);
  put(1, "self-s0.5", 256, 340, 0.92);
  // L = 2048: own 0.73 / 0.80 = 0.912 (met); spec 580 / 660 = 0.879 (short).
  put(1, "self-s1.0", 2048, 660, 0.80);
  put(1, "self-s0.5", 2048, 580, 0.73);
  // L = 1024, round 1 without its s = 0.5 call.
  put(1, "self-s1.0", 1024, 640, 0.80);

  const std::string s = gdpa::run_experiment_script("parity_summary.py", "'" + dir.string() + "' " + prefix);
  fs::remove_all(dir);
  if (s.empty()) {
    MESSAGE("no python3 here: parity_summary.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("L =  256: 0.979 / 0.999  met") != std::string::npos);
  CHECK(s.find("L =  512: 0.875 / 0.856  short") != std::string::npos);
  CHECK(s.find("L = 2048: 0.912 / 0.879  met by one reading") != std::string::npos);
  CHECK(s.find("incomplete: ['self-s1.0']") != std::string::npos);
  CHECK(s.find("L = 1024:") == std::string::npos);  // an incomplete pair gives no ratio
  // Round 1 times s = 1 first, round 2 s = 0.5 first.
  CHECK(s.find("  512     1       s=1 |") != std::string::npos);
  CHECK(s.find("  512     2     s=0.5 |") != std::string::npos);
}

TEST_CASE("parity_summary.py: KERNEL picks the forward timed; a call without it is an error") {
  const fs::path dir = fresh_dir("gdpa-parity-kernel-test");
  const std::string prefix = "parity-pairs-20990101-000001";
  // Each call holds the default's row and a variant's: own limits 0.70 / 0.80 = 0.875 for sm90,
  // 0.76 / 0.80 = 0.950 for the variant.
  for (const auto& [set, f_sm90, f_var] : {std::make_tuple("self-s1.0", 0.80, 0.80), std::make_tuple("self-s0.5", 0.70, 0.76)})
    write_bench_json(dir / (prefix + "-r1-" + set + "-L512-GPU-20990101-000001.json"),
                     {{std::string(set) + "-L512", "sm90", 600 * f_sm90, f_sm90},
                      {std::string(set) + "-L512", "sm90-no-skip-empty-half", 600 * f_var, f_var}});
  const std::string d = "'" + dir.string() + "' " + prefix;
  const std::string base = gdpa::run_experiment_script("parity_summary.py", d);
  const std::string var = gdpa::run_experiment_script("parity_summary.py", d + " sm90-no-skip-empty-half");
  const std::string none = gdpa::run_experiment_script("parity_summary.py", d + " sm90-no-such-kernel");
  fs::remove_all(dir);
  if (base.empty()) {
    MESSAGE("no python3 here: parity_summary.py not tried");
    return;
  }
  CHECK(base.find("L =  512: 0.875 /") != std::string::npos);
  CHECK(var.find("L =  512: 0.950 /") != std::string::npos);
  CHECK(none.find("expected one sm90-no-such-kernel forward row, found 0") != std::string::npos);
}

TEST_CASE("alone_summary.py: each kernel's rounds, median and ratio to the first kernel") {
  const fs::path dir = fresh_dir("gdpa-alone-summary-test");
  const std::string prefix = "alone-20990101-000000";
  const double base[3] = {600, 590, 610}, other[3] = {612, 606, 618};  // medians 600 and 612: x1.020
  for (int r = 0; r < 3; ++r) {
    write_bench_json(dir / (prefix + "-r" + std::to_string(r + 1) + "-sm90-GPU-20990101-00000" + std::to_string(r) +
                            ".json"),
                     {{"self-s0.5-L2048", "sm90", base[r], 0.7}});
    write_bench_json(dir / (prefix + "-r" + std::to_string(r + 1) + "-sm90-no-skip-empty-half-GPU-20990101-00001" +
                            std::to_string(r) + ".json"),
                     {{"self-s0.5-L2048", "sm90-no-skip-empty-half", other[r], 0.7}});
  }
  const std::string s = gdpa::run_experiment_script(
      "alone_summary.py", "'" + dir.string() + "' " + prefix + " sm90,sm90-no-skip-empty-half");
  fs::remove_all(dir);
  if (s.empty()) {
    MESSAGE("no python3 here: alone_summary.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("self-s0.5-L2048 fwd") != std::string::npos);
  CHECK(s.find("600.0  590.0  610.0  median  600.0  x1.000 of sm90") != std::string::npos);
  CHECK(s.find("612.0  606.0  618.0  median  612.0  x1.020 of sm90") != std::string::npos);
}

namespace {

// An ncu CSV as experiments/traffic.sh keeps it: the program's printout, then one row per metric
// (only the columns traffic_summary.py reads, plus one it skips), in the units given.
void write_ncu_csv(const fs::path& path, const std::vector<std::vector<std::string>>& metrics,
                   const std::string& printout = "GPU NVIDIA H200 (sm_90, 132 SMs); kernel sm90\nforward :  1.000 ms\n") {
  std::ofstream f(path);
  f << printout;
  f << "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  for (const auto& m : metrics)
    f << "\"0\",\"void gdpa_fwd<0, 128, 3, 0, 1>(TensorMap)\",\"" << m[0] << "\",\"" << m[1] << "\",\"" << m[2]
      << "\"\n";
}

}  // namespace

TEST_CASE("traffic_summary.py: time, clock and bytes per launch, in ms, GHz and GB, over the first file's") {
  const fs::path dir = fresh_dir("gdpa-traffic-summary-test");
  const fs::path a = dir / "traffic-fwd-sm90-20990101-000000.csv";
  const fs::path b = dir / "traffic-fwd-sm90-no-skip-empty-half-20990101-000000.csv";
  write_ncu_csv(a, {{"dram__bytes_read.sum", "byte", "7,090,000,000"},
                    {"dram__bytes_write.sum", "byte", "1,210,000,000"},
                    {"lts__t_bytes.sum", "byte", "49,500,000,000"},
                    {"gpu__time_duration.sum", "ns", "7,300,000"},
                    {"sm__cycles_elapsed.avg.per_second", "hz", "1,660,000,000"},
                    {"lts__t_sector_hit_rate.pct", "%", "75.8"}});
  // The same counts in the larger units ncu may choose: 7.446 ms, 6.13 / 1.21 / 38.61 GB, 1.7 GHz.
  write_ncu_csv(b, {{"dram__bytes_read.sum", "Gbyte", "6.13"},
                    {"dram__bytes_write.sum", "Mbyte", "1,210"},
                    {"lts__t_bytes.sum", "Gbyte", "38.61"},
                    {"gpu__time_duration.sum", "usecond", "7,446"},
                    {"sm__cycles_elapsed.avg.per_second", "Ghz", "1.70"}});
  const fs::path missing = dir / "traffic-fwd-broken-20990101-000000.csv";
  write_ncu_csv(missing, {{"gpu__time_duration.sum", "ns", "1"}});
  const std::string s =
      gdpa::run_experiment_script("traffic_summary.py", "'" + a.string() + "' '" + b.string() + "'");
  const std::string broken = gdpa::run_experiment_script("traffic_summary.py", "'" + missing.string() + "'");
  fs::remove_all(dir);
  if (s.empty()) {
    MESSAGE("no python3 here: traffic_summary.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("sm90                                  7.300  1.660        7.09        1.21    49.50   x1.000 x1.000 "
               "x1.000") != std::string::npos);
  CHECK(s.find("sm90-no-skip-empty-half               7.446  1.700        6.13        1.21    38.61   x1.020 x0.865 "
               "x0.780") != std::string::npos);
  // A launch ncu did not profile (metrics missing) is an error, not a row of zeros.
  CHECK(broken.find("failed") != std::string::npos);
  CHECK(broken.find("no clock_ghz, dram_read_gb") != std::string::npos);
}

TEST_CASE("parity_cycles.py: the parity of two launches split into work per cycle and clock") {
  const fs::path dir = fresh_dir("gdpa-parity-cycles-test");
  // `gdpa run`'s printout as traffic.sh keeps it, then the two metrics the split needs.
  auto launch = [&](const std::string& name, const std::string& shape, const std::string& flops, const std::string& ns,
                    const std::string& hz) {
    const fs::path p = dir / name;
    write_ncu_csv(p,
                  {{"dram__bytes_read.sum", "byte", "1"}, {"dram__bytes_write.sum", "byte", "1"},
                   {"lts__t_bytes.sum", "byte", "1"}, {"gpu__time_duration.sum", "ns", ns},
                   {"sm__cycles_elapsed.avg.per_second", "hz", hz}},
                  "GPU NVIDIA H200 (sm_90, 132 SMs); kernel sm90\nproblem: bf16 D128 fast_gelu none Hq4/Hkv4 B1152 " +
                      shape + "\nwork: forward " + flops + " FLOP (backward 2.5x)\nforward : 3676.938 ms 0.1 TFLOP/s\n");
    return "'" + p.string() + "'";
  };
  // s = 1: 6e11 FLOP in 1 ms at 1.65 GHz (363.6 TFLOP per 1e9 cycles); s = 0.5: 3e11 in 0.64 ms at
  // 1.6 GHz (293.0). Per cycle 293.0 / 363.6 / (730 / 750) = 0.828, clock 0.970, time 0.803.
  const std::string dense = launch("traffic-fwd-sm90-20990101-000000.csv", "Lq[512..512] Lk[512..512]", "6.000000e+11",
                                   "1,000,000", "1,650,000,000");
  const std::string half = launch("traffic-fwd-sm90-20990101-000001.csv", "Lq[1..512] Lk[512..512]", "3.000000e+11",
                                  "640,000", "1,600,000,000");
  const std::string jagged_keys = launch("traffic-fwd-sm90-20990101-000002.csv", "Lq[1..512] Lk[1..512]",
                                         "3.000000e+11", "640,000", "1,600,000,000");
  const std::string s = gdpa::run_experiment_script("parity_cycles.py", dense + " " + half);
  const std::string swapped = gdpa::run_experiment_script("parity_cycles.py", half + " " + dense);
  const std::string jagged = gdpa::run_experiment_script("parity_cycles.py", dense + " " + jagged_keys);
  fs::remove_all(dir);
  if (s.empty()) {
    MESSAGE("no python3 here: parity_cycles.py not tried");
    return;
  }
  CAPTURE(s);
  CHECK(s.find("  512 |   1.000  1.650   363.64 |    0.640  1.600   292.97 |     0.828  0.970  0.803") !=
        std::string::npos);
  // The pair's order and the seed's dense keys are checked, not assumed.
  CHECK(swapped.find("expected the s = 1 then the s = 0.5 forward of one L") != std::string::npos);
  CHECK(jagged.find("the keys are jagged") != std::string::npos);
}

// The command-line binary the experiment scripts run, absolute: `make test` builds it and names it
// in GDPA_BIN; run by hand, build/gdpa. Empty where there is no bash to run the scripts with.
static std::string script_gdpa_binary() {
  if (std::system("bash -c true > /dev/null 2>&1") != 0) return "";
  const char* env = std::getenv("GDPA_BIN");
  const fs::path bin = env && *env ? fs::path(env) : fs::path(gdpa::source_root()) / "build" / "gdpa";
  REQUIRE_MESSAGE(fs::exists(bin), "no gdpa binary at " << bin.string() << ": `make build/gdpa` first");
  return fs::absolute(bin).string();
}

// Runs one of lib.sh's preflight checks (require_kernels / require_activations) on NAMES; an empty
// optional where there is no bash.
static std::optional<gdpa::CommandResult> lib_preflight(const std::string& check, const std::string& names) {
  const std::string bin = script_gdpa_binary();
  if (bin.empty()) return std::nullopt;
  return gdpa::run_command("bash -c \"GDPA='" + bin + "'; source '" + gdpa::source_root() + "/experiments/lib.sh' && " +
                           check + " " + names + " && echo KNOWN\"");
}

// KNOWN (a comma-separated list) must pass the check, and each name of MISSPELT, listed after
// KNOWN, must fail it with "unknown <what> 'name'".
static void check_preflight(const std::string& check, const std::string& known, const std::string& what,
                            const std::vector<std::string>& misspelt) {
  const auto ok = lib_preflight(check, known);
  if (!ok) return;  // no bash: nothing to run the scripts with
  CAPTURE(ok->output);
  CHECK(ok->status == 0);
  CHECK(ok->output.find("KNOWN") != std::string::npos);
  for (const std::string& name : misspelt) {
    CAPTURE(name);
    const auto missing = lib_preflight(check, known + "," + name);
    REQUIRE(missing);
    CAPTURE(missing->output);
    CHECK(missing->status != 0);
    CHECK(missing->output.find("unknown " + what + " '" + name + "'") != std::string::npos);
    CHECK(missing->output.find("KNOWN") == std::string::npos);
  }
}

TEST_CASE("lib.sh preflight: kernel names are resolved as gdpa bench resolves them, a misspelt one is an error") {
  // The first two misspelt names are parts of real ones (sm90-fwd-tails-side, sm90-three-wg): a
  // search of the binary's bytes passed them; N = 0 is no valid number of SMs for the tail kernel.
  check_preflight("require_kernels", "sm90,sm90-fwd-tails-side16,sm90-fwd-half75,baseline", "kernel",
                  {"sm90-fwd-tails-sid16", "sm90-three", "sm90-fwd-tails-side0", "sm90-nosuch7"});
}

TEST_CASE("lib.sh preflight: activation names are resolved as gdpa bench --act resolves them") {
  // The known list is ablate_activation.sh's default. The first two misspelt names are parts of
  // real ones (gelu_taylor6, fast_gelu_bf16): a search of the binary's bytes, as this check once
  // was, passed them.
  check_preflight("require_activations", "fast_gelu,fast_gelu_bf16,gelu_taylor6,gelu_poly", "activation",
                  {"gelu_tay", "fast_gelu_bf", "gelu_nosuch"});
}

// experiments/register_probe.sh KERNEL FILE EXPR...; an empty optional where there is no bash.
static std::optional<gdpa::CommandResult> register_probe(const std::string& args) {
  const std::string bin = script_gdpa_binary();
  if (bin.empty()) return std::nullopt;
  return gdpa::run_command("GDPA='" + bin + "' bash '" + gdpa::source_root() + "/experiments/register_probe.sh' " +
                           args);
}

// The text of a file of the tree.
static std::string tree_file(const std::string& relative) {
  std::ifstream f(fs::path(gdpa::source_root()) / relative);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST_CASE("register_probe.sh: spills after a register cut, none as the tree is, the tree untouched") {
  // 168 registers, the allocation at launch, cannot hold S (64), P (32) and O (64) with the
  // activation's temporaries: every forward variant spills, where at 240 none does (the SASS
  // checks of `make test` require that of the benchmark kernels).
  const std::string file = "kernels/sm90/gdpa_fwd.cu";
  const std::string before = tree_file(file);
  const auto r = register_probe("sm90-no-intra-overlap " + file + " 's/kConsumerRegs = 240;/kConsumerRegs = 168;/'");
  if (!r) return;  // no bash
  CAPTURE(r->output);
  if (r->output.find("cuobjdump not found") != std::string::npos) {
    MESSAGE("skipped: no cuobjdump (make deps-sass installs it)");
    return;
  }
  REQUIRE(r->status == 0);
  CHECK(tree_file(file) == before);
  int as_is = 0, edited = 0;
  std::istringstream lines(r->output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("gdpa_fwd ") == std::string::npos) continue;
    CAPTURE(line);
    const size_t at = line.find("spill instructions");
    REQUIRE(at != std::string::npos);
    const int spills = std::stoi(line.substr(at + std::string("spill instructions").size()));
    if (line.rfind("as is", 0) == 0) {
      ++as_is;
      CHECK(spills == 0);
    } else if (line.rfind("edit 1", 0) == 0) {
      ++edited;
      CHECK(spills > 0);
    }
  }
  CHECK(as_is >= 2);  // the benchmark's forward variants: one per family of sets
  CHECK(edited == as_is);
}

TEST_CASE("register_probe.sh: an edit that changes nothing, or a file outside the kernel sources, is an error") {
  const auto same = register_probe("sm90 kernels/sm90/gdpa_fwd.cu 's/no such text/x/'");
  if (!same) return;
  CAPTURE(same->output);
  CHECK(same->status != 0);
  CHECK(same->output.find("changes nothing in kernels/sm90/gdpa_fwd.cu") != std::string::npos);
  CHECK(same->output.find("spill instructions") == std::string::npos);  // nothing compiled
  const auto host = register_probe("sm90 host/sm90.cpp 's/a/b/'");
  CAPTURE(host->output);
  CHECK(host->status != 0);
  CHECK(host->output.find("kernels/ and ptx/ only") != std::string::npos);
}
