#!/usr/bin/env bash
# mtnlg-eval --tasks end to end: a model trained here with GPT-2's vocabulary, exported to
# Hugging Face's format, scored on LAMBADA-style documents (lambada_openai: the test split, the
# few-shot examples from it with the evaluated document removed; lambada_standard: from its
# validation split) zero- and 2-shot; against lm-evaluation-harness's algorithm written again in
# Python (the split into context and last word, Random(1234).sample with n + 1 drawn and the
# document removed, _encode_pair, the window) over GPT-2's BPE in Python and the float64
# PyTorch GPT-2 of tests/reference/gpt2_torch_reference.py: the same accuracy, the same
# perplexity within float32's rounding; the results JSON; bad input named.
# Usage: tests/cmd/eval_tasks_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/text_corpus.sh"
cd "$src" || exit 1

train_text_checkpoint "$build" "$tmp" 8 || exit 1
"$build/mtnlg-ckpt" export "$tmp/ckpt" --format hf-gpt2 --output "$tmp/hf/model.safetensors" \
  >/dev/null || { echo "FAIL: mtnlg-ckpt export"; exit 1; }

/usr/bin/python3 tests/cmd/make_task_files.py "$tmp/tasks" || { echo "FAIL: writing the task files"; exit 1; }

bin=$build/mtnlg-eval
run() {  # TASK SHOTS -> one JSON line
  "$bin" --hf-model "$tmp/hf/model.safetensors" --tasks "$1" --task-dir "$tmp/tasks" \
    --num-fewshot "$2" --threads 2 --output "$tmp/results-$1-$2.json" \
    --log-samples "$tmp/samples-$1-$2.jsonl"
}
for task in lambada_openai lambada_standard piqa boolq wic anli_r2 hellaswag winogrande hans race wikitext; do
  for shots in 0 2; do
    [ "$task" = wikitext ] && [ "$shots" = 2 ] && continue
    run "$task" "$shots" >"$tmp/ours-$task-$shots.json" 2>"$tmp/err" ||
      { echo "FAIL: mtnlg-eval --tasks $task --num-fewshot $shots: $(tail -3 "$tmp/err")"; failures=$((failures + 1)); }
  done
done

/usr/bin/python3 - "$src" "$tmp" <<'PY'
import json, math, os, random, struct, sys, types
import numpy as np
import torch
src, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "scripts"))
sys.path.insert(0, os.path.join(src, "tests", "reference"))
from prepare_demo_data import GPT2Tokenizer
import gpt2_torch_reference as ref
tok = GPT2Tokenizer(os.path.join(src, "data", "gpt2"))
EOT = 50256

def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64}[info["dtype"]]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(info["shape"])
        out[name.removeprefix("transformer.")] = torch.from_numpy(arr.astype(np.float64))
    return out

p = read_safetensors(os.path.join(tmp, "hf", "model.safetensors"))
cfg = json.load(open(os.path.join(tmp, "hf", "config.json")))
a = types.SimpleNamespace(hidden=cfg["n_embd"], heads=cfg["n_head"], layers=cfg["n_layer"],
                          activation="gelu_tanh" if cfg["activation_function"] == "gelu_new" else "gelu")
max_length = cfg["n_positions"]

def encode_pair(context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tok.encode(context + continuation)
    ctx = tok.encode(context)
    return ctx, whole[len(ctx):]

def request(context, continuation):
    if context == "":
        cont = tok.encode(continuation)
        return ([EOT], cont) if EOT != cont[0] else (cont[:1], cont[1:])
    return encode_pair(context, continuation)

def score(context, continuation):
    ctx, cont = request(context, continuation)
    inp = (ctx + cont)[-(max_length + 1):][:-1]
    with torch.no_grad():
        logits = ref.logits_fn(p, torch.tensor([inp], dtype=torch.int32), a)[0]
    logp = torch.log_softmax(logits, dim=-1)[len(inp) - len(cont):len(inp)]
    greedy = bool((logp.argmax(dim=-1) == torch.tensor(cont)).all())
    return float(logp[torch.arange(len(cont)), torch.tensor(cont)].sum()), greedy

def lambada(text):  # doc_to_text, doc_to_target
    words = text.split(" ")
    return " ".join(words[:-1]), " " + words[-1]

def preprocess(text):
    import re
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")

def choice_doc(task, d):  # the tasks' YAMLs and utils.py
    if task == "piqa": return "Question: " + d["goal"] + "\nAnswer:", [d["sol1"], d["sol2"]], d["label"]
    if task == "boolq": return d["passage"] + "\nQuestion: " + d["question"] + "?\nAnswer:", ["no", "yes"], d["label"]
    if task == "wic":
        return ("Sentence 1: " + d["sentence1"] + "\nSentence 2: " + d["sentence2"] + "\nQuestion: Is the word '"
                + d["sentence1"][d["start1"]:d["end1"]] + "' used in the same way in the two sentences above?\nAnswer:",
                ["no", "yes"], d["label"])
    if task == "anli_r2":
        return (d["premise"] + "\nQuestion: " + d["hypothesis"] + " True, False, or Neither?\nAnswer:",
                ["True", "Neither", "False"], d["label"])
    if task == "race":  # preprocess_race.py
        import ast
        probs = ast.literal_eval(d["problems"])
        opt = lambda p: p["options"][{"A": 0, "B": 1, "C": 2, "D": 3}[p["answer"]]]
        text = "Article: " + d["article"] + "\n\n"
        for p_ in probs[:-1]:
            if p_["question"][-6:] == "  _  .":
                text += p_["question"][:-5] + opt(p_) + "\n"
            else:
                text += "Question: " + p_["question"] + "\n" + "Answer: " + opt(p_) + "\n"
        text += probs[-1]["question"]
        return text, [probs[-1]["options"][i] for i in range(4)], {"A": 0, "B": 1, "C": 2, "D": 3}[probs[-1]["answer"]]
    if task == "hans":
        return (d["premise"] + "\nQuestion: " + d["hypothesis"] + " True or False?\nAnswer:",
                ["True", "False"], d["label"])
    ctx = d["ctx_a"] + " " + d["ctx_b"].capitalize()
    return preprocess(d["activity_label"] + ": " + ctx), [preprocess(e) for e in d["endings"]], int(d["label"])

def winogrande(d):  # preprocess_winogrande.py: the contexts, the shared target, the gold one
    i = d["sentence"].index("_")
    return ([d["sentence"][:i] + d["option1"], d["sentence"][:i] + d["option2"]],
            d["sentence"][i + 1:].strip(), {"1": 0, "2": 1}[d["answer"]])

SPLITS = {"race": ("test", "test"), "winogrande": ("validation", "train"), "hans": ("validation", "train"),
          "piqa": ("validation", "train"), "boolq": ("validation", "train"), "wic": ("validation", "train"),
          "anli_r2": ("test_r2", "train_r2"), "hellaswag": ("validation", "train")}

def mean_stderr(xs):
    n = len(xs)
    m = sum(xs) / n
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) / math.sqrt(n)

def harness_choice(task, shots):
    ev, fs = SPLITS[task]
    docs = [json.loads(l) for l in open(os.path.join(tmp, "tasks", task, ev + ".jsonl"))]
    pool = [json.loads(l) for l in open(os.path.join(tmp, "tasks", task, fs + ".jsonl"))]
    rnd = random.Random(1234)
    acc, acc_norm, all_lls = [], [], []
    for doc in docs:
        ctx = ""
        if shots:
            ex = ([x for x in rnd.sample(pool, shots + 1) if x != doc][:shots] if ev == fs
                  else rnd.sample(pool, shots))
            for e in ex:
                if task == "winogrande":
                    cs, t, g = winogrande(e)
                    ctx += cs[g] + " " + t + "\n\n"
                else:
                    q, c, g = choice_doc(task, e)
                    ctx += q + " " + c[g] + "\n\n"
        if task == "winogrande":  # multiple inputs: each context, the shared continuation
            c, t, g = winogrande(doc)
            lls = [score(ctx + x, " " + t)[0] for x in c]
        else:
            q, c, g = choice_doc(task, doc)
            lls = [score(ctx + q, " " + x)[0] for x in c]
        all_lls.append(lls)
        acc.append(1.0 if int(np.argmax(lls)) == g else 0.0)
        acc_norm.append(1.0 if int(np.argmax([ll / len(x) for ll, x in zip(lls, c)])) == g else 0.0)
    return mean_stderr(acc), mean_stderr(acc_norm), len(docs), all_lls

def harness(task, shots):
    docs = [json.loads(l) for l in open(os.path.join(tmp, "tasks", task, "test.jsonl"))]
    pool = docs if task == "lambada_openai" else [
        json.loads(l) for l in open(os.path.join(tmp, "tasks", task, "validation.jsonl"))]
    rnd = random.Random(1234)
    lls, accs = [], []
    for doc in docs:
        ctx = ""
        if shots:
            if pool is docs:
                ex = [x for x in rnd.sample(pool, shots + 1) if x != doc][:shots]
            else:
                ex = rnd.sample(pool, shots)
            for e in ex:
                q, t = lambada(e["text"])
                ctx += q + " " + t + "\n\n"
        q, t = lambada(doc["text"])
        ll, g = score(ctx + q, t)
        lls.append(ll)
        accs.append(1.0 if g else 0.0)
    n = len(accs)
    acc = sum(accs) / n
    stderr = math.sqrt(sum((x - acc) ** 2 for x in accs) / (n - 1)) / math.sqrt(n)
    return acc, stderr, math.exp(-sum(lls) / n), n, lls

# lm_eval/api/metrics.py bootstrap_stderr(perplexity, lls, 100000): chunks of 1000 resamples,
# chunk i from Random(i).choices, then the sample standard deviation.
def bootstrap_perplexity_stderr(xs, iters=100000):
    res = []
    chunk = min(1000, iters)
    for i in range(iters // chunk):
        rnd = random.Random()
        rnd.seed(i)
        for _ in range(chunk):
            s = rnd.choices(xs, k=len(xs))
            res.append(math.exp(-(sum(s) / len(s))))
    mu = sum(res) / len(res)
    return math.sqrt(sum([(x - mu) ** 2 for x in res]) / (len(res) - 1))

bad = 0
for task in ("lambada_openai", "lambada_standard"):
    for shots in (0, 2):
        try:
            ours = json.loads(open(os.path.join(tmp, f"ours-{task}-{shots}.json")).read())
        except Exception as e:
            print(f"FAIL: {task} {shots}-shot: no JSON line ({e})"); bad += 1; continue
        acc, stderr, ppl, n, lls = harness(task, shots)
        ppl_se = bootstrap_perplexity_stderr(lls)
        ok = (ours["acc"] == acc and abs(ours["acc_stderr"] - stderr) < 1e-12
              and abs(ours["perplexity"] / ppl - 1) < 2e-5 and ours["documents"] == n
              and abs(ours["perplexity_stderr"] / ppl_se - 1) < 2e-5
              and ours["num_fewshot"] == shots)
        print(("ok" if ok else "FAIL") + f": {task} {shots}-shot: acc {ours['acc']} (reference {acc}), "
              f"perplexity {ours['perplexity']:.6f} (reference {ppl:.6f}) +- {ours['perplexity_stderr']:.6f} "
              f"(reference {ppl_se:.6f}), {n} documents")
        bad += not ok
for task in ("piqa", "boolq", "wic", "anli_r2", "hellaswag", "winogrande", "hans", "race"):
    for shots in (0, 2):
        try:
            ours = json.loads(open(os.path.join(tmp, f"ours-{task}-{shots}.json")).read())
        except Exception as e:
            print(f"FAIL: {task} {shots}-shot: no JSON line ({e})"); bad += 1; continue
        (acc, se), (accn, sen), n, lls = harness_choice(task, shots)
        ok = ours["acc"] == acc and abs(ours["acc_stderr"] - se) < 1e-12 and ours["documents"] == n
        # Every choice's log-likelihood, document by document (--log-samples): float32 against
        # float64, within 1e-5 of its size.
        reqs = [json.loads(l) for l in open(os.path.join(tmp, f"samples-{task}-{shots}.jsonl"))]
        mine = [{"loglikelihoods": [r["loglikelihood"] for r in reqs if r["doc_id"] == d]}
                for d in range(n)]
        ok &= all(r["continuation"].startswith(" ") and r["context"] for r in reqs)
        worst = max(abs(a - b) / max(1.0, abs(b)) for m, r in zip(mine, lls)
                    for a, b in zip(m["loglikelihoods"], r))
        ok &= len(mine) == n and all(len(m["loglikelihoods"]) == len(r) for m, r in zip(mine, lls))
        ok &= worst < 1e-5
        if task in ("piqa", "hellaswag"):
            ok &= ours["acc_norm"] == accn and abs(ours["acc_norm_stderr"] - sen) < 1e-12
        else:
            ok &= "acc_norm" not in ours
        print(("ok" if ok else "FAIL") + f": {task} {shots}-shot: acc {ours['acc']} (reference {acc})"
              + (f", acc_norm {ours.get('acc_norm')} (reference {accn})" if task in ("piqa", "hellaswag") else "")
              + f", {n} documents, log-likelihoods within {worst:.1e}")
        bad += not ok
def wikitext_detokenizer(string):  # preprocess_wikitext.py
    import re
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "),
                 (" . ", ". "), (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        string = string.replace(a, b)
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    for a, b in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" " + chr(176) + " ", chr(176)),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        string = string.replace(a, b)
    return string

def rolling(tokens, prefix, max_seq_len):  # get_rolling_token_windows, context_len 1, disjoint
    if not tokens: return []
    out, predicted = [], 0
    first = min(max_seq_len, len(tokens))
    out.append(([prefix] + tokens[:first - 1], tokens[:first]))
    predicted += first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_seq_len)
        end = predicted + n
        out.append((tokens[end - max_seq_len - 1:end - 1], tokens[end - n:end]))
        predicted += n
    return [(a[:len(a) - (len(b) - 1)], b) for a, b in out]

def score_pair(ctx, cont):
    inp = (ctx + cont)[-(max_length + 1):][:-1]
    with torch.no_grad():
        logits = ref.logits_fn(p, torch.tensor([inp], dtype=torch.int32), a)[0]
    logp = torch.log_softmax(logits, dim=-1)[len(inp) - len(cont):len(inp)]
    return float(logp[torch.arange(len(cont)), torch.tensor(cont)].sum())

import re
pages = [json.loads(l)["page"] for l in open(os.path.join(tmp, "tasks", "wikitext", "test.jsonl"))]
lls = [sum(score_pair(c, k) for c, k in rolling(tok.encode(wikitext_detokenizer(pg)), EOT, max_length))
       for pg in pages]
words = sum(len(re.split(r"\s+", pg)) for pg in pages)
nbytes = sum(len(pg.encode()) for pg in pages)
want = {"word_perplexity": math.exp(-sum(lls) / words), "byte_perplexity": math.exp(-sum(lls) / nbytes),
        "bits_per_byte": -sum(lls) / nbytes / math.log(2)}
ours = json.loads(open(os.path.join(tmp, "ours-wikitext-0.json")).read())
mine = [json.loads(l) for l in open(os.path.join(tmp, "samples-wikitext-0.jsonl"))]
ok = all(abs(ours[k] / v - 1) < 1e-6 for k, v in want.items()) and len(mine) == len(pages)
ok &= all(abs(m["loglikelihood"] - r) < 1e-5 * max(1, abs(r)) for m, r in zip(mine, lls))
ok &= all(m["continuation"] == wikitext_detokenizer(pg) and m["context"] == "" for m, pg in zip(mine, pages))
windows = [len(rolling(tok.encode(wikitext_detokenizer(pg)), EOT, max_length)) for pg in pages]
ok &= max(windows) >= 3
print(("ok" if ok else "FAIL") + f": wikitext: {', '.join(f'{k} {ours[k]:.6f} (reference {v:.6f})' for k, v in want.items())}"
      f", {len(pages)} pages in {sum(windows)} windows")
bad += not ok
res = json.load(open(os.path.join(tmp, "results-lambada_openai-2.json")))
r = res["results"]["lambada_openai"]
ok = res["n-shot"] == {"lambada_openai": 2} and res["n-samples"]["lambada_openai"] == {"original": 11, "effective": 11}
ok &= set(r) == {"alias", "acc,none", "acc_stderr,none", "perplexity,none", "perplexity_stderr,none"}
ok &= r["perplexity_stderr,none"] == json.loads(open(os.path.join(tmp, "ours-lambada_openai-2.json")).read())["perplexity_stderr"]
print(("ok" if ok else "FAIL") + ": the results JSON has the harness's keys")
bad += not ok
sys.exit(1 if bad else 0)
PY
check "the accuracies and perplexities equal the harness's algorithm over the float64 model" [ $? = 0 ]

# Several shot counts in one run: a JSON line for each, the results keyed by them, and the paper's
# table on the terminal with the same accuracies as the single runs above.
"$bin" --hf-model "$tmp/hf/model.safetensors" --tasks piqa,boolq --task-dir "$tmp/tasks" \
  --num-fewshot 0,2 --threads 2 --output "$tmp/multi.json" >"$tmp/multi.out" 2>"$tmp/multi.err"
check "--num-fewshot 0,2: four JSON lines" [ "$(grep -c '^{"task"' "$tmp/multi.out")" = 4 ]
check "the table's header and rows" bash -c "grep -Eq '^task +metric +zero-shot +2-shot' '$tmp/multi.err' &&
  grep -Eq '^piqa +acc +[0-9.]+ +[0-9.]+' '$tmp/multi.err' && grep -Eq '^boolq +acc ' '$tmp/multi.err'"
check "the same accuracies as one shot count a run" /usr/bin/python3 -c "
import json, sys
multi = json.load(open('$tmp/multi.json'))['results']
for task in ('piqa', 'boolq'):
    for k in (0, 2):
        one = json.load(open(f'$tmp/results-{task}-{k}.json'))['results'][task]
        if multi[f'{task} ({k}-shot)']['acc,none'] != one['acc,none']: sys.exit(1)"
# The checkpoint resharded to tensor 2 x pipeline 2 (gathered on load): the same scores.
"$build/mtnlg-ckpt" convert "$tmp/ckpt" --output "$tmp/tp2pp2" --layout 2,2,1 >/dev/null 2>&1
for task in piqa lambada_openai; do
  a=$("$bin" --checkpoint "$tmp/ckpt" --tasks "$task" --task-dir "$tmp/tasks" --num-fewshot 2 \
    --threads 2 --log-samples "$tmp/l111-$task.jsonl" 2>/dev/null | sed 's/"seconds": [0-9.e-]*//')
  b=$("$bin" --checkpoint "$tmp/tp2pp2" --tasks "$task" --task-dir "$tmp/tasks" --num-fewshot 2 \
    --threads 2 --log-samples "$tmp/l221-$task.jsonl" 2>/dev/null | sed 's/"seconds": [0-9.e-]*//')
  check "$task from the checkpoint in layout (1,1,1) and (2,2,1): the same line ($a)" \
    bash -c "[ -n '$a' ] && [ '$a' = '$b' ] && cmp -s '$tmp/l111-$task.jsonl' '$tmp/l221-$task.jsonl'"
done

# --batch-size packs fewer or more requests to a forward: the same scores (float32 rounding).
for task in race wikitext; do
  "$bin" --hf-model "$tmp/hf/model.safetensors" --tasks "$task" --task-dir "$tmp/tasks" \
    --threads 2 --batch-size 1 --log-samples "$tmp/b1-$task.jsonl" >/dev/null 2>&1
  check "--batch-size 1: $task scores as the default batch" /usr/bin/python3 -c "
import json, sys
a = [json.loads(l) for l in open('$tmp/b1-$task.jsonl')]
b = [json.loads(l) for l in open('$tmp/samples-$task-0.jsonl')]
sys.exit(len(a) != len(b) or len(a) == 0 or any(
    x['context'] != y['context'] or x['greedy'] != y['greedy'] or
    abs(x['loglikelihood'] - y['loglikelihood']) > 1e-5 * max(1, abs(y['loglikelihood']))
    for x, y in zip(a, b)))"
done
"$bin" --hf-model "$tmp/hf/model.safetensors" --tasks lambada_openai --task-dir "$tmp/tasks" \
  --threads 2 --bootstrap-iters 0 --output "$tmp/noboot.json" >"$tmp/noboot.out" 2>/dev/null
check "--bootstrap-iters 0: no perplexity_stderr, N/A in the results" /usr/bin/python3 -c "
import json, sys
line = json.loads(open('$tmp/noboot.out').read())
r = json.load(open('$tmp/noboot.json'))['results']['lambada_openai']
sys.exit('perplexity_stderr' in line or r['perplexity_stderr,none'] != 'N/A')"
expect 2 "bootstrap iterations must be at least 2" -- --hf-model "$tmp/hf/model.safetensors" \
  --tasks lambada_openai --task-dir "$tmp/tasks" --bootstrap-iters 1
expect 2 "batch-size: Value 0 must be positive" -- --hf-model "$tmp/hf/model.safetensors" \
  --tasks piqa --task-dir "$tmp/tasks" --batch-size 0
expect 2 "unknown task 'race_x'" -- --hf-model "$tmp/hf/model.safetensors" --tasks race_x \
  --task-dir "$tmp/tasks"
printf '{"goal": "g", "sol1": "a", "label": 0}\n' >"$tmp/tasks/piqa/validation.jsonl"
expect 2 'piqa/validation.jsonl:1.*sol2' -- --hf-model "$tmp/hf/model.safetensors" --tasks piqa \
  --task-dir "$tmp/tasks"
expect 2 "needs --task-dir" -- --hf-model "$tmp/hf/model.safetensors" --tasks lambada_openai
mkdir -p "$tmp/part/lambada_standard"
cp "$tmp/tasks/lambada_standard/test.jsonl" "$tmp/part/lambada_standard/"
expect 4 "lambada_standard/validation.jsonl: export the harness" -- \
  --hf-model "$tmp/hf/model.safetensors" --tasks lambada_standard --task-dir "$tmp/part" \
  --num-fewshot 1
printf '{"text": "fine here"}\n{"body": "x"}\n' >"$tmp/tasks/lambada_openai/test.jsonl"
expect 2 "lambada_openai/test.jsonl:2" -- --hf-model "$tmp/hf/model.safetensors" \
  --tasks lambada_openai --task-dir "$tmp/tasks"
expect 2 "goes with --tasks" -- --hf-model "$tmp/hf/model.safetensors" --num-fewshot 2 --data x
echo "eval_tasks: $passes passed, $failures failed"
[ "$failures" = 0 ]
