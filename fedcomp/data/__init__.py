"""Client data: the padded container, partitioners, generators and loaders."""

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .._registry import DatasetEntry, Registry
from ._bao import (
    bao_lowrank_matrix,
    bao_sparse_regression,
    lowrank_truth,
    sparse_regression_truth,
)
from ._client_data import Batch, ClientData
from ._digits import digit_forms, digits
from ._download import download, fetch, is_fetched, manual_download_hint, sha256_of
from ._federate import (
    add_feature_noise,
    breast_cancer,
    federate,
    partition_noise,
    partition_spec,
    relabel,
    split_to_clients,
)
from ._flwr import flwr_partition
from ._hf import from_federated_dataset
from ._image_files import load_cifar10_batch, load_idx, load_leaf
from ._images import cifar10, fashion_mnist, femnist, mnist
from ._liang import (
    LIANG_SAMPLERS,
    LIANG_TRUTHS,
    LiangSampler,
    liang_linear_models,
    liang_logistic_models,
    liang_sparse_linear,
    liang_sparse_logistic,
)
from ._libsvm import a9a, libsvm_file, load_libsvm
from ._partition import (
    PARTITIONERS,
    partition_classes,
    partition_contiguous,
    partition_dirichlet,
    partition_dirichlet_groups,
    partition_groups,
    partition_iid,
    partition_mixed,
    partition_quantity_skew,
    partition_shards,
)
from ._personal_sparse import personal_sparse_regression, personal_sparse_truths
from ._polyhedron import polyhedron_feasibility, polyhedron_point
from ._sources import DATA_DIR_ENV, SOURCES, data_dir
from ._sparse_text import SHAPES, SparseText, sparse_text_clients, sparse_text_like
from ._stand_in import image_files_or_synthetic
from ._synthetic import synthetic_fedprox
from ._tong import tong_sparse_regression


def _sparse_regression_truth(n_features: int = 1024, sparsity: int = 512, **_: Any) -> Any:
    return sparse_regression_truth(n_features, sparsity)


def _lowrank_truth(size: int = 32, rank: int = 16, **_: Any) -> Any:
    return lowrank_truth(size, rank)


#: Data-set generators by configuration name: ``DATASETS[name](**params) -> ClientData``,
#: each with one line for ``fedcomp list`` and what is known besides the samples
#: (:class:`~fedcomp._registry.DatasetEntry`: ground truth, streaming sampler, pooled).
DATASETS: Registry[DatasetEntry] = Registry("dataset", [
    DatasetEntry("synthetic_fedprox", synthetic_fedprox,
                 "FedProx Synthetic(alpha, beta): per-client softmax models and shifted "
                 "Gaussian features; n_classes=2 gives ±1 labels (seed 000)"),
    DatasetEntry("bao_sparse_regression", bao_sparse_regression,
                 "Fast-FedDA Example 3.1: w* = (1_s, 0), x = delta_k + AR(1) z with "
                 "Sigma_ij = 0.5^|i-j|, y = <x, w*> + noise (seed 001)",
                 ground_truth=_sparse_regression_truth),
    DatasetEntry("bao_lowrank_matrix", bao_lowrank_matrix,
                 "Fast-FedDA Example 3.2: W* = diag(1_r, 0), X = Z_k + A with "
                 "per-client Z_k, y = <X, W*> + noise (seed 001)",
                 ground_truth=_lowrank_truth),
    DatasetEntry("liang_sparse_linear", liang_sparse_linear,
                 "Liang et al. Sec. 7: dense distinct client optima averaging to an "
                 "s-sparse w*, x = (1, sigma1 g), y = <x, w_m> + noise (seed 004)",
                 ground_truth=LIANG_TRUTHS["liang_sparse_linear"],
                 sampler=LIANG_SAMPLERS["liang_sparse_linear"]),
    DatasetEntry("liang_sparse_logistic", liang_sparse_logistic,
                 "Liang et al. Sec. 7: paired client optima (alpha, +-beta_i), "
                 "sparse w* = (gamma alpha, 0), +-1 labels (seed 004)",
                 ground_truth=LIANG_TRUTHS["liang_sparse_logistic"],
                 sampler=LIANG_SAMPLERS["liang_sparse_logistic"]),
    DatasetEntry("tong_sparse_regression", tong_sparse_regression,
                 "Fed-HT Simulation I: per-client s-sparse models N(u_i, 1), features "
                 "N(v_i, diag(1/j^1.2)), y = <z, x_i> + noise (Tong et al.)"),
    DatasetEntry("personal_sparse_regression", personal_sparse_regression,
                 "least squares whose clients share a sparse support and add private ones "
                 "of their own (personalised composite FL)"),
    DatasetEntry("polyhedron_feasibility", polyhedron_feasibility,
                 "S-DANE Sec. 5: half-spaces a_j^T x <= b_j, a_j ~ U[-1,1]^d, all holding at a "
                 "planted x* of norm radius with slacks U(0, slack); loss halfspace_violation",
                 ground_truth=polyhedron_point),
    DatasetEntry("sparse_text", sparse_text_clients,
                 "bag-of-words documents shaped like rcv1 or news20 (sparse, Zipf word "
                 "frequencies, +-1 labels from a sparse w*), split by latent topic with "
                 "Dir(concentration) shares (offline)"),
    DatasetEntry("breast_cancer", breast_cancer,
                 "scikit-learn's bundled breast-cancer set (569 x 30, +-1 labels), "
                 "standardized, split by a partition (bundled: no download)",
                 pooled=True, extra="data"),
    DatasetEntry("libsvm_file", libsvm_file,
                 "any LIBSVM-format file (path), split by a partition", pooled=True),
    DatasetEntry("a9a", a9a,
                 "A9A / Adult (32561 x 123, +-1 labels) from a local LIBSVM file (seed 002 "
                 "Fig. 1); fedcomp.data.fetch('a9a') downloads it", pooled=True),
    DatasetEntry("digits", digits,
                 "scikit-learn's bundled 8x8 digits (1797 images, 10 classes, 14 writer-like "
                 "forms), (n,1,8,8) in [0,1], 20% held out (bundled: no download)",
                 pooled=True, extra="data"),
    DatasetEntry("mnist", mnist,
                 "MNIST (60000 + 10000 test, 28x28, 10 classes) from its IDX files; "
                 "`fedcomp data download mnist`", pooled=True),
    DatasetEntry("fashion_mnist", fashion_mnist,
                 "Fashion-MNIST (60000 + 10000 test, 28x28, 10 classes) from its IDX "
                 "files; `fedcomp data download fashion_mnist`", pooled=True),
    DatasetEntry("femnist", femnist,
                 "LEAF FEMNIST (28x28, 62 classes) from LEAF JSON, one client per writer "
                 "(natural partition); test split as holdout", pooled=True),
    DatasetEntry("cifar10", cifar10,
                 "CIFAR-10 (50000 + 10000 test, 3x32x32, 10 classes) from the python batches; "
                 "`fedcomp data download cifar10`", pooled=True),
    DatasetEntry("image_files_or_synthetic", image_files_or_synthetic,
                 "mnist, fashion_mnist or cifar10 (dataset) from its files when present, else "
                 "labelled synthetic images of its shape and sizes (for timing only)",
                 pooled=True),
])

#: One line per data set, for ``fedcomp list``.
DATASET_DESCRIPTIONS = DATASETS.describe()

#: The optional module each data set loads from (a key of ``fedcomp._extras.EXTRAS``): a
#: configuration naming the data set is refused up front when it is not installed.
DATASET_NEEDS: dict[str, str] = {"breast_cancer": "sklearn", "digits": "sklearn"}

#: Known true models of synthetic data sets: ``GROUND_TRUTHS[name](**params)`` takes the
#: generator's parameters (it ignores those it does not need) and returns the model the
#: data were generated from — what the statistical-recovery metrics compare against.
GROUND_TRUTHS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {e.name: e.ground_truth for e in DATASETS.entries() if e.ground_truth is not None})

#: Streaming samplers of synthetic data sets: ``SAMPLERS[name](**params)`` takes the
#: generator's parameters and returns an object whose ``batch(...)`` draws fresh samples for
#: every minibatch (configs: ``streaming = true``; see ``Problem(sampler=...)``).
SAMPLERS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {e.name: e.sampler for e in DATASETS.entries() if e.sampler is not None})


#: Generators whose clients each have a true model of their own: name → a function of the
#: generator's parameters giving them, ``(n_clients, *param_shape)`` (personalised runs
#: score each client's personal model against its own).
CLIENT_TRUTHS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {"personal_sparse_regression": personal_sparse_truths})

#: One line per partitioner, for ``fedcomp list``.
PARTITIONER_DESCRIPTIONS = PARTITIONERS.describe()

__all__ = [
    "CLIENT_TRUTHS", "DATASETS", "DATASET_DESCRIPTIONS", "DATASET_NEEDS", "GROUND_TRUTHS",
    "PARTITIONERS",
    "PARTITIONER_DESCRIPTIONS", "SAMPLERS", "Batch",
    "ClientData", "LiangSampler", "bao_lowrank_matrix", "bao_sparse_regression",
    "tong_sparse_regression", "personal_sparse_regression", "personal_sparse_truths",
    "polyhedron_feasibility", "polyhedron_point",
    "liang_linear_models", "liang_logistic_models", "liang_sparse_linear",
    "liang_sparse_logistic", "lowrank_truth",
    "add_feature_noise", "flwr_partition", "from_federated_dataset", "partition_classes",
    "partition_contiguous",
    "partition_dirichlet",
    "partition_dirichlet_groups", "partition_groups", "partition_iid", "partition_mixed",
    "partition_quantity_skew", "partition_shards", "sparse_regression_truth",
    "split_to_clients", "synthetic_fedprox",
    "DATA_DIR_ENV", "SOURCES", "a9a", "breast_cancer", "data_dir", "download", "federate",
    "fetch", "is_fetched", "libsvm_file", "load_libsvm", "manual_download_hint",
    "partition_noise", "partition_spec", "relabel", "sha256_of",
    "cifar10", "digit_forms", "digits", "fashion_mnist", "femnist", "image_files_or_synthetic",
    "load_cifar10_batch",
    "load_idx", "load_leaf", "mnist",
    "SHAPES", "SparseText", "sparse_text_clients", "sparse_text_like",
]
