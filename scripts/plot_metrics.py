#!/usr/bin/python3
"""Plot mtnlg-train metrics files: loss (train and valid), learning rate, global batch size and
throughput (tokens/s) against consumed tokens, in four panels.

  /usr/bin/python3 scripts/plot_metrics.py runs/demo-cpu/metrics.jsonl   # runs/demo-cpu/metrics.png
  /usr/bin/python3 scripts/plot_metrics.py runs/sweep/*/ --out plots/      # plots/<run>.png each
  /usr/bin/python3 scripts/plot_metrics.py runs/sweep/*/ --overlay         # runs/sweep/overlay.png

A METRICS argument is a metrics file (README "The metrics file") or a run directory holding
metrics.jsonl. A run's label is its directory's name when the file is called metrics.jsonl,
else the file's name without extension; --labels a,b,... overrides them (one per input).

Output, one figure per run: beside each metrics file as NAME.png (metrics.png) by default;
--out DIR (an existing directory, or a path ending in /) writes DIR/LABEL.png; --out PATTERN
with {label} or {index} (0, 1, ...) is formatted per run, e.g. plots/{index}-{label}.png;
--out FILE.png is the file (one input only). With --overlay, all runs share one figure:
--out FILE.png, or DIR/overlay.png for a directory; by default overlay.png in the inputs'
common directory.

Needs matplotlib (Debian python3-matplotlib); draws with the Agg backend (no display).
Exit status: 0 done; 1 a missing or empty metrics file or a line that is not JSON (the message
names file and line); 2 a bad command line.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from metrics_summary import MetricsError, read_metrics  # noqa: E402

PANELS = [  # (field, title, y label)
    ("loss", "loss", "cross entropy"),
    ("lr", "learning rate", "lr"),
    ("global_batch_size", "global batch size", "samples"),
    ("tokens_per_sec", "throughput", "tokens/s"),
]


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_run(path):
    """Reads one run: {'train': {field: (x, y)}, 'valid': (x, y)} against consumed tokens."""
    records = read_metrics(path)
    series = {field: ([], []) for field, _, _ in PANELS}
    valid = ([], [])
    for r in records:
        tokens = r.get("consumed_tokens")
        if not _number(tokens):
            raise MetricsError("%s:%d: no numeric \"consumed_tokens\" (is this an mtnlg-train "
                               "metrics file?)" % (path, r["_line"]))
        if r.get("split", "train") == "valid":
            if _number(r.get("loss")):
                valid[0].append(tokens)
                valid[1].append(r["loss"])
            continue
        for field, (xs, ys) in series.items():
            if _number(r.get(field)):
                xs.append(tokens)
                ys.append(r[field])
    if not series["loss"][0] and not valid[0]:
        raise MetricsError("%s: no train or valid loss lines" % path)
    return {"train": series, "valid": valid}


def default_label(path):
    if os.path.basename(path) == "metrics.jsonl":
        return os.path.basename(os.path.dirname(os.path.abspath(path))) or "metrics"
    return os.path.splitext(os.path.basename(path))[0]


def safe_name(label):
    return re.sub(r"[^A-Za-z0-9._+=-]", "_", label)[:150] or "run"


def draw(runs, title):
    """runs: list of (label, data). Returns a matplotlib figure with the four panels."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    overlay = len(runs) > 1
    for ax, (field, panel_title, ylabel) in zip(axes.flat, PANELS):
        for i, (label, data) in enumerate(runs):
            color = colors[i % len(colors)]
            xs, ys = data["train"][field]
            if xs:
                # The batch size holds over the tokens that end at each point: a step.
                ax.plot(xs, ys, color=color, linewidth=1.2,
                        drawstyle="steps-pre" if field == "global_batch_size" else "default",
                        label=(label if overlay else "train") if field == "loss" else label)
            if field == "loss" and data["valid"][0]:
                ax.plot(data["valid"][0], data["valid"][1], color=color, linestyle="--",
                        marker="o", markersize=3,
                        label=("%s (valid)" % label) if overlay else "valid")
        ax.set_title(panel_title)
        ax.set_xlabel("consumed tokens")
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_formatter(EngFormatter())
        if field == "tokens_per_sec":
            ax.yaxis.set_major_formatter(EngFormatter())
        if field == "global_batch_size":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize="small")
    fig.suptitle(title)
    return fig


def save(fig, out):
    parent = os.path.dirname(out)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fig.savefig(out, dpi=100)
    import matplotlib.pyplot as plt
    plt.close(fig)
    print("plot_metrics.py: wrote %s" % out)


def per_run_outputs(paths, labels, out):
    if out is None:
        return [os.path.splitext(p)[0] + ".png" for p in paths]
    if "{label}" in out or "{index}" in out:
        return [out.format(label=safe_name(label), index=i) for i, label in enumerate(labels)]
    if os.path.isdir(out) or out.endswith("/"):
        return [os.path.join(out, safe_name(label) + ".png") for label in labels]
    if len(paths) > 1:
        raise ValueError("--out %s: %d runs need a directory (an existing one, or a path ending"
                         " in /), a pattern with {label} or {index}, or --overlay"
                         % (out, len(paths)))
    return [out]


def overlay_output(paths, out):
    if out is None:
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
        return os.path.join(os.path.relpath(common), "overlay.png")
    if os.path.isdir(out) or out.endswith("/"):
        return os.path.join(out, "overlay.png")
    return out


def main(argv):
    parser = argparse.ArgumentParser(
        prog="plot_metrics.py",
        description="Plot loss, learning rate, global batch size and tokens/s against consumed"
                    " tokens from mtnlg-train metrics files.",
        epilog="--out: DIR/ or an existing DIR (DIR/LABEL.png), a pattern with {label} or"
               " {index}, or FILE.png; default: NAME.png beside each metrics file, or"
               " overlay.png in the inputs' common directory with --overlay.")
    parser.add_argument("metrics", nargs="+", metavar="METRICS",
                        help="a metrics.jsonl file, or a run directory holding one")
    parser.add_argument("--out", help="where the PNG(s) go (see below)")
    parser.add_argument("--labels", help="comma-separated labels, one per METRICS")
    parser.add_argument("--overlay", action="store_true",
                        help="all runs in one figure (one PNG), e.g. for a sweep")
    parser.add_argument("--title", help="the figure title (default: the label, or 'N runs')")
    args = parser.parse_args(argv)

    paths = [os.path.join(p, "metrics.jsonl") if os.path.isdir(p) else p for p in args.metrics]
    if args.labels is not None:
        labels = args.labels.split(",")
        if len(labels) != len(paths):
            parser.error("--labels has %d labels for %d metrics files" % (len(labels), len(paths)))
    else:
        labels = [default_label(p) for p in paths]

    try:
        outputs = [overlay_output(paths, args.out)] if args.overlay else \
            per_run_outputs(paths, labels, args.out)
    except ValueError as e:
        parser.error(str(e))

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_metrics.py: needs matplotlib: apt-get install python3-matplotlib (or run"
              " scripts/setup.sh)", file=sys.stderr)
        return 1

    try:
        runs = [(label, load_run(path)) for label, path in zip(labels, paths)]
    except MetricsError as e:
        print("plot_metrics.py: %s" % e, file=sys.stderr)
        return 1

    try:
        if args.overlay:
            save(draw(runs, args.title or "%d runs" % len(runs)), outputs[0])
        else:
            for run, out in zip(runs, outputs):
                save(draw([run], args.title or run[0]), out)
    except OSError as e:
        print("plot_metrics.py: cannot write %s: %s" % (e.filename or "the PNG", e.strerror),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
