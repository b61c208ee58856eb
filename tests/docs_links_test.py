#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves: the file exists and, for a link to a
Markdown heading (FILE.md#anchor or #anchor), the heading does, by GitHub's anchor rule (lower
case; punctuation but '-' and '_' dropped; spaces to '-'; a repeated heading gets -1, -2, ...).
Links inside code blocks and inline code are not links. Usage: docs_links_test.py SOURCE_DIR"""
import os
import re
import sys

root = sys.argv[1]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def strip_code(text):
    out, code = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            code = not code
            out.append("")
            continue
        out.append("" if code else re.sub(r"`[^`]*`", "``", line))
    return out


def anchors(path):
    seen, found, code = {}, set(), False
    for line in open(path, encoding="utf-8").read().split("\n"):
        if line.lstrip().startswith("```"):
            code = not code
            continue
        m = None if code else re.match(r"^#{1,6} (.*)$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        found.add(s if n == 0 else f"{s}-{n}")
    return found


files = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
bad, checked = [], 0
cache = {}
for f in files:
    for n, line in enumerate(strip_code(open(f, encoding="utf-8").read()), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            where = f"{os.path.relpath(f, root)}:{n}: {target}"
            if not os.path.exists(dest):
                bad.append(f"{where}: no such file")
                continue
            if anchor and dest.endswith(".md"):
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    bad.append(f"{where}: no heading with that anchor in {os.path.relpath(dest, root)}")
for b in bad:
    print("FAIL:", b)
print(f"docs_links_test: {checked} links in {len(files)} files, {len(bad)} broken")
sys.exit(1 if bad or checked == 0 else 0)
