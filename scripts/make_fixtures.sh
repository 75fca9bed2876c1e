#!/usr/bin/env bash
# make_fixtures.sh - regenerates the replay fixtures in tests/fixtures/ with
# scripts/dump_indexer.py (its --demo steps: values from a formula the specs restate):
#   replay_steps.safetensors   two ragged steps (step0/, step1/), 4 rows x 4 heads, 2 consumers
#   replay_decode.safetensors  one decode step (context_lens/row_start), same shapes
# It uses the project's .venv (git-ignored), made and filled with numpy and safetensors from
# PyPI when missing, as tests/dump_indexer_spec.lua does. Together they stay well under 1 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if ! "$py" -c 'import numpy, safetensors' 2>/dev/null; then
  [ -x "$py" ] || python3 -m venv .venv
  "$py" -m pip install -q --disable-pip-version-check numpy safetensors
fi
"$py" scripts/dump_indexer.py --demo tests/fixtures/replay_steps.safetensors --steps 2
"$py" scripts/dump_indexer.py --demo tests/fixtures/replay_decode.safetensors --decode
chmod 644 tests/fixtures/replay_*.safetensors
du -ch tests/fixtures/replay_*.safetensors | tail -n 1
