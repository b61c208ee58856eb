# Sourced by the tests that train one recipe under several parallel layouts and compare the
# metrics (dp/tp/pp/tp_pp/init_from_train_test.sh).
#   layout_setup BUILD_DIR SOURCE_DIR [VOCAB]
#       sets bin, src and tmp (removed at exit), enters SOURCE_DIR, writes the tiny corpus
#       $tmp/corpus (tokens < VOCAB, default 512)
#   run_layout NAME NP [mtnlg-train args ...]
#       trains configs/tiny.yaml on that corpus with metrics in $tmp/NAME/metrics.jsonl (logging
#       at $log_level, default warn): one
#       process when NP is 1, else NP ranks under mpirun (srun when launcher=srun;
#       scripts/launch.sh, the environment launch without PMIx, when launcher=env)
layout_setup() {
  bin=$1/mtnlg-train
  src=$2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  cd "$src"
  /usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/corpus" 400 "${3:-512}"
}

run_layout() {
  local name=$1 np=$2
  shift 2
  local args=(--config configs/tiny.yaml --threads 1 --log-level "${log_level:-warn}"
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" "$@")
  if [[ $np == 1 ]]; then
    "$bin" "${args[@]}"
    return
  fi
  local launch=(mpirun --oversubscribe --allow-run-as-root -np "$np")
  [[ ${launcher:-mpirun} == srun ]] &&
    launch=(srun --mpi=pmix --kill-on-bad-exit=1 --time=5 -n "$np")
  [[ ${launcher:-mpirun} == env ]] && launch=("$src/scripts/launch.sh" -n "$np" --)
  "${launch[@]}" "$bin" "${args[@]}"
}
