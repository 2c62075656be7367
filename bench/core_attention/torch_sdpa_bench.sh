#!/usr/bin/env bash
# torch_sdpa_bench.py under the first Python whose PyTorch sees a CUDA
# device: the GPU machine keeps one in a virtual environment (/opt/*/.venv);
# elsewhere the script runs under /usr/bin/python3 and says why it skips
# (under the device check on a GPU, finding none is a failure).
set -euo pipefail

self="$(readlink -f "$0")"
script=""
# Beside the binary (the device check's layout), or in its runfiles (bazel run).
for candidate in "$(dirname "$0")/torch_sdpa_bench.py" \
  "${RUNFILES_DIR:-$0.runfiles}/corescape/bench/core_attention/torch_sdpa_bench.py" \
  "$0.runfiles/corescape/bench/core_attention/torch_sdpa_bench.py" \
  "$(dirname "${self}")/torch_sdpa_bench.py"; do
  if [[ -f "${candidate}" ]]; then
    script="${candidate}"
    break
  fi
done
if [[ -z "${script}" ]]; then
  echo "torch_sdpa_bench: torch_sdpa_bench.py is not beside $0 or in its runfiles" >&2
  exit 1
fi
# PyTorch brings its own CUDA libraries: the device check's library path
# (this project's packaged libstdc++, the toolkit's libraries) is not for it.
unset LD_LIBRARY_PATH
for python in /opt/*/.venv/bin/python3 /usr/local/bin/python3 /usr/bin/python3; do
  [[ -x "${python}" ]] || continue
  if probe="$("${python}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>&1)"; then
    exec "${python}" "${script}" "$@"
  fi
  echo "torch_sdpa_bench: ${python}: no CUDA PyTorch${probe:+: $(tail -n 1 <<<"${probe}")}"
done
if [[ -n "${DEVICE_CHECK_GPU:-}" ]]; then
  # On the GPU machine the baseline is a figure the check exists for.
  echo "torch_sdpa_bench: no Python here has a PyTorch that sees ${DEVICE_CHECK_GPU}" >&2
  exit 1
fi
exec /usr/bin/python3 "${script}" "$@"
