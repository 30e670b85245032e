"""What a ``typing.Protocol`` declares, for conformance checks that name what an object lacks.

``isinstance(obj, SomeProtocol)`` on a ``@runtime_checkable`` Protocol says only yes or no, and on Python 3.11 it
evaluates each property of ``obj`` to find out (an embedder's ``query_encoder`` would load its ONNX model). These
read the declaration and ``dir(obj)`` instead: nothing of ``obj`` runs.
"""

from __future__ import annotations

from typing import Any

#: Names every class has or that ``typing`` adds to a Protocol: never a declared member.
_NOT_MEMBERS = frozenset(
    {
        "__abstractmethods__",
        "__annotations__",
        "__dict__",
        "__doc__",
        "__init__",
        "__module__",
        "__weakref__",
        "__parameters__",
        "__orig_bases__",
        "__subclasshook__",
        "__protocol_attrs__",
        "__non_callable_proto_members__",
        "__class_getitem__",
        "__init_subclass__",
        "__slots__",
        "__match_args__",
        "__type_params__",
        "__static_attributes__",
        "__firstlineno__",
    }
)


def protocol_members(protocol: type) -> list[str]:
    """The members ``protocol`` (a ``typing.Protocol`` class) and the Protocols it extends declare, sorted: methods,
    properties and annotated attributes (``typing.get_protocol_members`` of Python 3.13)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if not vars(cls).get("_is_protocol", False) or cls.__module__ == "typing":
            continue
        names |= {name for name in (*vars(cls), *vars(cls).get("__annotations__", {})) if not name.startswith("_abc")}
    return sorted(name for name in names if name not in _NOT_MEMBERS and not name.startswith("_is_"))


def missing_members(obj: Any, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``obj`` lacks (empty: it has them all), without evaluating any of them."""
    have = set(dir(obj))
    return [name for name in protocol_members(protocol) if name not in have]
