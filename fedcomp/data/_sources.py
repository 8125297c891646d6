"""Where data files live: the data directory and the official sources of named data sets.

Read by the loaders (which look for their files here) and by :mod:`._download` (which
fetches them); holds no network code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Environment variable naming the directory of downloaded / user-provided data files.
#: Environment variable naming the directory of downloaded / user-provided data files.
DATA_DIR_ENV = "FEDCOMP_DATA_DIR"

#: Where the files of a named data set come from (:func:`fetch`, ``fedcomp data download``).
#:
#: * one file (``url``, ``sha256``): saved as ``<data dir>/<name>``. ``sha256`` is pinned
#:   when known; A9A's is not (it could not be verified offline when this was written), so
#:   :func:`fetch` checks A9A's shape instead and records the digest of the first download
#:   next to the file;
#: * several files (``mirrors``: base addresses tried in order, the official one first;
#:   ``files``: file name → pinned sha256): saved in the folder ``<data dir>/<name>/``; an
#:   ``extract`` entry names the folder a downloaded ``.tar.gz`` is unpacked to. The
#:   publishers give MD5 sums (which torchvision pins); the SHA-256 digests here are of the
#:   same files, each cross-checked against several independent published copies (Keras
#:   pins CIFAR-10's);
#: * ``manual``: no single file to fetch; how to produce the data instead.
SOURCES: dict[str, dict[str, Any]] = {
    "a9a": {"url": "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/a9a",
            "sha256": None, "n_samples": 32561, "n_features": 123},
    "mnist": {
        "mirrors": ("http://yann.lecun.com/exdb/mnist/",
                    "https://ossci-datasets.s3.amazonaws.com/mnist/",
                    "https://storage.googleapis.com/cvdf-datasets/mnist/"),
        "files": {
            "train-images-idx3-ubyte.gz":
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "train-labels-idx1-ubyte.gz":
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "t10k-images-idx3-ubyte.gz":
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "t10k-labels-idx1-ubyte.gz":
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        },
    },
    "fashion_mnist": {
        "mirrors": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/"
                    "data/fashion/"),
        "files": {
            "train-images-idx3-ubyte.gz":
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "train-labels-idx1-ubyte.gz":
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "t10k-images-idx3-ubyte.gz":
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "t10k-labels-idx1-ubyte.gz":
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        },
    },
    "cifar10": {
        "mirrors": ("https://www.cs.toronto.edu/~kriz/",),
        "files": {"cifar-10-python.tar.gz":
                  "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"},
        "extract": "cifar-10-batches-py",
    },
    "femnist": {
        "manual": (
            "FEMNIST has no single official file: LEAF's preprocessing script builds it from "
            "NIST Special Database 19. On a machine with internet run\n"
            "  git clone https://github.com/TalwalkarLab/leaf && cd leaf/data/femnist\n"
            "  ./preprocess.sh -s niid --sf 0.05 -k 0 -t sample   # --sf 1.0 for all writers\n"
            "then copy leaf/data/femnist/data/train/ and data/test/ (LEAF JSON files) into "
            "{folder}/train/ and {folder}/test/, or pass femnist(path=...) the folder that "
            "holds them"),
    },
}



# --- files and downloads -------------------------------------------------------------------
def data_dir() -> Path:
    """``$FEDCOMP_DATA_DIR``, else ``~/.cache/fedcomp/data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or Path.home() / ".cache" / "fedcomp" / "data")


def _resolve(path: str | Path) -> Path:
    """``path`` with ``~`` expanded; a relative name missing here is taken in :func:`data_dir`."""
    candidate = Path(os.path.expanduser(path))
    if not candidate.is_absolute() and not candidate.exists():
        candidate = data_dir() / candidate
    return candidate


def _locate(path: str, name: str | None = None) -> Path:
    candidate = _resolve(path)
    if not candidate.exists():
        hint = (f"`fedcomp data download {name}` or fedcomp.data.fetch({name!r}) downloads it "
                f"(needs internet; --data-dir DIR or ${DATA_DIR_ENV} choose the directory)"
                if name else "pass the path of the file")
        raise FileNotFoundError(f"data file {path!r} not found (also looked in {data_dir()}, "
                                f"set ${DATA_DIR_ENV} to change it); {hint}")
    return candidate


