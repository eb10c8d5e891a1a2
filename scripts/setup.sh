#!/usr/bin/env bash
# Sets up a fresh machine: the locked Python environment in .venv/ and, on Debian, the chromium
# that the web UI test (tests/test_webui.py) drives. Non-interactive; run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q uv
uv sync --locked

if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "setup: no apt-get; install chromium at /usr/bin/chromium or tests/test_webui.py skips" >&2
  fi
fi
