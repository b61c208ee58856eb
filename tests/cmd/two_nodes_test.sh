#!/usr/bin/env bash
# Two nodes on one machine: each "node" is a network namespace with its own address, joined to
# the others by a bridge (veth pairs), and its own /dev/shm (a private mount namespace per rank,
# the node's directory bound on /dev/shm). Ranks of one node then share memory and ranks of two
# nodes cannot, so MTNLG_TRANSPORT=auto must give groups within a node shared memory and groups
# across nodes our TCP over the bridge, and training must still match one process:
#   (2,2,1): tensor groups within a node (shm), pipeline groups across (tcp)
#   (2,1,2) with ZeRO-1: tensor within (shm), data across (tcp)
# mpirun's PMIx server listens on the bridge (PMIx's remote connections), as slurmd's would on a
# real node. Needs root, ip (iproute2) and unshare; exits 77 (skipped) without them.
# Usage: tests/cmd/two_nodes_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"

if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
  echo "two_nodes_test: needs root, ip and unshare; skipped" >&2
  exit 77
fi
id=$$
net=10.213.$((id % 250))
bridge=mtbr$id
nodes=(mtnlg-$id-a mtnlg-$id-b)
cleanup() {
  for n in 0 1; do ip netns del "${nodes[$n]}" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
  for n in 0 1; do ip link del "mth$id$n" 2>/dev/null || true; done
}
if ! ip netns add "${nodes[0]}" 2>/dev/null; then
  echo "two_nodes_test: cannot create network namespaces here; skipped" >&2
  exit 77
fi
layout_setup "$1" "$2"
trap 'cleanup; rm -rf "$tmp"' EXIT
ip netns add "${nodes[1]}"
ip link add "$bridge" type bridge
ip addr add "$net.254/24" dev "$bridge"
ip link set "$bridge" up
for n in 0 1; do
  ip link add "mth$id$n" type veth peer name "mtn$id$n"
  ip link set "mtn$id$n" netns "${nodes[$n]}"
  ip -n "${nodes[$n]}" link set "mtn$id$n" name mtnlg0
  ip -n "${nodes[$n]}" addr add "$net.$((n + 1))/24" dev mtnlg0
  ip -n "${nodes[$n]}" link set lo up
  ip -n "${nodes[$n]}" link set mtnlg0 up
  ip link set "mth$id$n" master "$bridge"
  ip link set "mth$id$n" up
  mkdir -p "$tmp/shm$n"
done

# Rank r runs on node r / 2, in the node's network namespace with the node's /dev/shm.
cat >"$tmp/on_node.sh" <<EOF
#!/usr/bin/env bash
r=\${OMPI_COMM_WORLD_RANK:?run under mpirun}
n=\$((r / 2))
nodes=(${nodes[*]})
exec ip netns exec "\${nodes[\$n]}" unshare --mount sh -c 'mount --bind "\$0" /dev/shm && exec "\$@"' \\
  "$tmp/shm\$n" "\$@"
EOF
chmod +x "$tmp/on_node.sh"
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=$bridge
export MTNLG_GLOO_IFACE=mtnlg0
on_nodes=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np 4 -x MTNLG_GLOO_IFACE
  "$tmp/on_node.sh")

# Every collective, small and single-copy sizes, on the world group (spans both nodes: TCP).
"${on_nodes[@]}" "$1/tests/mtnlg-comm-check" --transport auto --timeout-s 20 | tee "$tmp/check.log"
[[ $(grep -c "OK .*global ranks \[0, 1, 2, 3\], TCP)" "$tmp/check.log") == 4 ]]

train() {  # NAME TP PP [--set ...]
  local name=$1 tp=$2 pp=$3
  shift 3
  local args=(--config configs/tiny.yaml --threads 1 --log-level info
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" --set "data.split=[9,1,0]"
    --set eval.interval=10 --set eval.iters=1 --set schedule.train_iters=20
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 --set model.num_layers=2
    --set parallel.tensor="$tp" --set parallel.pipeline="$pp" "$@")
  local launch=("${on_nodes[@]}")
  [[ $name == single ]] && launch=()
  "${launch[@]}" "$bin" "${args[@]}" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; exit 1; }
}
train single 1 1
train tp2-pp2 2 2
train tp2-dp2-zero1 2 1 --set parallel.zero_stage=1
# The recipe's parallel.transport: TCP within the nodes too.
train tp2-pp2-tcp 2 2 --set parallel.transport=tcp
/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single:tp2-pp2 single:tp2-dp2-zero1 \
  single:tp2-pp2-tcp

# Which transport each group got: every rank logs "transports: world W, tensor T, ...".
expect() {  # RUN PATTERN: all 4 ranks' transport lines must match
  local got
  got=$(grep -c "transports: $2\$" "$tmp/$1.log" || true)
  grep "transports:" "$tmp/$1.log" | sed "s/^/$1: /"
  [[ $got == 4 ]] || { echo "two_nodes_test: $1: $got of 4 ranks logged 'transports: $2'" >&2; exit 1; }
}
expect tp2-pp2 "world tcp, tensor shm, pipeline tcp"
expect tp2-dp2-zero1 "world tcp, tensor shm, data tcp"
expect tp2-pp2-tcp "world tcp, tensor tcp, pipeline tcp"
echo "two_nodes_test: OK"
