#!/usr/bin/env bash
# Create (or reuse) the venv that runs olah, the Hub mirror the cross-check tier tests against.
#
# olah pins many packages (fastapi, pydantic, huggingface_hub, ...), so it gets a venv of
# its own, never the project's. Idempotent: a venv whose stamp matches OLAH_SPEC and whose
# olah-cli imports is reused as is; anything else is rebuilt from scratch.
#
# Usage: crosscheck/setup_olah.sh [VENV_DIR]   (default: <repo>/.tox/olah-server)
# Env:   OLAH_SPEC (default olah==0.5.4), PYTHON (default python3)
# With uv on the PATH (CI puts tox-uv's there) uv builds the venv, in seconds; pip otherwise.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$repo_root/.tox/olah-server}"
spec="${OLAH_SPEC:-olah==0.5.4}"
python="${PYTHON:-python3}"
stamp="$venv/.olah-spec"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$spec" && -x "$venv/bin/olah-cli" ]] \
    && "$venv/bin/python" -c "import olah.server" 2>/dev/null; then
    echo "olah venv ready: $venv ($spec)"
    exit 0
fi

echo "building olah venv: $venv ($spec)"
rm -rf "$venv"
if command -v uv >/dev/null; then
    uv venv --quiet --python "$(command -v "$python")" "$venv"
    uv pip install --quiet --python "$venv/bin/python" "$spec"
else
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
fi
"$venv/bin/python" -c "import olah.server"
echo "$spec" > "$stamp"
echo "olah venv ready: $venv ($spec)"
