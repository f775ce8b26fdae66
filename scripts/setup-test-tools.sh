#!/usr/bin/env bash
# Installs the test-only tools a fresh machine lacks:
# - vroomrs (Sentry's chunk library, from PyPI): tests check that Sentry reads the chunks
#   profilink writes, and that flamegraph fingerprints match Sentry's;
# - chromium (Debian): the flamegraph viewer's headless-browser test.
set -euo pipefail
if ! python3 -c "import vroomrs" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "vroomrs==0.1.24"
  python3 -c "import vroomrs"
fi
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  command -v chromium
fi
