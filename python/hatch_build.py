"""Hatchling build hook: compile ``crates/ext`` and ship ``libsqlite_uring.so`` in the wheel.

Why hatchling and a hook rather than maturin: maturin packages a plain cdylib only as
``bindings = "cffi"``, which adds a generated ``sqlite_uring.sqlite_uring`` module
(``ffi.py`` importing ``_cffi_backend``) that ``exclude`` cannot drop, and requires
``cffi`` as a runtime dependency (a warning today, "will become an error"). The extension
needs neither: SQLite loads it, Python only needs its path. So this hook runs cargo, puts
the library at ``sqlite_uring/libsqlite_uring.so`` and tags the wheel ``py3-none-<platform>``
(any Python 3: nothing in it is tied to a CPython ABI). ``auditwheel repair`` then checks
the library against the manylinux policies and retags the wheel ``manylinux_2_XX``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "sqlite_uring"
LIBRARY = "libsqlite_uring.so"
CRATE = "sqlite-uring-ext"


class CargoBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Builds the extension before hatchling assembles a wheel (not an sdist)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile, then hand the library to the wheel (or, editable, to the source tree)."""
        if self.target_name != "wheel":
            return
        if not sys.platform.startswith("linux"):
            raise RuntimeError("sqlite-uring is Linux-only: its VFS is built on io_uring")
        library = build_extension(Path(self.root))
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{platform_tag()}"
        if version == "editable":
            # An editable install imports python/sqlite_uring from the checkout, and
            # loadable_path() looks next to __init__.py, so the library goes there
            # (ignored by git).
            shutil.copy2(library, Path(self.root, "python", PACKAGE, LIBRARY))
        else:
            build_data["force_include"][str(library)] = f"{PACKAGE}/{LIBRARY}"


def platform_tag() -> str:
    """Return the wheel platform tag of this interpreter, e.g. ``linux_x86_64``."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def cargo() -> str:
    """Find cargo as rustup installs it; fail with what to install when there is none."""
    found = os.environ.get("CARGO") or shutil.which("cargo")
    if found:
        return found
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    if (home / "bin" / "cargo").is_file():
        return str(home / "bin" / "cargo")
    raise RuntimeError(
        "building sqlite-uring from source needs Rust 1.80+ (cargo on PATH; see rustup.rs)"
    )


def build_extension(root: Path) -> Path:
    """Release-build the cdylib and return its path, as cargo reports it.

    ``cargo rustc`` so ``-C strip=debuginfo`` applies to the final library only: the
    dependencies keep the workspace's release flags and are reused from ``target/`` (or
    ``CARGO_TARGET_DIR``) when ``cargo test --release`` built them. The workspace keeps
    line tables for backtraces in development; a wheel does not need them (5 MB -> 0.5 MB).
    ``--locked``: the wheel is built from exactly the dependencies in Cargo.lock.
    """
    command = [
        cargo(),
        "rustc",
        "--release",
        "--locked",
        "--lib",
        "-p",
        CRATE,
        "--manifest-path",
        str(root / "Cargo.toml"),
        "--message-format=json-render-diagnostics",
        "--",
        "-C",
        "strip=debuginfo",
    ]
    result = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {result.returncode}")
    for line in result.stdout.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact":
            continue
        if "cdylib" not in message["target"]["kind"]:
            continue
        for filename in message["filenames"]:
            if filename.endswith(LIBRARY):
                return Path(filename)
    raise RuntimeError(f"cargo built no {LIBRARY}:\n{result.stdout}")
