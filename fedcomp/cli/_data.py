"""``fedcomp data download`` and ``fedcomp data list``: the real data sets' files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._log import STDOUT
from ._common import log


def cmd_data_download(args: argparse.Namespace) -> int:
    from ..data import data_dir, fetch

    directory = Path(args.data_dir) if args.data_dir else data_dir()
    try:
        path = fetch(args.name, directory, url=args.url, timeout=args.timeout)
    except ConnectionError as exc:  # exit 2 like every other failure (the help says so)
        log.error("%s", exc)
        return 2
    log.info("%s: ready in %s", args.name, path, extra=STDOUT)
    return 0


def cmd_data_list(args: argparse.Namespace) -> int:
    from ..data import DATASET_DESCRIPTIONS, SOURCES, data_dir, is_fetched

    directory = Path(args.data_dir) if args.data_dir else data_dir()
    print(f"data directory: {directory}")
    width = max(map(len, SOURCES))
    for name in SOURCES:
        state = "present" if is_fetched(name, directory) else "missing"
        print(f"  {name.ljust(width)}  {state:7}  {DATASET_DESCRIPTIONS.get(name, '')}")
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp data`` and its subcommands."""
    data = sub.add_parser("data", help="download data sets; list what the data directory holds",
                          description="Data files of the real data sets (MNIST, CIFAR-10, ...).")
    dsub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    def data_dir_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", metavar="DIR", help="the data directory (default "
                       "$FEDCOMP_DATA_DIR, else ~/.cache/fedcomp/data)")

    download = dsub.add_parser("download", help="fetch a data set from its official source",
                               description="Download the files of a data set, verify their "
                                           "SHA-256 and put them in the data directory, where "
                                           "the loaders look for them.",
                               epilog="Any failure (an unknown name, no network, a wrong "
                                      "checksum, an unwritable directory) prints one 'error: "
                                      "...' line and exits 2.")
    download.add_argument("name", help="the data set (see 'fedcomp data list')")
    data_dir_option(download)
    download.add_argument("--url", metavar="URL", help="download from this address (a mirror; "
                          "for a set of files, the folder holding them) instead")
    download.add_argument("--timeout", type=float, default=60.0, metavar="S",
                          help="seconds for each file's whole download (default 60)")
    download.set_defaults(func=cmd_data_download)
    lst = dsub.add_parser("list", help="data sets that can be downloaded, and which are here")
    data_dir_option(lst)
    lst.set_defaults(func=cmd_data_list)
