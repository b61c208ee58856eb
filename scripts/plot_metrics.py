#!/usr/bin/python3
"""Plot mtnlg-train metrics files: loss (train and valid), gradient norm, learning rate, global
batch size and throughput (tokens/s) against consumed tokens, one panel each. A panel whose value
never changes in any run (a constant learning rate, a batch without a ramp) is left out, and the
noisy series (train loss, gradient norm, tokens/s) are drawn faint with an exponential moving
average over them (--smooth, TensorBoard's; 0 turns it off).

  /usr/bin/python3 scripts/plot_metrics.py runs/demo-cpu/metrics.jsonl   # runs/demo-cpu/metrics.png
  /usr/bin/python3 scripts/plot_metrics.py runs/sweep/*/ --out plots/      # plots/<run>.png each
  /usr/bin/python3 scripts/plot_metrics.py runs/sweep/*/ --overlay         # runs/sweep/overlay.png

A METRICS argument is a metrics file (docs/metrics.md) or a run directory holding
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
    ("grad_norm", "gradient norm", "global L2 norm"),
    ("lr", "learning rate", "lr"),
    ("global_batch_size", "global batch size", "samples"),
    ("tokens_per_sec", "throughput", "tokens/s"),
]
SMOOTHED = {"loss", "grad_norm", "tokens_per_sec"}  # noisy per iteration


def smooth(ys, weight):
    """TensorBoard's smoothing: an exponential moving average, debiased at the start."""
    if weight <= 0:
        return list(ys)
    out, avg = [], 0.0
    for t, y in enumerate(ys, start=1):
        avg = weight * avg + (1 - weight) * y
        out.append(avg / (1 - weight ** t))
    return out


def panels_to_draw(runs):
    """The panels with something to show: loss always; the others when some run's value changes
    (a constant is a line of no information; its value is in the run's resolved recipe)."""
    keep = []
    for field, title, ylabel in PANELS:
        values = set()
        for _, data in runs:
            values.update(data["train"][field][1])
        if field == "loss" or len(values) > 1:
            keep.append((field, title, ylabel))
    return keep


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


def draw(runs, title, smoothing=0.6):
    """runs: list of (label, data). Returns a matplotlib figure and the titles of its panels."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    panels = panels_to_draw(runs)
    cols = 2 if len(panels) <= 4 else 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 8), constrained_layout=True, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    overlay = len(runs) > 1
    for ax, (field, panel_title, ylabel) in zip(axes.flat, panels):
        for i, (label, data) in enumerate(runs):
            color = colors[i % len(colors)]
            xs, ys = data["train"][field]
            name = (label if overlay else "train") if field == "loss" else label
            if xs and field in SMOOTHED and smoothing > 0:
                ax.plot(xs, ys, color=color, linewidth=0.8, alpha=0.3)
                ax.plot(xs, smooth(ys, smoothing), color=color, linewidth=1.4, label=name)
            elif xs:
                # The batch size holds over the tokens that end at each point: a step.
                ax.plot(xs, ys, color=color, linewidth=1.2,
                        drawstyle="steps-pre" if field == "global_batch_size" else "default",
                        label=name)
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
    return fig, [title for _, title, _ in panels]


def save(figure, out):
    fig, panels = figure
    parent = os.path.dirname(out)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fig.savefig(out, dpi=100)
    import matplotlib.pyplot as plt
    plt.close(fig)
    print("plot_metrics.py: wrote %s (%s)" % (out, ", ".join(panels)))


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
    parser.add_argument("--smooth", type=float, default=0.6, metavar="F",
                        help="weight of the moving average over the train loss, gradient norm"
                             " and tokens/s, in [0, 1) (TensorBoard's; default 0.6; 0: raw only)")
    args = parser.parse_args(argv)

    if not 0 <= args.smooth < 1:
        parser.error("--smooth %g: give a weight in [0, 1), e.g. 0.6" % args.smooth)
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
            save(draw(runs, args.title or "%d runs" % len(runs), args.smooth), outputs[0])
        else:
            for run, out in zip(runs, outputs):
                save(draw([run], args.title or run[0], args.smooth), out)
    except OSError as e:
        print("plot_metrics.py: cannot write %s: %s" % (e.filename or "the PNG", e.strerror),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
