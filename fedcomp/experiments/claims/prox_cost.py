"""Seed 002, TABLE I: the time of one proximal mapping vs one forward-backward pass.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data", TABLE I: on ResNet-18 with MNIST inputs, one ℓ1 /
MCP / SCAD prox of the whole parameter vector costs 1.4× / 2.6× / 4.5× a forward-backward
pass — the motivation for FedCanon's single server-side prox per round. The paper says
only that every entry was "tested on the same device"; its platform has a 24-core Xeon and
three P100 GPUs, and it publishes no code.

This is a timing experiment, not a training run: ``fedcomp/configs/prox_cost.toml`` names the
networks (as :class:`fedcomp.losses.TorchModel` specifications), the penalties, the
minibatch and the ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"``); :func:`run`
times, for each network, one forward-backward pass on a minibatch (the loss's ``grad`` on
a block of one client, the code path every algorithm uses) and one prox of each penalty on
the flat parameter vector, float32, best of ``repeats``. Every timing waits for the device
before it reads the clock (:func:`best_time`), so a GPU's asynchronous queue is timed, not
its dispatch.

What the paper's prox was is not said, so ``implementation`` names how the prox is
computed (:data:`IMPLEMENTATIONS`): fedcomp's own (``vectorised``: one elementwise
expression over the flat vector, on the device) and the ways a prox is commonly written
that cost more — a Python loop over the network's parameter tensors, a round trip to the
host per prox (float32, or float64 as NumPy's default), a Python loop over the
coordinates. A run of another implementation times the vectorised prox beside it, in the
same process, and the verdict judges the named one. It writes ``results.csv`` (one row per
network and implementation) and ``summary.md`` and prints the table with the ratios.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..._array import to_numpy, wait_for
from ..._extras import check_installed, require
from ..._log import get_logger
from ._timing import best_time, check_device

CLAIM = ("TABLE I: on ResNet-18 one l1 / MCP / SCAD proximal mapping costs 1.38x / 2.57x / "
         "4.47x a forward-backward pass (MNIST), so K local proxes per round are a client-side "
         "bottleneck.")

#: The verdict: ResNet-18's prox/fwd-bwd ratios against this fraction of the paper's.
RATIO_FRACTION = 0.5
PAPER_RATIOS = {"l1": 1.383, "mcp": 2.568, "scad": 4.473}

#: The prox step every implementation is timed at (any step below the penalties' limits).
STEP = 0.01

#: How a prox can be computed: the name a config's ``implementation`` takes → what it is.
IMPLEMENTATIONS = {
    "vectorised": "fedcomp's prox: one elementwise expression over the flat parameter "
                  "vector, float32 on the device",
    "per_tensor": "the same prox applied to each of the network's parameter tensors in a "
                  "Python loop (for p in model.parameters())",
    "host_float32": "a round trip per prox: the vector copied to the host, NumPy's prox in "
                    "float32 there, copied back to the device",
    "host_float64": "a round trip per prox in NumPy's default dtype: copied to the host, "
                    "cast to float64, NumPy's prox, cast back to float32 on the device",
    "scalar_loop": "a Python loop over the coordinates with the textbook piecewise formula "
                   "(no vectorisation)",
}


#: The keys of a ``kind = "timing"`` configuration, of its ``[[networks]]`` entries (a
#: :class:`fedcomp.losses.TorchModel` specification and an optional label) and of its
#: ``[[penalties]]`` entries (a regularizer's name and its parameters).
#: ``readings`` / ``reading``: a timing may declare diagnosis readings (a measured variant,
#: e.g. another batch size or prox implementation) like any experiment; ``reading`` names
#: the one applied.
KEYS = {"name", "kind", "description", "claim", "paper", "batch_size", "repeats", "networks",
        "penalties", "quick", "readings", "reading", "device", "implementation"}
NETWORK_KEYS = {"name", "label", "input_shape", "options"}


def check_config(config: dict[str, Any]) -> None:
    """Validate a timing configuration: known keys, positive counts, named entries, a
    device this machine has.

    A training configuration goes through :func:`fedcomp.experiments.resolve`; this one is read
    key by key, so a misspelt key (``batch_sise``) would otherwise be ignored silently.

    Raises
    ------
    fedcomp.config.ConfigError
        Naming the unknown key and the accepted ones, the bad value, or the device that is
        not there (one line).
    fedcomp.MissingExtraError
        When PyTorch (the ``torch`` extra) is not installed.
    """

    from ...config import ConfigError
    from ...regularizers import REGULARIZERS

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
    implementation = config.get("implementation", "vectorised")
    if implementation not in IMPLEMENTATIONS:
        raise ConfigError(f"implementation must be one of {sorted(IMPLEMENTATIONS)} (got "
                          f"{implementation!r})")
    if implementation == "scalar_loop":
        missing = [p["name"] for p in config["penalties"] if p["name"] not in SCALAR_PROXES]
        if missing:
            raise ConfigError(f"implementation = 'scalar_loop' has a scalar formula for "
                              f"{sorted(SCALAR_PROXES)} only (got penalties {missing})")
    # the networks are TorchModel specifications: refuse before anything is timed or written
    check_installed(["torch"], f"{config.get('name', 'timing')!r} (kind = 'timing', networks)")
    check_device(str(config.get("device", "cpu")))


def _scalar_l1(alpha: float, step: float) -> Callable[[float], float]:
    threshold = step * alpha

    def prox(v: float) -> float:
        if v > threshold:
            return v - threshold
        if v < -threshold:
            return v + threshold
        return 0.0
    return prox


def _scalar_mcp(alpha: float, step: float, gamma: float = 3.0) -> Callable[[float], float]:
    def prox(v: float) -> float:
        magnitude = abs(v)
        if magnitude <= step * alpha:
            return 0.0
        if magnitude <= gamma * alpha:
            return math.copysign((magnitude - step * alpha) / (1.0 - step / gamma), v)
        return v
    return prox


def _scalar_scad(alpha: float, step: float, a: float = 3.7) -> Callable[[float], float]:
    def prox(v: float) -> float:
        magnitude = abs(v)
        if magnitude <= (1.0 + step) * alpha:
            return math.copysign(max(magnitude - step * alpha, 0.0), v)
        if magnitude <= a * alpha:
            return math.copysign(((a - 1.0) * magnitude - step * a * alpha)
                                 / (a - 1.0 - step), v)
        return v
    return prox


#: The textbook coordinate-wise proxes (the regularizers' docstrings give the formulas),
#: for the ``scalar_loop`` implementation: penalty name → ``(alpha, step, **params)`` →
#: the prox of one coordinate.
SCALAR_PROXES: dict[str, Callable[..., Callable[[float], float]]] = {
    "l1": _scalar_l1, "mcp": _scalar_mcp, "scad": _scalar_scad}


def prox_call(implementation: str, penalty: dict[str, Any], x: Any, sizes: list[int]
              ) -> Callable[[], Any]:
    """The timed call: one prox of ``penalty`` on the parameters ``x`` (``(1, D)`` on the
    device) computed as ``implementation`` does (:data:`IMPLEMENTATIONS`); ``sizes`` are
    the network's parameter tensors' sizes, in order (``per_tensor``)."""
    torch = require("torch", "fedcomp.experiments.prox_cost")
    from ...regularizers import make_regularizer

    params = {k: v for k, v in penalty.items() if k != "name"}
    reg = make_regularizer(penalty["name"], **params)
    if implementation == "vectorised":
        return lambda: reg.prox(x, STEP)
    if implementation == "per_tensor":
        def per_tensor() -> Any:
            out = x.clone()
            for tensor in out[0].split(sizes):  # views into out, one per parameter tensor
                tensor.copy_(reg.prox(tensor[None], STEP)[0])
            return out
        return per_tensor
    if implementation in ("host_float32", "host_float64"):
        dtype = np.float64 if implementation == "host_float64" else np.float32

        def round_trip() -> Any:
            host = to_numpy(x).astype(dtype, copy=True)  # a copy even where x is on the host
            return torch.as_tensor(reg.prox(host, STEP), dtype=x.dtype, device=x.device)
        return round_trip
    scalar = SCALAR_PROXES[penalty["name"]](step=STEP, **params)

    def scalar_loop() -> Any:
        values = [scalar(v) for v in to_numpy(x)[0].tolist()]
        return torch.tensor(values, dtype=x.dtype, device=x.device)[None]
    return scalar_loop


def time_network(spec: dict[str, Any], penalties: list[dict[str, Any]], batch_size: int,
                 repeats: int, n_classes: int = 10, device: str = "cpu",
                 implementations: tuple[str, ...] = ("vectorised",)
                 ) -> list[dict[str, Any]]:
    """Milliseconds of one forward-backward pass and of each penalty's prox for one network,
    one row per prox implementation (the forward-backward pass is timed once)."""
    torch = require("torch", "fedcomp.experiments.prox_cost")

    from ...data import Batch
    from ...losses import TorchModel

    where = check_device(device)
    loss = TorchModel(spec["name"], input_shape=tuple(spec["input_shape"]),
                      n_classes=n_classes, options=spec.get("options"))
    x = torch.as_tensor(loss.initial_model(), dtype=torch.float32, device=where)[None]
    gen = torch.Generator().manual_seed(0)
    batch = Batch(torch.rand((1, batch_size, *loss.input_shape), generator=gen).to(where),
                  torch.randint(0, n_classes, (1, batch_size), generator=gen).to(where),
                  torch.full((1, batch_size), 1.0 / batch_size, device=where))

    def wait(result: Any) -> None:
        wait_for(x, result)

    fwd_bwd_ms = 1e3 * best_time(lambda: loss.grad(x, batch), repeats, wait)
    sizes = [entry.size for entry in loss.layout().entries]
    rows = []
    for implementation in implementations:
        row: dict[str, Any] = {"network": spec.get("label", spec["name"]),
                               "implementation": implementation, "device": str(where),
                               "parameters": int(x.shape[1]), "fwd_bwd_ms": fwd_bwd_ms}
        for penalty in penalties:
            call = prox_call(implementation, penalty, x, sizes)
            ms = 1e3 * best_time(call, repeats, wait)
            row[f"{penalty['name']}_ms"] = ms
            row[f"{penalty['name']}_ratio"] = ms / fwd_bwd_ms
        rows.append(row)
    return rows


def verdict(rows: list[dict[str, Any]], config: dict[str, Any] | None = None
            ) -> tuple[str, str]:
    """Reproduced when every penalty's ratio on ResNet-18, with the prox computed as the
    configuration's ``implementation`` does (vectorised by default), is at least half the
    paper's; partly when some is; not reproduced when none is."""
    implementation = implementations_of(config or {})[-1]
    rule = (f"every ResNet-18 prox/fwd-bwd ratio >= {RATIO_FRACTION} x the paper's "
            f"({', '.join(f'{k} {v}' for k, v in PAPER_RATIOS.items())}), the prox computed "
            f"as '{implementation}': reproduced; some: partly; none: not reproduced")
    resnet = [r for r in rows if r["network"].startswith("resnet18")
              and r.get("implementation", "vectorised") == implementation]
    if not resnet:
        return f"not assessed (no resnet18 row of '{implementation}')", rule
    ratios = {k: resnet[0].get(f"{k}_ratio") for k in PAPER_RATIOS}
    held = [k for k, r in ratios.items() if r is not None and r >= RATIO_FRACTION *
            PAPER_RATIOS[k]]
    measured = ", ".join(f"{k} {r:.3f}x" for k, r in ratios.items() if r is not None)
    where = f"{implementation} on {resnet[0].get('device', 'cpu')}: {measured}"
    if len(held) == len(PAPER_RATIOS):
        return f"reproduced ({where})", rule
    return (f"partly ({where})" if held else f"not reproduced ({where})"), rule


def implementations_of(config: dict[str, Any]) -> tuple[str, ...]:
    """The implementations a run times: the configured one, beside the vectorised one."""
    implementation = str(config.get("implementation", "vectorised"))
    return tuple(dict.fromkeys(("vectorised", implementation)))


def summary_markdown(rows: list[dict[str, Any]], penalties: list[dict[str, Any]]) -> str:
    """The table of times and ratios, one row per network and implementation."""
    header = "| network | implementation | device | parameters | fwd & bwd ms | " + \
        " | ".join(p["name"] for p in penalties) + " |"
    lines = [header, "|---|---|---|---:|---:|" + "---:|" * len(penalties)]
    for row in rows:
        cells = [f"{row[p['name'] + '_ms']:.2f} ({row[p['name'] + '_ratio']:.3f}x)"
                 for p in penalties]
        lines.append(f"| {row['network']} | {row['implementation']} | {row['device']} | "
                     f"{row['parameters']} | {row['fwd_bwd_ms']:.2f} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def run(config: dict[str, Any], out_dir: str | Path, stream: TextIO | None = None
        ) -> list[dict[str, Any]]:
    """Time every network of ``config`` and write ``results.csv`` / ``summary.md``."""
    check_config(config)
    torch = require("torch", "fedcomp.experiments.prox_cost")
    stream = stream or sys.stdout
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = str(config.get("device", "cpu"))
    implementations = implementations_of(config)
    (out / "config.json").write_text(json.dumps(
        {"config": config, "torch": torch.__version__, "threads": torch.get_num_threads(),
         "device": _device_name(torch, check_device(device))}, indent=2) + "\n")
    penalties = config["penalties"]
    columns = ["network", "implementation", "device", "parameters", "fwd_bwd_ms"] + [
        f"{p['name']}_{s}" for p in penalties for s in ("ms", "ratio")]
    rows = []
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for spec in config["networks"]:
            for row in time_network(spec, penalties, int(config.get("batch_size", 64)),
                                    int(config.get("repeats", 3)), device=device,
                                    implementations=implementations):
                writer.writerow(row)
                rows.append(row)
            f.flush()  # the rows of each network as it is measured
            get_logger("experiments").info(
                f"timed {spec.get('label', spec['name'])} ({rows[-1]['parameters']} "
                f"parameters) on {device}")
    table = summary_markdown(rows, penalties)
    result, rule = verdict(rows, config)
    text = (f"# {config['name']}\n\n{config.get('description', '')}\n\n{table}\n\n"
            f"Claim: {config.get('claim', CLAIM)}\n\nVerdict: {result} (rule: {rule})\n")
    (out / "summary.md").write_text(text)
    print(table, file=stream)
    print(f"Verdict: {result} (rule: {rule})", file=stream)
    return rows


def _device_name(torch: Any, where: Any) -> str:
    """What ran the timings, in words: the GPU's model, or the CPU's threads."""
    if where.type == "cuda":
        return f"{where} ({torch.cuda.get_device_name(where)})"
    return f"{where} ({torch.get_num_threads()} threads)" if where.type == "cpu" else str(where)


NAME = "prox_cost"
KIND = "timing"



__all__ = ["CLAIM", "IMPLEMENTATIONS", "KEYS", "KIND", "NAME", "NETWORK_KEYS", "best_time",
           "check_config", "check_device", "prox_call", "run", "time_network", "verdict"]
