"""Credentials from a Prefect block, where the flow is used: the storage options of remote roots
(``citeline.sources.remote``) kept in a :class:`prefect.blocks.system.Secret` block (Prefect's own, no integration
package needed), whose value is the fsspec ``storage_options`` mapping as JSON (flat, or one mapping per protocol:
``{"s3": {"key": ..., "secret": ...}}``).

The flow's ``storage_block`` parameter is the block's **name**, never its value: the run loads it when it starts
(:func:`block_storage`), in its own process, and each task that reads sources on another process (a Dask worker)
loads it there (:func:`task_storage`); the options are held in memory for the run only (``remote.storage``), never
in a parameter, a log line, the ledger or the index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from citeline.errors import SettingsError
from citeline.sources import remote
from citeline.sources.document import SourceFile


def storage_options_of_block(name: str) -> dict[str, Any]:
    """The storage options held by the Prefect ``Secret`` block ``name`` (``secret/NAME`` is the same block). A block
    that does not exist, cannot be loaded or does not hold a mapping is one :class:`SettingsError` line naming the
    block, never its value."""
    from prefect.blocks.system import Secret

    block_name = name.removeprefix("secret/")
    try:
        block: Any = Secret.load(block_name)  # sync here: the flow and its tasks are sync functions
        value = block.get()
    except ValueError as exc:  # Prefect's "Unable to find block document named ..."
        raise SettingsError(
            f"storage_block {name!r}: no Prefect Secret block of that name ({_first_line(exc)}); save one with "
            "Secret(value={...storage options...}).save(NAME)"
        ) from None
    except Exception as exc:  # the API not answering, a block of another type
        raise SettingsError(f"storage_block {name!r}: cannot load it ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise SettingsError(
            f"storage_block {name!r}: the Secret must hold a mapping of storage options (JSON), not a "
            f"{type(value).__name__}"
        )
    return value


@contextlib.contextmanager
def block_storage(name: str | None) -> Iterator[None]:
    """Inside, remote roots are read with the storage options of the block ``name`` (nothing changes for None)."""
    if not name:
        yield
        return
    with remote.storage(storage_options_of_block(name)):
        yield


def task_storage(files: Iterable[SourceFile]) -> contextlib.AbstractContextManager[None]:
    """In a task of the flow reading ``files``: the storage options of the flow run's ``storage_block`` when some of
    them are remote and this process has no options of its own (a Dask worker: the flow's process has them from
    :func:`block_storage` already). The flow run's parameters are asked of Prefect only then."""
    if remote.run_options_given() or not any(remote.is_remote(source.path) for source in files):
        return contextlib.nullcontext()
    from prefect.runtime import flow_run

    return block_storage((flow_run.parameters or {}).get("storage_block"))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
