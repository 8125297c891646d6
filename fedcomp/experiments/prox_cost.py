"""Seed 002, TABLE I: the time of one proximal mapping vs one forward-backward pass.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data", TABLE I: on ResNet-18 with MNIST inputs, one ℓ1 /
MCP / SCAD prox of the whole parameter vector costs 1.4× / 2.6× / 4.5× a forward-backward
pass — the motivation for FedCanon's single server-side prox per round.

This is a timing experiment, not a training run: ``fedcomp/configs/prox_cost.toml`` names the
networks (as :class:`fedcomp.losses.TorchModel` specifications), the penalties and the
minibatch; :func:`run` times, for each network, one forward-backward pass on a minibatch
(the loss's ``grad`` on a block of one client, the code path every algorithm uses) and one
prox of each penalty on the flat parameter vector (the regularizer's ``prox`` on a block of
one), float32 on the CPU, best of ``repeats``. It writes ``results.csv`` (one row per
network) and ``summary.md`` and prints the table with the ratios.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from .._extras import check_installed, require

CLAIM = ("TABLE I: on ResNet-18 one l1 / MCP / SCAD proximal mapping costs 1.38x / 2.57x / "
         "4.47x a forward-backward pass (MNIST), so K local proxes per round are a client-side "
         "bottleneck.")

#: The verdict: ResNet-18's prox/fwd-bwd ratios against this fraction of the paper's.
RATIO_FRACTION = 0.5
PAPER_RATIOS = {"l1": 1.383, "mcp": 2.568, "scad": 4.473}


#: The keys of a ``kind = "timing"`` configuration, of its ``[[networks]]`` entries (a
#: :class:`fedcomp.losses.TorchModel` specification and an optional label) and of its
#: ``[[penalties]]`` entries (a regularizer's name and its parameters).
#: ``readings`` / ``reading``: a timing may declare diagnosis readings (a measured variant,
#: e.g. another batch size) like any experiment; ``reading`` names the one applied.
KEYS = {"name", "kind", "description", "claim", "batch_size", "repeats", "networks",
        "penalties", "quick", "readings", "reading"}
NETWORK_KEYS = {"name", "label", "input_shape", "options"}


def check_config(config: dict[str, Any]) -> None:
    """Validate a timing configuration: known keys, positive counts, named entries.

    A training configuration goes through :func:`fedcomp.config.resolve`; this one is read
    key by key, so a misspelt key (``batch_sise``) would otherwise be ignored silently.

    Raises
    ------
    fedcomp.config.ConfigError
        Naming the unknown key and the accepted ones, or the bad value.
    fedcomp.MissingExtraError
        When PyTorch (the ``torch`` extra) is not installed.
    """

    from ..config import ConfigError
    from ..regularizers import REGULARIZERS

    def check_keys(table: dict[str, Any], accepted: set[str], where: str) -> None:
        unknown = sorted(set(table) - accepted)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; accepted: {sorted(accepted)}")

    check_keys(config, KEYS, f"{config.get('name', 'config')} (kind = 'timing')")
    for key in ("batch_size", "repeats"):
        value = config.get(key, 1)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ConfigError(f"{key} must be a positive integer (got {value!r})")
    for key in ("networks", "penalties"):
        entries = config.get(key)
        if not (isinstance(entries, list) and entries and all(
                isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries)):
            raise ConfigError(f"{key} must be a non-empty list of tables with a name "
                              f"([[{key}]] entries; got {entries!r})")
    for spec in config["networks"]:
        check_keys(spec, NETWORK_KEYS, f"networks ({spec['name']})")
        if "input_shape" not in spec:
            raise ConfigError(f"networks ({spec['name']}): missing input_shape, e.g. "
                              "input_shape = [1, 28, 28]")
    for penalty in config["penalties"]:
        name = penalty["name"]
        if name not in REGULARIZERS:
            raise ConfigError(f"penalties: unknown regularizer {name!r}; valid: "
                              f"{sorted(REGULARIZERS)}")
        check_keys(penalty, {"name", *REGULARIZERS.settable(name)},
                   f"penalties ({name})")
    # the networks are TorchModel specifications: refuse before anything is timed or written
    check_installed(["torch"], f"{config.get('name', 'timing')!r} (kind = 'timing', networks)")


def _best_time(fn: Any, repeats: int) -> float:
    fn()  # warm-up: vmap tracing, allocator
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - tic)
    return best


def time_network(spec: dict[str, Any], penalties: list[dict[str, Any]], batch_size: int,
                 repeats: int, n_classes: int = 10) -> dict[str, Any]:
    """Milliseconds of one forward-backward pass and of each penalty's prox for one network."""
    torch = require("torch", "fedcomp.experiments.prox_cost")

    from ..data import Batch
    from ..losses import TorchModel
    from ..regularizers import make_regularizer

    loss = TorchModel(spec["name"], input_shape=tuple(spec["input_shape"]),
                      n_classes=n_classes, options=spec.get("options"))
    x = torch.as_tensor(loss.initial_model(), dtype=torch.float32)[None]
    gen = torch.Generator().manual_seed(0)
    batch = Batch(torch.rand((1, batch_size, *loss.input_shape), generator=gen),
                  torch.randint(0, n_classes, (1, batch_size), generator=gen),
                  torch.full((1, batch_size), 1.0 / batch_size))
    row: dict[str, Any] = {"network": spec.get("label", spec["name"]),
                           "parameters": int(x.shape[1]),
                           "fwd_bwd_ms": 1e3 * _best_time(lambda: loss.grad(x, batch), repeats)}
    for penalty in penalties:
        params = {k: v for k, v in penalty.items() if k != "name"}
        reg = make_regularizer(penalty["name"], **params)
        ms = 1e3 * _best_time(lambda reg=reg: reg.prox(x, 0.01), repeats)
        row[f"{penalty['name']}_ms"] = ms
        row[f"{penalty['name']}_ratio"] = ms / row["fwd_bwd_ms"]
    return row


def verdict(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Reproduced when every penalty's ratio on ResNet-18 is at least half the paper's."""
    rule = (f"every ResNet-18 prox/fwd-bwd ratio >= {RATIO_FRACTION} x the paper's "
            f"({', '.join(f'{k} {v}' for k, v in PAPER_RATIOS.items())}): reproduced; some: "
            "partly; none: not reproduced")
    resnet = [r for r in rows if r["network"].startswith("resnet18")]
    if not resnet:
        return "not assessed (no resnet18 in the config)", rule
    ratios = {k: resnet[0].get(f"{k}_ratio") for k in PAPER_RATIOS}
    held = [k for k, r in ratios.items() if r is not None and r >= RATIO_FRACTION *
            PAPER_RATIOS[k]]
    measured = ", ".join(f"{k} {r:.3f}x" for k, r in ratios.items() if r is not None)
    if len(held) == len(PAPER_RATIOS):
        return f"reproduced ({measured})", rule
    return (f"partly ({measured})" if held else f"not reproduced ({measured})"), rule


def run(config: dict[str, Any], out_dir: str | Path, stream: TextIO | None = None
        ) -> list[dict[str, Any]]:
    """Time every network of ``config`` and write ``results.csv`` / ``summary.md``."""
    check_config(config)
    torch = require("torch", "fedcomp.experiments.prox_cost")
    stream = stream or sys.stdout
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(
        {"config": config, "torch": torch.__version__, "threads": torch.get_num_threads()},
        indent=2) + "\n")
    penalties = config["penalties"]
    columns = ["network", "parameters", "fwd_bwd_ms"] + [
        f"{p['name']}_{s}" for p in penalties for s in ("ms", "ratio")]
    rows = []
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for spec in config["networks"]:
            row = time_network(spec, penalties, int(config.get("batch_size", 64)),
                               int(config.get("repeats", 3)))
            writer.writerow(row)
            f.flush()  # one row per network as it is measured
            rows.append(row)
            print(f"timed {row['network']} ({row['parameters']} parameters)", file=sys.stderr)
    header = "| network | parameters | fwd & bwd ms | " + " | ".join(
        p["name"] for p in penalties) + " |"
    lines = [header, "|---|---:|---:|" + "---:|" * len(penalties)]
    for row in rows:
        cells = [f"{row[p['name'] + '_ms']:.2f} ({row[p['name'] + '_ratio']:.3f}x)"
                 for p in penalties]
        lines.append(f"| {row['network']} | {row['parameters']} | {row['fwd_bwd_ms']:.2f} | "
                     + " | ".join(cells) + " |")
    table = "\n".join(lines)
    result, rule = verdict(rows)
    text = (f"# {config['name']}\n\n{config.get('description', '')}\n\n{table}\n\n"
            f"Claim: {config.get('claim', CLAIM)}\n\nVerdict: {result} (rule: {rule})\n")
    (out / "summary.md").write_text(text)
    print(table, file=stream)
    print(f"Verdict: {result} (rule: {rule})", file=stream)
    return rows


NAME = "prox_cost"
KIND = "timing"



__all__ = ["CLAIM", "KEYS", "KIND", "NAME", "NETWORK_KEYS", "check_config", "run",
           "time_network", "verdict"]
