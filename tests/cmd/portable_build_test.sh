#!/usr/bin/env bash
# The binaries are portable (CMakeLists.txt MTNLG_CPU_TARGET): our code holds no AVX-512
# instruction, mtnlg-train runs on an AVX2-only CPU (QEMU's user-mode emulation of Haswell), and
# there it trains the tiny recipe to the same losses and gradient norms, bit for bit, as on this
# CPU, in fp32 and bf16 (bf16 through the fp32 fallback where oneDNN has no bf16 matmul). Both
# runs pin the libraries' run-time dispatch to the same kernels (OPENBLAS_CORETYPE=Haswell,
# ONEDNN_MAX_CPU_ISA=AVX2), as two nodes of those CPUs would pick them; what is compared is
# therefore our code compiled once, on two CPUs.
# Usage: tests/cmd/portable_build_test.sh BUILD_DIR SOURCE_DIR CPU_TARGET
set -uo pipefail
build=$1
src=$2
target=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

if [[ $target != x86-64-v3 ]]; then
  echo "built with MTNLG_CPU_TARGET=$target: not the portable target, nothing to check"
  exit 77
fi
for tool in qemu-x86_64 objdump; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not found (scripts/setup.sh installs it)"; exit 1; }
done

# 1. No AVX-512 register (zmm) or mask (k0-k7) in our libraries and executables. A missing file, an
# empty glob or a file objdump cannot read is a failure, not a pass.
libs=("$build"/libmtnlg_*.a)
[[ ${#libs[@]} -ge 8 && -e ${libs[0]} ]] || fail "expected our layer libraries, found: ${libs[*]}"
for f in "${libs[@]}" "$build"/mtnlg-train "$build"/mtnlg-preprocess "$build"/mtnlg-ckpt \
  "$build"/mtnlg-data "$build"/mtnlg-eval "$build"/mtnlg-generate "$build"/mtnlg-recipe; do
  if [[ ! -f $f ]]; then
    fail "$f is missing"
    continue
  fi
  if ! dis=$(objdump -d --no-show-raw-insn "$f" 2>&1) || [[ $(wc -l <<<"$dis") -lt 100 ]]; then
    fail "objdump cannot disassemble $f: $(head -c 300 <<<"$dis")"
    continue
  fi
  n=$(grep -cE '%zmm[0-9]|%k[0-7]\b' <<<"$dis")
  if [[ $n -ne 0 ]]; then
    fail "$f holds $n AVX-512 instructions"
  else
    echo "ok: no AVX-512 in $(basename "$f")"
  fi
done

# 2. The same training on this CPU and on an emulated Haswell.
cd "$src" || exit 1
/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/corpus" 400 512
export OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2
haswell=(qemu-x86_64 -cpu Haswell)
for precision in fp32 bf16; do
  args=(--config configs/tiny.yaml --threads 1 --log-level warn
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.cache_dir=$tmp/cache"
    --set schedule.train_iters=3 --set logging.interval=1 --set eval.interval=0
    --set precision=$precision)
  "$build/mtnlg-train" "${args[@]}" --set "logging.metrics_file=$tmp/here-$precision.jsonl" ||
    fail "$precision: mtnlg-train failed on this CPU"
  # QEMU warns about CPUID bits it does not model; the run's own output is what matters.
  "${haswell[@]}" "$build/mtnlg-train" "${args[@]}" \
    --set "logging.metrics_file=$tmp/haswell-$precision.jsonl" 2> >(grep -v "TCG doesn't" >&2) ||
    fail "$precision: mtnlg-train failed on the emulated Haswell"
  if /usr/bin/python3 - "$tmp/here-$precision.jsonl" "$tmp/haswell-$precision.jsonl" <<'PY'
import json, sys
def rows(path):
    return [(r["iteration"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(path))
            if r.get("split") == "train"]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
print("\n".join(f"  iteration {x[0]}: loss {x[1]!r} / {y[1]!r}, grad norm {x[2]!r} / {y[2]!r}"
                for x, y in zip(a, b)))
sys.exit(0 if len(a) == 3 and a == b else 1)
PY
  then
    echo "ok: $precision losses and grad norms bit for bit the same on the emulated Haswell"
  else
    fail "$precision: the emulated Haswell trained to other numbers"
  fi
done

echo "$failures failed"
[[ $failures -eq 0 ]]
