#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian/Ubuntu machine, then runs them all:
# lint, unit tests, AppTest page tests and the real-browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The browser tests drive Debian's chromium (Playwright's own browser download needs the internet).
if ! command -v chromium >/dev/null 2>&1; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -r requirements-dev.txt

python3 -m ruff check .
python3 -m ruff format --check .
python3 -m pytest "$@"
