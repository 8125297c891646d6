"""The papers the report follows, which experiments belong to each, and which readings of an
experiment the report runs (the configuration each runs, the folders it may hold).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import (
    AS_WRITTEN,
    experiment_names,
    load,
    quick_config,
    reading_base,
    reading_config,
    readings,
)
from ..experiments._results import RUN_FOLDERS

#: The source papers (``shared/papers/``), in the report's order.
PAPERS = {
    "seed000": "Zhang, Hu, Johansson — Composite Federated Learning with Heterogeneous Data "
               "(ICASSP 2024)",
    "seed001": "Bao, Crawshaw, Luo, Liu — Fast Composite Optimization and Statistical Recovery "
               "in Federated Learning (ICML 2022)",
    "seed002": "Zhou, Zhong, Shi, Wen, Yu — FedCanon: Non-Convex Composite Federated Learning "
               "with Efficient Proximal Operation",
    "seed003": "Tran-Dinh, Pham, Phan, Nguyen — FedDR: Randomized Douglas-Rachford Splitting "
               "Algorithms for Nonconvex Federated Composite Optimization (NeurIPS 2021)",
    "seed004": "Liang, Peng, Zhang — Gradient Tracking for High Dimensional Federated "
               "Optimization",
    "tong2021": "Tong, Liang, Zhu, Bi — Federated Nonconvex Sparse Learning (arXiv:2101.00052)",
    "condat2023": "Condat, Agarský, Malinovsky, Maranjyan, Richtárik — CompressedScaffnew "
                  "(arXiv:2210.13277), TAMUNA (arXiv:2302.09832), LoCoDL (ICLR 2025)",
    "mcmahan2018": "McMahan, Ramage, Talwar, Zhang — Learning Differentially Private Recurrent "
                   "Language Models (ICLR 2018)",
    "li2021": "Li, Hu, Beirami, Smith — Ditto: Fair and Robust Federated Learning Through "
              "Personalization (ICML 2021)",
    "jiang2024": "Jiang, Rodomanov, Stich — Stabilized Proximal-Point Methods for Federated "
                 "Optimization (NeurIPS 2024)",
    "yan2023": "Yan, Chen, Chen, Cui, Lu, Xu — Compressed Decentralized Proximal Stochastic "
               "Gradient Method for Nonconvex Composite Problems with Heterogeneous Data "
               "(ICML 2023)",
    "xiao2023": "Xiao, Chen, Balasubramanian, Ghadimi — A One-Sample Decentralized Proximal "
                "Algorithm for Non-Convex Stochastic Composite Optimization (UAI 2023)",
    "yi2025": "Yi, Condat, Richtárik — Explicit Personalization and Local Training: Double "
              "Communication Acceleration in Federated Learning (TMLR 2025)",
}


#: The papers as the page names them: authors — venue and year.
PAPER_NAMES = {
    "seed000": "Zhang, Hu, Johansson — ICASSP 2024",
    "seed001": "Bao, Crawshaw, Luo, Liu — ICML 2022",
    "seed002": "Zhou, Zhong, Shi, Wen, Yu — FedCanon (preprint)",
    "seed003": "Tran-Dinh, Pham, Phan, Nguyen — NeurIPS 2021",
    "seed004": "Liang, Peng, Zhang — preprint 2023",
    "tong2021": "Tong, Liang, Zhu, Bi — arXiv 2021",
    "condat2023": "Condat et al. — compressed local training (2022–2025)",
    "mcmahan2018": "McMahan, Ramage, Talwar, Zhang — ICLR 2018",
    "li2021": "Li, Hu, Beirami, Smith — ICML 2021",
    "jiang2024": "Jiang, Rodomanov, Stich — NeurIPS 2024",
    "yan2023": "Yan, Chen, Chen, Cui, Lu, Xu — ICML 2023",
    "xiao2023": "Xiao, Chen, Balasubramanian, Ghadimi — UAI 2023",
    "yi2025": "Yi, Condat, Richtárik — TMLR 2025",
}


#: The paper of an experiment whose configuration names none (its ``paper`` key).
NO_PAPER = "other"


def paper_of(config: dict[str, Any]) -> str:
    """The paper an experiment follows (a key of :data:`PAPERS`): its configuration's
    ``paper``, or :data:`NO_PAPER`.

    Examples
    --------
    >>> paper_of(load("dp_utility")), paper_of({"name": "mine"})
    ('mcmahan2018', 'other')
    """
    return str(config.get("paper", NO_PAPER))


def paper_name(paper: str) -> str:
    """The paper as headings and tables name it (``Bao, Crawshaw, Luo, Liu — ICML 2022``)."""
    return PAPER_NAMES.get(paper, "other experiments")


def experiment_configs(config_dir: str | Path | None = None, only: list[str] | None = None
                       ) -> list[tuple[str, dict[str, Any]]]:
    """``(name, config)`` of every built-in experiment (or every ``*.toml`` in ``config_dir``),
    in paper order.

    ``only`` keeps the named experiments (an unknown name raises, listing the valid ones).
    """
    if config_dir is None:
        configs = {name: load(name) for name in experiment_names()}
    else:
        configs = {path.stem: load(path) for path in sorted(Path(config_dir).glob("*.toml"))}
    if only:
        unknown = sorted(set(only) - set(configs))
        if unknown:
            raise ValueError(f"unknown experiment(s) {unknown}; valid: {sorted(configs)}")
        configs = {name: cfg for name, cfg in configs.items() if name in only}
    order = list(PAPERS)
    return sorted(configs.items(), key=lambda item: (
        order.index(paper_of(item[1])) if paper_of(item[1]) in order else len(order), item[0]))


def reading_names(config: dict[str, Any], only: list[str] | None = None) -> list[str]:
    """The readings of ``config`` the report runs: :data:`AS_WRITTEN`, then the others in
    the order the configuration declares them; ``only`` keeps the named ones (and the
    bases they start from, whose verdicts theirs are read against)."""
    names = list(readings(config))
    if not only:
        return names
    keep = set(only)
    for name in only:
        while name in names and name != AS_WRITTEN:
            name = reading_base(config, name)
            keep.add(name)
    return [name for name in names if name in keep]


def reading_run_config(raw: dict[str, Any], reading: str, *, quick: bool = False,
                       seeds: list[int] | None = None) -> dict[str, Any]:
    """The configuration the report runs for ``reading`` of ``raw``: the reading's
    assignments, then the ``[quick]`` sizes (``quick``), then ``seeds`` (not for a timing
    experiment, which has none). As written, the configuration without its ``[readings]``."""
    if reading == AS_WRITTEN:
        config = {k: v for k, v in raw.items() if k != "readings"}
    else:
        config = reading_config(raw, reading)
    config = quick_config(config) if quick else {k: v for k, v in config.items()
                                                 if k != "quick"}
    if seeds is not None and config.get("kind") != "timing":
        config["seeds"] = list(seeds)
    return config


def stale_folders(out: Path, named: dict[str, set[str]]) -> list[Path]:
    """The folders of report directory ``out`` that no configuration names.

    ``named`` maps every experiment the report knows to its readings. A folder of ``out``
    is an experiment's run as written (its name is an experiment's), and a folder inside
    it one of its other readings; anything else — a reading or an experiment dropped from
    the configs, a typo — is stale: it would be linked and judged beside current runs.

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> for folder in ("seed000/as_run", "seed000/models", "seed000/old", "gone"):
    ...     (out / folder).mkdir(parents=True)
    >>> [str(p.relative_to(out)) for p in stale_folders(out, {"seed000": {"as_run"}})]
    ['gone', 'seed000/old']
    """
    stale: list[Path] = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []:
        if folder.name not in named:
            stale.append(folder)
            continue
        # the runner's own folders (models, partial rows) sit beside the readings
        kept = named[folder.name] | set(RUN_FOLDERS)
        stale.extend(sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in kept))
    return stale


def jobs_for(name: str, jobs: int) -> int:
    """Worker processes for experiment ``name``: ``jobs``, but 1 for an experiment whose
    verdict compares the runs' wall times (its module's ``TIMED``): runs beside each other
    share the cores and would time each other."""
    from ..experiments import EXPERIMENTS

    return 1 if getattr(EXPERIMENTS.get(name), "TIMED", False) else jobs
