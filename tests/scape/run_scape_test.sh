#!/bin/sh
# Runs one of the Python drivers in this folder under Debian's interpreter.
set -eu
cd "$TEST_SRCDIR/$TEST_WORKSPACE/tests/scape"
exec /usr/bin/python3 -B "$1"
