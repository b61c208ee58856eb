#!/usr/bin/env bash
# End-to-end checks of the mtnlg-preprocess command line: --help, a small run of each input
# format, and the exit status, message and leftover files of each kind of bad input.
# Usage: tests/data/preprocess_cli_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
bin=$1/mtnlg-preprocess
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"

# check DESCRIPTION COMMAND...: a plain assertion.

cd "$src" || exit 1  # so that the default vocabulary paths (data/gpt2/...) resolve
for flag in --input --input-format --json-key --output-prefix --vocab-file --merge-file \
  --append-eod --workers --skip-bad-lines --log-interval; do
  expect 0 "$flag" -- --help
done

printf '{"text": "Hello world"}\n{"text": "caf\\u00e9 \\ud83d\\ude00"}\n' >"$tmp/ok.jsonl"
expect 0 'wrote .*: 2 documents, 9 tokens \(uint16\)' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/ok" --append-eod --workers 2
check "ok.bin holds 9 uint16 tokens" test "$(stat -c %s "$tmp/ok.bin")" -eq 18
check "ok.idx starts with MMIDIDX" test "$(head -c 7 "$tmp/ok.idx")" = MMIDIDX
# "Hello world" + EOD = 15496 995 50256, little endian.
check "ok.bin starts with Hello world EOD" test "$(od -An -tu2 -N6 "$tmp/ok.bin" | xargs)" = "15496 995 50256"

printf 'first document\nstill first\n\nsecond\n' >"$tmp/ok.txt"
expect 0 '2 documents' -- --input "$tmp/ok.txt" --input-format text --output-prefix "$tmp/txt"

printf '{"text": "fine"}\n{"text": 12}\n{"text": "fine"}\n' >"$tmp/bad.jsonl"
expect 2 'bad\.jsonl:2: .*not a string.*--skip-bad-lines' -- --input "$tmp/bad.jsonl" --output-prefix "$tmp/bad"
check "no output after a bad line" test -z "$(ls "$tmp" | grep '^bad\.\(bin\|idx\)')"
expect 0 'skipped 1 bad line' -- --input "$tmp/bad.jsonl" --output-prefix "$tmp/bad" --skip-bad-lines
check "output with --skip-bad-lines" test -s "$tmp/bad.idx"

expect 4 'nope\.jsonl' -- --input "$tmp/nope.jsonl" --output-prefix "$tmp/x"
expect 4 'encoder\.json' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/x" --vocab-file "$tmp/encoder.json"
expect 4 'output directory|no/such' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/no/such/x"
expect 2 'input is required' -- --output-prefix "$tmp/x"
# An empty merge file (byte-level tokens, another model), a directory as the prefix, absurd workers.
: >"$tmp/empty.bpe"
expect 4 'empty\.bpe\]: the merge file has no merges' -- --input "$tmp/ok.jsonl" \
  --output-prefix "$tmp/x" --merge-file "$tmp/empty.bpe"
mkdir -p "$tmp/outdir"
expect 2 "--output-prefix\]: '.*outdir/' names a directory" -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/outdir/"
check "no hidden outdir/.bin written" test ! -e "$tmp/outdir/.bin"
expect 2 '--workers: Value 100000 not in range 1 to 1024' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/x" --workers 100000
# FIFOs as the input or a tokenizer file are refused before open() could block.
mkfifo "$tmp/fifo.jsonl" "$tmp/fifo-encoder.json"
expect 4 'fifo\.jsonl\]: not a regular file \(it is a FIFO\)' -- --input "$tmp/fifo.jsonl" --output-prefix "$tmp/x"
expect 4 'fifo-encoder\.json\]: not a regular file \(it is a FIFO\)' -- --input "$tmp/ok.jsonl" \
  --output-prefix "$tmp/x" --vocab-file "$tmp/fifo-encoder.json"
expect 2 'jsonl or text' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/x" --input-format csv
expect 2 'workers' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/x" --workers 0
expect 3 'GPT2BPETokenizer' -- --input "$tmp/ok.jsonl" --output-prefix "$tmp/x" --tokenizer-type BertWordPieceLowerCase
# Megatron's flags: --json-keys names the outputs PREFIX_KEY_document (or _sentence), and the
# command Megatron's README gives runs unchanged.
printf '{"text": "A first. A second.", "title": "T"}\n' >"$tmp/keys.jsonl"
expect 0 "wrote .*mg_text_document.\{bin,idx\}, .*mg_title_document" -- --input "$tmp/keys.jsonl" \
  --output-prefix "$tmp/mg" --json-keys text title --dataset-impl mmap \
  --tokenizer-type GPT2BPETokenizer --append-eod --workers 1
check "PREFIX_text_document written" test -s "$tmp/mg_text_document.idx"
check "PREFIX_title_document written" test -s "$tmp/mg_title_document.bin"
expect 0 "wrote .*ss_text_sentence\\.\\{bin,idx\\}: 1 documents, .*, 2 sequences" -- --input "$tmp/keys.jsonl" \
  --output-prefix "$tmp/ss" --json-keys text --split-sentences --keep-newlines --log-interval 5
expect 3 'dataset-impl lazy is not supported.*mmap' -- --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --dataset-impl lazy
expect 2 'json-key.*excludes|excludes.*json-key' -- --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --json-key text --json-keys text
expect 2 'json-keys needs --input-format jsonl' -- --input "$tmp/keys.jsonl" --output-prefix "$tmp/x" --json-keys text --input-format text
check "no temporary files left" test -z "$(ls "$tmp" | grep tmp-)"

echo "preprocess cli: $passes passed, $failures failed"
exit $((failures > 0))
