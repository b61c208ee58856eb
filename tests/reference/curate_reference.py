#!/usr/bin/env python3
"""Independent Python references for mtnlg-curate's tests (written from the published
definitions, not from our C++):

  normalize(text)      NFC, str.lower(), whitespace runs (str.isspace) to one space, strip
  shingles(text)       distinct character 5-grams of normalize(text) (the whole text if shorter)
  DatasketchMinHash    datasketch's MinHash: sha1_hash32 and ((a*h + b) mod 2^64) mod (2^61-1)
                       & 0xFFFFFFFF in numpy uint64, (a, b) from RandomState(seed).randint as
                       datasketch draws them, update_batch over the UTF-8 shingles

Command line:
  curate_reference.py extract STOPLIST OUT.jsonl FILE.html...
      jusText's good paragraphs of each HTML file (lxml), a record per file that has any
  curate_reference.py decontaminate IN.jsonl OUT.jsonl TASK=FILE...
      filter_ngrams.py's output records for IN with the task files' n-grams
  curate_reference.py dedup NAME=FILE,... PRIORITY THRESHOLD NUM_PERM SEED BANDS ROWS OUT.json
      the groups (members as [input index, line]) and the kept documents of every input
  curate_reference.py lsh-params THRESHOLD NUM_PERM
      datasketch's _optimal_param(THRESHOLD, NUM_PERM, 0.5, 0.5), integrals exact
  curate_reference.py minhash IN.jsonl OUT.npy NUM_PERM SEED [TEXT_KEY]
      the datasketch signatures of every record (blank lines skipped), as numpy writes them
"""
import gzip
import re
import hashlib
import json
import struct
import sys
import unicodedata

import numpy as np

MERSENNE = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64((1 << 32) - 1)


def normalize(text):
    return " ".join(unicodedata.normalize("NFC", text).lower().split())


def shingles(text, n=5):
    t = normalize(text)
    if len(t) < n:
        return {t}
    return {t[i:i + n] for i in range(len(t) - n + 1)}


def sha1_hash32(data):
    return struct.unpack("<I", hashlib.sha1(data).digest()[:4])[0]


class DatasketchMinHash:
    def __init__(self, num_perm=128, seed=1):
        gen = np.random.RandomState(seed)
        self.a, self.b = np.array(
            [(gen.randint(1, MERSENNE, dtype=np.uint64), gen.randint(0, MERSENNE, dtype=np.uint64))
             for _ in range(num_perm)], dtype=np.uint64).T
        self.hashvalues = np.ones(num_perm, dtype=np.uint64) * MAX_HASH

    def update_batch(self, items):
        hv = np.array([sha1_hash32(x) for x in items], dtype=np.uint64).reshape(-1, 1)
        if hv.size == 0:
            return
        with np.errstate(over="ignore"):
            phv = ((hv * self.a + self.b) % MERSENNE) & MAX_HASH
        self.hashvalues = np.minimum(self.hashvalues, phv.min(axis=0))


def optimal_param_exact(threshold, num_perm, fp_weight=0.5, fn_weight=0.5):
    """datasketch's _optimal_param with the integrals in exact rational arithmetic (the
    integrands are polynomials): the (b, r) scipy's quad picks, barring near-ties below its
    tolerance."""
    from fractions import Fraction
    from math import comb
    t = Fraction(threshold)
    best, opt = None, (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            # (1 - s^r)^b = sum_k C(b, k) (-1)^k s^(rk); its integral from x to y
            def miss(x, y):
                return sum(comb(b, k) * (-1) ** k * (y ** (r * k + 1) - x ** (r * k + 1)) /
                           (r * k + 1) for k in range(b + 1))
            fp = t - miss(Fraction(0), t)
            fn = miss(t, Fraction(1))
            err = fp * Fraction(fp_weight) + fn * Fraction(fn_weight)
            if best is None or err < best:
                best, opt = err, (b, r)
    return opt


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if path.endswith(".zst"):
        import io
        import zstandard
        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")),
                                encoding="utf-8")
    return open(path, encoding="utf-8")


def signatures(path, num_perm, seed, key="text"):
    rows = []
    with open_text(path) as f:
        for line in f:
            if not line.strip():
                continue
            m = DatasketchMinHash(num_perm, seed)
            m.update_batch([s.encode("utf-8") for s in sorted(shingles(json.loads(line)[key]))])
            rows.append(m.hashvalues.astype(np.uint32))
    return np.array(rows, dtype=np.uint32).reshape(-1, num_perm)


def dedup(inputs, priority, threshold, num_perm, seed, bands, rows, key="text"):
    """The paper's fuzzy dedup, written plainly: every document's datasketch MinHash, LSH
    buckets of bands x rows (datasketch's hashranges), every pair sharing a bucket verified by
    the exact Jaccard of the shingle sets, components of the pairs at or above the threshold,
    each keeping the document of the dataset first in `priority`, then input position, then
    line. inputs: [(dataset, file)]. Returns (kept: {(input index, line)}, groups: sorted list of
    sorted member tuples (input index, line))."""
    docs, sets, sigs = [], [], []
    for f, (name, path) in enumerate(inputs):
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                sh = shingles(json.loads(line)[key])
                m = DatasketchMinHash(num_perm, seed)
                m.update_batch([s.encode("utf-8") for s in sh])
                docs.append((priority.index(name), f, lineno))
                sets.append(sh)
                sigs.append(m.hashvalues)
    buckets = {}
    for d, sig in enumerate(sigs):
        for b in range(bands):
            buckets.setdefault((b, tuple(sig[b * rows:(b + 1) * rows])), []).append(d)
    parent = list(range(len(docs)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    seen = set()
    for members in buckets.values():
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                a, b = members[i], members[j]
                if (a, b) in seen:
                    continue
                seen.add((a, b))
                inter = len(sets[a] & sets[b])
                if inter / (len(sets[a]) + len(sets[b]) - inter) >= threshold:
                    parent[find(a)] = find(b)
    comps = {}
    for d in range(len(docs)):
        comps.setdefault(find(d), []).append(d)
    kept, groups = set(), []
    for members in comps.values():
        best = min(members, key=lambda d: docs[d])
        kept.add(docs[best][1:])
        if len(members) > 1:
            groups.append(tuple(sorted(docs[d][1:] for d in members)))
    return kept, sorted(groups)


TASK_FIELDS = {"lambada": ["text"], "piqa": ["goal"], "squad": ["question"],
               "triviaqa": ["question"], "webqa": ["question"], "race": ["question"],
               "drop": ["question"], "boolq": ["question", "passage"], "hellaswag": ["ctx"],
               "winogrande": ["sentence"], "anli": ["premise", "hypothesis"],
               "hans": ["premise", "hypothesis"], "wic": ["sentence1", "sentence2"],
               # filter_ngrams.py's line["question"]["text"] and line["questions"]
               "natural_questions": ["question.text"], "coqa": ["questions[]"]}


def task_texts(rec, field):
    """The texts of one TASK_FIELDS entry in a record, as filter_ngrams.py reads them."""
    if field.endswith("[]"):
        value = rec.get(field[:-2])
        return [q for q in value if isinstance(q, str)] if isinstance(value, list) and all(
            isinstance(q, str) for q in value) else []
    if "." in field:
        outer, inner = field.split(".", 1)
        value = rec.get(outer)
        return [value[inner]] if isinstance(value, dict) and isinstance(value.get(inner), str) else []
    return [rec[field]] if isinstance(rec.get(field), str) else []


def decontaminate(input_path, task_files, key="text", max_n=13, min_n=8, char_len=200,
                  key_threshold=10, splits_count=10, each_side=200):
    """filter_ngrams.py's algorithm with its defaults, in Python's own strings, dicts and re, step
    by step as the script takes them (task n-grams; pass 1 counting documents per n-gram; pass 2
    cutting with the n-grams below the threshold). Returns the output records (dicts)."""
    import re

    def get_words(text):
        words, positions = [], []
        for m in re.finditer(r"\w+", text.lower()):
            words.append(m.group(0))
            positions.append(m.start())
        return words, positions

    ngrams = {}
    for task, path in task_files:
        for line in open_text(path):
            if not line.strip():
                continue
            rec = json.loads(line)
            for text in (t for field in TASK_FIELDS[task] for t in task_texts(rec, field)):
                words, _ = get_words(text)
                if len(words) < min_n:
                    continue
                if len(words) < max_n:
                    ngrams.setdefault(" ".join(words), 0)
                for i in range(len(words) - max_n + 1):
                    ngrams.setdefault(" ".join(words[i:i + max_n]), 0)

    def lengths(d):
        return sorted({len(k.split()) for k in d})

    def scan(text0, grams, lens, counting):
        buf, pieces, local = [text0], [], set()
        while buf:
            text = buf.pop(0)
            words, positions = get_words(text)

            def hit(ws, start):
                seq = " ".join(ws)
                if seq not in grams:
                    return False
                if counting:
                    local.add(seq)
                    if start + len(seq) + 1 < len(text):
                        buf.append(text[start + len(seq) + 1:])
                    return True
                pos, first = start - each_side, ""
                while pos > 0 and text[pos] not in ".!?":
                    pos -= 1
                if pos > 0:
                    first = text[0:pos + 1]
                pos, second = start + len(seq) + each_side, ""
                while pos < len(text) and text[pos] not in ".!?":
                    pos += 1
                if pos + 1 < len(text):
                    second = text[pos + 1:]
                if len(first) > char_len:
                    pieces.append(first)
                if len(second) > char_len:
                    buf.append(second)
                return True

            free = True
            for i in range(len(words) - max_n + 1):
                if hit(words[i:i + max_n], positions[i]):
                    free = False
                    break
                for n in lens:
                    if hit(words[i:i + n], positions[i]):
                        free = False
                        break
                if not free:
                    break
            if free and len(words) - max_n > 0:
                last = len(words) - max_n
                for n in lens:
                    if n == max_n:
                        continue
                    for i in range(max_n - n + 1):
                        if hit(words[last + i:last + i + n], positions[last + i]):
                            free = False
                            break
                    if not free:
                        break
            if free and not counting:
                pieces.append(text)
        return pieces, local

    records = [(n, json.loads(l)) for n, l in enumerate(open_text(input_path), 1) if l.strip()]
    lens = lengths(ngrams)
    for _, rec in records:
        for seq in scan(rec[key], ngrams, lens, True)[1]:
            ngrams[seq] += 1
    below = {k: 1 for k, v in ngrams.items() if v < key_threshold}
    lens = lengths(below)
    prefix = "-".join(t for t, _ in task_files)
    out = []
    for n, rec in records:
        pieces = scan(rec[key], below, lens, False)[0]
        if len(pieces) > splits_count:
            continue
        for i, p in enumerate(pieces):
            r = dict(rec)
            r[key] = p
            r["split_id"] = (rec["split_id"] + "-" if "split_id" in rec else "") + \
                prefix + "-{:010d}".format(n) + "-{:04d}".format(i)
            out.append(r)
    return out


def justext_paragraphs(html, stoplist, charset=None, length_low=70, length_high=200,
                       stopwords_low=0.30, stopwords_high=0.32, max_link_density=0.2,
                       max_heading_distance=200):
    """jusText 3.0's algorithm on lxml, as its core.py takes it: decode_html, lxml.html.fromstring,
    the Cleaner with its options, ParagraphMaker through lxml.sax.saxify, classify_paragraphs,
    revise_paragraph_classification. Returns [(text, class_type)]."""
    import lxml.html
    import lxml.sax
    from lxml.html.clean import Cleaner
    from xml.sax.handler import ContentHandler

    def normalize_whitespace(s):
        return re.sub(r"\s+", " ", s)

    text = None
    if charset:
        try:
            text = html.decode(charset, "replace")
        except LookupError:
            pass
    if text is None:
        m = re.search(rb"""<meta[^>]+charset=["']?([^'"/>\s]+)""", html, re.IGNORECASE)
        if m:
            try:
                text = html.decode(m.group(1).decode("ascii"), "replace")
            except LookupError:
                pass
    if text is None:
        try:
            text = html.decode("utf8")
        except UnicodeDecodeError:
            text = html.decode("utf8", "replace")
    if not text:
        return []
    dom = lxml.html.fromstring(text, parser=lxml.html.HTMLParser())
    dom = Cleaner(processing_instructions=False, remove_unknown_tags=False, safe_attrs_only=False,
                  page_structure=False, annoying_tags=False, frames=False, meta=False,
                  links=False, javascript=False, scripts=True, comments=True, style=True,
                  embedded=True, forms=True, kill_tags=("head",)).clean_html(dom)
    tags = {"body", "blockquote", "caption", "center", "col", "colgroup", "dd", "div", "dl", "dt",
            "fieldset", "form", "legend", "optgroup", "option", "p", "pre", "table", "td",
            "textarea", "tfoot", "th", "thead", "tr", "ul", "li", "h1", "h2", "h3", "h4", "h5",
            "h6"}

    class Maker(ContentHandler):
        def __init__(self):
            self.path, self.paragraphs, self.link, self.br = [], [], False, False
            self.new()

        def new(self):
            if getattr(self, "cur", None) and self.cur["nodes"]:
                self.paragraphs.append(self.cur)
            self.cur = {"path": ".".join(self.path), "nodes": [], "links": 0}

        def startElementNS(self, name, qname, attrs):
            name = name[1]
            self.path.append(name)
            if name in tags or (name == "br" and self.br):
                self.new()
            else:
                self.br = name == "br"
                if name == "a":
                    self.link = True

        def endElementNS(self, name, qname):
            name = name[1]
            self.path.pop()
            if name in tags:
                self.new()
            if name == "a":
                self.link = False

        def endDocument(self):
            self.new()

        def characters(self, content):
            if not content.lstrip():
                return
            t = normalize_whitespace(content)
            self.cur["nodes"].append(t)
            if self.link:
                self.cur["links"] += len(t)
            self.br = False

    maker = Maker()
    lxml.sax.saxify(dom, maker)
    paras = []
    for p in maker.paragraphs:
        t = normalize_whitespace("".join(p["nodes"]).strip())
        words = t.split()
        stop = sum(w.lower() in stoplist for w in words)
        sd = stop / len(words) if words else 0
        ld = p["links"] / len(t) if t else 0
        heading = bool(re.search(r"\bh\d\b", p["path"]))
        if ld > max_link_density:
            c = "bad"
        elif "\xa9" in t or "&copy" in t:
            c = "bad"
        elif re.search(r"^select|\.select", p["path"]):
            c = "bad"
        elif len(t) < length_low:
            c = "bad" if p["links"] > 0 else "short"
        elif sd >= stopwords_high:
            c = "good" if len(t) > length_high else "neargood"
        elif sd >= stopwords_low:
            c = "neargood"
        else:
            c = "bad"
        paras.append({"text": t, "cf": c, "cls": c, "heading": heading})

    def neighbour(i, ignore_neargood, inc, boundary):
        while i + inc != boundary:
            i += inc
            c = paras[i]["cls"]
            if c in ("good", "bad"):
                return c
            if c == "neargood" and not ignore_neargood:
                return c
        return "bad"

    n = len(paras)
    for i, p in enumerate(paras):
        if not (p["heading"] and p["cls"] == "short"):
            continue
        j, dist = i + 1, 0
        while j < n and dist <= max_heading_distance:
            if paras[j]["cls"] == "good":
                p["cls"] = "neargood"
                break
            dist += len(paras[j]["text"])
            j += 1
    new = {}
    for i, p in enumerate(paras):
        if p["cls"] != "short":
            continue
        a, b = neighbour(i, True, -1, -1), neighbour(i, True, 1, n)
        if {a, b} == {"good"}:
            new[i] = "good"
        elif {a, b} == {"bad"}:
            new[i] = "bad"
        elif (a == "bad" and neighbour(i, False, -1, -1) == "neargood") or \
                (b == "bad" and neighbour(i, False, 1, n) == "neargood"):
            new[i] = "good"
        else:
            new[i] = "bad"
    for i, c in new.items():
        paras[i]["cls"] = c
    for i, p in enumerate(paras):
        if p["cls"] != "neargood":
            continue
        a, b = neighbour(i, True, -1, -1), neighbour(i, True, 1, n)
        p["cls"] = "bad" if (a, b) == ("bad", "bad") else "good"
    for i, p in enumerate(paras):
        if not (p["heading"] and p["cls"] == "bad" and p["cf"] != "bad"):
            continue
        j, dist = i + 1, 0
        while j < n and dist <= max_heading_distance:
            if paras[j]["cls"] == "good":
                p["cls"] = "good"
                break
            dist += len(paras[j]["text"])
            j += 1
    return [(p["text"], p["cls"]) for p in paras]


def main(argv):
    if argv and argv[0] == "lsh-params" and len(argv) == 3:
        print(*optimal_param_exact(float(argv[1]), int(argv[2])))
        return 0
    if argv and argv[0] == "dedup" and len(argv) == 9:
        # dedup INPUTS PRIORITY THRESHOLD NUM_PERM SEED BANDS ROWS OUT.json
        # INPUTS: NAME=FILE,NAME=FILE...; OUT: {"groups": [[[input, line], ...], ...], "kept": [...]}
        inputs = [tuple(x.split("=", 1)) for x in argv[1].split(",")]
        kept, groups = dedup(inputs, argv[2].split(","), float(argv[3]), int(argv[4]),
                             int(argv[5]), int(argv[6]), int(argv[7]))
        with open(argv[8], "w") as f:
            json.dump({"groups": [[list(m) for m in g] for g in groups],
                       "kept": sorted(list(k) for k in kept)}, f)
        return 0
    if argv and argv[0] == "decontaminate" and len(argv) >= 4:
        # decontaminate IN.jsonl OUT.jsonl TASK=FILE...
        with open(argv[2], "w", encoding="utf-8") as f:
            for r in decontaminate(argv[1], [tuple(x.split("=", 1)) for x in argv[3:]]):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        return 0
    if argv and argv[0] == "extract" and len(argv) >= 4:
        # extract STOPLIST OUT.jsonl FILE.html...: {"text", "url"} per file with good paragraphs
        # as jusText's get_stoplist reads its lists
        stop = frozenset(w.decode("utf8").lower() for w in open(argv[1], "rb").read().splitlines())
        with open(argv[2], "w", encoding="utf-8") as f:
            for path in argv[3:]:
                good = [t for t, c in justext_paragraphs(open(path, "rb").read(), stop) if c == "good"]
                if good:
                    f.write(json.dumps({"text": "\n".join(good), "url": path}, ensure_ascii=False) + "\n")
        return 0
    if argv and argv[0] == "minhash" and len(argv) in (5, 6):
        path, out, num_perm, seed = argv[1], argv[2], int(argv[3]), int(argv[4])
        key = argv[5] if len(argv) == 6 else "text"
        np.save(out, signatures(path, num_perm, seed, key))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
