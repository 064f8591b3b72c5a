"""Shared pytest setup: 8 CPU devices stand in for GPUs (set here, once, before jax is
imported), and this folder on ``sys.path`` so that test files can ``import toolkit``.

Where pytest-xdist is installed (the ``test`` extra), a plain ``python -m pytest``
runs the tests on one worker per core (``-n auto --dist loadgroup``); ``-n 0``
runs them in this process. Slow tests are handed out first, so that none starts
last, and the tests of a file that share a module-scoped fixture go to one
worker together (the fixture is built once, not once per worker).

The tests share one persistent compilation cache (``_TestCompilationCache``): unless
``JAX_COMPILATION_CACHE_DIR`` is set already, the controller points JAX at
``$XDG_CACHE_HOME/jaxpp_mlir/test-compilation-cache`` (``~/.cache`` without
``XDG_CACHE_HOME``; ``JAXPP_MLIR_TEST_CACHE_DIR`` names another) through the
environment, every compilation cached however fast or small; xdist workers and the
processes that tests start inherit it. It is kept between runs, so a second run loads
what the first compiled (entries are keyed by the compiled program, the compile options
and the jax version, so a changed pass or jax compiles anew); it is emptied when it
grows past ``_CACHE_LIMIT_BYTES``. ``JAXPP_MLIR_TEST_CACHE=session`` uses a temporary
directory removed at the end instead; ``JAXPP_MLIR_TEST_CACHE=0`` or
``-p no:jaxpp_compilation_cache`` turns it off.
"""

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))

_LOADGROUP = "jaxpp_loadgroup"  # workerinput key: the controller distributes by group
_SHARED_SCOPES = ("module", "package", "session")


_CACHE_PLUGIN = "jaxpp_compilation_cache"
_CACHE_MODE_VAR = "JAXPP_MLIR_TEST_CACHE"  # 1 (kept between runs), session, or 0 (off)
_CACHE_DIR_VAR = "JAXPP_MLIR_TEST_CACHE_DIR"
_CACHE_LIMIT_BYTES = 2 * 2**30
_CACHE_ENVIRONMENT = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


def _kept_cache_directory() -> str:
    if os.environ.get(_CACHE_DIR_VAR):
        return os.environ[_CACHE_DIR_VAR]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "jaxpp_mlir", "test-compilation-cache")


def _cache_entries(directory: str) -> list[os.DirEntry]:
    try:
        return [entry for entry in os.scandir(directory) if entry.name.endswith("-cache")]
    except FileNotFoundError:
        return []


class _TestCompilationCache:
    """One JAX persistent compilation cache directory for the tests of a run."""

    def __init__(self) -> None:
        self.directory: str | None = None
        self.temporary = False
        self.entries_before = 0
        self.saved: dict[str, str | None] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        if hasattr(config, "workerinput") or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
            return  # an xdist worker inherits the controller's; the user's own wins
        mode = os.environ.get(_CACHE_MODE_VAR, "1")
        if mode == "0":
            return
        self.temporary = mode == "session"
        if self.temporary:
            self.directory = tempfile.mkdtemp(prefix="jaxpp_mlir_test_cache_")
        else:
            self.directory = _kept_cache_directory()
            entries = _cache_entries(self.directory)
            if sum(entry.stat().st_size for entry in entries) > _CACHE_LIMIT_BYTES:
                shutil.rmtree(self.directory, ignore_errors=True)
                entries = []
            os.makedirs(self.directory, exist_ok=True)
            self.entries_before = len(entries)
        settings = {"JAX_COMPILATION_CACHE_DIR": self.directory, **_CACHE_ENVIRONMENT}
        for name, value in settings.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value
        if "jax" in sys.modules:  # imported before this hook: its config read the env already
            import jax

            jax.config.update("jax_compilation_cache_dir", self.directory)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.directory is None:
            return
        entries = _cache_entries(self.directory)
        stages = sum(1 for entry in entries if entry.name.startswith("jaxpp_mlir-"))
        size = sum(entry.stat().st_size for entry in entries)
        kind = "temporary" if self.temporary else "kept"
        terminalreporter.write_line(
            f"test compilation cache ({kind}, {self.directory}): {len(entries)} entries "
            f"({stages} stage programs, {len(entries) - self.entries_before} new), "
            f"{size / 2**20:.1f} MiB"
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.directory is None:
            return
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.is_blocked(_CACHE_PLUGIN):
        config.pluginmanager.register(_TestCompilationCache(), _CACHE_PLUGIN)


class _XdistDefaults:
    """Tells the workers that groups are in use (they rebuild their options from the
    command line, which does not hold the defaults set below)."""

    def pytest_configure_node(self, node) -> None:
        node.workerinput[_LOADGROUP] = node.config.option.dist == "loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Defaults to ``-n auto --dist loadgroup`` (before pytest-xdist reads its options)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    option = config.option
    if hasattr(config, "workerinput"):
        option.loadgroup = config.workerinput.get(_LOADGROUP, option.loadgroup)
        return
    config.pluginmanager.register(_XdistDefaults(), "jaxpp_xdist_defaults")
    if option.numprocesses is not None or option.collectonly or option.usepdb:
        return  # -n given (-n 0 runs in this process), or a mode that needs one process
    option.numprocesses = "auto"
    if option.dist == "no":
        option.dist = "loadgroup"


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-, package- or session-scoped fixture of its own file
    (those of a conftest.py, such as ``python_server``, are built once per worker anyway)."""
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:
        return False
    file = item.nodeid.split("::")[0]
    return any(
        definitions[-1].scope in _SHARED_SCOPES and definitions[-1].baseid == file
        for definitions in fixtures.name2fixturedefs.values()
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first (the order is stable otherwise); the tests of a file that use one
    of its module-scoped fixtures in one xdist group."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    for item in items:
        if _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


# -- the Python fork server of the tests' worker processes --------------------------------

_PYTHON_SERVER_VAR = "JAXPP_MLIR_TEST_PYTHON_SERVER"  # 0: every child imports jax itself


class PythonServer:
    """How tests start Python processes that import jax: ``command`` in place of
    ``[sys.executable]`` and ``env`` added to the environment (the launcher's children go
    through ``JAXPP_MLIR_LAUNCH_PYTHON`` in ``env``). Through the fork server
    (``tests/fork_servers/python_server.py``) where it runs, else the plain interpreter."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.command = command
        self.env = env


@pytest.fixture(scope="session")
def python_server(tmp_path_factory) -> Iterator[PythonServer]:
    """One fork server per pytest process, started by the first test that asks for it and
    stopped at the end of the session (it also exits when this process ends)."""
    if os.environ.get(_PYTHON_SERVER_VAR, "1") == "0":
        yield PythonServer([sys.executable], {})
        return
    import toolkit  # imports jax: only where a test asks for the server

    directory = str(tmp_path_factory.mktemp("python_server"))
    with toolkit.running_python_server(directory) as socket_path:
        command = [sys.executable, "-I", "-S", toolkit.PYTHON_CLIENT]
        yield PythonServer(
            command,
            {"JAXPP_PYTHON_SERVER": socket_path, "JAXPP_MLIR_LAUNCH_PYTHON": shlex.join(command)},
        )
