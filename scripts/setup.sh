#!/usr/bin/env bash
# Sets up a fresh machine: uv (when it is not on PATH yet), the locked Python environment in
# .venv/ (a C compiler first, when there is none) and, with --test, the chromium that the web UI
# test (tests/test_webui.py) drives.
# Non-interactive; run as root or with sudo: uv goes to /opt/uv with a link in /usr/local/bin,
# missing Debian packages come from apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9 # the uv of helm/Dockerfile
UV_HOME=/opt/uv

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "setup: no apt-get; install $* by hand" >&2
    return 1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

if ! command -v uv >/dev/null; then
  # Debian's system Python refuses pip installs outside a virtual environment (PEP 668), and its
  # venv module needs the python3-venv package: uv gets a virtual environment of its own.
  if ! { command -v python3 >/dev/null && $sudo python3 -m venv --clear "$UV_HOME"; }; then
    apt_install python3-venv
    $sudo python3 -m venv --clear "$UV_HOME"
  fi
  $sudo "$UV_HOME/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  $sudo ln -sf "$UV_HOME/bin/uv" /usr/local/bin/uv
fi
# Installing the project compiles its C libraries (scripts/hatch_build.py).
if ! command -v "${CC:-cc}" >/dev/null; then
  apt_install gcc libc6-dev
fi
# With their bytecode compiled once here, commands start without compiling what they import
# (where PYTHONDONTWRITEBYTECODE is set, Python would compile it again at every start).
uv sync --locked --compile-bytecode
uv run --no-sync python -m compileall -q tokenmill resources data_assets sensors >/dev/null

if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ]; then
  apt_install chromium ||
    echo "setup: install chromium at /usr/bin/chromium or tests/test_webui.py skips" >&2
fi
