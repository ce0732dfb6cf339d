"""The io_uring SQLite VFS for Python: ``libsqlite_uring.so`` plus two helpers.

::

    import sqlite3, sqlite_uring
    sqlite_uring.load(sqlite3.connect(":memory:"))   # registers VFS "io_uring" process-wide
    db = sqlite3.connect("file:app.db?vfs=io_uring", uri=True)

The package is the loadable extension and nothing else: the VFS lives in SQLite, not
in Python, so it works with any SQLite binding that can load extensions (the standard
``sqlite3`` module when built with ``--enable-loadable-sqlite-extensions``, ``apsw``,
``sqlean.py``, ``pysqlite3``). Environment read by the extension when it is loaded:
``SQLITE_URING_FALLBACK=syscall`` registers the VFS on plain syscalls where io_uring is
unavailable (kernel too old, seccomp, ``io_uring_disabled``) instead of failing.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "DEFAULT_ENTRY_POINT",
    "ENTRY_POINT",
    "VFS_NAME",
    "ExtensionLoadingUnavailable",
    "load",
    "loadable_path",
]

#: The name the VFS registers under: open databases with ``?vfs=io_uring`` (URI) or
#: ``vfs="io_uring"`` (apsw).
VFS_NAME = "io_uring"

#: Entry point that registers the VFS. SQLite would derive the same name from the file
#: name, but naming it keeps loading independent of how the file is called.
ENTRY_POINT = "sqlite3_sqliteuring_init"

#: Entry point that registers the VFS and makes it the process's default VFS, so plain
#: ``sqlite3.connect("app.db")`` uses it.
DEFAULT_ENTRY_POINT = "sqlite3_sqliteuring_default_init"

_LIBRARY = "libsqlite_uring.so"

_ALTERNATIVES = """These can load extensions:
  - Debian's or Ubuntu's /usr/bin/python3 (its sqlite3 module)
  - pip install sqlean.py          (import sqlean as sqlite3)
  - pip install apsw
  - pip install pysqlite3-binary   (import pysqlite3 as sqlite3)
  - this Python rebuilt with --enable-loadable-sqlite-extensions (pyenv:
    PYTHON_CONFIGURE_OPTS=--enable-loadable-sqlite-extensions pyenv install VERSION)"""

try:
    import sqlite3 as _sqlite3

    _Unsupported: type[Exception] = _sqlite3.NotSupportedError
except ImportError:  # a Python built without _sqlite3 can still use apsw or sqlean.py
    _Unsupported = RuntimeError


class ExtensionLoadingUnavailable(_Unsupported):  # type: ignore[valid-type,misc]
    """The connection's SQLite binding cannot load extensions.

    A subclass of ``sqlite3.NotSupportedError`` (so ``except sqlite3.Error`` catches it),
    because the missing capability is the binding's, not the database's or ours: CPython
    leaves out ``Connection.enable_load_extension`` unless it was configured with
    ``--enable-loadable-sqlite-extensions``, which a default build (pyenv's) is not.
    """


def loadable_path() -> str:
    """Absolute path of ``libsqlite_uring.so`` inside this installed package.

    For ``.load`` in the sqlite3 CLI, ``load_extension()`` in SQL, or a binding this module
    does not know. Raises ``FileNotFoundError`` rather than returning a path that
    ``load_extension`` would then reject with a vaguer message (a source checkout that was
    never built or installed has no library next to this file).
    """
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} does not exist: install the sqlite-uring wheel, or build from a "
            "checkout with `pip install .` (which compiles crates/ext with cargo)"
        )
    return path


def load(conn: Any, default: bool = False) -> None:
    """Load the extension through ``conn``, registering VFS ``io_uring`` for the process.

    ``conn`` is any connection of a binding with ``enable_load_extension`` and
    ``load_extension`` (``sqlite3``, ``sqlean``, ``pysqlite3``, ``apsw``). The VFS stays
    registered after ``conn`` closes (the extension returns
    ``SQLITE_OK_LOAD_PERMANENTLY``), and ``conn`` itself keeps the VFS it was opened with:
    open new connections with ``file:NAME?vfs=io_uring`` and ``uri=True``. With
    ``default=True`` the VFS also becomes SQLite's default, so every later open without
    a ``vfs`` parameter uses it. Loading again is harmless (and can make it the default).

    Extension loading is switched back off on ``conn`` afterwards, even on failure, so
    SQL run later on it cannot call ``load_extension()``.

    Raises ``ExtensionLoadingUnavailable`` when the binding cannot load extensions, and
    the binding's own error (``sqlite3.OperationalError``) when SQLite refuses: for
    example io_uring unavailable without ``SQLITE_URING_FALLBACK=syscall``, whose message
    says why and what to do.
    """
    enable = getattr(conn, "enable_load_extension", None)
    if enable is None or not hasattr(conn, "load_extension"):
        raise ExtensionLoadingUnavailable(
            f"sqlite_uring cannot load into {type(conn).__module__}."
            f"{type(conn).__qualname__}: this SQLite binding has no "
            "enable_load_extension().\nCPython's sqlite3 module has it only when Python "
            "was configured with --enable-loadable-sqlite-extensions, and a default "
            "build (pyenv's, for one) is not.\n" + _ALTERNATIVES
        )
    path = loadable_path()
    entry_point = DEFAULT_ENTRY_POINT if default else ENTRY_POINT
    enable(True)
    try:
        _load_with_entry_point(conn, path, entry_point)
    finally:
        enable(False)


def _load_with_entry_point(conn: Any, path: str, entry_point: str) -> None:
    """Call the named entry point, whichever way the binding allows.

    ``apsw`` and ``sqlite3`` from Python 3.12 take ``entrypoint=``; older ``sqlite3``,
    ``pysqlite3`` and ``sqlean`` do not (TypeError), and there the SQL function
    ``load_extension(path, entry)`` does the same: ``enable_load_extension(True)`` has
    switched it on too.
    """
    try:
        conn.load_extension(path, entrypoint=entry_point)
    except TypeError:
        conn.execute("SELECT load_extension(?, ?)", (path, entry_point)).fetchall()
