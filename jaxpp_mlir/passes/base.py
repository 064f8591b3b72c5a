"""The module-pass base class and the registry of jaxpp passes by name.

A pass is a dataclass subclass of ``ModulePass`` with a kebab-case ``name``;
its dataclass fields are its options (``field(metadata={"help": ...})``), and
the first line of its docstring is the summary ``jaxpp-opt --list-passes``
prints. ``@register_pass`` makes it available by name to ``jaxpp-opt`` and
pipelines; a new pass needs nothing else.

Option values are parsed by their fields' type hints (``bool``, ``int``,
``float``, ``str``, or a tuple or list of one of them; ``@register_pass`` refuses
any other) and checked when the pass is built (from ``{key=value}`` text or
in Python): a value of another type is refused (``fuse_tasks="false"``: only a
bool is a bool), an ``int`` field, or each entry of a ``tuple[int, ...]`` field,
whose metadata has ``"min": m`` must be at least ``m``; a pass with other
rules overrides ``validate()``. An option given twice in one ``{...}`` is an
error, as in MLIR.

Pass order is checked before a pass runs, from what each pass declares about
itself: ``finished(module)`` finds the evidence that the pass already ran,
``unfinished(module)`` the evidence that work it does is still left. A pass
refuses to run before the passes named in its ``requires`` are done with their
work (their ``unfinished``), a second time (its own ``finished``), and after
those named in its ``must_precede`` (their ``finished``). Each refusal is a
located error naming the pass and what to run instead. A required pass that
already ran on the module in the same pipeline run (``completed``) is not looked
for again: its postcondition says its work is done.

Pass objects are frozen: a run keeps its state in locals or in a helper object
of its own, never on the pass.

A pass whose run left the module as it found it (a check, or nothing to do)
returns ``UNCHANGED``: the pipeline then skips the verifier after it, which
would only find again what it found after the pass before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import sys
import typing
from collections.abc import Callable, Collection, Iterator
from typing import Any, ClassVar, NamedTuple

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.diagnostics import PassFailed
from jaxpp_mlir.dialect.vocabulary import YIELD_OP
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.runtime import records

_REGISTRY: dict[str, type[ModulePass]] = {}
# Importing it registers every pass; a lookup by name that misses imports it, so
# ``partition`` loads only the passes its pipeline runs.
_EVERY_PASS_MODULE = "jaxpp_mlir.passes.registry"


class PassOptionError(ValueError):
    """A pass option is unknown, or its value does not parse or is out of range."""


class Unchanged:
    """The type of ``UNCHANGED``."""

    def __repr__(self) -> str:
        return "UNCHANGED"


#: What ``ModulePass.run`` returns when it left the module exactly as it found it.
UNCHANGED = Unchanged()


class Evidence(NamedTuple):
    """An op that shows where the module stands in the pipeline, and what it shows."""

    op: ir.Operation
    what: str  # e.g. "the stages are already outlined (found jaxpp.task @stage0_fwd)"


@records.frozen
class ModulePass:
    """Base class of every jaxpp pass (operates on a ``builtin.module``)."""

    name: ClassVar[str] = ""
    # Passes whose work must be done (their ``unfinished`` finds nothing) before this one.
    requires: ClassVar[tuple[str, ...]] = ()
    # Passes after which this pass must not run (their ``finished`` finds evidence).
    must_precede: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raises ``PassOptionError`` for an option value of another type than its field's
        (a str where a bool is declared) or out of range (see the module doc)."""
        for field in self.option_fields():
            value = getattr(self, field.name)
            _check_option_type(self.name, field, option_type(type(self), field), value)
            minimum = field.metadata.get("min")
            if minimum is None:
                continue
            values = value if isinstance(value, (tuple, list)) else (value,)
            for item in values:
                if isinstance(item, int) and item < minimum:
                    key = field.name.replace("_", "-")
                    entries = "entries " if values is value else ""
                    raise PassOptionError(
                        f"pass '{self.name}': option '{key}' {entries}must be at least "
                        f"{minimum}, got {item}"
                    )

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        """Evidence that this pass already ran on ``module`` (default: none is looked for)."""
        return None

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        """Evidence that work this pass does is left in ``module`` (default: none)."""
        return None

    def run(self, module: ir.Operation) -> Unchanged | None:
        """Transforms or checks ``module`` in place; ``UNCHANGED`` if it changed nothing."""
        raise NotImplementedError

    def check_order(self, module: ir.Operation, completed: Collection[str] = ()) -> None:
        """Fails with a located error if ``module`` is not where this pass belongs.

        ``completed`` names the passes that already ran on ``module`` in this pipeline run.
        """
        for earlier_name in self.requires:
            if earlier_name in completed:
                continue
            found = _declared_pass(self.name, earlier_name).unfinished(module)
            if found is not None:
                raise diagnostics.error(
                    found.op, f"{self.name}: {found.what}: run {earlier_name} first"
                )
        found = self.finished(module)
        if found is not None:
            raise diagnostics.error(
                found.op, f"{self.name}: {found.what}: run {self.name} only once"
            )
        for later_name in self.must_precede:
            found = _declared_pass(self.name, later_name).finished(module)
            if found is not None:
                raise diagnostics.error(
                    found.op, f"{self.name}: {found.what}: run {self.name} before {later_name}"
                )

    def __call__(self, module: ir.Operation, pass_: Any) -> None:
        """Entry point used by MLIR's PassManager (see ``PassRun`` to keep internal errors)."""
        PassRun(self)(module, pass_)

    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def description(cls) -> str:
        return inspect.getdoc(cls) or ""

    @classmethod
    def option_fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.init]

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ModulePass:
        """Builds the pass from ``{key: text}`` options (MLIR's ``{key=value}``)."""
        fields = {f.name.replace("_", "-"): f for f in cls.option_fields()}
        kwargs: dict[str, Any] = {}
        for key, text in options.items():
            field = fields.get(key) or fields.get(key.replace("_", "-"))
            if field is None:
                known = ", ".join(sorted(fields)) or "none"
                raise PassOptionError(
                    f"pass '{cls.name}' has no option '{key}' (its options: {known})"
                )
            kwargs[field.name] = _parse_option(cls.name, key, text, option_type(cls, field))
        return cls(**kwargs)

    def options_text(self) -> str:
        """The options in MLIR's ``{key=value ...}`` form ('' if none)."""
        parts = []
        for field in self.option_fields():
            value = getattr(self, field.name)
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            parts.append(f"{field.name.replace('_', '-')}={value}")
        return "{" + " ".join(parts) + "}" if parts else ""


@dataclasses.dataclass
class PassRun:
    """One run of ``pass_`` through MLIR's PassManager; keeps a bug's exception.

    Located errors (``PassFailed``) fail the pass; any other exception is an
    internal error: reported at the module, kept in ``internal_error``, and the
    interpreter stays alive. ``changed`` is False when the pass returned ``UNCHANGED``.
    ``completed`` names the passes that already ran on the module (see ``check_order``);
    ``failure_category`` is the category of a located error (``PassFailed``).
    """

    pass_: ModulePass
    completed: Collection[str] = ()
    internal_error: Exception | None = None
    changed: bool = True
    failure_category: type[Exception] | None = None

    def __call__(self, module: ir.Operation, pass_: Any) -> None:
        try:
            with module.location:
                self.pass_.check_order(module, self.completed)
                self.changed = self.pass_.run(module) is not UNCHANGED
        except PassFailed as failed:
            self.failure_category = failed.category
            pass_.signal_pass_failure()
        except Exception as exc:
            self.internal_error = exc
            module.location.emit_error(f"internal error in {self.pass_.name}: {exc!r}")
            pass_.signal_pass_failure()


def _declared_pass(declaring: str, name: str) -> type[ModulePass]:
    found = get_pass_class(name)
    if found is None:
        raise ValueError(f"pass '{declaring}' declares an order with unknown pass '{name}'")
    return found


def register_pass(cls: type[ModulePass]) -> type[ModulePass]:
    """Class decorator: registers ``cls`` under ``cls.name``."""
    if not cls.name or not cls.name.startswith("jaxpp-"):
        raise ValueError(f"pass class {cls.__name__} needs a name starting with 'jaxpp-'")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"pass name '{cls.name}' is registered twice")
    for field in cls.option_fields():
        hint = option_type(cls, field)
        if not _supported_option_type(hint):
            raise TypeError(
                f"pass '{cls.name}': option '{field.name}' has type {_type_name(hint)}; "
                "pass options are bool, int, float, str or a tuple/list of one of them"
            )
    _REGISTRY[cls.name] = cls
    return cls


@contextlib.contextmanager
def registered(*classes: type[ModulePass]) -> Iterator[None]:
    """Registers ``classes`` (checked as ``@register_pass`` checks them) for the ``with``
    block only, for tests and experiments: afterwards the registry is as it was."""
    added = [cls for cls in classes if _REGISTRY.get(cls.name) is not cls]
    try:
        for cls in added:
            register_pass(cls)
        yield
    finally:
        for cls in added:
            if _REGISTRY.get(cls.name) is cls:
                del _REGISTRY[cls.name]


def registered_passes() -> dict[str, type[ModulePass]]:
    """Every registered pass by name (every pass module imported first)."""
    _import_every_pass()
    return dict(sorted(_REGISTRY.items()))


def get_pass_class(name: str) -> type[ModulePass] | None:
    """The pass registered as ``name`` (every pass module imported first if none is yet)."""
    found = _REGISTRY.get(name)
    if found is None and _import_every_pass():
        found = _REGISTRY.get(name)
    return found


def _import_every_pass() -> bool:
    """Imports the module that imports every pass; False if it was imported already."""
    if _EVERY_PASS_MODULE in sys.modules:
        return False
    importlib.import_module(_EVERY_PASS_MODULE)
    return True


def find_in_stage_block(
    module: ir.Operation, what_it_shows: Callable[[ir.Operation], str | None]
) -> Evidence | None:
    """The first op of the stage block (the loop body, else ``@main``) for which
    ``what_it_shows`` says something, as evidence for ``finished``/``unfinished``."""
    main = find_main(module)
    if main is None:
        return None
    for op in ir_utils.block_ops(ir_utils.stage_block(main)):
        what = what_it_shows(op)
        if what is not None:
            return Evidence(op, what)
    return None


_TERMINATORS = ("func.return", YIELD_OP)


def find_untagged(
    module: ir.Operation, tagged: Callable[[ir.Operation], bool], what: str, module_attr: str
) -> Evidence | None:
    """Work left for a pass that tags every op of the stage block but its terminator
    (``tagged`` says whether an op is) and the module (with ``module_attr``), as
    evidence for ``unfinished``: the first op without its ``what``, else the module."""
    found = find_in_stage_block(
        module,
        lambda op: (
            f"'{op.name}' has no {what}" if op.name not in _TERMINATORS and not tagged(op) else None
        ),
    )
    if found is not None or find_main(module) is None:
        return found
    if module_attr not in module.attributes:
        return Evidence(module, f"module has no {module_attr} attribute")
    return None


_SCALAR_OPTION_TYPES = (bool, int, float, str)


def option_type(pass_class: type[ModulePass], field: dataclasses.Field) -> Any:
    """The type hint of ``field``, resolved in the pass's module (not the annotation text)."""
    return _type_hints(pass_class)[field.name]


@functools.cache
def _type_hints(pass_class: type[ModulePass]) -> dict[str, Any]:
    # Resolving a class's hints evaluates every annotation: once per pass class, not per
    # option of every pass made.
    return typing.get_type_hints(pass_class)


def _sequence_item_type(hint: Any) -> Any:
    """``T`` of ``tuple[T, ...]`` or ``list[T]`` (None for any other hint)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if origin is list and len(args) == 1:
        return args[0]
    return None


def _supported_option_type(hint: Any) -> bool:
    return hint in _SCALAR_OPTION_TYPES or _sequence_item_type(hint) in _SCALAR_OPTION_TYPES


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _is_scalar(hint: type, value: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


def _check_option_type(pass_name: str, field: dataclasses.Field, hint: Any, value: Any) -> None:
    item_type = _sequence_item_type(hint)
    if item_type is None:
        fits = _is_scalar(hint, value)
    else:
        fits = isinstance(value, (tuple, list)) and all(_is_scalar(item_type, v) for v in value)
    if not fits:
        key = field.name.replace("_", "-")
        raise PassOptionError(
            f"pass '{pass_name}': option '{key}' expects {_type_name(hint)}, got {value!r} "
            f"({type(value).__name__})"
        )


def _parse_scalar(hint: type, text: str) -> Any:
    if hint is bool:
        if text.lower() in ("true", "1", ""):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise ValueError(text)
    return hint(text)


def _parse_option(pass_name: str, key: str, text: str, hint: Any) -> Any:
    text = text.strip()
    item_type = _sequence_item_type(hint)
    try:
        if item_type is not None:
            return tuple(
                _parse_scalar(item_type, part.strip()) for part in text.split(",") if part.strip()
            )
        return _parse_scalar(hint, text)
    except ValueError:
        raise PassOptionError(
            f"pass '{pass_name}': option '{key}' expects {_type_name(hint)}, got '{text}'"
        ) from None
