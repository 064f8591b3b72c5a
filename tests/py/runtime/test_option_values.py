"""Every option (the runtime's and the compiler's) refuses a value outside what it
allows, at its first read, by name."""

import pytest
from jaxpp_mlir.runtime import options

from jaxpp_mlir import partition_options

EVERY_OPTION = (*options.OPTIONS, *partition_options.OPTIONS)


def _out_of_range(option: options.Option) -> list[str]:
    """Texts of the option's type that it must refuse."""
    if option.choices:
        return ["-1", "3", "banana"] if option.type is str else ["-1", "3"]
    if option.above is not None:
        return ["nan", "inf", "-1", str(option.above)]
    if option.minimum is not None:
        return [str(option.minimum - 1), *(["nan", "-inf"] if option.type is float else [])]
    return []


CONSTRAINED = [o for o in EVERY_OPTION if _out_of_range(o)]


def test_every_number_or_choice_option_says_what_it_allows():
    free = {o.name for o in EVERY_OPTION if not o.allowed()}
    assert free == {"DUMP_DIR", "FAILURE_NOTES", "LAUNCH_PYTHON"}


@pytest.mark.parametrize("option", CONSTRAINED, ids=lambda o: o.name)
def test_a_value_outside_the_allowed_ones_names_variable_value_and_allowed(option):
    for text in _out_of_range(option):
        with pytest.raises(ValueError) as caught:
            option.value({option.env: text})
        assert f"{option.env}={text!r}" in str(caught.value)
        assert option.allowed() in str(caught.value)


@pytest.mark.parametrize("option", CONSTRAINED, ids=lambda o: o.name)
def test_the_default_is_allowed(option):
    if option.default is not None:
        assert option.value({option.env: str(option.default)}) == option.default


def test_choices_of_words_ignore_case_and_spaces():
    assert options.PROGRESS.value({"JAXPP_MLIR_PROGRESS": " TQDM "}) == "tqdm"


def test_the_issues_values():
    cases = {
        partition_options.PACK_PARAMETERS: "3",
        partition_options.REPLICATE_MAX_BYTES: "-1",
        options.PROGRESS: "banana",
        options.HEARTBEAT_INTERVAL: "nan",
        options.TRANSFER_TIMEOUT: "-1",
    }
    for option, text in cases.items():
        with pytest.raises(ValueError, match=f"{option.env}='{text}' is not allowed: "):
            option.value({option.env: text})
