"""Client data: the padded container, partitioners, generators and loaders."""

from collections.abc import Callable
from typing import Any

from ._bao import (
    bao_lowrank_matrix,
    bao_sparse_regression,
    lowrank_truth,
    sparse_regression_truth,
)
from ._client_data import Batch, ClientData
from ._images import (
    cifar10,
    digit_forms,
    digits,
    fashion_mnist,
    femnist,
    load_cifar10_batch,
    load_idx,
    load_leaf,
    mnist,
)
from ._liang import (
    LIANG_SAMPLERS,
    LIANG_TRUTHS,
    LiangSampler,
    liang_linear_models,
    liang_logistic_models,
    liang_sparse_linear,
    liang_sparse_logistic,
)
from ._partition import (
    partition_dirichlet,
    partition_dirichlet_groups,
    partition_groups,
    partition_iid,
    partition_quantity_skew,
    partition_shards,
    split_to_clients,
)
from ._real import (
    DATA_DIR_ENV,
    SOURCES,
    a9a,
    breast_cancer,
    data_dir,
    download,
    federate,
    fetch,
    is_fetched,
    libsvm_file,
    load_libsvm,
    manual_download_hint,
    partition_spec,
    relabel,
    sha256_of,
)
from ._synthetic import synthetic_fedprox

#: Data-set generators by configuration name: ``DATASETS[name](**params) -> ClientData``.
DATASETS: dict[str, Callable[..., ClientData]] = {
    "synthetic_fedprox": synthetic_fedprox,
    "bao_sparse_regression": bao_sparse_regression,
    "bao_lowrank_matrix": bao_lowrank_matrix,
    "liang_sparse_linear": liang_sparse_linear,
    "liang_sparse_logistic": liang_sparse_logistic,
    "breast_cancer": breast_cancer,
    "libsvm_file": libsvm_file,
    "a9a": a9a,
    "digits": digits,
    "mnist": mnist,
    "fashion_mnist": fashion_mnist,
    "femnist": femnist,
    "cifar10": cifar10,
}

#: The optional module each data set loads from (a key of ``fedcomp._extras.EXTRAS``): a
#: configuration naming the data set is refused up front when it is not installed.
DATASET_NEEDS: dict[str, str] = {"breast_cancer": "sklearn", "digits": "sklearn"}

#: Known true models of synthetic data sets: ``GROUND_TRUTHS[name](**params)`` takes the
#: generator's parameters (it ignores those it does not need) and returns the model the
#: data were generated from — what the statistical-recovery metrics compare against.
GROUND_TRUTHS: dict[str, Callable[..., Any]] = {
    "bao_sparse_regression": lambda n_features=1024, sparsity=512, **_: sparse_regression_truth(
        n_features, sparsity),
    "bao_lowrank_matrix": lambda size=32, rank=16, **_: lowrank_truth(size, rank),
    **LIANG_TRUTHS,
}

#: One line per data set, for ``fedcomp list``.
DATASET_DESCRIPTIONS = {
    "synthetic_fedprox": "FedProx Synthetic(alpha, beta): per-client softmax models and shifted "
                         "Gaussian features; n_classes=2 gives ±1 labels (seed 000)",
    "bao_sparse_regression": "Fast-FedDA Example 3.1: w* = (1_s, 0), x = delta_k + AR(1) z with "
                             "Sigma_ij = 0.5^|i-j|, y = <x, w*> + noise (seed 001)",
    "bao_lowrank_matrix": "Fast-FedDA Example 3.2: W* = diag(1_r, 0), X = Z_k + A with "
                          "per-client Z_k, y = <X, W*> + noise (seed 001)",
    "liang_sparse_linear": "Liang et al. Sec. 7: dense distinct client optima averaging to an "
                           "s-sparse w*, x = (1, sigma1 g), y = <x, w_m> + noise (seed 004)",
    "liang_sparse_logistic": "Liang et al. Sec. 7: paired client optima (alpha, +-beta_i), "
                             "sparse w* = (gamma alpha, 0), +-1 labels (seed 004)",
    "breast_cancer": "scikit-learn's bundled breast-cancer set (569 x 30, +-1 labels), "
                     "standardized, split by a partition (bundled: no download)",
    "libsvm_file": "any LIBSVM-format file (path), split by a partition",
    "a9a": "A9A / Adult (32561 x 123, +-1 labels) from a local LIBSVM file (seed 002 Fig. 1); "
           "fedcomp.data.fetch('a9a') downloads it",
    "digits": "scikit-learn's bundled 8x8 digits (1797 images, 10 classes, 14 writer-like "
              "forms), (n,1,8,8) in [0,1], 20% held out (bundled: no download)",
    "mnist": "MNIST (60000 + 10000 test, 28x28, 10 classes) from its IDX files; "
             "`fedcomp data download mnist`",
    "fashion_mnist": "Fashion-MNIST (60000 + 10000 test, 28x28, 10 classes) from its IDX "
                     "files; `fedcomp data download fashion_mnist`",
    "femnist": "LEAF FEMNIST (28x28, 62 classes) from LEAF JSON, one client per writer "
               "(natural partition); test split as holdout",
    "cifar10": "CIFAR-10 (50000 + 10000 test, 3x32x32, 10 classes) from the python batches; "
               "`fedcomp data download cifar10`",
}

#: Streaming samplers of synthetic data sets: ``SAMPLERS[name](**params)`` takes the
#: generator's parameters and returns an object whose ``batch(...)`` draws fresh samples for
#: every minibatch (configs: ``streaming = true``; see ``Problem(sampler=...)``).
SAMPLERS: dict[str, Callable[..., Any]] = {**LIANG_SAMPLERS}

#: Partitioners by name: pure functions returning one index array per client.
PARTITIONERS = {
    "iid": partition_iid,
    "dirichlet": partition_dirichlet,
    "shards": partition_shards,
    "quantity_skew": partition_quantity_skew,
    "writers": partition_groups,
    "dirichlet_writers": partition_dirichlet_groups,
}

#: One line per partitioner, for ``fedcomp list``.
PARTITIONER_DESCRIPTIONS = {
    "iid": "uniform shuffle into near-equal clients",
    "dirichlet": "label skew: each class spread over clients by Dir(concentration) shares",
    "shards": "label-sorted shards, shards_per_client per client (McMahan et al.)",
    "quantity_skew": "IID samples, client sizes from Dir(concentration) shares",
    "writers": "natural partition: whole writers dealt to clients (one each when n_clients = "
               "writers); femnist, digits",
    "dirichlet_writers": "Dirichlet over writer ids: whole writers, Dir(concentration) shares "
                         "of them per client; femnist, digits",
}

__all__ = [
    "DATASETS", "DATASET_DESCRIPTIONS", "DATASET_NEEDS", "GROUND_TRUTHS", "PARTITIONERS",
    "PARTITIONER_DESCRIPTIONS", "SAMPLERS", "Batch",
    "ClientData", "LiangSampler", "bao_lowrank_matrix", "bao_sparse_regression",
    "liang_linear_models", "liang_logistic_models", "liang_sparse_linear",
    "liang_sparse_logistic", "lowrank_truth",
    "partition_dirichlet", "partition_dirichlet_groups", "partition_groups", "partition_iid",
    "partition_quantity_skew", "partition_shards", "sparse_regression_truth",
    "split_to_clients", "synthetic_fedprox",
    "DATA_DIR_ENV", "SOURCES", "a9a", "breast_cancer", "data_dir", "download", "federate",
    "fetch", "is_fetched", "libsvm_file", "load_libsvm", "manual_download_hint",
    "partition_spec", "relabel", "sha256_of",
    "cifar10", "digit_forms", "digits", "fashion_mnist", "femnist", "load_cifar10_batch",
    "load_idx", "load_leaf", "mnist",
]
