#!/bin/sh
# Runs the straggler benchmark's launcher at tiny sizes (both modes as real
# processes on loopback; a few seconds) and checks its report: the JSON
# summary parses, every figure is there and positive, and the disaggregated
# outputs equal the colocated ones within 1e-5 (the launcher also fails
# above that).
set -eu
cd "$TEST_SRCDIR/$TEST_WORKSPACE/bench/attention_straggler"
summary="$TEST_TMPDIR/summary.json"
./attention_straggler --workers=2 --servers=2 --tokens_per_worker=256 --short_document=32 \
  --heads=4 --kv_heads=2 --head_dim=16 --layers=2 --warmup=1 --repeats=2 \
  --tolerance=0 --timeout_s=120 --max_error=1e-5 --summary_json="$summary"
# Uneven: more servers than workers, servers drop Q/K/V and workers resend.
./attention_straggler --workers=2 --servers=3 --tokens_per_worker=200 --short_document=24 \
  --heads=4 --kv_heads=2 --head_dim=16 --layers=2 --warmup=0 --repeats=1 \
  --keep_qkv_for_backward=false --timeout_s=120 --max_error=1e-5 \
  --summary_json="$TEST_TMPDIR/uneven.json" >/dev/null
exec /usr/bin/python3 -B check_summary.py "$summary" "$TEST_TMPDIR/uneven.json"
