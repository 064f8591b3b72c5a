"""Options are declared once per audience (the compiler's beside ``PartitionOptions``,
the runtime's in runtime/options.py); the tables in docs/options.md match them."""

import pathlib
import re

import pytest
from jaxpp_mlir.runtime import options

from jaxpp_mlir import partition_options

OPTIONS_DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "options.md"
SOURCES = pathlib.Path(__file__).resolve().parents[3]


EVERY_OPTION = (*partition_options.OPTIONS, *options.OPTIONS)


def test_options_tables_list_every_option_as_declared_compiler_first():
    rows = [line for line in OPTIONS_DOC.read_text().splitlines() if line.startswith("| `JAXPP_")]
    assert rows == [options.markdown_row(option) for option in EVERY_OPTION]


def test_every_option_has_the_one_prefix_and_a_help():
    names = [option.env for option in EVERY_OPTION]
    assert len(set(names)) == len(names)
    for option in EVERY_OPTION:
        assert option.env.startswith("JAXPP_MLIR_")
        assert option.help


def test_the_compiler_options_are_not_the_runtimes():
    runtime_names = {option.name for option in options.OPTIONS}
    assert {"DUMP_DIR", "FUSE_TASKS", "PACK_PARAMETERS"} <= {
        option.name for option in partition_options.OPTIONS
    }
    assert runtime_names.isdisjoint(option.name for option in partition_options.OPTIONS)
    assert all(option.read_by.startswith("partition") for option in partition_options.OPTIONS)


def test_no_module_reads_the_environment_for_a_jaxpp_option_itself():
    readers = []
    for folder in ("jaxpp_mlir", "runtime"):
        for path in (SOURCES / folder).rglob("*.py"):
            if path.name in ("options.py", "partition_options.py"):
                continue
            if re.search(r"""environ(?:\.get\(|\[)\s*["']JAXPP_""", path.read_text()):
                readers.append(str(path.relative_to(SOURCES)))
    assert readers == []


def test_new_name_is_read_and_parsed():
    assert options.SETUP_TIMEOUT.value({"JAXPP_MLIR_SETUP_TIMEOUT": "12.5"}) == 12.5
    assert options.SETUP_TIMEOUT.value({}) == 900.0
    assert options.SETUP_TIMEOUT.value({"JAXPP_MLIR_SETUP_TIMEOUT": ""}) == 900.0


def test_old_name_is_read_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="JAXPP_PEER_TIMEOUT is deprecated: set JAXPP_MLIR"):
        assert options.PEER_TIMEOUT.value({"JAXPP_PEER_TIMEOUT": "7"}) == 7.0


def test_new_name_wins_over_the_old_one():
    environ = {"JAXPP_MLIR_PROCESS_ID": "1", "JAXPP_PROCESS_ID": "0"}
    assert options.PROCESS_ID.value(environ) == 1


def test_a_bad_value_names_the_variable():
    with pytest.raises(ValueError, match="JAXPP_MLIR_INIT_TIMEOUT='soon' is not a valid int"):
        options.INIT_TIMEOUT.value({"JAXPP_MLIR_INIT_TIMEOUT": "soon"})


def test_launcher_sets_both_names_of_the_process_options():
    from jaxpp_mlir.distributed.child_setup import child_env

    env = child_env({}, process=1, nproc=2, port=1234, devices_per_proc=None)
    assert env["JAXPP_MLIR_PROCESS_ID"] == env["JAXPP_PROCESS_ID"] == "1"
    assert env["JAXPP_MLIR_NUM_PROCESSES"] == env["JAXPP_NUM_PROCESSES"] == "2"
