#!/usr/bin/env bash
# mtnlg-curate extract against jusText's algorithm on lxml (tests/reference/curate_reference.py
# justext_paragraphs: decode_html, lxml.html.fromstring, lxml's Cleaner, lxml.sax, classify,
# revise) on Debian's HTML documentation (libffi8's manual, base-passwd's), as files and as a
# generated WARC (.warc.gz, a gzip member a record; charsets in headers and <meta>, Latin-1
# bytes, a 404, an image, a WET conversion record); truncated and mis-sized WARCs named.
# Usage: tests/curate/extract_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"

mapfile -t pages < <(ls /usr/share/doc/libffi8/html/*.html /usr/share/doc/base-passwd/*.html 2>/dev/null)
((${#pages[@]} >= 10)) || { echo "FAIL: Debian's HTML documentation (libffi8, base-passwd) is missing"; exit 1; }
# A stop-word list both sides read.
printf '%s\n' the a an of and to in is it that was for on with as by at be this are from or have \
  not but which you your can will if when its into than then there these they their also may \
  each other more most some such only so no do does how all any use used using >stop.txt

"$curate" extract --input "${pages[@]}" --output ours.jsonl --stoplist stop.txt --threads 2 \
  --report rep.json --log-level warn
$py "$ref" extract stop.txt ref.jsonl "${pages[@]}"
check "the HTML files give jusText's good paragraphs (lxml reference), record for record" $py -c "
import json
a = [json.loads(l) for l in open('ours.jsonl')]; b = [json.loads(l) for l in open('ref.jsonl')]
print(len(a), 'documents')
raise SystemExit(0 if a == b and len(a) >= 8 else 1)"

# With no --stoplist: jusText's English list, compiled in, equals the reference reading the
# shipped stoplists/English.txt as jusText's get_stoplist reads its own.
"$curate" extract --input "${pages[@]}" --output default.jsonl --threads 2 --log-level warn
$py "$ref" extract "$src/data/curate/stoplists/English.txt" ref_en.jsonl "${pages[@]}"
check "no --stoplist: jusText's English list gives the reference's records" $py -c "
import json
a = [json.loads(l) for l in open('default.jsonl')]; b = [json.loads(l) for l in open('ref_en.jsonl')]
print(len(a), 'documents')
raise SystemExit(0 if a == b and len(a) >= 8 else 1)"
check "jusText's list keeps other paragraphs than the test's short list" \
  $py -c "raise SystemExit(0 if open('default.jsonl').read() != open('ours.jsonl').read() else 1)"
printf 'the\nof\xff\n' >badstop.txt
expect 4 "badstop.txt.*not valid UTF-8" -- extract --input "${pages[0]}" --output x.jsonl --stoplist badstop.txt
printf '\n\n' >emptystop.txt
expect 2 "emptystop.txt.*holds no word" -- extract --input "${pages[0]}" --output x.jsonl --stoplist emptystop.txt

# The same pages in a WARC, with the cases of the web.
$py - "$ref" "${pages[@]}" <<'PY'
import gzip, json, sys, uuid
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
import curate_reference as c
stop = {w.strip() for w in open("stop.txt") if w.strip()}
pages = sys.argv[2:]
records, want = [], []
def record(kind, uri, block, extra=b""):
    head = (b"WARC/1.0\r\nWARC-Type: " + kind + b"\r\nWARC-Target-URI: " + uri.encode() +
            b"\r\nWARC-Date: 2026-11-27T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:" +
            str(uuid.UUID(int=len(records))).encode() + b">\r\n" + extra +
            b"Content-Length: " + str(len(block)).encode() + b"\r\n\r\n")
    records.append(head + block + b"\r\n\r\n")
for i, p in enumerate(pages):
    html = open(p, "rb").read()
    uri = "https://example.org/%d" % i
    if i % 3 == 0:   # the charset in the HTTP header
        http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html
        charset = "utf-8"
    elif i % 3 == 1:  # Latin-1 bytes, declared in a <meta> tag, no header charset
        body = html.decode("utf-8").encode("latin-1", "replace")
        body = body.replace(b"<head>", b'<head><meta charset="iso-8859-1">', 1)
        http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
        html, charset = body, None
    else:            # no Content-Type at all
        http = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n" + html
        charset = None
    record(b"response", uri, http, b"Content-Type: application/http; msgtype=response\r\n")
    good = [t for t, k in c.justext_paragraphs(html, stop, charset) if k == "good"]
    if good:
        want.append({"text": "\n".join(good), "url": uri, "date": "2026-11-27T00:00:00Z",
                     "warc_record_id": "<urn:uuid:%s>" % uuid.UUID(int=len(records) - 1)})
    if i == 1:
        record(b"request", uri, b"GET / HTTP/1.1\r\n\r\n")
        record(b"response", uri + "/missing", b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\n<p>gone</p>")
        record(b"response", uri + "/logo.png", b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n\x89PNG")
        record(b"conversion", uri + "/plain", "Plain text of a WET record, passed through: é.".encode())
        want.append({"text": "Plain text of a WET record, passed through: é.", "url": uri + "/plain",
                     "date": "2026-11-27T00:00:00Z", "warc_record_id": "<urn:uuid:%s>" % uuid.UUID(int=len(records) - 1)})
with open("crawl.warc.gz", "wb") as f:
    for r in records:
        f.write(gzip.compress(r))
with open("crawl.warc", "wb") as f:
    f.write(b"".join(records))
bad = bytearray(b"".join(records))
at = bad.index(b"Content-Length: ") + len(b"Content-Length: ")
bad[at] = ord("9") if bad[at] != ord("9") else ord("8")  # a wrong length
with open("badlen.warc", "wb") as f:
    f.write(bytes(bad))
with open("want.jsonl", "w", encoding="utf-8") as f:
    for w in want:
        f.write(json.dumps(w, ensure_ascii=False) + "\n")
PY
"$curate" extract --input crawl.warc.gz --output warc.jsonl.zst --stoplist stop.txt \
  --report warc.json --log-level warn
"$curate" extract --input crawl.warc --output plain.jsonl --stoplist stop.txt --threads 1 --log-level warn
check "the WARC's responses give the reference's records; WET passes; 404, image, request skipped" \
  $py - <<'PY'
import json, sys, zstandard
got = [json.loads(l) for l in zstandard.ZstdDecompressor().stream_reader(open("warc.jsonl.zst", "rb")).read().decode().splitlines()]
want = [json.loads(l) for l in open("want.jsonl", encoding="utf-8")]
rep = json.load(open("warc.json"))
print(len(got), "documents;", rep["skipped"], rep["warc_records"])
ok = got == want and rep["skipped"].get("HTTP status not 200") == 1 and rep["skipped"].get("not HTML") == 1
ok &= rep["warc_records"].get("request") == 1 and rep["warc_records"].get("conversion") == 1
sys.exit(0 if ok else 1)
PY
check "plain and gzip WARCs, 1 and 2 threads: the same records" $py -c "
import json, zstandard
a = zstandard.ZstdDecompressor().stream_reader(open('warc.jsonl.zst', 'rb')).read().decode()
raise SystemExit(0 if a == open('plain.jsonl', encoding='utf-8').read() else 1)"

head -c 3000 crawl.warc.gz >cut.warc.gz
expect 4 "cut.warc.gz.*(truncated|ends inside)" -- extract --input cut.warc.gz --output x.jsonl
expect 4 "badlen.warc: record 2.*Content-Length is wrong" -- extract --input badlen.warc --output x.jsonl
expect 2 "extract reads .warc" -- extract --input stop.txt --output x.jsonl
expect 4 "missing.warc" -- extract --input missing.warc --output x.jsonl
check "nothing is left under the output's name after an error" [ ! -e x.jsonl ]

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
