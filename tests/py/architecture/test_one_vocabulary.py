"""Task kinds, attribute names and the lookup of @main are spelled once."""

import pathlib
import re

from jaxpp_mlir.dialect import ops, vocabulary
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.plan import stage_modules
from jaxpp_mlir.schedules import task

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "jaxpp_mlir"


def test_task_kinds_come_from_the_dialect_vocabulary():
    assert task.KINDS is vocabulary.KINDS is ops.KINDS
    assert (task.FWD, task.BWD, task.BWD_I, task.BWD_W) == vocabulary.KINDS


def test_sharding_attribute_named_once():
    assert shardings.SHARDING_ATTR is stage_modules.SHARDING_ATTR is vocabulary.SHARDING_ATTR


def test_no_module_spells_a_vocabulary_string_as_its_own_constant():
    words = {
        value
        for name, value in vars(vocabulary).items()
        if name.isupper() and isinstance(value, str) and value.startswith(("jaxpp.", "sdy."))
    }
    spelled = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "vocabulary.py" or "plan_builder" in path.name:
            continue
        for match in re.finditer(r'^([A-Z_]+) = "([^"]+)"', path.read_text(), re.M):
            if match.group(2) in words:
                spelled.append(f"{path.relative_to(PACKAGE)}: {match.group(1)}")
    assert spelled == []


def test_main_is_found_one_way():
    lookups = []
    for path in PACKAGE.rglob("*.py"):
        if path.parts[-2:] == ("ir", "utils.py") or "plan_builder" in path.name:
            continue
        if re.search(r"""\.value == ["']main["']""", path.read_text()):
            lookups.append(str(path.relative_to(PACKAGE)))
    assert lookups == []
