"""Data files: the data directory, checked downloads, the official sources of named sets.

:func:`download` fetches a file over HTTP(S), verifying its SHA-256; :func:`fetch` knows
the official sources of :data:`SOURCES` (also ``fedcomp data download NAME``), tries their
mirrors in order and unpacks archives into the data directory (``$FEDCOMP_DATA_DIR``, else
``~/.cache/fedcomp/data``), where the loaders look for them.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

#: Environment variable naming the directory of downloaded / user-provided data files.
#: Environment variable naming the directory of downloaded / user-provided data files.
from ._libsvm import load_libsvm
from ._sources import DATA_DIR_ENV, SOURCES, data_dir


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 digest of a file (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: str | Path, sha256: str | None, *, timeout: float = 60.0,
             max_bytes: int = 1 << 30) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its SHA-256.

    Parameters
    ----------
    url : str
        An ``http://`` or ``https://`` address.
    dest : path
        The file to create (its directory is created); written only after the checks pass.
    sha256 : str or None
        Expected hex digest; ``None`` skips the check (the caller then verifies the
        content itself, as :func:`fetch` does for files without a pinned digest).
    timeout : float, default 60
        Seconds for the whole download: the connection and every read share them (a
        server trickling bytes cannot hold it longer; a ``TimeoutError`` then).
    max_bytes : int, default 1 GiB
        Abort when the response grows beyond this.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ValueError
        For another URL scheme, a response over ``max_bytes`` or a checksum mismatch (the
        partial file is removed; ``dest`` is left untouched).
    """
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"download: only http(s) URLs are fetched (got {url!r})")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    deadline = time.monotonic() + timeout
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := _read_before(resp, deadline, url, timeout):
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"download: {url} is larger than max_bytes={max_bytes}")
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise ValueError(f"download: checksum mismatch for {url}: expected sha256 {sha256}, "
                             f"got {digest.hexdigest()}; the file was not saved")
        shutil.move(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest


def _read_before(resp: Any, deadline: float, url: str, timeout: float) -> bytes:
    """The next bytes of ``resp`` that arrive before ``deadline``.

    ``urlopen``'s timeout bounds each socket operation, not the download: a server sending
    a byte a second would hold ``read(65536)`` for hours. Here every read gets only the
    time left (``read1``: whatever one receive brings), so the whole download ends by the
    deadline.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"download: {url} took longer than timeout={timeout:g} s")
    sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    if sock is not None:  # the socket under http.client's buffered reader
        sock.settimeout(left)
    try:
        return bytes(resp.read1(1 << 16))
    except TimeoutError:
        raise TimeoutError(f"download: {url} took longer than timeout={timeout:g} s") from None


def fetch(name: str, directory: str | Path | None = None, *, url: str | None = None,
          timeout: float = 60.0) -> Path:
    """Download a named data set of :data:`SOURCES` into ``directory`` unless it is there.

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`: ``"a9a"``, ``"mnist"``, ``"fashion_mnist"``, ``"cifar10"``
        (``"femnist"`` explains how to produce its files instead).
    directory : path, optional
        The data directory (default :func:`data_dir`): a one-file set is saved as
        ``directory/<name>``, a set of files in the folder ``directory/<name>/``.
    url : str, optional
        Overrides the source (mirrors, tests): the file's address for a one-file set, the
        base address of the files (``url + "/" + file name``) otherwise.
    timeout : float, default 60
        Seconds for each file's whole download (connection and reads).

    Returns
    -------
    Path
        The file or folder, which the loader of the same name reads.

    Raises
    ------
    ConnectionError
        When no source can be reached; the message says where to put the files by hand.
    ValueError
        For an unknown name, a set that cannot be downloaded (FEMNIST), a checksum mismatch
        (nothing is saved) or a file already there that does not match its digest.

    Notes
    -----
    With a pinned ``sha256`` every download is verified against it. A9A has none: the file
    must parse as LIBSVM with the expected shape, and its digest is recorded in
    ``<name>.sha256`` beside it so a later replacement of the file is detected. Files of a
    set already present are checked against their digests and not downloaded again.
    """
    if name not in SOURCES:
        raise ValueError(f"fetch: unknown data set {name!r}; known: {sorted(SOURCES)}")
    source = SOURCES[name]
    root = Path(directory or data_dir())
    if "manual" in source:
        raise ValueError(f"fetch: {name} cannot be downloaded automatically. "
                         + manual_download_hint(name, root / name))
    if "files" in source:
        return _fetch_files(name, source, root / name, url, timeout)
    path = root / name
    record = path.with_suffix(".sha256")
    if path.exists():
        expected = source["sha256"] or (record.read_text().split()[0] if record.exists()
                                        else None)
        if expected is not None and sha256_of(path) != expected:
            raise ValueError(f"fetch: {path} does not match its recorded sha256 {expected}; "
                             "delete it to download again")
        return path
    _download_any(name, [url or source["url"]], path, source["sha256"], timeout)
    if source["sha256"] is None:
        try:
            features, _ = load_libsvm(path, n_features=source["n_features"])
        except ValueError as exc:
            path.unlink()
            raise ValueError(f"fetch: the download of {name} is not a LIBSVM file: {exc}"
                             ) from exc
        if features.shape[0] != source["n_samples"]:
            path.unlink()
            raise ValueError(f"fetch: {name} should have {source['n_samples']} samples, the "
                             f"download has {features.shape[0]}; not saved")
        record.write_text(f"{sha256_of(path)}  {name}\n")
    return path


def _fetch_files(name: str, source: dict[str, Any], folder: Path, url: str | None,
                 timeout: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    bases = [url] if url else list(source["mirrors"])
    for filename, sha256 in source["files"].items():
        dest = folder / filename
        if dest.exists():
            if sha256_of(dest) != sha256:
                raise ValueError(f"fetch: {dest} does not match its pinned sha256 {sha256}; "
                                 "delete it to download again")
            continue
        _download_any(name, [f"{b.rstrip('/')}/{filename}" for b in bases], dest, sha256,
                      timeout)
    if "extract" in source and not (folder / source["extract"]).is_dir():
        for filename in source["files"]:
            _extract_folder(folder / filename, folder, source["extract"])
    return folder


def _download_any(name: str, urls: list[str], dest: Path, sha256: str | None,
                  timeout: float) -> Path:
    """:func:`download` from the first address that answers with the right content."""
    unreachable, rejected = [], []
    for address in urls:
        try:
            return download(address, dest, sha256, timeout=timeout)
        except ValueError as exc:  # a checksum mismatch or an oversized answer: next mirror
            rejected.append(str(exc))
        except (OSError, http.client.HTTPException) as exc:
            unreachable.append(f"{address} ({exc})")
    if rejected:
        raise ValueError(f"fetch: no source of {name} gave the expected file: "
                         + "; ".join(rejected))
    raise ConnectionError(f"could not download {name}: " + "; ".join(unreachable)
                          + f". {manual_download_hint(name, dest.parent)}")


def manual_download_hint(name: str, folder: str | Path | None = None) -> str:
    """How to get data set ``name`` of :data:`SOURCES` onto a machine by hand.

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`.
    folder : path, optional
        Where the files belong (default: ``<data dir>/<name>``, the data directory itself
        for a one-file set).

    Returns
    -------
    str
        The command to run, the files and their addresses, the folder and the environment
        variable ``$FEDCOMP_DATA_DIR`` the loaders read.

    Examples
    --------
    >>> "FEDCOMP_DATA_DIR" in manual_download_hint("mnist")
    True
    """
    source = SOURCES[name]
    if folder is None:
        folder = data_dir() if "url" in source else data_dir() / name
    where = (f"Loaders look in the data directory ${DATA_DIR_ENV} (now {data_dir()}; default "
             "~/.cache/fedcomp/data) or take path=...")
    if "manual" in source:
        return source["manual"].format(folder=folder) + ". " + where
    if "files" in source:
        files, mirrors = ", ".join(source["files"]), source["mirrors"]
        origin = f"from {mirrors[0]}" + (f" (mirrors: {', '.join(mirrors[1:])})"
                                         if len(mirrors) > 1 else "")
    else:
        files, origin = name, f"from {source['url']}"
    return (f"Run `fedcomp data download {name}` on a machine with internet (--data-dir DIR "
            f"saves under DIR), or download {files} {origin} yourself into {folder}. {where}")


def _extract_folder(archive: Path, folder: Path, member_dir: str) -> None:
    """Unpack the plain files ``member_dir/*`` of a tar archive into ``folder/member_dir``.

    Only regular files directly inside ``member_dir`` are written (no links, no other
    paths, so a crafted archive cannot write elsewhere); the folder appears atomically.
    """
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=f".{member_dir}."))
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if (member.isfile() and len(parts) == 2 and parts[0] == member_dir
                        and parts[1] not in (".", "..")):
                    content = tar.extractfile(member)
                    if content is None:  # pragma: no cover - regular files have content
                        continue
                    with content, open(tmp / parts[1], "wb") as out:
                        shutil.copyfileobj(content, out)
        tmp.rename(folder / member_dir)
    except (tarfile.TarError, EOFError, OSError) as exc:  # a cut or damaged archive
        if isinstance(exc, OSError) and not isinstance(exc, gzip.BadGzipFile):
            raise
        raise ValueError(f"{archive}: damaged or truncated archive ({exc or type(exc).__name__})"
                         "; delete it and download it again") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def is_fetched(name: str, directory: str | Path | None = None) -> bool:
    """Whether the files of data set ``name`` are in ``directory`` (default :func:`data_dir`).

    Checks presence only (:func:`fetch` verifies the digests).
    """
    source = SOURCES[name]
    folder = Path(directory or data_dir()) / name
    if "manual" in source:
        return (folder / "train").is_dir()
    if "files" in source:
        if "extract" in source:
            return (folder / source["extract"]).is_dir()
        # the loaders also read the unpacked files (``gunzip`` leaves no .gz behind)
        return all((folder / f).exists() or (folder / f.removesuffix(".gz")).exists()
                   for f in source["files"])
    return folder.exists()
