"""S3's own listing and fetching: what citeline asks of s3fs beyond fsspec's generic interface.

A bucket is listed a page (1,000 keys) at a time through s3fs's paginator, each page's metadata dicts dropped once
their keys and stamps are taken (:func:`objects`); a versioned bucket is listed by its versions, keeping each key's
latest (:func:`versioned`); an object is fetched in one GET, at the version listed (:func:`whole_get`).

**Pinned to s3fs.** The paged listing and the versioning question go through two members s3fs does not publish
(``S3FileSystem._list_pages`` and ``S3FileSystem._call_s3``): they are named here and nowhere else, checked before
use (:func:`paged`), and the ``[s3]`` extra in ``pyproject.toml`` pins the s3fs releases they were tested with. An
s3fs without them is listed through fsspec's generic ``find`` (every object's metadata held at once), never wrongly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

#: The protocols s3fs answers to.
PROTOCOLS = ("s3", "s3a")
#: The members of ``S3FileSystem`` the paged listing relies on (not public: see the module's docstring).
PRIVATE_MEMBERS = ("_list_pages", "_call_s3")


def protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    """The protocols a filesystem answers to."""
    return (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)


def is_s3(fs: AbstractFileSystem) -> bool:
    """Whether ``fs`` is s3fs's (an S3 or S3-compatible store)."""
    return "s3" in protocols(fs)


def paged(fs: AbstractFileSystem) -> bool:
    """Whether ``fs`` is s3fs's and has the members the paged listing calls (else the generic listing is used)."""
    return is_s3(fs) and all(hasattr(fs, name) for name in PRIVATE_MEMBERS)


def objects(fs: AbstractFileSystem, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object below ``path`` (``bucket/prefix``), as its key relative to ``path`` and its listing's dict
    (``Size``, ``ETag``, ``LastModified``, ``VersionId``...), a page at a time (only for :func:`paged` filesystems).
    A versioned bucket gives each key's latest version (a key whose latest is a delete marker is gone); the
    "folder/" markers some consoles write are left out."""
    from fsspec.asyn import sync

    bucket, _, key_prefix = path.strip("/").partition("/")
    key_prefix = key_prefix + "/" if key_prefix else ""
    request = {"Bucket": bucket, "Prefix": key_prefix, **getattr(fs, "req_kw", {})}
    # The version id joins the ETag in the stamp, so an overwrite is seen even when the ETag repeats, and the
    # object is fetched at the version listed (whole_get).
    is_versioned = versioned(fs, bucket)
    method, field = ("list_object_versions", "Versions") if is_versioned else ("list_objects_v2", "Contents")
    pages = fs._list_pages(method, **request)
    while (page := sync(fs.loop, _next_page, pages)) is not None:
        for item in page.get(field, ()):
            key = item["Key"][len(key_prefix) :]
            if is_versioned and not item.get("IsLatest"):
                continue
            if key and not key.endswith("/"):
                yield key, {"size": item.get("Size"), "ETag": item.get("ETag"), **item}


def versioned(fs: AbstractFileSystem, bucket: str) -> bool:
    """Whether the bucket keeps versions (versioning enabled, or suspended with versions kept). Without the right
    to ask (s3:GetBucketVersioning) or on a store that does not answer it, the bucket is listed as unversioned: its
    stamps are ETags."""
    from fsspec.asyn import sync

    try:
        answer = sync(fs.loop, fs._call_s3, "get_bucket_versioning", Bucket=bucket)
    except Exception:
        return False
    return answer.get("Status") in ("Enabled", "Suspended")


def whole_get(version: str | None) -> dict[str, Any]:
    """``cat_file``'s arguments for one object in one GET: s3fs asks an object's size (a HEAD) before a GET unless
    told to fetch it in one part; an object of a versioned bucket is fetched at the version listed (``version``)."""
    return {"max_concurrency": 1, **({"version_id": version} if version else {})}


async def _next_page(pages: Any) -> dict[str, Any] | None:
    # The paginator's next page, or None at its end.
    try:
        page: dict[str, Any] = await pages.__anext__()
        return page
    except StopAsyncIteration:
        return None
