"""Every error citeline raises crosses a process boundary whole: raised on a Dask worker, in a shard's process or
in a Prefect task, it reaches the coordinator pickled, with its class, message and attributes (a class whose
constructor takes other arguments than its message reached it as a TypeError of unpickling: SourceError,
SourceUnavailable, PartialRunError and ShardsFailedError did)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import citeline
from citeline.errors import CitelineError


def _every_error() -> list[type[CitelineError]]:
    for module in pkgutil.walk_packages(citeline.__path__, "citeline."):
        importlib.import_module(module.name)
    found: list[type[CitelineError]] = []
    todo: list[type[CitelineError]] = [CitelineError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


#: Constructor arguments for the errors that take more than a message.
SAMPLES: dict[str, tuple[Any, ...]] = {
    "PartialRunError": (SimpleNamespace(run_id="r1", errors=[{"path": "notes/a.md", "reason": "cannot read file"}]),),
    "ShardsFailedError": (Path("/idx"), [(1, OSError("disk full"))], 3),
}


def _made(cls: type[CitelineError]) -> CitelineError:
    if cls.__name__ in SAMPLES:
        return cls(*SAMPLES[cls.__name__])
    required = [
        parameter
        for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if parameter.default is parameter.empty and parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    ]
    return cls(*[f"{parameter.name}-value" for parameter in required] or ["what went wrong"])


@pytest.mark.parametrize("cls", _every_error(), ids=lambda cls: cls.__name__)
def test_every_error_survives_pickling(cls: type[CitelineError]) -> None:
    try:
        error = _made(cls)
    except Exception as exc:  # a new error class taking other arguments: give it a sample
        pytest.fail(f"add {cls.__name__}'s constructor arguments to SAMPLES ({exc})")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and str(again) == str(error) and again.args == error.args
    assert {key: repr(value) for key, value in vars(again).items()} == {
        key: repr(value) for key, value in vars(error).items()
    }
