"""`pip install ./clients/python` works: pip builds the package with its build backend
(flit_core, which scripts/install-test-deps puts in the test venv, so that this runs
offline) and installs it, typed (py.typed) and importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def test_pip_installs_the_package_with_its_types(tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # --no-build-isolation: the backend comes from this venv instead of a download.
    offline = ["--no-index", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*pip, *offline, str(PACKAGE)], check=True, cwd=tmp_path)
    assert (target / "lockwarden" / "py.typed").is_file()
    check = "import lockwarden, sys; print(lockwarden.__file__, lockwarden.Client.__name__)"
    env = {**os.environ, "PYTHONPATH": str(target)}
    shown = subprocess.run(
        [sys.executable, "-c", check],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert shown.startswith(str(target)) and shown.split()[1] == "Client"
