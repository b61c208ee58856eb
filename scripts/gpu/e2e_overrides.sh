# Sourced by scripts/gpu/check.sh (its bench stage) and tests/scripts/gpu_report_test.sh: what
# makes configs/1.3b.yaml the kit's end-to-end run through mtnlg-train (row 1.3b-train, and its
# plan). 16 micro-batches of 4 x 2048 an iteration, 8 iterations, over the demo corpora
# (scripts/demo.sh prepares data/demo); no evaluation and no checkpoint, whose time is not
# training's. The recipe's own 512-sample batch (128 micro-batches) would take about 25 s an
# iteration on one H100.
# shellcheck disable=SC2034 # used by the scripts that source this
e2e_overrides=(--set batch.global_batch_size=64 --set schedule.train_iters=8 --set eval.interval=0
  --set checkpoint.dir=null --set checkpoint.save_interval=0 --set checkpoint.resume=false
  --set logging.interval=1
  --set 'data.blend=[{prefix: data/demo/kjv_text_document, weight: 0.6}, {prefix: data/demo/fortunes_text_document, weight: 0.4}]')
