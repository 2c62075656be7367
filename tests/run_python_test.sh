#!/bin/sh
# Runs a Python test under Debian's interpreter, which has grpcio and
# protobuf (the first python3 on PATH may be another one). Arguments after
# the file (bazel test --test_arg=Class.test_name) pick tests to run.
set -eu
cd "$TEST_SRCDIR/$TEST_WORKSPACE/tests"
exec /usr/bin/python3 -B "$@"
