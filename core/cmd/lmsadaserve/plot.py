"""PNG plots of lmsadaserve's CSV files, drawn with matplotlib.

lmsadaserve writes each sweep as a CSV (and an SVG it draws itself, with no
dependency); `make bench-adaserve` runs this script over its output folders
for PNGs, the form most reports and issue trackers take:

    python core/cmd/lmsadaserve/plot.py build/adaserve [more folders...]

For every sweep NAME.csv it writes NAME-attainment.png and NAME-goodput.png:
one line per policy against the load (the x axis of the urgent-only study
is the SLO as a multiple of the baseline latency). engine-vs-sim.csv holds
two settings; the simulator's replay is drawn dashed in the engine's colour.
"""

import csv
import sys
from collections import OrderedDict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402

METRICS = [
    ("attainment", "TPOT SLO attainment (%)", lambda r: 100 * float(r["attainment"])),
    ("goodput", "goodput (tokens/s)", lambda r: float(r["goodput_tps"])),
]


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def series(rows, metric):
    """(setting, policy) -> ([x], [y]) in file order."""
    out = OrderedDict()
    for r in rows:
        xs, ys = out.setdefault((r["setting"], r["policy"]), ([], []))
        xs.append(float(r["load"]))
        ys.append(metric(r))
    return out


# The default cycle's ten colours, then more: the sweeps compare eleven
# policies.
PALETTE = [f"C{i}" for i in range(10)] + ["black", "gold", "navy", "magenta"]


def plot(path, rows):
    urgent = path.stem.endswith("-urgent")
    written = []
    for name, label, metric in METRICS:
        if name == "goodput" and urgent:
            continue  # the study reports attainment only
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
        colours = {}
        for (setting, policy), (xs, ys) in series(rows, metric).items():
            colour = colours.setdefault(policy, PALETTE[len(colours) % len(PALETTE)])
            dashed = setting.startswith("sim")
            ax.plot(xs, ys, marker="o", markersize=3, color=colour,
                    linestyle="--" if dashed else "-",
                    label=f"{policy} ({setting})" if dashed else policy)
        ax.set_xlabel("TPOT SLO / baseline latency" if urgent else "load (fraction of measured capacity)")
        ax.set_ylabel(label)
        ax.set_title(f"{path.stem}: {label}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = path.with_name(f"{path.stem}-{name}.png")
        fig.savefig(out)
        plt.close(fig)
        written.append(out)
    return written


def main(dirs):
    if not dirs:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: plot.py DIR [DIR...]", file=sys.stderr)
        return 2
    n = 0
    for d in map(Path, dirs):
        for path in sorted(d.glob("*.csv")):
            rows = read_rows(path)
            if not rows or not {"setting", "policy", "load", "attainment", "goodput_tps"} <= rows[0].keys():
                continue  # not a sweep (an engine record, for one)
            for out in plot(path, rows):
                print(out)
                n += 1
    if n == 0:
        print("plot.py: no sweep CSV in " + " ".join(dirs), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
