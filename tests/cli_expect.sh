# Sourced by the command-line and script tests (tests/cmd/*.sh, tests/data/preprocess_cli_test.sh,
# tests/scripts/*.sh); expect runs $bin, the executable under test. Counts into $passes and $failures.
#   expect STATUS PATTERN -- ARGS...  runs "$bin" ARGS, checks the exit status and that the
#                                     output matches the extended regular expression PATTERN
#   check WHAT COMMAND...             passes when COMMAND succeeds
passes=0
failures=0

expect() {
  local want=$1 pattern=$2
  shift 3
  local out status name
  name=$(basename "$bin")
  # A bound: an input that blocks (a FIFO) must fail, not hang (124 is timeout's own status).
  out=$(timeout 60 "$bin" "$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $name $* -> status $status (want $want), output did not match /$pattern/:"
    echo "$out" | tail -20
    failures=$((failures + 1))
  else
    echo "ok: $name $*"
    passes=$((passes + 1))
  fi
}

check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok: $what"
    passes=$((passes + 1))
  else
    echo "FAIL: $what"
    failures=$((failures + 1))
  fi
}
