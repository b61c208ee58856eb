#!/usr/bin/env python3
"""Writes the small task files the evaluation tests score: DIR/TASK/SPLIT.jsonl for every task
mtnlg-eval --tasks knows, in the datasets' own fields (LAMBADA from Genesis verses, the
multiple-choice tasks from phrases of its words, WikiText pages in its tokens).
Usage: make_task_files.py DIR"""
import json, os, sys
verses = [
    "And God said, Let there be light: and there was light",
    "And God saw the light, that it was good: and God divided the light from the darkness",
    "And God called the light Day, and the darkness he called Night",
    "And the evening and the morning were the first day",
    "In the beginning God created the heaven and the earth",
    "And the earth was without form, and void; and darkness was upon the face of the deep",
    "And the Spirit of God moved upon the face of the waters",
    "And God made the firmament, and divided the waters which were under the firmament",
    "And God called the firmament Heaven",  # short: few tokens of context
    "Amen",  # one word: an empty context, the end-of-text token in its place
]
def write(task, split, texts):
    os.makedirs(os.path.join(sys.argv[1], task), exist_ok=True)
    with open(os.path.join(sys.argv[1], task, split + ".jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
write("lambada_openai", "test", verses + [verses[1]])  # a duplicate: removed with its twin
write("lambada_standard", "test", verses[:6])
write("lambada_standard", "validation", verses[6:])

def records(task, split, recs):
    os.makedirs(os.path.join(sys.argv[1], task), exist_ok=True)
    with open(os.path.join(sys.argv[1], task, split + ".jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
words = " ".join(verses).replace(",", "").replace(":", "").replace(";", "").split()
def phrase(i, n):
    return " ".join(words[(i * 7 + k) % len(words)] for k in range(n))
for split, count in (("validation", 6), ("train", 4)):
    records("piqa", split, [{"goal": phrase(i, 6) + "?", "sol1": phrase(i + 1, 4) + ".",
                             "sol2": phrase(i + 2, 9) + ".", "label": i % 2} for i in range(count)])
    records("boolq", split, [{"question": phrase(i, 5), "passage": phrase(i + 3, 12) + ".",
                              "idx": i, "label": (i + 1) % 2} for i in range(count)])
    records("wic", split, [{"word": "w", "sentence1": phrase(i, 6) + ".", "sentence2": phrase(i + 4, 5) + ".",
                            "start1": 4, "end1": 9, "label": i % 2} for i in range(count)])
    records("hellaswag", split, [{"activity_label": phrase(i, 2), "ctx_a": phrase(i + 1, 8) + " [title] x.",
                                  "ctx_b": phrase(i + 5, 3).upper(),
                                  "endings": [phrase(i + k, 3 + k) + "." for k in range(4)],
                                  "label": str(i % 4)} for i in range(count)])
    records("winogrande", split, [{"sentence": phrase(i, 5) + " _ " + phrase(i + 3, 6) + ".",
                                   "option1": phrase(i + 1, 1), "option2": phrase(i + 6, 2),
                                   "answer": str(1 + i % 2)} for i in range(count)])
    records("hans", split, [{"premise": phrase(i, 9) + ".", "hypothesis": phrase(i + 1, 5) + ".",
                             "label": i % 2, "heuristic": "lexical_overlap"} for i in range(count)])
race = []
for i in range(7):
    probs = [{"answer": "ABCD"[(i + k) % 4], "question": phrase(i + k, 5) + ("  _  ." if k % 2 else "?"),
              "options": [phrase(i + k + m, 2 + m) for m in range(4)]} for k in range(1 + i % 3)]
    race.append({"example_id": f"high{i}", "article": phrase(i, 14) + ".", "problems": repr(probs)})
records("race", "test", race + [race[2]])  # a duplicate: removed with its twin from the examples
# WikiText pages in its tokens; the model's window is 32 positions (tiny.yaml), so a page takes
# several rolling windows.
records("wikitext", "test", [{"page": " = " + phrase(i, 3) + " = \n " + " @-@ ".join(phrase(i + k, 9)
                              for k in range(2 + 3 * i)) + " . ( " + phrase(i, 2) + " ) \n"} for i in range(4)])
records("anli_r2", "test_r2", [{"uid": str(i), "premise": phrase(i, 10) + ".", "hypothesis": phrase(i + 2, 5),
                                "label": i % 3} for i in range(6)])
records("anli_r2", "train_r2", [{"uid": str(i), "premise": phrase(i + 9, 8) + ".", "hypothesis": phrase(i, 4),
                                 "label": (i + 1) % 3} for i in range(4)])
