"""The Python package end to end, as a user gets it.

Build the sdist and the wheel with the PEP 517 backend, check the wheel with auditwheel,
install it into fresh environments and use it.

Everything that loads the extension runs in a subprocess with an interpreter that can:
the one running pytest may well be a pyenv build that cannot (that case is tested too).
Needs Debian's /usr/bin/python3 with its venv module (apt: python3-venv), cargo, nm and
readelf (binutils), and PyPI for the build tools; `.ci/run` installs what is missing.
Nothing here measures time.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = "/usr/bin/python3"
LIBRARY = "libsqlite_uring.so"
# Build tools, bounded to the major versions these tests were written against.
BUILD_TOOLS = ["build>=1,<2", "auditwheel>=6,<7", "patchelf>=0.17,<0.18"]
# The error message names these; each must really be able to load the extension.
# Pinned so a new release cannot change the test's outcome.
ALTERNATIVES = {
    "sqlean": ("sqlean.py==3.50.4.5", "sqlean"),
    "pysqlite3": ("pysqlite3-binary==0.5.4.post2", "pysqlite3.dbapi2"),
    "apsw": ("apsw==3.54.1.0", "apsw"),
}
SUBPROCESS_TIMEOUT = 1800  # a guard against hangs, not a measurement


def run(
    command: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command; if it fails, fail the test with its whole output."""
    full_env = dict(os.environ)
    full_env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"})
    # The interpreter under test must not pick up the pytest process's module paths.
    full_env.pop("PYTHONPATH", None)
    full_env.pop("PYTHONHOME", None)
    full_env.update(env or {})
    result = subprocess.run(
        [str(part) for part in command],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, command))} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def run_python(python: Path | str, code: str, env: Mapping[str, str] | None = None) -> str:
    """Run a snippet with `python` and return its stdout."""
    return run([python, "-c", textwrap.dedent(code)], env=env).stdout


def cargo_version() -> str:
    """Return the workspace version, which the wheel's version must equal."""
    text = (ROOT / "Cargo.toml").read_text()
    match = re.search(r'(?m)^version = "([^"]+)"', text)
    assert match, "no version in Cargo.toml"
    return match.group(1)


def make_venv(path: Path) -> Path:
    """Make a fresh venv with Debian's python3, whose sqlite3 module loads extensions."""
    run([DEBIAN_PYTHON, "-m", "venv", path])
    return path / "bin" / "python"


@dataclass(frozen=True)
class Artifacts:
    """What the build produced."""

    sdist: Path
    pep517_wheel: Path  # as the backend made it: py3-none-linux_<arch>
    wheel: Path  # after auditwheel repair: py3-none-manylinux_2_XX_<arch>


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the session's venvs and builds."""
    return tmp_path_factory.mktemp("sqlite-uring-python")


@pytest.fixture(scope="session")
def build_python(workdir: Path) -> Path:
    """Make a venv with the PyPA build frontend and auditwheel, as a release job has."""
    python = make_venv(workdir / "build-venv")
    run([python, "-m", "pip", "install", "-q", *BUILD_TOOLS])
    return python


@pytest.fixture(scope="session")
def cargo_env() -> dict[str, str]:
    """Cargo's target directory for wheel builds: target/python.

    Its own, so the wheel builds reuse each other's compiled dependencies but never
    overwrite target/release/libsqlite_uring.so with a library built from an sdist's copy
    of the sources. (Sharing target/release would save little: `cargo test` does not
    build the cdylib, and only the extension's five small crates are compiled here.)
    """
    return {"CARGO_TARGET_DIR": str(ROOT / "target" / "python")}


@pytest.fixture(scope="session")
def artifacts(workdir: Path, build_python: Path, cargo_env: dict[str, str]) -> Artifacts:
    """`python -m build`: the sdist, then the wheel built from that sdist alone."""
    dist = workdir / "dist"
    run([build_python, "-m", "build", "--outdir", dist, ROOT], env=cargo_env)
    (sdist,) = dist.glob("sqlite_uring-*.tar.gz")
    (pep517_wheel,) = dist.glob("sqlite_uring-*.whl")
    wheelhouse = workdir / "wheelhouse"
    bin_dir = build_python.parent
    run(
        [bin_dir / "auditwheel", "repair", "--wheel-dir", wheelhouse, pep517_wheel],
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},  # auditwheel runs patchelf
    )
    (wheel,) = wheelhouse.glob("sqlite_uring-*.whl")
    return Artifacts(sdist, pep517_wheel, wheel)


@pytest.fixture(scope="session")
def venv_python(workdir: Path, artifacts: Artifacts) -> Path:
    """Debian's python3 in a fresh venv with only the wheel installed (no index)."""
    python = make_venv(workdir / "venv")
    run([python, "-m", "pip", "install", "-q", "--no-index", artifacts.wheel])
    return python


# --- the artifacts ------------------------------------------------------------------


def test_wheel_is_a_py3_manylinux_platform_wheel(artifacts: Artifacts, tmp_path: Path) -> None:
    version = cargo_version()
    assert artifacts.pep517_wheel.name == (f"sqlite_uring-{version}-py3-none-linux_x86_64.whl"), (
        "the backend tags any Python 3, this platform"
    )
    assert re.fullmatch(
        rf"sqlite_uring-{re.escape(version)}-py3-none-manylinux_2_\d+_x86_64\.whl",
        artifacts.wheel.name,
    ), artifacts.wheel.name
    with zipfile.ZipFile(artifacts.wheel) as wheel:
        files = {name for name in wheel.namelist() if not name.endswith("/")}
        info = f"sqlite_uring-{version}.dist-info"
        assert files == {
            "sqlite_uring/__init__.py",
            "sqlite_uring/py.typed",
            f"sqlite_uring/{LIBRARY}",
            f"{info}/METADATA",
            f"{info}/WHEEL",
            f"{info}/RECORD",
        }
        wheel_info = wheel.read(f"{info}/WHEEL").decode()
        tag = artifacts.wheel.name[len(f"sqlite_uring-{version}-") : -len(".whl")]
        assert f"Tag: {tag}\n" in wheel_info
        assert "Root-Is-Purelib: false" in wheel_info
        metadata = wheel.read(f"{info}/METADATA").decode()
        assert "Requires-Python: >=3.8" in metadata
        assert "Requires-Dist" not in metadata, "the wheel needs nothing at run time"
        library = tmp_path / LIBRARY
        library.write_bytes(wheel.read(f"sqlite_uring/{LIBRARY}"))
    exported = run(["nm", "-D", "--defined-only", library]).stdout
    assert "sqlite3_sqliteuring_init" in exported
    assert "sqlite3_sqliteuring_default_init" in exported
    undefined = run(["nm", "-D", "--undefined-only", library]).stdout
    assert "sqlite3_" not in undefined, "SQLite is reached only through the API table"
    sections = run(["readelf", "-S", "-W", library]).stdout
    assert ".debug_info" not in sections, "the wheel's library is built without debuginfo"


def test_sdist_carries_what_cargo_needs(artifacts: Artifacts) -> None:
    # The wheel above was built from this sdist alone, so it is self-contained; check
    # it holds the sources and nothing built.
    with tarfile.open(artifacts.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for required in (
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "crates/ext/src/lib.rs",
        "crates/vfs/src/lib.rs",
        "crates/cli/Cargo.toml",
        "python/hatch_build.py",
        "python/sqlite_uring/__init__.py",
    ):
        assert required in names, required
    assert not [n for n in names if n.startswith("target/") or n.endswith(".so")]


# --- using the installed wheel ------------------------------------------------------


def test_loadable_path_is_the_library_in_the_installed_package(venv_python: Path) -> None:
    out = run_python(
        venv_python,
        """
        import os, sqlite_uring
        path = sqlite_uring.loadable_path()
        print(path)
        print(os.path.isfile(path))
        print(os.path.dirname(path) == os.path.dirname(sqlite_uring.__file__))
        """,
    )
    path, is_file, beside_init = out.splitlines()
    assert path.endswith(f"/site-packages/sqlite_uring/{LIBRARY}")
    assert path.startswith(str(venv_python.parent.parent))
    assert (is_file, beside_init) == ("True", "True")


def test_load_registers_io_uring_for_uri_opens(venv_python: Path, tmp_path: Path) -> None:
    out = run_python(
        venv_python,
        f"""
        import json, sqlite3, sqlite_uring
        db_path = {str(tmp_path / "app.db")!r}
        loader = sqlite3.connect(":memory:")
        sqlite_uring.load(loader)
        try:
            loader.execute("SELECT load_extension('x')")
        except sqlite3.OperationalError as error:
            print("loading afterwards:", error)
        loader.close()  # the VFS stays registered

        conn = sqlite3.connect(f"file:{{db_path}}?vfs=io_uring", uri=True)
        print(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        with conn:
            conn.executemany("INSERT INTO t(v) VALUES (?)", [(f"v{{i}}",) for i in range(1000)])
        print(conn.execute("SELECT count(*), sum(id), max(v) FROM t").fetchone())
        print(conn.execute("PRAGMA integrity_check").fetchone()[0])
        stats = json.loads(conn.execute("PRAGMA io_uring_stats").fetchone()[0])
        print(stats["vfs"], stats["engine"], stats["file"]["write_calls"] > 0)
        conn.close()

        # Not the default VFS: a plain open is SQLite's unix VFS, which has no such pragma,
        # and reads what io_uring wrote.
        plain = sqlite3.connect(db_path)
        print(plain.execute("PRAGMA io_uring_stats").fetchall())
        print(plain.execute("SELECT count(*) FROM t").fetchone()[0])
        """,
    )
    assert out.splitlines() == [
        "loading afterwards: not authorized",
        "wal",
        "(1000, 500500, 'v999')",
        "ok",
        "io_uring io_uring True",
        "[]",
        "1000",
    ]


def test_default_true_makes_io_uring_the_default_vfs(venv_python: Path, tmp_path: Path) -> None:
    out = run_python(
        venv_python,
        f"""
        import json, sqlite3, sqlite_uring
        sqlite_uring.load(sqlite3.connect(":memory:"))
        before = sqlite3.connect({str(tmp_path / "before.db")!r})
        print(before.execute("PRAGMA io_uring_stats").fetchall())
        # Loading again is harmless, and with default=True switches the default.
        sqlite_uring.load(sqlite3.connect(":memory:"), default=True)
        conn = sqlite3.connect({str(tmp_path / "default.db")!r})
        print(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        with conn:
            conn.execute("CREATE TABLE t(x)")
            conn.execute("INSERT INTO t VALUES (42)")
        print(conn.execute("SELECT x FROM t").fetchone()[0])
        print(conn.execute("PRAGMA integrity_check").fetchone()[0])
        print(json.loads(conn.execute("PRAGMA io_uring_stats").fetchone()[0])["vfs"])
        """,
    )
    assert out.splitlines() == ["[]", "wal", "42", "ok", "io_uring"]


def test_default_true_on_first_load(venv_python: Path, tmp_path: Path) -> None:
    out = run_python(
        venv_python,
        f"""
        import json, sqlite3, sqlite_uring
        sqlite_uring.load(sqlite3.connect(":memory:"), default=True)
        conn = sqlite3.connect({str(tmp_path / "first.db")!r})
        conn.execute("CREATE TABLE t(x)")
        print(json.loads(conn.execute("PRAGMA io_uring_stats").fetchone()[0])["vfs"])
        """,
    )
    assert out == "io_uring\n"


def test_unavailable_io_uring_fails_the_load_unless_fallback(
    venv_python: Path, tmp_path: Path
) -> None:
    code = f"""
        import json, sqlite3, sqlite_uring
        loader = sqlite3.connect(":memory:")
        try:
            sqlite_uring.load(loader)
        except sqlite3.OperationalError as error:
            print("refused:", "io_uring is unavailable" in str(error))
        else:
            conn = sqlite3.connect("file:{tmp_path / "fb.db"}?vfs=io_uring", uri=True)
            conn.execute("CREATE TABLE t(x)")
            stats = json.loads(conn.execute("PRAGMA io_uring_stats").fetchone()[0])
            print("engine:", stats["engine"])
        try:  # switched off again, on failure too
            loader.execute("SELECT load_extension('x')")
        except sqlite3.OperationalError as error:
            print(error)
        """
    simulate = {"SQLITE_URING_SIMULATE_UNAVAILABLE": "EPERM"}
    assert run_python(venv_python, code, env=simulate).splitlines() == [
        "refused: True",
        "not authorized",
    ]
    fallback = {**simulate, "SQLITE_URING_FALLBACK": "syscall"}
    assert run_python(venv_python, code, env=fallback).splitlines() == [
        "engine: syscall",
        "not authorized",
    ]


def test_binding_without_enable_load_extension_gets_a_clear_error(venv_python: Path) -> None:
    # A stand-in for a connection of a Python built without loadable extensions: the
    # real sqlite3.Connection of such a build simply lacks the method.
    out = run_python(
        venv_python,
        """
        import sqlite3, sqlite_uring

        class Connection:
            def execute(self, sql, parameters=()):
                raise AssertionError("nothing may run on this connection")

            def load_extension(self, path):
                raise AssertionError("must not be reached")

        try:
            sqlite_uring.load(Connection())
        except sqlite3.Error as error:  # catchable as any sqlite3 error
            print(type(error).__name__, isinstance(error, sqlite3.NotSupportedError))
            print(error)
        """,
    )
    first, *message = out.splitlines()
    assert first == "ExtensionLoadingUnavailable True"
    assert_names_alternatives("\n".join(message), "__main__.Connection")


def assert_names_alternatives(message: str, connection_type: str) -> None:
    """Check the error says what is missing, why, and what to use instead."""
    assert message.startswith(f"sqlite_uring cannot load into {connection_type}:"), message
    for needed in (
        "enable_load_extension()",
        "--enable-loadable-sqlite-extensions",
        "/usr/bin/python3",
        "pip install sqlean.py",
        "pip install apsw",
        "pip install pysqlite3-binary",
    ):
        assert needed in message, (needed, message)


def _pythons_without_extension_loading() -> list[Path]:
    """Find pyenv's interpreters (3.8+) whose sqlite3 module cannot load extensions."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for python in sorted(versions.glob("*/bin/python3")):
        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import sys, sqlite3; print(sys.version_info >= (3, 8) and "
                "not hasattr(sqlite3.Connection, 'enable_load_extension'))",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "True":
            found.append(python)
    return found


PYTHONS_WITHOUT_LOADING = _pythons_without_extension_loading()


@pytest.mark.parametrize(
    "python",
    PYTHONS_WITHOUT_LOADING or [None],
    ids=lambda p: p.parts[-3] if p else "none-found",
)
def test_real_python_without_extension_loading(
    python: Path | None, artifacts: Artifacts, tmp_path: Path
) -> None:
    """The wheel installs on every pyenv Python 3.8+, and load() explains what to use."""
    if python is None:
        pytest.fail(
            "no Python 3.8+ without loadable-extension support under $PYENV_ROOT/versions: "
            "this check needs one (any pyenv-built CPython is one)"
        )
    target = tmp_path / "site"
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            target,
            artifacts.wheel,
        ]
    )
    out = run_python(
        python,
        """
        import os, sqlite3, sqlite_uring
        print(os.path.isfile(sqlite_uring.loadable_path()))
        try:
            sqlite_uring.load(sqlite3.connect(":memory:"))
        except sqlite_uring.ExtensionLoadingUnavailable as error:
            print(error)
        """,
        env={"PYTHONPATH": str(target)},
    )
    first, *message = out.splitlines()
    assert first == "True"
    assert_names_alternatives("\n".join(message), "sqlite3.Connection")


@pytest.fixture(scope="session")
def alternatives_python(workdir: Path, artifacts: Artifacts) -> Path:
    """Make a venv with the wheel and every binding the error message recommends."""
    python = make_venv(workdir / "alternatives-venv")
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            artifacts.wheel,
            *(spec for spec, _ in ALTERNATIVES.values()),
        ]
    )
    return python


@pytest.mark.parametrize("name", sorted(ALTERNATIVES))
def test_each_alternative_named_in_the_error_loads_it(
    name: str, alternatives_python: Path, tmp_path: Path
) -> None:
    out = run_python(
        alternatives_python,
        f"""
        import importlib, json, sqlite_uring
        name, m = {name!r}, importlib.import_module({ALTERNATIVES[name][1]!r})
        if name == "apsw":  # its own API: vfs= instead of a URI, execute() on the connection
            connect = m.Connection
            open_io_uring = lambda path: m.Connection(path, vfs="io_uring")
            query = lambda conn, sql: list(conn.execute(sql))
        else:  # the sqlite3 API
            connect = m.connect
            open_io_uring = lambda path: m.connect(f"file:{{path}}?vfs=io_uring", uri=True)
            query = lambda conn, sql: conn.execute(sql).fetchall()

        sqlite_uring.load(connect(":memory:"))
        conn = open_io_uring({str(tmp_path / "uri.db")!r})
        print(query(conn, "PRAGMA journal_mode=WAL")[0][0])
        query(conn, "CREATE TABLE t(x)")
        query(conn, "INSERT INTO t VALUES (7)")
        print(query(conn, "SELECT x FROM t")[0][0])
        print(json.loads(query(conn, "PRAGMA io_uring_stats")[0][0])["vfs"])

        sqlite_uring.load(connect(":memory:"), default=True)
        conn = connect({str(tmp_path / "plain.db")!r})
        query(conn, "CREATE TABLE t(x)")
        print(json.loads(query(conn, "PRAGMA io_uring_stats")[0][0])["vfs"])
        """,
    )
    assert out.splitlines() == ["wal", "7", "io_uring", "io_uring"]


def test_editable_install_finds_the_library_in_the_checkout(
    workdir: Path, cargo_env: dict[str, str], tmp_path: Path
) -> None:
    python = make_venv(workdir / "editable-venv")
    run([python, "-m", "pip", "install", "-q", "-e", ROOT], env=cargo_env)
    out = run_python(
        python,
        f"""
        import json, sqlite3, sqlite_uring
        print(sqlite_uring.__file__)
        sqlite_uring.load(sqlite3.connect(":memory:"))
        conn = sqlite3.connect("file:{tmp_path / "e.db"}?vfs=io_uring", uri=True)
        conn.execute("CREATE TABLE t(x)")
        print(json.loads(conn.execute("PRAGMA io_uring_stats").fetchone()[0])["vfs"])
        """,
    )
    assert out.splitlines() == [str(ROOT / "python" / "sqlite_uring" / "__init__.py"), "io_uring"]
