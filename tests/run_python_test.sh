#!/bin/sh
# Runs a Python test under Debian's interpreter, which has grpcio and
# protobuf (the first python3 on PATH may be another one).
set -eu
cd "$TEST_SRCDIR/$TEST_WORKSPACE/tests"
exec /usr/bin/python3 -B "$1"
