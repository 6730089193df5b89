#!/usr/bin/env python3
"""plot.py — the figures of this project, drawn from the JSON under experiments/results/.

    python3 experiments/plot.py [--results DIR] [--out DIR] [--only TEXT]

Reads every *.json that `gdpa bench` and `gdpa schedule` wrote (file names are
<stem>-<gpu>-<YYYYMMDD>-<HHMMSS>.json) and writes PNGs to experiments/results/figures/:

  * the seed's six charts (self-attention forward / backward at s = 1.0 and 0.5, cross-attention
    with short KV forward / backward): TFLOP/s per length for each of our kernels, with the H200
    reference numbers of TARGETS.md and each set's physical limit measured in the same run;
  * one chart per ablation: the full kernel against the same kernel with one optimization off;
  * the activation chart (time of each activation, and its accuracy when accuracy JSON exists);
  * the per-SM load skew of each scheduling policy; real (jagged) against synthetic (uniform) lengths.

A figure whose data is missing is skipped with a note; nothing here needs a GPU. Matplotlib is used
through Figure objects and the Agg canvas only (no pyplot, no display), so the same functions serve
`make plots` and notebooks/gdpa_figures.ipynb.
"""
import argparse
import datetime
import glob
import io
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RESULTS = os.path.join(HERE, "results")
DEFAULT_FIGURES = os.path.join(DEFAULT_RESULTS, "figures")

LENGTHS = (256, 512, 1024, 2048)

# ---------------------------------------------------------------------------------------------
# Reference numbers: perf/TARGETS.md of the project brief (one H200, 132 SMs, 2026-11-29, median
# of triton.testing.do_bench, the seed's FLOP convention). They come from another run on another
# day, so they are drawn as markers, never as bars next to ours.
# ---------------------------------------------------------------------------------------------
REFERENCES = {
    ("self-s1.0", "fwd"): {"triton": (279, 368, 433, 471), "cudnn": (461, 491, 545, 575)},
    ("self-s0.5", "fwd"): {"triton": (175, 295, 380, 440)},
    ("cross-Lk256", "fwd"): {"triton": (302, 288, 281, 289), "cudnn": (398, 424, 434, 437)},
    ("self-s1.0", "bwd"): {"triton": (245, 293, 328, 348), "cudnn": (243, 349, 432, 484)},
    ("self-s0.5", "bwd"): {"triton": (164, 234, 285, 321)},
    ("cross-Lk256", "bwd"): {"triton": (241, 263, 273, 279), "cudnn": (241, 270, 286, 288)},
}
REFERENCE_STYLE = {  # key: (label, colour, marker)
    "triton": ("Meta Triton GDPA (H200, TARGETS.md)", "black", "D"),
    "cudnn": ("cuDNN SDPA, softmax (H200, TARGETS.md)", "#6d6d6d", "^"),
}

# Our kernels in the seed figures, in bar order (ours last, as the seed's charts put the
# strongest kernel last), with a label and a colour.
KERNEL_STYLE = {
    "baseline": ("baseline (FMA kernels)", "#fbbc04"),
    "unfused-cublas": ("unfused cuBLAS path", "#ea4335"),
    "sm90-softmax": ("ours, softmax variant (sm90-softmax)", "#4285f4"),
    "sm90": ("ours (sm90)", "#34a853"),
}
FULL_COLOUR = KERNEL_STYLE["sm90"][1]
OFF_COLOURS = ("#9e9e9e", "#c98b2b", "#7b61b5", "#4db6ac")
LIMIT_COLOUR = "#c0392b"


def note(message):
    print(f"plot.py: {message}")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
FILE_RE = re.compile(r"^(?P<stem>.+)-(?P<gpu>[A-Za-z0-9_]+)-(?P<date>\d{8})-(?P<time>\d{6})\.json$")
SET_RE = re.compile(r"^(?:(?P<self>self)-s(?P<s>[0-9.]+)|cross-Lk(?P<lk>\d+))-L(?P<L>\d+)$")


@dataclass
class ResultFile:
    """One JSON file: its stem (what wrote it), its time stamp and its rows, indexed."""

    path: str
    stem: str
    when: datetime.datetime
    data: dict
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        for r in self.rows:
            if isinstance(r, dict) and {"set", "kernel", "direction"} <= r.keys():
                self._index[(r["set"], r["kernel"], r["direction"])] = r

    @property
    def name(self):
        return os.path.basename(self.path)

    @property
    def rows(self):
        rows = self.data.get("rows", [])
        return rows if isinstance(rows, list) else []

    @property
    def gpu(self):
        return (self.data.get("device") or {}).get("name", "unknown GPU")

    @property
    def date(self):
        return self.when.strftime("%Y-%m-%d")

    @property
    def activation(self):
        return self.data.get("activation", "fast_gelu")

    @property
    def head_dim(self):
        return int(self.data.get("head_dim", 128))

    @property
    def is_seed_config(self):
        """The seed's benchmark configuration (spec 5): fast_gelu at D = 128."""
        return self.activation == "fast_gelu" and self.head_dim == 128

    @property
    def self_kv(self):
        """The self sets' keys: "dense" (the seed's: every Lk = L) or "jagged" (Lk = Lq). Files from
        before `gdpa bench --self-kv` have no such field and measured jagged keys."""
        return self.data.get("self_kv", "jagged")

    def row(self, set_name, kernel, direction):
        return self._index.get((set_name, kernel, direction))

    def bench_sets(self):
        return sorted({k[0] for k in self._index}, key=set_sort_key)

    def ceilings_text(self):
        c = self.data.get("ceilings") or {}
        if "gemm_bf16_8192_tflops" not in c:
            return ""
        return (f"ceilings in the same run: cuBLAS bf16 GEMM {c['gemm_bf16_8192_tflops']:.0f} TFLOP/s, "
                f"copy {c.get('copy_gbs', 0):.0f} GB/s")


def load_results(results_dir=DEFAULT_RESULTS):
    """Every readable results JSON of the directory, oldest first."""
    out = []
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        m = FILE_RE.match(os.path.basename(path))
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            note(f"skipping {os.path.basename(path)}: {e}")
            continue
        if not isinstance(data, dict):
            note(f"skipping {os.path.basename(path)}: not a JSON object")
            continue
        if m:
            when = datetime.datetime.strptime(m["date"] + m["time"], "%Y%m%d%H%M%S")
            stem = m["stem"]
        else:  # a file renamed by hand: its modification time is the best stamp there is
            when = datetime.datetime.utcfromtimestamp(os.path.getmtime(path))
            stem = os.path.splitext(os.path.basename(path))[0]
        out.append(ResultFile(path, stem, when, data))
    out.sort(key=lambda r: (r.when, r.name))
    return out


def newest_per(files, key):
    """The newest file for each value of key(file)."""
    best = {}
    for rf in files:  # files are oldest first, so later ones win
        best[key(rf)] = rf
    return list(best.values())


def set_sort_key(name):
    m = SET_RE.match(name)
    if not m:
        return (9, 0.0, 0, 0, name)
    if m["self"]:
        return (0, -float(m["s"]), 0, int(m["L"]), name)
    return (1, 0.0, -int(m["lk"]), int(m["L"]), name)


def set_label(name):
    """'self-s0.5-L1024' -> 'self s=0.5\\nL=1024' (two short lines under a bar group)."""
    m = SET_RE.match(name)
    if not m:
        return name
    head = f"self s={m['s']}" if m["self"] else f"cross Lk={m['lk']}"
    return f"{head}\nL={m['L']}"


# ---------------------------------------------------------------------------------------------
# Drawing helpers
# ---------------------------------------------------------------------------------------------
def new_figure(width, height):
    # Constrained layout makes room for the legends below the axes and the footnote under them.
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)  # Agg only: the figures are files, never windows
    return fig


def figure_png(fig, dpi=110):
    """PNG bytes of a figure (the notebook displays these; no backend state is involved)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def tflops_spread(row):
    """TFLOP/s at the fastest and slowest repetition, as error-bar lengths below / above the median."""
    t, med = row["tflops"], row["median_ms"]
    lo = t * med / row["max_ms"] if row.get("max_ms") else t
    hi = t * med / row["min_ms"] if row.get("min_ms") else t
    return t - lo, hi - t


def draw_bars(ax, xs, rows, width, colour, label, hatch=None, annotate="value"):
    """One bar series from bench rows (None rows leave a gap), with min..max error bars."""
    pts = [(x, r) for x, r in zip(xs, rows) if r is not None]
    if not pts:
        return 0.0
    x = [p[0] for p in pts]
    y = [p[1]["tflops"] for p in pts]
    spread = [tflops_spread(p[1]) for p in pts]
    yerr = [[s[0] for s in spread], [s[1] for s in spread]]
    ax.bar(x, y, width * 0.92, color=colour, label=label, hatch=hatch, edgecolor="white" if not hatch else "#333333",
           linewidth=0.4, yerr=yerr, capsize=1.5, error_kw={"elinewidth": 0.7, "ecolor": "#444444"}, zorder=3)
    if annotate == "value":
        for xi, yi, s in zip(x, y, spread):
            ax.text(xi, yi + s[1], f"{yi:.0f}", ha="center", va="bottom", fontsize=6.5, zorder=4)
    return max(yi + s[1] for yi, s in zip(y, spread))


def draw_limits(ax, centres, limits, half_width, label="physical limit of the set (same run)"):
    """The set's physical limit as a dashed segment over its bar group."""
    first = True
    for c, lim in zip(centres, limits):
        if lim:
            ax.hlines(lim, c - half_width, c + half_width, colors=LIMIT_COLOUR, linestyles="--", linewidth=1.3,
                      label=label if first else None, zorder=4)
            first = False


def style_axes(ax, ylabel="Tensor Core TFLOP/s"):
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", color="#dddddd", linewidth=0.7, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def title_of(ax, text, sources):
    """Title with the GPU and date of the data (several when the figure merges runs)."""
    who = sorted({f"{rf.gpu}, {rf.date}" for rf in sources})
    ax.set_title(f"{text}\n{'; '.join(who)}", loc="left", fontsize=12, color="#444444")


def footnote(fig, text):
    """Provenance under everything; supxlabel because constrained layout reserves space for it."""
    chars = int(fig.get_figwidth() * 17)  # about that many 7-point characters per inch
    fig.supxlabel("\n".join(textwrap.wrap(text, chars)), fontsize=7, color="#666666")


def legend_below(ax, ncol):
    """Legend under the axes: bars first (in drawing order), then reference markers, then limits."""
    handles, labels = ax.get_legend_handles_labels()
    rank = {"BarContainer": 0, "Line2D": 1}
    order = sorted(range(len(handles)), key=lambda i: (rank.get(type(handles[i]).__name__, 2), i))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper center",
              bbox_to_anchor=(0.5, -0.16), ncol=ncol, fontsize=8, frameon=False)


def speedup_text(ax, x, y, full, off):
    gain = full / off - 1.0
    ax.annotate(f"{gain:+.1%}", (x, y), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                fontsize=7, rotation=90, color="#1b7f3b" if gain >= 0 else "#b3261e", zorder=5)


# ---------------------------------------------------------------------------------------------
# The seed's six figures
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeedFigure:
    file: str
    title: str
    family: str  # set-name prefix: the four sets are <family>-L<L>
    direction: str
    xlabel: str

    @property
    def sets(self):
        return [f"{self.family}-L{L}" for L in LENGTHS]


SEED_FIGURES = (
    SeedFigure("self_attention_fwd_s1.0.png", "Self attention Fwd sparsity = 1.0", "self-s1.0", "fwd", "QKV length"),
    SeedFigure("self_attention_fwd_s0.5.png", "Self attention Fwd sparsity = 0.5", "self-s0.5", "fwd",
               "max length L (Lq uniform in [1, L], every Lk = L)"),
    SeedFigure("self_attention_bwd_s1.0.png", "Self attention Bwd sparsity = 1.0", "self-s1.0", "bwd", "QKV length"),
    SeedFigure("self_attention_bwd_s0.5.png", "Self attention Bwd sparsity = 0.5", "self-s0.5", "bwd",
               "max length L (Lq uniform in [1, L], every Lk = L)"),
    SeedFigure("cross_attention_short_kv_fwd.png", "Cross attention, short KV (Lk = 256) Fwd sparsity = 1.0",
               "cross-Lk256", "fwd", "Q length"),
    SeedFigure("cross_attention_short_kv_bwd.png", "Cross attention, short KV (Lk = 256) Bwd sparsity = 1.0",
               "cross-Lk256", "bwd", "Q length"),
)


def pick_seed_source(results, spec):
    """The newest seed-configuration file with the figure's rows, preferring (in this order) a file
    with ours and at least one other kernel on all four lengths, then ours alone on all four, then
    any of our kernels on some lengths. Bars of one figure always come from one run."""
    best, best_key = None, None
    for rf in results:
        if not rf.is_seed_config:
            continue
        if spec.family.startswith("self-s0.5") and rf.self_kv != "dense":
            continue  # the seed's s = 0.5 sets have dense keys; older files measured Lk = Lq
        complete = [k for k in KERNEL_STYLE if all(rf.row(s, k, spec.direction) for s in spec.sets)]
        partial = [k for k in KERNEL_STYLE if any(rf.row(s, k, spec.direction) for s in spec.sets)]
        if not partial:
            continue
        tier = 2 if ("sm90" in complete and len(complete) >= 2) else 1 if complete else 0
        key = (tier, rf.when)
        if best_key is None or key >= best_key:
            best, best_key = rf, key
    return best


def seed_figure(results, spec):
    rf = pick_seed_source(results, spec)
    if rf is None:
        note(f"{spec.file}: no {spec.direction} rows for {spec.family}-L* (fast_gelu, D = 128): skipped")
        return None
    kernels = [k for k in KERNEL_STYLE if any(rf.row(s, k, spec.direction) for s in spec.sets)]
    fig = new_figure(9.0, 5.4)
    ax = fig.add_subplot()
    group, n = 0.8, len(kernels)
    width = group / n
    top = 0.0
    for i, k in enumerate(kernels):
        label, colour = KERNEL_STYLE[k]
        xs = [j - group / 2 + width * (i + 0.5) for j in range(len(LENGTHS))]
        rows = [rf.row(s, k, spec.direction) for s in spec.sets]
        top = max(top, draw_bars(ax, xs, rows, width, colour, label))
    limits = []
    for s in spec.sets:
        r = next((rf.row(s, k, spec.direction) for k in kernels if rf.row(s, k, spec.direction)), None)
        limits.append(r.get("limit_tflops") if r else None)
    draw_limits(ax, range(len(LENGTHS)), limits, group / 2 + 0.04)
    top = max([top] + [lim for lim in limits if lim])
    for key, values in REFERENCES.get((spec.family, spec.direction), {}).items():
        label, colour, marker = REFERENCE_STYLE[key]
        ax.plot(range(len(LENGTHS)), values, color=colour, marker=marker, markersize=6, linestyle=":",
                linewidth=1.0, label=label, zorder=6)
        top = max(top, max(values))
    ax.set_xticks(range(len(LENGTHS)))
    ax.set_xticklabels([str(L) for L in LENGTHS])
    ax.set_xlabel(spec.xlabel)
    ax.set_ylim(0, top * 1.12)
    style_axes(ax)
    title_of(ax, spec.title, [rf])
    legend_below(ax, 3)
    footnote(fig, f"source: {rf.name}; {rf.ceilings_text()}. FLOPs by the seed's convention (B = 1152, H = 4, "
                  f"D = 128, bf16, fast_gelu; backward = 2.5x forward). Error bars: fastest..slowest repetition.")
    return fig


# ---------------------------------------------------------------------------------------------
# Ablations: the full kernel against the same kernel with one optimization switched off
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ablation:
    name: str  # its script writes stems ablation-<name>[-<suffix>]
    title: str
    off: tuple  # variants, each with its legend label
    full: str = "sm90"

    @property
    def file(self):
        return f"ablation_{self.name.replace('-', '_')}.png"


ABLATIONS = (
    Ablation("zigzag", "Zigzag tile scheduling",
             (("sm90-grid-order", "grid order"), ("sm90-longest-first", "longest-first"))),
    Ablation("outer-pipeline", "Outer-loop pipelining (double-buffered Q, next tile's QK^T before the epilogue)",
             (("sm90-no-outer-pipeline", "outer pipelining off"),)),
    Ablation("pingpong", "Pingpong consumer warpgroups", (("sm90-no-pingpong", "pingpong off"),)),
    Ablation("intra-overlap", "Intra-warpgroup overlap (activation under the PV GEMM)",
             (("sm90-no-intra-overlap", "intra-warpgroup overlap off"),)),
    Ablation("softmax", "What dropping softmax frees", (("sm90-softmax", "same kernel with softmax"),)),
    Ablation("kv-reuse", "K/V kept resident across the query tiles of a short-KV sequence",
             (("sm90-no-kv-reuse", "K/V reuse off"),)),
    Ablation("half-fold", "GELU as 2f = x + x tanh(.), O (backward: dV) halved once (one multiply per score fewer)",
             (("sm90-no-half-fold", "plain f = x/2 (1 + tanh(.))"),)),
    Ablation("skip-empty-half", "A warpgroup whose 64 rows (fwd) or keys (bwd) lie past the sequence's end skips its GEMMs",
             (("sm90-no-skip-empty-half", "both warpgroups compute every tile"),)),
    Ablation("whole-batch-branch", "Forward: a step branches on its PV's accumulate flag before the GEMM batch (default: mean Lk >= 192)",
             (("sm90-no-whole-batch-branch", "between two PV sequences after the QK^T"),)),
    Ablation("dq-finish", "Backward: each dQ block finished by its last contributor in the kernel (default: mean Lk <= 384)",
             (("sm90-no-dq-finish", "fp32 accumulator + separate dq_convert pass"),
              ("sm90-dq-finish-always", "finished in the kernel at every Lk"))),
    Ablation("dq-follow", "Backward: dQ blocks converted beside the kernel on a few SMs as they complete (accumulator path)",
             (("sm90-no-dq-follow", "dq_convert pass after the kernel"),)),
    Ablation("dq-pair", "Backward: KV-tile pairs in a cluster, dQ parts through shared memory (default: mean Lq >= 256)",
             (("sm90-no-dq-pair", "parts through the fp32 accumulator (ordered finish)"),)),
    Ablation("dq-tma-store", "Backward: finished dQ blocks stored by the writer's TMA store (where dQ is finished in the kernel)",
             (("sm90-no-dq-tma-store", "rows copied by the finishing warpgroup's threads"),)),
    Ablation("dq-first", "Backward: the dQ job first in its GEMM batch, handed over under dV and dK (default: ordered finish)",
             (("sm90-no-dq-first", "dV and dK first, the hand-over after all three"),)),
    Ablation("dq-two-stage", "Backward: dQ jobs alternating between two staging buffers (accumulator path)",
             (("sm90-no-dq-two-stage", "one staging buffer"),)),
    Ablation("early-act", "Backward: P^T and act' computed while the dP^T product still runs (default: dQ finished in the kernel)",
             (("sm90-no-early-act", "both products waited for first"),)),
    Ablation("dk-in-ds", "Backward: dK staged in the dS^T buffers at a tile's end (accumulator path)",
             (("sm90-no-dk-in-ds", "dK after dV through dV's buffer"),)),
    Ablation("dv-in-v", "Backward: dV staged in V's rows at a tile's last dQ job (accumulator path)",
             (("sm90-no-dv-in-v", "dV in the next dQ job's buffer, after the writer"),)),
    Ablation("pair-two-stage", "Backward: rank 0 of a KV-tile pair stages its dQ jobs in two buffers (pairs)",
             (("sm90-no-pair-two-stage", "one buffer, back once rank 1 has read the copy (dV in the spare buffer)"),)),
    Ablation("pair-dv-in-ds", "Backward: rank 0 of a KV-tile pair stages dV in the dS^T buffers at a tile's end (pairs)",
             (("sm90-no-pair-dv-in-ds", "dV in the next dQ job's buffer"),)),
    Ablation("stmatrix-o", "Forward: O staged for its TMA store by stmatrix.x4 (8 stores per thread at D = 128)",
             (("sm90-no-stmatrix-o", "one 4-byte shared store per packed pair (32)"),)),
    Ablation("narrow-last-block", "Forward: a tile's last key block of at most 64 keys run over those keys only (s = 0.5)",
             (("sm90-no-narrow-last-block", "the whole 128-key block"),)),
    Ablation("fwd-tails", "Forward, experimental: last query tiles of <= 64 / 96 rows as query-column tiles",
             (("sm90-fwd-tails", "tiles of <= 64 rows in the tail kernel"), ("sm90-fwd-tails96", "<= 96 rows"),
              ("sm90-fwd-tails-side12", "<= 64 rows beside the main forward, 12 SMs"),
              ("sm90-fwd-tails-side16", "beside, 16 SMs"), ("sm90-fwd-tails-side24", "beside, 24 SMs"),
              ("sm90-fwd-sibling-tails", "<= 32-row pieces inside the whole tiles' CTAs"))),
    Ablation("record-lanes", "Forward: the next tile's record loaded a tile ahead, one field per lane",
             (("sm90-no-record-lanes", "loaded at the tile's top (the warp waits for it)"),)),
    Ablation("tile-records", "Backward: each work tile read from a host-built record",
             (("sm90-no-tile-records", "derived from the tile list and the offsets"),)),
    Ablation("bwd-record-lanes", "Backward: the next tile's record loaded over the lanes in the tail (ordered finish)",
             (("sm90-no-bwd-record-lanes", "read at the tile's top"),)),
    Ablation("pair-late-store-wait", "Backward: a pair's rank 1 waits for its dK / dV stores where the buffer is reused",
             (("sm90-no-pair-late-store-wait", "waited for at the epilogue's end"),)),
    Ablation("pair-rank1-dv-in-ds", "Backward: a pair's rank 1 stages dV in the dS^T buffers, dK alone",
             (("sm90-no-pair-rank1-dv-in-ds", "dV, then dK, through the staging buffer"),)),
    Ablation("pair-rank0-late-store-wait", "Backward: a pair's rank 0 waits for its dK / dV stores at the next tile's first dS^T store",
             (("sm90-no-pair-rank0-late-store-wait", "waited for at the epilogue's end"),)),
    Ablation("first-step-init-acc", "Backward: dV / dK initialised by the first step's wgmmas (accumulator path)",
             (("sm90-no-first-step-init-acc", "zeroed at the tile's top"),)),
    Ablation("proxy-fences", "Backward: proxy fences in the threads that issue the async reads, after their waits",
             (("sm90-no-dq-fence-at-writer", "dQ jobs fenced by every consumer thread (and the dQ job last)"),
              ("sm90-no-ds-fence-at-reader", "dS^T halves fenced by every storing thread"))),
    Ablation("stmatrix-bwd", "Backward: dV, dK, finished dQ blocks and each step's dS^T staged by stmatrix.x4",
             (("sm90-no-stmatrix-grads", "dV, dK and dQ blocks by 4-byte stores"),
              ("sm90-no-stmatrix-ds", "dS^T by 4-byte stores"))),
    Ablation("dq-red", "Backward, unordered mode: dQ jobs added from the registers by vector reductions (mean Lk >= 384)",
             (("sm90-unordered-no-red", "staged for the writer's bulk reduce"),), full="sm90-unordered-dq"),
)


def ablation_sources(results, ab):
    """Files for one ablation. The ablation's own runs come first: the newest file of each stem
    ablation-<name>[-<suffix>] (one per Lk, say), merged. Without any, the newest seed-configuration
    file that holds the full kernel next to a switched-off variant on some set (e.g. `gdpa bench
    --kernels sm90,sm90-no-pingpong` under another stem)."""
    own = [rf for rf in results if rf.stem == f"ablation-{ab.name}" or rf.stem.startswith(f"ablation-{ab.name}-")]
    if own:
        return newest_per(own, lambda rf: rf.stem)
    offs = [k for k, _ in ab.off]
    for rf in reversed(results):
        if not rf.is_seed_config:
            continue
        if any(rf.row(s, ab.full, d) and any(rf.row(s, o, d) for o in offs)
               for s in rf.bench_sets() for d in ("fwd", "bwd")):
            return [rf]
    return []


def paired_rows(sources, ab, direction):
    """{set: {kernel: row}} over the sources, for sets where the full kernel and a variant both ran
    in the same file (a pair is never split across runs); newer files win."""
    pairs = {}
    offs = [k for k, _ in ab.off]
    for rf in sorted(sources, key=lambda r: r.when):
        for s in rf.bench_sets():
            full = rf.row(s, ab.full, direction)
            got = {o: rf.row(s, o, direction) for o in offs if rf.row(s, o, direction)}
            if full and got:
                pairs[s] = {ab.full: full, **got}
    return dict(sorted(pairs.items(), key=lambda kv: set_sort_key(kv[0])))


def ablation_figure(results, ab):
    sources = ablation_sources(results, ab)
    panels = [(d, paired_rows(sources, ab, d)) for d in ("fwd", "bwd")]
    panels = [(d, p) for d, p in panels if p]
    if not panels:
        note(f"{ab.file}: no run with {ab.full} next to {', '.join(k for k, _ in ab.off)}: skipped")
        return None
    offs = [(k, lab) for k, lab in ab.off if any(k in rows for _, p in panels for rows in p.values())]
    n_sets = max(len(p) for _, p in panels)
    fig = new_figure(max(7.0, 1.0 + 0.9 * n_sets * (1 + len(offs)) / 2), 4.2 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    group = 0.8
    width = group / (1 + len(offs))
    for ax, (direction, pairs) in zip(axes, panels):
        sets = list(pairs)
        xs = range(len(sets))
        top = draw_bars(ax, [x - group / 2 + width / 2 for x in xs], [pairs[s][ab.full] for s in sets], width,
                        FULL_COLOUR, f"full kernel ({ab.full})")
        for i, (k, lab) in enumerate(offs):
            bx = [x - group / 2 + width * (i + 1.5) for x in xs]
            rows = [pairs[s].get(k) for s in sets]
            t = draw_bars(ax, bx, rows, width, OFF_COLOURS[i % len(OFF_COLOURS)], f"{lab} ({k})", annotate=None)
            top = max(top, t)
            for x, s, r in zip(bx, sets, rows):
                if r:
                    speedup_text(ax, x, r["tflops"] + tflops_spread(r)[1], pairs[s][ab.full]["tflops"], r["tflops"])
        limits = [pairs[s][ab.full].get("limit_tflops") for s in sets]
        draw_limits(ax, xs, limits, group / 2 + 0.04)
        top = max([top] + [lim for lim in limits if lim])
        ax.set_xticks(list(xs))
        ax.set_xticklabels([set_label(s) for s in sets], fontsize=8)
        ax.set_ylim(0, top * 1.18)
        style_axes(ax)
        ax.text(0.995, 0.98, "forward" if direction == "fwd" else "backward", transform=ax.transAxes, ha="right",
                va="top", fontsize=10, fontweight="bold", color="#444444")
    title_of(axes[0], f"Ablation: {ab.title}", sources)
    legend_below(axes[-1], 2)
    footnote(fig, "Rotated numbers: speed-up of the full kernel over the variant next to it (same inputs, same run). "
                  f"Sources: {', '.join(rf.name for rf in sources)}.")
    return fig


# ---------------------------------------------------------------------------------------------
# Activations: time of each activation in the full kernel, and accuracy when measured
# ---------------------------------------------------------------------------------------------
ACTIVATION_ORDER = ("fast_gelu", "fast_gelu_bf16", "gelu_taylor6", "gelu_poly")
ACTIVATION_COLOURS = ("#34a853", "#7cc68d", "#c98b2b", "#4285f4", "#9e9e9e", "#7b61b5", "#ea4335", "#fbbc04")
METRIC_COLOURS = ("#37474f", "#90a4ae", "#8d6e63", "#bcaaa4")


def activation_runs(results):
    """{head_dim: {activation: file}}: the ablation script's runs (stems ablation-act-<act>-d<D>);
    without any, earlier single-activation runs (stems act-<act>)."""
    own = [rf for rf in results if rf.stem.startswith("ablation-act-")]
    runs = own or [rf for rf in results if rf.stem.startswith("act-")]
    out = {}
    for rf in newest_per(runs, lambda r: (r.activation, r.head_dim)):
        out.setdefault(rf.head_dim, {})[rf.activation] = rf
    order = {a: i for i, a in enumerate(ACTIVATION_ORDER)}
    return {d: dict(sorted(acts.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
            for d, acts in sorted(out.items(), reverse=True)}


def accuracy_rows(results):
    """Rows of the newest accuracy file (stem accuracy*, or 'accuracy' in its 'what'): each with an
    'activation' and numeric fields whose names contain 'err'."""
    files = [rf for rf in results if rf.stem.startswith("accuracy") or "accuracy" in str(rf.data.get("what", ""))]
    if not files:
        return None, []
    rf = files[-1]
    rows = [r for r in rf.rows if isinstance(r, dict) and "activation" in r
            and (r["activation"] in ACTIVATION_ORDER or "mixed" in r["activation"])]
    return rf, rows


def activation_keys(acts, kernel):
    """(set, direction) pairs any of the runs measured, forward first."""
    keys = {(s, d) for rf in acts.values() for s in rf.bench_sets() for d in ("fwd", "bwd") if rf.row(s, kernel, d)}
    return sorted(keys, key=lambda k: (k[1] != "fwd", set_sort_key(k[0])))


def draw_relative_time(ax, keys, series, base, ylabel, head_dim, decimals=0):
    """Grouped bars, one group per (set, direction) in `keys`: each series' median time against the
    base's on the same set, in percent (a few percent either way: bars from zero time would hide
    them), with the base's median under each group. series: [(legend label, row_of)], base: row_of,
    where row_of(set, direction) gives a result row or None; the base's own bars are not annotated."""
    group = 0.84
    width = group / max(1, len(series))
    for i, (label, row_of) in enumerate(series):
        xs, ys = [], []
        for j, (s, direction) in enumerate(keys):
            r, b = row_of(s, direction), base(s, direction)
            if r and b:
                xs.append(j - group / 2 + width * (i + 0.5))
                ys.append((r["median_ms"] / b["median_ms"] - 1.0) * 100.0)
        ax.bar(xs, ys, width * 0.92, color=ACTIVATION_COLOURS[i % len(ACTIVATION_COLOURS)], label=label, zorder=3)
        if row_of is not base:
            for x, y in zip(xs, ys):
                ax.text(x, max(y, 0.0), f"{y:+.{decimals}f}", ha="center", va="bottom", fontsize=6, rotation=90)
    labels = []
    for s, direction in keys:
        b = base(s, direction)
        labels.append(f"{set_label(s)}\n{direction}" + (f" {b['median_ms']:.2f} ms" if b else ""))
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.axhline(0.0, color="#444444", linewidth=0.8, zorder=4)
    style_axes(ax, ylabel)
    ax.text(0.995, 0.98, f"D = {head_dim}", transform=ax.transAxes, ha="right", va="top", fontsize=10,
            fontweight="bold", color="#444444")


def draw_activation_time(ax, d, acts, kernel="sm90"):
    """Time of each activation against fast_gelu's on the same set; absolute times when fast_gelu
    did not run."""
    keys = activation_keys(acts, kernel)
    series = [(act, lambda s, direction, rf=rf: rf.row(s, kernel, direction)) for act, rf in acts.items()]
    if "fast_gelu" in acts:
        base = series[list(acts).index("fast_gelu")][1]
        draw_relative_time(ax, keys, series, base, "time vs fast_gelu (%), up = slower", d)
        return
    group = 0.84
    width = group / len(series)
    for i, (act, row_of) in enumerate(series):
        pts = [(j - group / 2 + width * (i + 0.5), row_of(s, direction)["median_ms"])
               for j, (s, direction) in enumerate(keys) if row_of(s, direction)]
        ax.bar([x for x, _ in pts], [y for _, y in pts], width * 0.92,
               color=ACTIVATION_COLOURS[i % len(ACTIVATION_COLOURS)], label=act, zorder=3)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{set_label(s)}\n{direction}" for s, direction in keys], fontsize=7)
    style_axes(ax, "median time (ms)")
    ax.text(0.995, 0.98, f"D = {d}", transform=ax.transAxes, ha="right", va="top", fontsize=10,
            fontweight="bold", color="#444444")


def draw_accuracy(ax, rows):
    metrics = sorted({k for r in rows for k, v in r.items() if "err" in k and isinstance(v, (int, float))})
    acts = [r["activation"] for r in rows]
    width = 0.8 / max(1, len(metrics))
    for i, m in enumerate(metrics):
        xs = [j - 0.4 + width * (i + 0.5) for j, r in enumerate(rows) if isinstance(r.get(m), (int, float))]
        ys = [max(r[m], 1e-12) for r in rows if isinstance(r.get(m), (int, float))]
        ax.bar(xs, ys, width * 0.92, color=METRIC_COLOURS[i % len(METRIC_COLOURS)], label=m, zorder=3)
    ax.set_yscale("log")
    ax.set_xticks(range(len(acts)))
    ax.set_xticklabels(acts, rotation=30, ha="right", fontsize=8)
    style_axes(ax, "error (log scale)")
    ax.set_title("accuracy", loc="left", fontsize=10, color="#444444")
    ax.legend(fontsize=7, frameon=False)


def activation_figure(results):
    runs = activation_runs(results)
    if not runs:
        note("activations.png: no activation runs (stems ablation-act-* or act-*): skipped")
        return None
    acc_file, acc = accuracy_rows(results)
    n_keys = max(len(activation_keys(acts, "sm90")) for acts in runs.values())
    n_acts = max(len(acts) for acts in runs.values())
    fig = new_figure(max(8.0, 1.5 + 0.22 * n_keys * n_acts) + (4.5 if acc else 0.0), 4.0 * len(runs))
    grid = fig.add_gridspec(len(runs), 2 if acc else 1, width_ratios=[3, 1] if acc else [1])
    axes = []
    for i, (d, acts) in enumerate(runs.items()):
        ax = fig.add_subplot(grid[i, 0])
        draw_activation_time(ax, d, acts)
        axes.append(ax)
    sources = [rf for acts in runs.values() for rf in acts.values()]
    title_of(axes[0], "Activation cost in the full kernel (sm90): forward and backward time", sources)
    legend_below(axes[-1], 4)
    text = ("Bars: median time against fast_gelu's on the same set at the same D; under each group, fast_gelu's "
            "median. Each activation is its own bench call, so the differences carry run-to-run drift of a few percent.")
    if acc:
        draw_accuracy(fig.add_subplot(grid[:, 1]), acc)
        text += f" Accuracy from {acc_file.name}."
    else:
        note("activations.png: no accuracy JSON (stem accuracy*): drawing time only")
    footnote(fig, text)
    return fig


# ---------------------------------------------------------------------------------------------
# Mixed MUFU / FMA fast_gelu: the full kernel with N sixteenths of the scores on the FMA pipe
# ---------------------------------------------------------------------------------------------
def act_mix_kernels(rf):
    """The sm90-act-mixN kernels of one run, by N."""
    names = {r["kernel"] for r in rf.rows if isinstance(r, dict) and str(r.get("kernel", "")).startswith("sm90-act-mix")}
    return sorted(names, key=lambda k: int(k[len("sm90-act-mix"):]))


def act_mix_figure(results):
    runs = [rf for rf in results if rf.stem.startswith("ablation-actmix-d")]
    if not runs:
        note("ablation_act_mix.png: no runs (stems ablation-actmix-d<D>, experiments/ablate_act_mix.sh): skipped")
        return None
    runs = sorted(newest_per(runs, lambda r: r.head_dim), key=lambda r: -r.head_dim)
    fig = new_figure(10.0, 3.8 * len(runs))
    axes = []
    for i, rf in enumerate(runs):
        ax = fig.add_subplot(len(runs), 1, i + 1)
        kernels = act_mix_kernels(rf)
        base = "sm90-act-mix0" if "sm90-act-mix0" in kernels else kernels[0]
        keys = sorted({(s, d) for s in rf.bench_sets() for d in ("fwd", "bwd") if rf.row(s, base, d)},
                      key=lambda k: (k[1] != "fwd", set_sort_key(k[0])))
        series = [(f"{int(k[len('sm90-act-mix'):])}/16 on the FMA pipe",
                   lambda s, d, k=k, rf=rf: rf.row(s, k, d)) for k in kernels]
        draw_relative_time(ax, keys, series, series[kernels.index(base)][1], "time vs all-MUFU (%), up = slower",
                           rf.head_dim, decimals=1)
        axes.append(ax)
    title_of(axes[0], "Mixed MUFU / FMA fast_gelu (sm90-act-mixN): forward and backward time", runs)
    legend_below(axes[-1], 5)
    footnote(fig, "Bars: median time against the same kernel with every score on MUFU (N = 0), same run, same "
                  "inputs; under each group, the N = 0 median. The FMA part is gelu_poly (docs/gelu_poly.md).")
    return fig


# ---------------------------------------------------------------------------------------------
# Scheduling: per-SM load skew of each policy (from `gdpa schedule`, no GPU)
# ---------------------------------------------------------------------------------------------
POLICY_STYLE = {"grid": ("grid order", "#9e9e9e"), "longest-first": ("longest-first", "#c98b2b"),
                "zigzag": ("zigzag (ours)", "#34a853")}


def schedule_figure(results):
    files = [rf for rf in results if rf.stem == "schedule"]
    if not files:
        note("schedule_skew.png: no schedule-*.json (run `build/gdpa schedule`): skipped")
        return None
    rf = files[-1]
    rows = [r for r in rf.rows if isinstance(r, dict) and {"set", "policy", "fwd_skew", "bwd_skew"} <= r.keys()]
    if not rows:
        note(f"schedule_skew.png: {rf.name} has no rows: skipped")
        return None
    sets = sorted({r["set"] for r in rows}, key=set_sort_key)
    policies = [p for p in POLICY_STYLE if any(r["policy"] == p for r in rows)]
    policies += sorted({r["policy"] for r in rows} - set(policies))
    fig = new_figure(max(9.0, 0.85 * len(sets)), 8.0)
    axes = fig.subplots(2, 1)
    group = 0.8
    width = group / len(policies)
    for ax, direction in zip(axes, ("fwd", "bwd")):
        top = 0.0
        for i, p in enumerate(policies):
            label, colour = POLICY_STYLE.get(p, (p, OFF_COLOURS[i % len(OFF_COLOURS)]))
            xs, ys = [], []
            for j, s in enumerate(sets):
                r = next((r for r in rows if r["set"] == s and r["policy"] == p), None)
                if r:
                    xs.append(j - group / 2 + width * (i + 0.5))
                    ys.append((r[f"{direction}_skew"] - 1.0) * 100.0)
            ax.bar(xs, ys, width * 0.92, color=colour, label=label, zorder=3)
            for x, y in zip(xs, ys):
                if y >= 0.95:  # label only visible bars; the rest are balanced to within 1%
                    ax.text(x, y, f"{y:.1f}", ha="center", va="bottom", fontsize=6.5)
            top = max([top] + ys)
        ax.set_xticks(range(len(sets)))
        ax.set_xticklabels([set_label(s) for s in sets], fontsize=7.5)
        ax.set_ylim(0, max(1.0, top * 1.15))
        style_axes(ax, "busiest SM's excess work (%)")
        ax.text(0.995, 0.98, "forward tiles" if direction == "fwd" else "backward tiles", transform=ax.transAxes,
                ha="right", va="top", fontsize=10, fontweight="bold", color="#444444")
    sms = rows[0].get("sms", "?")
    axes[0].set_title(f"Per-SM load skew of each tile-scheduling policy ({sms} SMs, block "
                      f"{rf.data.get('block_m', '?')}x{rf.data.get('block_n', '?')})\nhost computation, {rf.date}",
                      loc="left", fontsize=12, color="#444444")
    legend_below(axes[-1], 3)
    footnote(fig, f"(max / mean of the work assigned to each SM - 1) x 100; 0 is perfect balance. Source: {rf.name}.")
    return fig


# ---------------------------------------------------------------------------------------------
# Real (jagged) against synthetic (uniform) lengths, with zigzag and grid-order scheduling
# ---------------------------------------------------------------------------------------------
REAL_SYN_SERIES = (  # (family, kernel, label, colour, hatch)
    ("self-s1.0", "sm90", "uniform lengths (s = 1.0), zigzag", "#4285f4", None),
    ("self-s1.0", "sm90-grid-order", "uniform lengths (s = 1.0), grid order", "#a8c7fa", "//"),
    ("self-s0.5", "sm90", "jagged lengths (s = 0.5), zigzag", "#e37400", None),
    ("self-s0.5", "sm90-grid-order", "jagged lengths (s = 0.5), grid order", "#fbc98e", "//"),
)


def real_vs_synthetic_source(results):
    own = [rf for rf in results if rf.stem == "real-vs-synthetic"]
    if own:
        return own[-1]
    for rf in reversed(results):  # a file with all four series at one length at least
        if rf.is_seed_config and any(all(rf.row(f"{fam}-L{L}", k, d) for fam, k, *_ in REAL_SYN_SERIES)
                                     for L in LENGTHS for d in ("fwd", "bwd")):
            return rf
    return None


def real_vs_synthetic_figure(results):
    rf = real_vs_synthetic_source(results)
    if rf is None:
        note("real_vs_synthetic.png: no run with sm90 and sm90-grid-order on both s = 1.0 and s = 0.5: skipped")
        return None
    directions = [d for d in ("fwd", "bwd")
                  if any(rf.row(f"{fam}-L{L}", k, d) for fam, k, *_ in REAL_SYN_SERIES for L in LENGTHS)]
    fig = new_figure(9.5, 4.4 * len(directions))
    axes = fig.subplots(len(directions), 1, squeeze=False)[:, 0]
    group = 0.84
    width = group / len(REAL_SYN_SERIES)
    for ax, d in zip(axes, directions):
        top = 0.0
        rows_by_series = []
        for i, (fam, k, label, colour, hatch) in enumerate(REAL_SYN_SERIES):
            xs = [j - group / 2 + width * (i + 0.5) for j in range(len(LENGTHS))]
            rows = [rf.row(f"{fam}-L{L}", k, d) for L in LENGTHS]
            rows_by_series.append((xs, rows))
            top = max(top, draw_bars(ax, xs, rows, width, colour, label, hatch=hatch, annotate="value"))
        for zig, grid in ((0, 1), (2, 3)):  # zigzag's gain over grid order, centred over the pair
            for xz, xg, rz, rg in zip(rows_by_series[zig][0], rows_by_series[grid][0], rows_by_series[zig][1],
                                      rows_by_series[grid][1]):
                if rz and rg:
                    y = max(r["tflops"] + tflops_spread(r)[1] for r in (rz, rg))
                    gain = rz["tflops"] / rg["tflops"] - 1.0
                    ax.annotate(f"{gain:+.1%}", ((xz + xg) / 2, y), xytext=(0, 10), textcoords="offset points",
                                ha="center", va="bottom", fontsize=7, color="#1b7f3b" if gain >= 0 else "#b3261e")
        for pair, fam in ((0, "self-s1.0"), (2, "self-s0.5")):
            lims = []
            for L in LENGTHS:
                r = rf.row(f"{fam}-L{L}", "sm90", d) or rf.row(f"{fam}-L{L}", "sm90-grid-order", d)
                lims.append(r.get("limit_tflops") if r else None)
            centres = [j - group / 2 + width * (pair + 1) for j in range(len(LENGTHS))]
            draw_limits(ax, centres, lims, width, label="physical limit of the set (same run)" if pair == 0 else None)
            top = max([top] + [lim for lim in lims if lim])
        ax.set_xticks(range(len(LENGTHS)))
        ax.set_xticklabels([str(L) for L in LENGTHS])
        ax.set_xlabel("L (uniform: every Lq = L; jagged: Lq uniform in [1, L]; Lk = L)")
        ax.set_ylim(0, top * 1.25)
        style_axes(ax)
        ax.text(0.995, 0.98, "forward" if d == "fwd" else "backward", transform=ax.transAxes, ha="right", va="top",
                fontsize=10, fontweight="bold", color="#444444")
    title_of(axes[0], "Real (jagged) vs synthetic (uniform) lengths, with and without the zigzag scheduler", [rf])
    legend_below(axes[-1], 2)
    footnote(fig, f"Coloured numbers: zigzag's speed-up over grid order on the same sets. Source: {rf.name}; "
                  f"{rf.ceilings_text()}.")
    return fig


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------
def figure_builders():
    """(file name, function of the results returning a Figure or None), in drawing order."""
    out = [(spec.file, lambda res, spec=spec: seed_figure(res, spec)) for spec in SEED_FIGURES]
    out += [(ab.file, lambda res, ab=ab: ablation_figure(res, ab)) for ab in ABLATIONS]
    out += [("activations.png", activation_figure), ("ablation_act_mix.png", act_mix_figure),
            ("schedule_skew.png", schedule_figure),
            ("real_vs_synthetic.png", real_vs_synthetic_figure)]
    return out


def build_figures(results, only=None):
    """[(file name, Figure)] for every figure whose data exists; notes for the others. A figure that
    fails on malformed data is reported and skipped, so one bad file cannot stop the rest."""
    figs = []
    for name, build in figure_builders():
        if only and only not in name:
            continue
        try:
            fig = build(results)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            note(f"{name}: malformed data ({type(e).__name__}: {e}): skipped")
            continue
        if fig is not None:
            figs.append((name, fig))
    return figs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=DEFAULT_RESULTS, help="directory of the JSON (default: experiments/results)")
    ap.add_argument("--out", default=None, help="directory for the PNGs (default: RESULTS/figures)")
    ap.add_argument("--only", default=None, help="draw only figures whose file name contains this text")
    args = ap.parse_args(argv)
    out_dir = args.out or os.path.join(args.results, "figures")
    results = load_results(args.results)
    if not results:
        note(f"no JSON under {args.results}: nothing to draw")
        return 0
    figs = build_figures(results, args.only)
    os.makedirs(out_dir, exist_ok=True)
    for name, fig in figs:
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        print(f"wrote {os.path.relpath(path)}")
    print(f"plot.py: {len(figs)} figure(s) from {len(results)} JSON file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
