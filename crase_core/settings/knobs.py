"""Settings fields described once: default, help, range or choices, environment variable, CLI flag.

A settings dataclass declares each field with :func:`knob`; the :class:`Knob`
in the field's metadata is what the CLI flags, the app's form, the settings
file loader and validation all read, so no knob is listed twice.

:func:`check` validates an instance against its metadata (type, finite
numbers, range, choices) and raises :class:`InputError` naming the first bad
field; :func:`coerce` turns text (a flag, a variable, a form value) into the
field's type. A knob whose ``when`` condition is false for the current
values "does not apply" (for example α to the CEP ranker): front ends disable
or refuse it; the dataclass itself accepts and ignores it, so old traces load.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crase_core.errors import InputError

KNOB = "crase_knob"

Choices = Callable[[], Sequence[Any]] | Sequence[Any]


@dataclass(frozen=True)
class When:
    """A knob applies only while the setting ``field`` has one of ``values`` (a callable reads a registry)."""

    field: str
    values: Callable[[], Collection[Any]] | Collection[Any]

    def allowed(self) -> tuple[Any, ...]:
        values = self.values() if callable(self.values) else self.values
        return tuple(values)

    def holds(self, obj: Any) -> bool:
        return getattr(obj, self.field) in self.allowed()


@dataclass(frozen=True)
class Knob:
    """What front ends need to know about one settings field (its default lives on the field)."""

    help: str
    label: str = ""
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False  # the bound itself is excluded
    max_open: bool = False
    choices: Choices | None = None
    env: str | None = None  # environment variable that sets it (read by crase_core.settings.config)
    flag: str | None = None  # CLI flag; default ``--`` + the field name with ``-`` for ``_``
    metavar: str | None = None  # the flag's value placeholder; default from the type or the choices
    cli: bool = True  # offered as a CLI flag
    form: bool = True  # offered in the app's run-settings form (only operator-safe knobs)
    step: float | None = None  # the form's slider step (floats) / number step (ints)
    form_max: float | None = None  # the form's upper bound where the field has none
    none_as: Any = None  # the form shows None as this value (e.g. 0 = no cap)
    when: When | None = None
    secret: bool = False  # never shown, never recorded

    def options(self) -> tuple[Any, ...]:
        if self.choices is None:
            return ()
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def describe_range(self) -> str:
        lo, hi = self.minimum, self.maximum
        if lo is not None and hi is not None:
            return f"in {'(' if self.min_open else '['}{_num(lo)}, {_num(hi)}{')' if self.max_open else ']'}"
        if lo is not None:
            return f"{'>' if self.min_open else '≥'} {_num(lo)}"
        if hi is not None:
            return f"{'<' if self.max_open else '≤'} {_num(hi)}"
        return ""


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def knob(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field with ``default`` and a :class:`Knob` (keyword arguments) in its metadata."""
    k = Knob(help=help, **meta)
    if k.secret:
        return dataclasses.field(default=default, repr=False, compare=False, metadata={KNOB: k})
    return dataclasses.field(default=default, metadata={KNOB: k})


@dataclass(frozen=True)
class Spec:
    """One knob field of a settings class: name, default, base type, whether None is allowed, metadata."""

    name: str
    default: Any
    type: type
    optional: bool
    knob: Knob

    @property
    def flag(self) -> str:
        return self.knob.flag or "--" + self.name.replace("_", "-")

    @property
    def label(self) -> str:
        return self.knob.label or self.name


_SPECS: dict[type, tuple[Spec, ...]] = {}


def specs(cls: type) -> tuple[Spec, ...]:
    """The knob fields of the dataclass ``cls``, in declaration order (computed once per class)."""
    known = _SPECS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    out: list[Spec] = []
    for f in dataclasses.fields(cls):
        k = f.metadata.get(KNOB)
        if not isinstance(k, Knob):
            continue
        base, optional = _base_type(hints[f.name])
        out.append(Spec(f.name, f.default, base, optional, k))
    _SPECS[cls] = tuple(out)
    return _SPECS[cls]


def spec(cls: type, name: str) -> Spec:
    for s in specs(cls):
        if s.name == name:
            return s
    raise KeyError(name)


def _base_type(hint: Any) -> tuple[type, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return _plain(rest[0]), True
    return _plain(hint), False


def _plain(hint: Any) -> type:
    if typing.get_origin(hint) is typing.Literal:
        return type(typing.get_args(hint)[0])
    return hint if isinstance(hint, type) else str


def coerce(s: Spec, value: Any, name: str | None = None) -> Any:
    """``value`` (text from a flag, variable or form, or a parsed file value) as ``s``'s type.

    ``name`` is how errors call the knob (a flag, ``section.field``); default: the field name.
    """
    name = name or s.name
    if value is None or (isinstance(value, str) and not value.strip() and s.optional):
        if s.optional:
            return None
        raise InputError(f"{name} needs a value")
    if s.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise InputError(f"{name} must be true or false (got {value!r})")
    if s.type is int:
        if isinstance(value, bool):
            raise InputError(f"{name} must be a whole number (got {value!r})")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        try:
            return int(str(value).strip())
        except ValueError:
            raise InputError(f"{name} must be a whole number (got {value!r})") from None
    if s.type is float:
        if isinstance(value, bool):
            raise InputError(f"{name} must be a number (got {value!r})")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a number (got {value!r})") from None
        except OverflowError:
            raise InputError(f"{name} must be a finite number (got {value!r})") from None
        if not math.isfinite(number):
            raise InputError(f"{name} must be a finite number (got {value!r})")
        return number
    if not isinstance(value, str):
        raise InputError(f"{name} must be text (got {value!r})")
    return value.strip()


def check(obj: Any, prefix: str = "") -> None:
    """Validate every knob field of ``obj`` (type, finite, range, choices); normalise int → float fields.

    Raises :class:`InputError` naming the first bad field (``prefix`` + name).
    """
    for s in specs(type(obj)):
        value = getattr(obj, s.name)
        if s.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
            object.__setattr__(obj, s.name, value)
        check_value(s, value, prefix + s.name)


def check_value(s: Spec, value: Any, name: str | None = None) -> None:
    """Raise :class:`InputError` (calling the knob ``name``) unless ``value`` suits ``s``."""
    name = name or s.name
    if value is None:
        if not s.optional:
            raise InputError(f"{name} needs a value")
        return
    if s.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    ok_type = (isinstance(value, bool) if s.type is bool
               else isinstance(value, s.type) and not isinstance(value, bool))
    if not ok_type:
        raise InputError(f"{name} must be {_type_name(s.type)} (got {value!r})")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{name} must be a finite number (got {value})")
    options = s.knob.options()
    if options and value not in options:
        listed = ", ".join(_num(o) for o in options)
        if isinstance(value, str):
            raise InputError(f"unknown {s.name} {value!r}; choose one of {listed}")
        raise InputError(f"{name} must be one of {listed} (got {_num(value)})")
    k = s.knob
    if isinstance(value, int | float) and not isinstance(value, bool) and (
        (k.minimum is not None and (value < k.minimum or (k.min_open and value == k.minimum)))
        or (k.maximum is not None and (value > k.maximum or (k.max_open and value == k.maximum)))
    ):
        raise InputError(f"{name} must be {k.describe_range()} (got {_num(value)})")


def _type_name(t: type) -> str:
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(t, t.__name__)


def values_of(obj: Any) -> dict[str, Any]:
    """Field name → value for every knob field of ``obj`` (secrets included: keep it internal)."""
    return {s.name: getattr(obj, s.name) for s in specs(type(obj))}


T = typing.TypeVar("T")


def from_options(cls: type[T], options: Mapping[str, Any] | T | None, service: str) -> T:
    """An instance of the settings class ``cls`` from a plain mapping (or ``cls`` itself, returned as is);
    :class:`InputError` naming the unknown keys and the valid ones, or a bad value."""
    if isinstance(options, cls):
        return options
    values: dict[str, Any] = dict(typing.cast(Mapping[str, Any], options or {}))
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - names)
    if unknown:
        raise InputError(f"unknown {service} setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}")
    try:
        return cls(**values)
    except TypeError as e:
        raise InputError(f"bad {service} settings: {e}") from None
