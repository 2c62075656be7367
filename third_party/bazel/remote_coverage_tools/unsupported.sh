#!/bin/sh
echo "coverage is not supported in the offline corescape build" >&2
exit 1
