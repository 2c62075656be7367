#!/usr/bin/env bash
# Runs a fuzz target's seed driver (see fuzz_target.h): its seeds and their
# mutations, failing on a crash or when a seed is refused.
set -euo pipefail
exec "$@"
