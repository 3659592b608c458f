"""The one argument check of the public face: every public verb of
:class:`~graphmem.memory.GraphMemory` and of its sub-objects checks its arguments against its
own signature before it runs, and refuses a call that does not fit with
:class:`~graphmem.errors.InvalidInput` — so a caller only ever sees graphmem's errors, and a
refused call has touched nothing.

What is checked, from the annotations the verbs already carry (the same ones mypy checks):

- the call binds: no unknown keyword, no missing argument, no argument given twice;
- each argument has its annotated type: ``str`` is text that can be stored (no lone
  surrogate), ``int`` an integer (not a bool) that fits 64 bits, ``float`` a finite number,
  ``bool`` a bool, a ``Sequence``/``Iterable`` of something is a container (a lone string is
  not a list of strings) whose items fit, a ``Mapping`` is a mapping with fitting keys,
  ``Literal`` one of its values, a class an instance of it; unions take any member;
- text anywhere inside an argument (metadata values, payloads) can be stored.

What a value *means* (an unknown category, a negative limit, a date out of range) is the
verb's own business (mostly the pydantic models): this module only makes sure it gets the
types its code was written for. :func:`guard` wraps the methods of a class in place; the store
guards its face once, at import (bottom of :mod:`graphmem.memory`).
"""

from __future__ import annotations

import collections.abc as cabc
import datetime
import functools
import inspect
import numbers
import threading
import types
import typing
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import is_, itemgetter
from typing import Any, ParamSpec, TypeVar

from graphmem.errors import InvalidInput

_P = ParamSpec("_P")
_R = TypeVar("_R")

__all__ = ["batch_columns", "check_arguments", "guard", "unchecked"]

_INT64 = 2**63
#: how deep and how wide text inside an argument is looked at
_MAX_DEPTH = 8
_MAX_ITEMS = 10_000

#: set on a checked function, so guarding twice wraps once
_MARK = "__graphmem_guarded__"


def _storable(text: str) -> bool:
    if text.isascii():  # a flag CPython keeps on the string: no encoding to try
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_WALKED = (list, tuple, set, frozenset)
#: values a batch holds many of that hold no text (an item's importance, its time)
_SCALARS = frozenset({int, float, bool, type(None), datetime.datetime})


def _all_text_storable(value: Any) -> bool:
    """Whether every string inside ``value`` (containers walked, at most ``_MAX_DEPTH``
    deep and ``_MAX_ITEMS`` values) can be stored. Iterative, with strings looked at where
    they are found: a batch of 1,000 mappings is ~10,000 values, once per call."""
    # nothing the walk could find (the common case: a batch of plain items), or the walk
    return _every_text_storable(value) or _walk_text_storable(value)


def _walk_text_storable(value: Any) -> bool:
    """:func:`_all_text_storable` by walking ``value`` (the walk's budget decides what a
    refusal names: text past it is left to the verb's own checks)."""
    budget = _MAX_ITEMS
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return True
        if isinstance(node, str):
            if not _storable(node):
                return False
            continue
        if depth >= _MAX_DEPTH:
            continue
        if node.__class__ is dict:  # a batch's items: its keys and values, not its pairs
            items: Iterable[Any] = (*node, *node.values())
        elif isinstance(node, cabc.Mapping):
            items = (x for pair in node.items() for x in pair)
        elif isinstance(node, _WALKED):
            items = node
        else:
            continue
        inner: list[tuple[Any, int]] = []
        for item in items:
            if item.__class__ is str:  # most of a batch: checked here, not stacked
                budget -= 1
                if not item.isascii() and not _storable(item):
                    return False
            elif item.__class__ in _SCALARS:  # no text inside: counted, not stacked
                budget -= 1
            else:
                inner.append((item, depth + 1))
        stack.extend(reversed(inner))  # walked in their order: a batch from its start
    return True


#: what this thread's check read of a batch (a list of dicts): ``shapes`` (the list, its
#: items' key tuples: for the text walk of the same check), ``columns`` (the list, key ->
#: the items' values when they have one shape: for the checked verb's own validation of
#: it, see :func:`batch_columns`); cleared when a check starts and when its verb returns
_READ = threading.local()


def batch_columns(items: Any) -> dict[str, list[Any]] | None:
    """The columns (key -> each item's value, in the items' key order) the argument check
    of the running verb read of ``items`` — this very list, whose dicts all have one shape
    — or None; forgotten either way. The verb validating the batch it was given takes them
    instead of reading the items again (only graphmem's code runs between the two)."""
    held = getattr(_READ, "columns", None)
    _READ.columns = None
    if held is None or held[0] is not items:
        return None
    columns: dict[str, list[Any]] = held[1]
    return columns


def _shapes(values: Sequence[Any]) -> set[tuple[Any, ...]]:
    """The key tuples of ``values`` (dicts), as the check of a list's type just read them
    when it read this very list."""
    held = getattr(_READ, "shapes", None)
    if held is not None and held[0] is values:
        shapes: set[tuple[Any, ...]] = held[1]
        return shapes
    return set(map(tuple, values))


#: what plain containers may hold for :func:`_every_text_storable` to answer
_PLAIN_KINDS = frozenset({str, dict, list, tuple, *_SCALARS})


def _every_text_storable(value: Any) -> bool:
    """True when every string anywhere inside ``value`` — a list or tuple of dicts, lists,
    tuples, strings and :data:`_SCALARS` — can be stored, so the walk of
    :func:`_all_text_storable` cannot find one that cannot, however deep or far it looks;
    False when that is not sure (then the walk decides). Column by column: the values of a
    list, the values dicts of one shape hold under each key, each read by one map over
    the column, every string found joined and checked at once — a batch of 1,000 items is
    a few dozen passes, not 10,000 steps."""
    if value.__class__ is not list and value.__class__ is not tuple:
        return False
    texts: list[Sequence[str]] = []
    columns: list[tuple[Sequence[Any], int]] = [(value, 0)]
    while columns:
        column, depth = columns.pop()
        if depth > _MAX_DEPTH:
            return False  # nested deeper than the walk looks: the walk answers
        kinds = set(map(type, column))
        if not kinds.issubset(_PLAIN_KINDS):
            return False  # a mapping or a walked container of another class: the walk's
        if len(kinds) == 1:
            parts: Iterable[tuple[type, Sequence[Any]]] = ((next(iter(kinds)), column),)
        else:
            classes = list(map(type, column))
            parts = ((k, list(compress(column, map(is_, classes, repeat(k))))) for k in kinds)
        for kind, values in parts:
            if kind is str:
                texts.append(values)
            elif kind is dict:
                shapes = _shapes(values)
                if len(shapes) == 1:
                    [keys] = shapes
                    columns.append((keys, depth + 1))
                    read = {key: list(map(itemgetter(key), values)) for key in keys}
                    if values is value:  # the argument itself: its columns kept for its verb
                        _READ.columns = (value, read)
                    columns.extend((column, depth + 1) for column in read.values())
                else:
                    columns.append((list(chain.from_iterable(values)), depth + 1))
                    columns.append((list(chain.from_iterable(map(dict.values, values))), depth + 1))
            elif kind is list or kind is tuple:
                columns.append((list(chain.from_iterable(values)), depth + 1))
    joined = "".join(chain.from_iterable(texts))
    return joined.isascii() or _storable(joined)


def _describe(tp: Any) -> str:
    """``a datetime or None``, ``a str or Sequence[str]``: the annotation in words."""
    if tp is None or tp is type(None):
        return "None"
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if isinstance(tp, type):
        return ("an " if tp.__name__[0] in "aeiouAEIOU" else "a ") + tp.__name__
    return str(tp).replace("typing.", "").replace("collections.abc.", "")


def _is_protocol(tp: type) -> bool:
    return bool(getattr(tp, "_is_protocol", False))


def _fits(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the annotated type ``tp`` (see the module docstring)."""
    return _checker(tp)(value)


_Check = Callable[[Any], bool]
#: a check -> its check of a whole list, tuple or set at once: True when every value passes,
#: False when that is not sure (each value is then checked)
_ALL_FIT: weakref.WeakKeyDictionary[_Check, Callable[[Collection[Any]], bool]] = (
    weakref.WeakKeyDictionary()
)


def _anything(value: Any) -> bool:
    return True


def _checker(tp: Any) -> _Check:
    """The check of annotation ``tp``, built once per annotation: a long list of items (a
    batch of 100k memories) is then checked at the cost of one call per item, not of
    re-reading the annotation for each."""
    try:
        return _cached_checker(tp)
    except TypeError:  # an unhashable annotation: built for this call only
        return _build_checker(tp)


@functools.lru_cache(maxsize=1024)
def _cached_checker(tp: Any) -> _Check:
    return _build_checker(tp)


def _build_checker(tp: Any) -> _Check:
    if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return _anything
    if tp is None or tp is type(None):
        return lambda value: value is None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        members = tuple(_checker(a) for a in args)

        def union(value: Any) -> bool:
            for check in members:
                if check(value):
                    return True
            return False

        batched = [_ALL_FIT[m] for m in members if m in _ALL_FIT]
        if batched:
            # a list that one member takes whole is taken (a batch of items, all mappings)
            _ALL_FIT[union] = lambda values: any(fit(values) for fit in batched)
        return union
    if origin is typing.Literal:
        return lambda value: (
            any(type(value) is type(a) and value == a for a in args)
            or any(isinstance(a, str) and value == a for a in args)
        )
    if origin is None:
        return _class_checker(tp)
    if origin is cabc.Callable:
        return callable
    if origin is type:
        return lambda value: isinstance(value, type)
    if origin is typing.IO or tp is typing.IO:
        return lambda value: hasattr(value, "read") or hasattr(value, "write")
    if isinstance(origin, type) and issubclass(origin, (cabc.Iterable, cabc.Mapping)):
        return _container_checker(origin, args)
    if isinstance(origin, type):  # another generic class (os.PathLike[str]): its instances
        return _class_checker(origin)
    return _anything


def _fits_int(value: Any) -> bool:
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and -_INT64 <= int(value) < _INT64
    )


def _fits_float(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return bool(abs(float(value)) < float("inf"))  # finite, and not NaN
    except OverflowError:
        return False


def _fits_str(value: Any) -> bool:
    return isinstance(value, str) and _storable(value)


def _class_checker(tp: Any) -> _Check:
    if not isinstance(tp, type):
        return _anything  # a forward reference that did not resolve: not checked
    if tp is bool:
        return lambda value: isinstance(value, bool)
    if tp is int:
        return _fits_int
    if tp is float:
        return _fits_float
    if tp is str:
        return _fits_str
    if tp is typing.IO:
        return lambda value: hasattr(value, "read") or hasattr(value, "write")
    if _is_protocol(tp) and not getattr(tp, "_is_runtime_protocol", False):
        return _anything

    def instance(value: Any) -> bool:
        try:
            return isinstance(value, tp)
        except TypeError:
            return True

    return instance


def _container_checker(origin: type, args: tuple[Any, ...]) -> _Check:
    textual = issubclass(origin, (str, bytes))
    if issubclass(origin, cabc.Mapping):
        key, val = (_checker(args[0]), _checker(args[1])) if len(args) == 2 else (None, None)

        plain = issubclass(dict, origin)  # a dict then passes without an ABC check

        def mapping(value: Any) -> bool:
            if not (plain and value.__class__ is dict) and not isinstance(value, origin):
                return False
            if key is None or val is None or not isinstance(value, dict):
                return True
            if val is _anything:
                if key is _fits_str:  # the keys' text is looked at by the text walk
                    return all(isinstance(k, str) for k in value)
                return all(key(k) for k in value)
            return all(key(k) and val(v) for k, v in value.items())

        if plain and key is _fits_str and val is _anything:

            def all_mappings(values: Collection[Any]) -> bool:
                # dicts of a few shapes (a batch's items): the keys of each shape once
                if set(map(type, values)) != {dict}:
                    return False
                shapes = set(map(tuple, values))
                _READ.shapes = (values, shapes)  # the text walk reads them next
                return all(isinstance(k, str) for shape in shapes for k in shape)

            _ALL_FIT[mapping] = all_mappings
        return mapping
    fixed = origin is tuple and bool(args) and not (len(args) == 2 and args[1] is Ellipsis)
    parts = tuple(_checker(a) for a in args) if fixed else ()
    item = _checker(args[0]) if args and not fixed else None

    def container(value: Any) -> bool:
        if isinstance(value, (str, bytes, bytearray)) and not textual:
            return False  # one string is not a list of strings
        if not isinstance(value, origin):
            return False
        if not isinstance(value, (list, tuple, set, frozenset)) or not args:
            return True  # a generator is not consumed here
        if fixed:
            return len(value) == len(parts) and all(
                check(v) for check, v in zip(parts, value, strict=True)
            )
        if item is None or item is _anything:
            return True
        fit = _ALL_FIT.get(item)
        return (fit is not None and fit(value)) or all(map(item, value))

    return container


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``fn``; a name only imported for type checking stays
    unchecked (Any)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        pass
    ns = dict(getattr(fn, "__globals__", {}))
    hints: dict[str, Any] = {}
    for name, ann in getattr(fn, "__annotations__", {}).items():
        try:
            hints[name] = eval(ann, ns) if isinstance(ann, str) else ann
        except Exception:
            hints[name] = Any
    return hints


@functools.cache
def _typed_dict_fields(td: Any) -> dict[str, Any]:
    """The keys of the TypedDict ``td`` (``**options: Unpack[td]``) and their resolved types;
    a key whose annotation names something only imported for type checking stays unchecked."""
    try:
        return typing.get_type_hints(td)
    except Exception:
        pass
    module = inspect.getmodule(td)
    ns = dict(vars(module)) if module is not None else {}
    fields: dict[str, Any] = {}
    for name, ann in getattr(td, "__annotations__", {}).items():
        text = ann.__forward_arg__ if isinstance(ann, typing.ForwardRef) else ann
        try:
            fields[name] = eval(text, ns) if isinstance(text, str) else text
        except Exception:
            fields[name] = Any
    return fields


def check_arguments(
    verb: str, sig: inspect.Signature, hints: dict[str, Any], args: Any, kwargs: Any
) -> None:
    """InvalidInput when ``args``/``kwargs`` do not fit ``sig`` (see the module docstring)."""
    _READ.shapes = _READ.columns = None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise InvalidInput(f"{verb}(): {e}") from None
    for name, value in bound.arguments.items():
        param = sig.parameters[name]
        tp = hints.get(name, Any)
        keyed: dict[str, Any] | None = None
        if param.kind is param.VAR_POSITIONAL:
            values: Iterable[tuple[str, Any]] = ((name, v) for v in value)
        elif param.kind is param.VAR_KEYWORD:
            values = value.items()
            if typing.get_origin(tp) is typing.Unpack:
                keyed = _typed_dict_fields(typing.get_args(tp)[0])
        else:
            values = ((name, value),)
        for label, v in values:
            if keyed is not None:
                if label not in keyed:
                    raise InvalidInput(f"{verb}(): got an unexpected keyword argument {label!r}")
                tp = keyed[label]
            if not _fits(v, tp):
                why = _why_refused(v, tp)
                if why:
                    raise InvalidInput(f"{verb}(): {label} {why}")
                raise InvalidInput(
                    f"{verb}(): {label} must be {_describe(tp)}, not {type(v).__name__} {_short(v)}"
                )
            if not _all_text_storable(v):
                raise InvalidInput(f"{verb}(): {label} holds text that cannot be stored")
    _READ.shapes = None


def _why_refused(value: Any, tp: Any) -> str | None:
    """Why a value whose type ``tp`` takes was refused (text that cannot be stored, an
    integer past 64 bits, a number that is not finite), or None: "must be an int, not int
    …" would name the type the value already has."""
    if isinstance(value, str):
        return "holds text that cannot be stored (a lone surrogate)" if _fits("", tp) else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if _fits(0.0, tp):
        return "is not a finite number (of a 64-bit float)"
    if isinstance(value, numbers.Integral) and _fits(0, tp):
        return "is outside the 64-bit range of integers"
    return None


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = "?"
    return text if len(text) <= 40 else text[:37] + "..."


def _wrap(fn: Callable[..., Any], verb: str, *, method: bool) -> Callable[..., Any]:
    # the signature and the resolved hints are read at the first call, not when the class
    # is guarded: resolving ~120 verbs' annotations at import costs every process (a cold
    # CLI command uses two or three verbs)
    spec: list[tuple[inspect.Signature, dict[str, Any]]] = []

    def check(args: Any, kwargs: Any) -> None:
        if not spec:
            sig = inspect.signature(fn)
            if method:  # the bound receiver is not the caller's argument
                sig = sig.replace(parameters=list(sig.parameters.values())[1:])
            spec.append((sig, _hints(fn)))
        sig, hints = spec[0]
        check_arguments(verb, sig, hints, args, kwargs)

    if not method:

        @functools.wraps(fn)
        def checked_static(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            try:
                return fn(*args, **kwargs)
            finally:
                _READ.columns = None  # what the check read lives as long as the call

        setattr(checked_static, _MARK, True)
        return checked_static

    @functools.wraps(fn)
    def checked(receiver: Any, /, *args: Any, **kwargs: Any) -> Any:
        check(args, kwargs)
        try:
            return fn(receiver, *args, **kwargs)
        finally:
            _READ.columns = None  # what the check read lives as long as the call

    setattr(checked, _MARK, True)
    return checked


def guard(cls: type, names: Iterable[str] | None = None, *, prefix: str = "") -> None:
    """Check the arguments of ``cls``'s public methods (or of ``names``) on every call
    (in place; idempotent). ``prefix`` names the object in messages (``mem.runs``)."""
    label = prefix or cls.__name__
    # dir(): a verb a class takes from a base (a mixin of a split module) is guarded too
    chosen = names if names is not None else [n for n in dir(cls) if not n.startswith("_")]
    for name in chosen:
        static = inspect.getattr_static(cls, name)
        verb = f"{label}.{name}"
        if isinstance(static, (classmethod, staticmethod)):
            fn = static.__func__
            if not getattr(fn, _MARK, False):
                is_class = isinstance(static, classmethod)
                wrapped = _wrap(fn, verb, method=is_class)
                setattr(cls, name, classmethod(wrapped) if is_class else staticmethod(wrapped))
        elif inspect.isfunction(static) and not getattr(static, _MARK, False):
            setattr(cls, name, _wrap(static, verb, method=True))


def unchecked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A guarded verb (bound to its object or class) without its argument check, for
    graphmem's own calls that pass on arguments the public verb receiving them has checked
    already (``recall``'s filters to ``namespaces.memory_filter``): the check binds the
    call to the signature again, tens of µs a call. Anything else is returned as it is."""
    fn = getattr(method, "__func__", None)
    receiver = getattr(method, "__self__", None)
    if fn is None or receiver is None or not getattr(fn, _MARK, False):
        return method
    return types.MethodType(fn.__wrapped__, receiver)


#: the verbs of ``mem.writes`` (WritesAPI, plus the checks it offers); the rest of the write
#: path is called by graphmem itself with values it made
WRITES_FACE = ("reconcile", "supersede", "link", "set_status", "validate", "memories")


def guard_face(store: type) -> None:
    """Guard the store class and the class of each sub-object it declares (``runs: Runs``,
    ...): every public method of each, and :data:`WRITES_FACE` of ``mem.writes``."""
    guard(store, prefix="mem")
    for name, part in typing.get_type_hints(store).items():
        if name.startswith("_") or not isinstance(part, type) or part.__module__ == "builtins":
            continue
        guard(part, WRITES_FACE if name == "writes" else None, prefix=f"mem.{name}")
