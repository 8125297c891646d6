"""Partitions that refuse what they would silently change (issue 43): the ``flwr``
partitioner's ``num_partitions``, ``partition_by`` and its count of partitions, and a
``group_column`` that the partition would ignore."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp.data import federate, libsvm_file

LABELS = np.array([1.0, -1.0] * 20)
FEATURES = np.arange(40.0)[:, None]


def flwr_split(n_clients, partitioner, **options):
    pytest.importorskip("flwr_datasets")
    return federate(FEATURES, LABELS, n_clients,
                    {"name": "flwr", "partitioner": partitioner, **options}, seed=0)


def test_num_partitions_other_than_n_clients_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"num_partitions=3 but the data set's n_clients=5; "
                                         r"num_partitions is n_clients: drop it, or set "
                                         r"n_clients = 3"):
        flwr_split(5, "IidPartitioner", num_partitions=3)
    # the same number is only redundant
    assert flwr_split(5, "IidPartitioner", num_partitions=5).n_clients == 5


def test_natural_id_partitioner_refuses_another_count_naming_the_natural_ids():
    with pytest.raises(ValueError, match=r"NaturalIdPartitioner makes one client per natural "
                                         r"id .* these samples have 2 natural ids, but "
                                         r"n_clients=5 was asked; set n_clients = 2"):
        flwr_split(5, "NaturalIdPartitioner")
    assert flwr_split(2, "NaturalIdPartitioner").n_clients == 2  # one client per label


def test_a_partition_by_column_the_table_lacks_is_refused():
    with pytest.raises(ValueError, match=r"partition_by='writer', but the table fedcomp hands "
                                         r"it holds only the samples' labels"):
        flwr_split(2, "NaturalIdPartitioner", partition_by="writer")


def test_group_column_with_a_partition_that_ignores_groups_is_refused(tmp_path):
    path = tmp_path / "grouped.svm"
    path.write_text("+1 1:1 3:2\n-1 1:2 2:1\n+1 1:1\n-1 1:2 3:1\n")
    with pytest.raises(ValueError, match=r"group_column=0 gives each sample a group, but "
                                         r"partition 'iid' does not split by groups .* use "
                                         r"partition = 'writers'"):
        libsvm_file(str(path), n_clients=2, group_column=0)
    with pytest.raises(ValueError, match="partition 'flwr' does not split by groups"):
        libsvm_file(str(path), n_clients=2, group_column=0,
                    partition={"name": "flwr", "partitioner": "IidPartitioner"})
    # with a partition by groups, each client holds whole groups (column 0's values 1 and 2)
    data = libsvm_file(str(path), n_clients=2, group_column=0, partition="writers")
    assert sorted({tuple(np.unique(data.features[i, :data.counts[i], 0]))
                   for i in range(2)}) == [(1.0,), (2.0,)]
