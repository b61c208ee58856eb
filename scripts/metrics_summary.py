#!/usr/bin/python3
"""Summarise mtnlg-train runs: one table row per run directory.

  /usr/bin/python3 scripts/metrics_summary.py runs/lr-sweep/*/
  /usr/bin/python3 scripts/metrics_summary.py --last 20 runs/a runs/b

A run directory holds metrics.jsonl (mtnlg-train's JSON-lines metrics; docs/metrics.md "The metrics
file") and, when scripts/sweep.sh made it, overrides.txt (its KEY=VALUE lines), exit_status,
train.log and, for Slurm jobs, slurm_job_id. The columns: combination (the overrides, else the
directory's name) | status | final train loss | final valid loss (- without validation) |
tokens/s (mean over the last --last train lines). Failed runs are listed below the table with
the last line of their log.

Exit status: 0 (also when runs failed: scripts/sweep.sh decides its own); 2 a bad command line
or a run directory that does not exist.

read_metrics() is also used by scripts/plot_metrics.py.
"""

import argparse
import json
import math
import os
import sys


class MetricsError(Exception):
    """A metrics file that is missing, empty or not JSON lines; the message names file and line."""


def read_metrics(path):
    """Returns the metrics file's objects, in order. Blank lines are skipped.

    Raises MetricsError naming the file (and line) when it is missing, holds no lines, or a line
    is not a JSON object.
    """
    if not os.path.exists(path):
        raise MetricsError("%s: no such file" % path)
    if os.path.isdir(path):
        raise MetricsError("%s: is a directory, not a metrics file (did you mean %s?)"
                           % (path, os.path.join(path, "metrics.jsonl")))
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise MetricsError("%s:%d: not a JSON line (%s): %.80s"
                                   % (path, number, e, line.rstrip())) from None
            if not isinstance(record, dict):
                raise MetricsError("%s:%d: a JSON line that is not an object: %.80s"
                                   % (path, number, line.rstrip()))
            record["_line"] = number
            records.append(record)
    if not records:
        raise MetricsError("%s: empty: no metrics lines (did the run reach its first iteration?"
                           " see train.log beside it)" % path)
    return records


def _read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def last_log_line(run_dir):
    text = _read_text(os.path.join(run_dir, "train.log")) or ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(train.log is empty or missing)"


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def summarise(run_dir, last):
    """One row: a dict of combination, status, train_loss, valid_loss, tokens_per_sec, failed,
    note (the reason of a failure)."""
    overrides = _read_text(os.path.join(run_dir, "overrides.txt"))
    if overrides is not None:
        combination = " ".join(line for line in overrides.splitlines() if line) or "(no overrides)"
    else:
        combination = os.path.basename(os.path.normpath(run_dir))
    row = {"combination": combination, "train_loss": "-", "valid_loss": "-",
           "tokens_per_sec": "-", "failed": False, "note": ""}

    exit_status = _read_text(os.path.join(run_dir, "exit_status"))
    job_id = _read_text(os.path.join(run_dir, "slurm_job_id"))
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    if exit_status is not None and exit_status.strip():
        code = exit_status.strip()
        row["status"] = "ok" if code == "0" else "failed (exit %s)" % code
        row["failed"] = code != "0"
    elif job_id is not None:
        started = os.path.exists(metrics_path)
        row["status"] = "%s (job %s)" % ("running" if started else "submitted", job_id.strip())
    elif os.path.exists(os.path.join(run_dir, "submit.log")):
        row["status"] = "submit failed"
        row["failed"] = True
        row["note"] = (_read_text(os.path.join(run_dir, "submit.log")) or "").strip()
    else:
        row["status"] = "unknown" if os.path.exists(metrics_path) else "not run"

    if os.path.exists(metrics_path):
        try:
            records = read_metrics(metrics_path)
        except MetricsError as e:
            records = []
            if not row["failed"] and not row["status"].startswith(("submitted", "running")):
                row["status"] = "bad metrics"
                row["failed"] = True
                row["note"] = str(e)
        train = [r for r in records if r.get("split", "train") == "train"]
        valid = [r for r in records if r.get("split") == "valid"]
        if train and _number(train[-1].get("loss")):
            row["train_loss"] = "%.4f" % train[-1]["loss"]
        if valid and _number(valid[-1].get("loss")):
            row["valid_loss"] = "%.4f" % valid[-1]["loss"]
        rates = [r["tokens_per_sec"] for r in train[-last:] if _number(r.get("tokens_per_sec"))]
        if rates:
            row["tokens_per_sec"] = "%.0f" % (sum(rates) / len(rates))
    if row["failed"] and not row["note"]:
        row["note"] = last_log_line(run_dir)
    return row


def format_table(rows):
    """A Markdown table with aligned columns."""
    header = ["combination", "status", "final train loss", "final valid loss", "tokens/s"]
    keys = ["combination", "status", "train_loss", "valid_loss", "tokens_per_sec"]
    cells = [header] + [[row[k] for k in keys] for row in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c[i].ljust(widths[i]) for i in range(len(c))) + " |" for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="metrics_summary.py",
        description="One table row per run directory: combination | status | final train loss |"
                    " final valid loss | tokens/s.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUNDIR",
                        help="a directory holding metrics.jsonl (e.g. one made by sweep.sh)")
    parser.add_argument("--last", type=int, default=10, metavar="N",
                        help="tokens/s is the mean of the last N train lines (default 10)")
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error("--last must be at least 1")
    for run_dir in args.run_dirs:
        if not os.path.isdir(run_dir):
            parser.error("%s: not a run directory (no such directory)" % run_dir)
    rows = [summarise(run_dir, args.last) for run_dir in args.run_dirs]
    print(format_table(rows))
    failed = [(run_dir, row) for run_dir, row in zip(args.run_dirs, rows) if row["failed"]]
    if failed:
        print("\nfailed runs:")
        for run_dir, row in failed:
            print("  %s: %s: %s" % (run_dir, row["status"], row["note"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
