#!/usr/bin/env python3
"""Two mtnlg-eval --tasks runs scored the same: DIR/A.samples and DIR/B.samples (--log-samples of
the few-shot tasks), DIR/A.wikitext.samples and its twin, and the results lines DIR/A.jsonl and
DIR/A.wikitext.jsonl against B's. The same requests with log-likelihoods within TOLERANCE
(relative); below 1e-3 also the same greedy flags and accuracies. Prints what differs (up to 8
lines); exit 1 when anything does.
Usage: compare_task_samples.py DIR A B TOLERANCE"""
import json, math, sys
tmp, a, b, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]
bad = []
for suffix in ("samples", "wikitext.samples"):
    x, y = lines(f"{tmp}/{a}.{suffix}"), lines(f"{tmp}/{b}.{suffix}")
    if len(x) != len(y) or not x:
        bad.append(f"{suffix}: {len(x)} against {len(y)} requests")
        continue
    for p, q in zip(x, y):
        key = (p["task"], p["doc_id"], p["request"])
        if key != (q["task"], q["doc_id"], q["request"]) or p["context"] != q["context"]:
            bad.append(f"{key}: different requests")
        elif abs(p["loglikelihood"] - q["loglikelihood"]) > tol * abs(p["loglikelihood"]) + 1e-6:
            bad.append(f"{key}: log-likelihood {p['loglikelihood']} against {q['loglikelihood']}")
        elif tol < 1e-3 and p["greedy"] != q["greedy"]:
            bad.append(f"{key}: greedy {p['greedy']} against {q['greedy']}")
for suffix in ("jsonl", "wikitext.jsonl"):
    x, y = lines(f"{tmp}/{a}.{suffix}"), lines(f"{tmp}/{b}.{suffix}")
    for p, q in zip(x, y):
        for k in ("acc", "acc_norm", "documents"):
            if tol < 1e-3 and p.get(k) != q.get(k):
                bad.append(f"{p['task']} {p['num_fewshot']}-shot {k}: {p.get(k)} against {q.get(k)}")
        for k in ("perplexity", "word_perplexity"):
            if k in p and abs(p[k] - q[k]) > 10 * tol * abs(p[k]):
                bad.append(f"{p['task']} {k}: {p[k]} against {q[k]}")
    if len(x) != len(y) or len(x) < 1:
        bad.append(f"{suffix}: {len(x)} against {len(y)} task lines")
for line in bad[:8]:
    print("  " + line)
sys.exit(1 if bad else 0)
