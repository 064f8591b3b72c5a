"""Shared pytest setup: 8 CPU devices stand in for GPUs (set here, once, before jax is
imported), and this folder on ``sys.path`` so that test files can ``import toolkit``.

Where pytest-xdist is installed (the ``test`` extra), a plain ``python -m pytest``
runs the tests on one worker per core (``-n auto --dist loadgroup``); ``-n 0``
runs them in this process. Slow tests are handed out first, so that none starts
last, and the tests of a file that share a module-scoped fixture go to one
worker together (the fixture is built once, not once per worker).

The session shares one persistent compilation cache (``_SessionCompilationCache``):
unless ``JAX_COMPILATION_CACHE_DIR`` is set already, the controller makes a temporary
directory, points JAX at it through the environment (every compilation cached, however
fast or small), and removes it at the end; xdist workers and the processes that tests
start inherit it. ``-p no:jaxpp_compilation_cache`` or ``JAXPP_MLIR_TEST_CACHE=0``
turns it off.
"""

import os
import shutil
import sys
import tempfile

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_LOADGROUP = "jaxpp_loadgroup"  # workerinput key: the controller distributes by group
_SHARED_SCOPES = ("module", "package", "session")


_CACHE_PLUGIN = "jaxpp_compilation_cache"
_CACHE_OFF_VAR = "JAXPP_MLIR_TEST_CACHE"
_CACHE_ENVIRONMENT = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


class _SessionCompilationCache:
    """One JAX persistent compilation cache directory for the whole test session."""

    def __init__(self) -> None:
        self.directory: str | None = None
        self.saved: dict[str, str | None] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        if hasattr(config, "workerinput") or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
            return  # an xdist worker inherits the controller's; the user's own wins
        if os.environ.get(_CACHE_OFF_VAR, "1") == "0":
            return
        self.directory = tempfile.mkdtemp(prefix="jaxpp_mlir_test_cache_")
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
        entries = [p for p in os.scandir(self.directory) if p.name.endswith("-cache")]
        stages = sum(1 for p in entries if p.name.startswith("jaxpp_mlir-"))
        size = sum(p.stat().st_size for p in entries)
        terminalreporter.write_line(
            f"session compilation cache: {len(entries)} entries ({stages} stage programs), "
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
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.is_blocked(_CACHE_PLUGIN):
        config.pluginmanager.register(_SessionCompilationCache(), _CACHE_PLUGIN)


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
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:
        return False
    return any(
        definitions[-1].scope in _SHARED_SCOPES and definitions[-1].baseid
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
