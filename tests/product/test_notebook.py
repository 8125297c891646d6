"""fedcomp in a notebook (issue 45): a run's progress is a tqdm widget, and a run shows itself
as a short line and a small HTML table, not as its arrays.

One notebook, run by nbclient in a real kernel (ipykernel, this venv's python), is the
acceptance test; the pieces it relies on (where progress shows, the reprs) are checked here
without a kernel too.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import fedcomp
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import L1
from fedcomp.runtime import _recording
from fedcomp.runtime._recording import _Progress, progress_display

#: The notebook's one cell: a tiny simulate with the default progress ("auto"), the run shown.
CELL = """\
import numpy as np, fedcomp
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import L1
rng = np.random.default_rng(0)
pairs = [(rng.normal(size=(20, 3)), rng.normal(size=20)) for _ in range(4)]
problem = fedcomp.Problem(LeastSquares(), L1(0.01), pairs)
run = fedcomp.simulate(fedcomp.za1(client_lr=0.2), problem, 20, eval_every=10)
run
"""

WIDGET = "application/vnd.jupyter.widget-view+json"


def tiny_run(**kwargs):
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=(20, 3)), rng.normal(size=20)) for _ in range(4)]
    problem = fedcomp.Problem(LeastSquares(), L1(0.01), pairs)
    return fedcomp.simulate(fedcomp.za1(client_lr=0.2), problem, 20, eval_every=10, **kwargs)


@pytest.fixture
def in_a_kernel(monkeypatch):
    """This process seen as a Jupyter kernel: an IPython whose shell has a kernel (tqdm and
    ipywidgets imported first, with the real IPython)."""
    pytest.importorskip("tqdm")
    pytest.importorskip("ipywidgets")
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))


def test_progress_auto_is_a_widget_in_a_kernel(in_a_kernel, monkeypatch):
    assert progress_display("auto") == "widget" and progress_display(False) == "off"
    # tqdm without ipywidgets would print text (and warn): the terminal's line is that text
    monkeypatch.setattr(_recording, "_installed", lambda name: name != "ipywidgets")
    assert progress_display("auto") == "line"


def test_an_experiment_in_a_kernel_shows_its_runs_not_a_widget_per_run(in_a_kernel):
    from fedcomp.experiments._runner import round_progress

    assert round_progress("auto") is False and round_progress(True) is True


def test_progress_auto_off_a_kernel_is_the_terminals_line(monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert progress_display("auto") == "off" and progress_display(True) == "line"


def test_a_run_that_stops_early_completes_its_widget_at_its_last_round(in_a_kernel):
    bar = _Progress("auto", 100, "za1")
    widget = bar.bar
    bar.update(40)
    assert (widget.n, widget.total) == (40, 100)
    del bar  # dropped with its Recorder when simulate returns
    assert (widget.n, widget.total) == (40, 40)  # complete, not tqdm's red "failed" bar


def test_a_run_shows_a_line_and_a_table_not_its_arrays():
    run = tiny_run(options=fedcomp.RunOptions(progress=False))
    text = repr(run)
    assert text.startswith("RunResult(completed, 20 rounds, 3 rows; objective=")
    assert text.endswith("; x: float64 (3,) numpy)") and "array(" not in text
    assert "\n" not in text and len(text) < 200
    html = run._repr_html_()
    assert html.startswith("<table") and "<td style=\"text-align:left\">completed</td>" in html
    assert "last row: objective" in html and "float64 (3,) numpy" in html
    assert run[0] is run.x and run._replace(status="x").status == "x"  # still a NamedTuple


def test_an_async_run_shows_a_line_too():
    from fedcomp.runtime import ComputeTimes, simulate_async
    from fedcomp.toy import tiny_problem

    problem = tiny_problem()
    clock = ComputeTimes.build({"distribution": "exponential", "mean": 1.0},
                               problem.n_clients)
    run = simulate_async(fedcomp.async_feddr(eta=1.0), problem, 6, compute_times=clock,
                         eval_every=3)
    text = repr(run)
    assert text.startswith("AsyncRunResult(completed, 6 rounds, ") and "array(" not in text
    assert run._repr_html_().startswith("<table")


@pytest.mark.xdist_group("serial")  # a kernel: a subprocess with its own ports
def test_a_notebook_shows_a_progress_widget_and_the_runs_html(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient")
    pytest.importorskip("ipykernel", reason="the notebook test needs ipykernel")
    pytest.importorskip("tqdm", reason="the progress widget is tqdm's")
    pytest.importorskip("ipywidgets", reason="tqdm's widget needs ipywidgets")
    # the kernel's profile and connection files here, not in the home directory
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CELL)]
    # generous: a kernel's start and fedcomp's import on a busy machine
    client = nbclient.NotebookClient(notebook, timeout=600, startup_timeout=300,
                                     kernel_name="python3", resources={
                                         "metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = notebook.cells[0].outputs
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    data = [o.get("data", {}) for o in outputs]
    widgets = [d[WIDGET] for d in data if WIDGET in d]
    assert widgets, outputs  # tqdm's widget: progress was on, by default, in the notebook
    html = [d["text/html"] for d in data if "text/html" in d]
    assert any(h.startswith("<table class=\"fedcomp-run\"") for h in html), outputs
    shown = [d["text/plain"] for d in data if "text/html" in d and "text/plain" in d]
    assert any(text.startswith("RunResult(completed, 20 rounds") for text in shown), shown
