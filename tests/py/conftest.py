"""Shared pytest setup: 8 CPU devices stand in for GPUs (set here, once, before jax is
imported), and this folder on ``sys.path`` so that test files can ``import toolkit``.

Where pytest-xdist is installed (the ``test`` extra), a plain ``python -m pytest``
runs the tests on one worker per core (``-n auto --dist loadgroup``); ``-n 0``
runs them in this process. Slow tests are handed out first, so that none starts
last, and the tests of a file that share a module-scoped fixture go to one
worker together (the fixture is built once, not once per worker).
"""

import os
import sys

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_LOADGROUP = "jaxpp_loadgroup"  # workerinput key: the controller distributes by group
_SHARED_SCOPES = ("module", "package", "session")


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
