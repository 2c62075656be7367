"""The corescape version, compiled into every binary (keep in sync with VERSION)."""

CORESCAPE_VERSION = "0.1.0"

VERSION_DEFINE = ["-DCORESCAPE_VERSION=\\\"" + CORESCAPE_VERSION + "\\\""]
