#!/usr/bin/env bash
# Installs the test-only tools a fresh machine lacks: vroomrs (Sentry's chunk library, from
# PyPI), which the tests use to check that Sentry reads the chunks profilink writes.
set -euo pipefail
if python3 -c "import vroomrs" 2>/dev/null; then
  exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check "vroomrs==0.1.24"
python3 -c "import vroomrs"
