"""The main-job runner: validation, exit codes, papermill parameters, outputs in the run directory."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kgir_lib import runner
from kgir_lib.config import default_data_dir
from kgir_lib.partial_output import failure_paths, partial_path

REPO = Path(__file__).resolve().parents[1]


def run(*args, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs")}
    env.pop("KGIR_PROFILE", None)
    return subprocess.run([sys.executable, "-m", "kgir_lib.runner", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture
def run_here(tmp_path, monkeypatch, capsys):
    """``run_here(*args)``: what :func:`run` gives (exit code, stdout, stderr), from ``runner.main`` in this process
    (its imports already paid; the entry point itself is run as a child in
    :func:`test_bad_profile_exits_2_naming_it`), with the same environment and working folder."""
    def call(*args) -> subprocess.CompletedProcess:
        monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))
        monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "figs"))
        monkeypatch.delenv("KGIR_PROFILE", raising=False)
        monkeypatch.chdir(REPO)
        capsys.readouterr()
        code = runner.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)
    return call


def test_validate_only_ci(tmp_path, run_here):
    out = run_here("--profile", "ci", "--validate-only")
    assert out.returncode == 0, out.stderr
    assert "profile ci:" in out.stdout
    assert "hotpotqa: 84 questions, 840 passages" in out.stdout
    assert "musique_train: 100 questions, 1890 passages" in out.stdout
    assert "musique: 84" not in out.stdout  # ci (as sample) runs hotpotqa and musique_train only
    assert not (tmp_path / "results" / "ci" / "notebooks").exists()


def test_bad_profile_exits_2_naming_it(tmp_path):
    out = run("--profile", "no_such_profile", tmp_path=tmp_path)
    assert out.returncode == 2
    assert "no_such_profile" in out.stderr and "Traceback" not in out.stderr


def test_bad_parameter_exits_2_naming_it(run_here):
    out = run_here("--profile", "ci", "-p", "top_k", "0", "--validate-only")
    assert out.returncode == 2 and "'top_k'" in out.stderr
    out = run_here("--profile", "ci", "-p", "no_field", "1", "--validate-only")
    assert out.returncode == 2 and "'no_field'" in out.stderr


def test_bad_data_dir_exits_2(tmp_path, monkeypatch, run_here):
    monkeypatch.setenv("KGIR_DATA_DIR", str(tmp_path / "nowhere"))
    out = run_here("--profile", "ci", "--validate-only")
    assert out.returncode == 2 and "nowhere" in out.stderr


def test_empty_notebooks_dir_runs_nothing(tmp_path, run_here):
    (tmp_path / "nbs").mkdir()
    out = run_here("--profile", "ci", "--notebooks-dir", str(tmp_path / "nbs"))
    assert out.returncode == 0, out.stderr
    assert "nothing to run" in out.stdout


def test_only_without_a_match_is_an_error(run_here):
    out = run_here("--profile", "ci", "--only", "99")
    assert out.returncode == 2 and "--only 99" in out.stderr


def _notebook(path: Path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("profile = None\ntop_k = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# probe"), params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


PROBE = """
import json
from kgir_lib.config import load_config, start_run
from kgir_lib.notebook.opening import config_params
cfg = load_config(profile, **config_params(globals()))  # as open_notebook reads the parameters
start_run(cfg, "00_probe")
cfg.path("probe.json").write_text(json.dumps({"profile": cfg.profile, "top_k": cfg.top_k}))
"""


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_runs_notebooks_in_order_with_parameters(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "00_probe.ipynb", PROBE)
    _notebook(nbs / "01_fail.ipynb", "raise ValueError('scripted failure')")
    _notebook(nbs / "02_never.ipynb", "open('never_ran', 'w')")
    out = run("--profile", "ci", "-p", "top_k", "4", "--notebooks-dir", str(nbs), tmp_path=tmp_path)
    assert out.returncode == 1
    assert "01_fail.ipynb failed" in out.stderr and "scratch run (parameters top_k given)" in out.stdout
    run_dir = tmp_path / "results" / runner.scratch_name("ci", {"top_k": 4})  # a run with -p: a scratch run
    assert not (tmp_path / "results" / "ci").exists()
    assert json.loads((run_dir / "probe.json").read_text()) == {"profile": "ci", "top_k": 4}
    assert (run_dir / "config" / "00_probe.yaml").exists()
    assert (run_dir / "notebooks" / "00_probe.ipynb").exists()   # executed copies, not the sources
    assert (run_dir / "notebooks" / "01_fail.partial.ipynb").exists()  # partial output kept beside, named so
    assert not (run_dir / "notebooks" / "01_fail.ipynb").exists()  # (no complete output yet)
    assert not (run_dir / "notebooks" / "00_probe.partial.ipynb").exists()  # renamed once finished
    assert not (run_dir / "notebooks" / "02_never.ipynb").exists()
    assert not (nbs / "never_ran").exists()
    executed = nbformat.read(str(run_dir / "notebooks" / "00_probe.ipynb"), as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)

    (nbs / "01_fail.ipynb").unlink()
    (nbs / "02_never.ipynb").unlink()
    for _ in range(2):  # without -p: the profile's own run directory; timings.tsv is appended to
        out = run("--profile", "ci", "--notebooks-dir", str(nbs), "--only", "00", tmp_path=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "done: 1 notebooks" in out.stdout and "scratch" not in out.stdout
    timings = (tmp_path / "results" / "ci" / "runtime" / "timings.tsv").read_text().splitlines()
    assert len(timings) == 2 and all(line.startswith("00_probe.ipynb\t") for line in timings)


def test_notebook_discovery(tmp_path):
    for name in ("02_b.ipynb", "01_a.ipynb", "notes.ipynb", "1_bad.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in runner.notebooks(folder=tmp_path)] == ["01_a.ipynb", "02_b.ipynb"]
    assert [p.name for p in runner.notebooks(["02"], tmp_path)] == ["02_b.ipynb"]


def test_validate_in_process():
    lines = runner.validate("ci", {"datasets": ["hotpotqa"]})
    assert lines[0].startswith("profile ci:") and "  hotpotqa: 84 questions, 840 passages" in lines
    with pytest.raises(Exception, match="'datasets'"):
        runner.validate("ci", {"datasets": 5})


# ------------------------------------------------------------------ what --validate-only refuses
ONE = ["-p", "datasets", "[hotpotqa]", "-p", "extract_datasets", "[hotpotqa]", "-p", "ablation_datasets",
       "[hotpotqa]", "-p", "study_datasets", "[hotpotqa]"]


def main_in_process(capsys, *args) -> tuple:
    code = runner.main(["--profile", "ci", "--validate-only", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args, needle", [
    (["-p", "llm_timeout_s", ".nan"], "'llm_timeout_s'.*finite"),
    (["-p", "llm_timeout_s", "nan"], "'llm_timeout_s'.*finite"),
    (["-p", "temperature", "inf"], "'temperature'.*finite"),
    (["-p", "top_k", "1e400"], "'top_k'.*finite"),
    (["-p", "top_k", "many"], "'top_k'.*expected a number, got the text 'many'"),
    (["-p", "llm_backend", "openai", "-p", "llm_base_urls", "http://"], "'llm_base_urls'.*names no host"),
    (["-p", "llm_base_urls", "http://localhost:port/v1"], "'llm_base_urls'.*bad port"),
    (["-p", "llm_model_path", "no/such/model.gguf"], "'llm_model_path'.*no/such/model.gguf does not exist"),
    (["-p", "study_datasets", "[musique_trian]"], "'study_datasets'.*unknown dataset 'musique_trian'"),
    (["-p", "ablation_datasets", "[nosuch]"], "'ablation_datasets'.*unknown dataset 'nosuch'"),
    (["-p", "extract_datasets", "[nosuch]"], "'extract_datasets'.*unknown dataset 'nosuch'"),
    (["-p", "dataset", "nosuch"], "'dataset'.*unknown dataset 'nosuch'"),
    (["-p", "resume", "maybe"], "'resume': must be true or false"),
    (["-p", "n_boot", "0"], "'n_boot': must be a whole number >= 1"),
    (["-p", "methods", "[kgir, no_such_method]"], "'methods'.*no_such_method"),
    # each of these used to validate, then fail later (or do nothing) without naming the field
    (["-p", "max_tokens_reader", "0"], "'max_tokens_reader': must be >= 1 and <= 131072, got 0"),
    (["-p", "max_tokens_extract", "-5"], "'max_tokens_extract': must be >= 1"),
    (["-p", "n_questions", "0"], "'n_questions': must be >= 1"),
    (["-p", "hipporag2_link_top_k", "-1"], "'hipporag2_link_top_k': must be >= 1"),
    (["-p", "qid", "q" * 300], "'qid': must be a question id of 1 to 100 characters"),
    (["-p", "profile", "paper"], "'profile': choose the profile with --profile"),
    (["-p", "llm_n_ctx", "1e11"], "'llm_n_ctx': must be >= 1 and <= 1048576, got 100000000000"),
    (["-p", "hipporag2_synonym_threshold", "7"], "'hipporag2_synonym_threshold': must be >= -1 and <= 1"),
    (["-p", "hipporag2_synonym_top_k", "0"], "'hipporag2_synonym_top_k': must be >= 1"),
    (["-p", "study_n_questions", "0"], "'study_n_questions': must be >= 1"),
    (["-p", "extract_max_passages", "0"], "'extract_max_passages': must be >= 1"),
])
def test_validate_only_refuses(capsys, args, needle):
    code, _, err = main_in_process(capsys, *ONE, *args)
    assert code == 2, err
    assert re.search(needle, err), err


def test_validate_only_refuses_a_secret_as_the_key_variable_without_echoing_it(capsys):
    code, out, err = main_in_process(capsys, *ONE, "-p", "llm_api_key_env", "sk-proj-AbC123secretvalue")
    assert code == 2 and "'llm_api_key_env'" in err and "NAME of an environment variable" in err
    assert "AbC123secretvalue" not in out + err


def test_a_number_written_with_an_exponent_is_a_number(capsys):
    code, out, err = main_in_process(capsys, *ONE, "-p", "top_k", "1e3", "-p", "n_boot", "1e3")
    assert code == 0, err
    assert runner.load_config("ci", top_k="1e3").top_k == 1_000


def test_a_results_dir_that_is_a_file_is_refused(capsys, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, _, err = main_in_process(capsys, *ONE, "-p", "results_dir", str(tmp_path / "afile"))
    assert code == 2 and f"'results_dir': {tmp_path / 'afile'} is a file, not a directory" in err
    code, _, err = main_in_process(capsys, *ONE, "-p", "figures_dir", str(tmp_path / "afile" / "below"))
    assert code == 2 and "'figures_dir'" in err and "is a file" in err


def test_a_profile_that_is_not_utf8_names_the_file(capsys, tmp_path):
    bad = tmp_path / "latin.yaml"
    bad.write_bytes("extends: ci\ndescription: caf\xe9\n".encode("latin-1"))
    code, _, err = main_in_process(capsys, "--profile", str(bad))
    assert code == 2 and f"profile {bad}: not UTF-8" in err and "Traceback" not in err


def test_notebook_only_parameters_are_accepted(capsys):
    code, out, err = main_in_process(capsys, *ONE, "-p", "resume", "false", "-p", "methods", "[kgir, ircot]",
                                     "-p", "n_boot", "50", "-p", "qid", "5a8b57f25542995d1e6f1371",
                                     "-p", "dataset", "hotpotqa")
    assert code == 0, err


PROBE_ALL = """
import json, os
from kgir_lib.config import load_config, start_run
from kgir_lib.llm import LLMCache
from kgir_lib.notebook.opening import config_params
cfg = load_config(profile, **config_params(globals()))  # as open_notebook reads the parameters
start_run(cfg, "00_probe")
LLMCache(cfg.path("cache", "llm.sqlite")).put("k" * 64, "scripted:m", {}, "an answer", 3, 2, 0.5)
cfg.path("probe.json").write_text(json.dumps({
    "cwd": os.getcwd(), "run_dir": str(cfg.run_dir), "data_path": str(cfg.data_path), "top_k": cfg.top_k,
    "notebook": {k: globals().get(k) for k in ("resume", "methods", "n_boot", "qid", "dataset")}}))
"""


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_runner_injects_every_parameter_resolves_relative_dirs_and_exports_the_log(tmp_path):
    """Notebook-only parameters reach the kernel; relative KGIR_* dirs are resolved against the runner's
    directory, not the kernel's (notebooks/); the response log is written after each notebook, even a failed one."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "00_probe.ipynb", PROBE_ALL)
    _notebook(nbs / "01_fail.ipynb", "raise ValueError('scripted failure')")
    (tmp_path / "data").symlink_to(default_data_dir().resolve())
    env = {**os.environ, "KGIR_RESULTS_DIR": "rel_results", "KGIR_DATA_DIR": "data",
           "KGIR_FIGURES_DIR": "figs"}
    env.pop("KGIR_PROFILE", None)
    out = subprocess.run([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs),
                          *ONE, "-p", "top_k", "4", "-p", "resume", "false", "-p", "methods", "[kgir]",
                          "-p", "n_boot", "7", "-p", "qid", "q1", "-p", "dataset", "hotpotqa"],
                         cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert out.returncode == 1 and "01_fail.ipynb failed" in out.stderr, out.stderr
    scratch = next(line for line in out.stdout.splitlines() if line.startswith("results: "))
    run_dir = tmp_path / "rel_results" / Path(scratch).name
    assert run_dir.name.startswith("ci-")
    probe = json.loads((run_dir / "probe.json").read_text())
    assert probe["cwd"] == str(nbs)  # the kernel ran elsewhere ...
    assert probe["run_dir"] == str(run_dir) and probe["data_path"] == str(tmp_path / "data")  # ... on absolute paths
    assert probe["top_k"] == 4
    assert probe["notebook"] == {"resume": False, "methods": ["kgir"], "n_boot": 7, "qid": "q1", "dataset": "hotpotqa"}
    from kgir_lib.llm.response_log import read_log

    assert [r[:3] for r in read_log(run_dir / "llm_responses.jsonl.gz")] == [("k" * 64, "scripted:m", "an answer")]


def test_a_profile_file_reports_its_own_run_directory(capsys, tmp_path):
    from kgir_lib.config import PROFILE_DIR

    copy = tmp_path / "anywhere" / "sample.yaml"
    copy.parent.mkdir()
    copy.write_text(f"extends: {PROFILE_DIR / 'ci.yaml'}\n")
    code, out, err = main_in_process(capsys, "--profile", str(copy), *ONE)
    assert code == 0, err
    results = next(line for line in out.splitlines() if line.startswith("results: "))
    assert "/sample-" in results and not results.endswith("/sample")


def test_the_runner_removes_temporary_files_of_killed_writes_at_start(tmp_path, run_here):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "00_probe.ipynb", "print('ok')")
    stale = tmp_path / "results" / "ci" / "tables" / ".05_cost.csv.999999999.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_text("half a table")
    out = run_here("--profile", "ci", "--notebooks-dir", str(nbs))
    assert out.returncode == 0, out.stderr
    assert not stale.exists() and "removed 1 temporary file(s) left by killed writes" in out.stdout
    if (REPO / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", "results/sample/traces/kgir/.x.trace.jsonl.12.tmp"],
                                 cwd=REPO).returncode
        assert ignored == 0


def test_config_fields_passed_by_name_are_not_reported_as_unknown_parameters(caplog):
    """A config field given with -p (or the scratch run_name) reaches the config through the notebook's globals;
    papermill's "unknown parameter" warning for it is dropped, every other papermill message is kept."""
    import logging

    from kgir_lib.runner import ConfigFieldParameters

    log = logging.getLogger("papermill")
    f = ConfigFieldParameters()
    log.addFilter(f)
    try:
        with caplog.at_level(logging.WARNING, logger="papermill"):
            log.warning("Passed unknown parameter: run_name")
            log.warning("Input notebook does not contain a cell with tag 'parameters'")
    finally:
        log.removeFilter(f)
    assert [r.getMessage() for r in caplog.records] == ["Input notebook does not contain a cell with tag 'parameters'"]


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_a_failed_notebook_keeps_the_last_complete_output_and_names_both_files(tmp_path):
    """The notebook executes into NN_name.partial.ipynb: a failure leaves the previous output byte for byte, the
    partial copy (with its error) beside it, and the error names both; a later success replaces the output and
    leaves no partial copy."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "00_work.ipynb", "print('first run')")
    assert run("--profile", "ci", "--notebooks-dir", str(nbs), tmp_path=tmp_path).returncode == 0
    done = tmp_path / "results" / "ci" / "notebooks" / "00_work.ipynb"
    partial = done.with_name("00_work.partial.ipynb")
    good = done.read_bytes()
    assert nbformat.reads(good.decode(), as_version=4).metadata["papermill"]["output_path"] == \
        "$KGIR_RESULTS_DIR/ci/notebooks/00_work.ipynb"  # where it went, not the partial name it ran under
    _notebook(nbs / "00_work.ipynb", "print('second run')\nraise ValueError('scripted failure')")
    out = run("--profile", "ci", "--notebooks-dir", str(nbs), tmp_path=tmp_path)
    assert out.returncode == 1
    assert done.read_bytes() == good
    assert f"partial output: {partial}\nlast complete output, unchanged: {done}" in out.stderr, out.stderr
    outputs = nbformat.read(partial, as_version=4).cells[-1].outputs
    assert outputs[0]["text"] == "second run\n" and outputs[-1]["ename"] == "ValueError"
    _notebook(nbs / "00_work.ipynb", "print('third run')")
    assert run("--profile", "ci", "--notebooks-dir", str(nbs), tmp_path=tmp_path).returncode == 0
    assert nbformat.read(done, as_version=4).cells[-1].outputs[0]["text"] == "third run\n"
    assert not partial.exists()
    if (REPO / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", "results/sample/notebooks/02_index.partial.ipynb"],
                                 cwd=REPO).returncode
        assert ignored == 0


def test_with_no_output_yet_a_failure_says_so():
    assert failure_paths(Path("/nowhere/00_a.ipynb"), Path("/nowhere/00_a.partial.ipynb")) == (
        "partial output: none (/nowhere/00_a.partial.ipynb was not written)\n"
        "last complete output: none yet (/nowhere/00_a.ipynb)")
    assert partial_path(Path("r/notebooks/02_index.ipynb")) == Path("r/notebooks/02_index.partial.ipynb")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.slow  # starts notebook kernels or loads a model: the whole suite's
def test_ctrl_c_ends_in_one_line_and_a_run_leaves_tmpdir_as_it_found_it_less_a_dead_runs_kernel_files(tmp_path):
    """A run removes the kernel files a killed run left in $TMPDIR (its socket folder with the connection file, and
    an older version's tmp*.json, both holding a signing key); interrupted with Ctrl-C while a cell runs, it ends
    with one line and exit code 130, and $TMPDIR holds the same entries as before it (the user's own file)."""
    import signal
    import socket
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "mine.txt").write_text("the user's own")
    before = sorted(os.listdir(tmp))
    left = tmp / f"kgir-kernel-{_dead_pid()}-abcdefgh"  # what a killed run of this version leaves
    left.mkdir()
    (left / "kernel.json").write_text(json.dumps({"key": "signing-key", "shell_port": 1, "transport": "ipc",
                                                  "ip": str(left / "kernel")}))
    older = tmp / "tmpk3rn3l00.json"  # what a killed run of an older version left: jupyter_client's default name
    free = socket.create_server(("127.0.0.1", 0))  # a port nobody listens on: the older kernel is gone
    port = free.getsockname()[1]
    free.close()
    older.write_text(json.dumps({"key": "signing-key", "shell_port": port, "transport": "tcp", "ip": "127.0.0.1"}))
    os.utime(older, (time.time() - 600, time.time() - 600))
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    started = tmp_path / "started"
    _notebook(nbs / "00_long.ipynb", f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(300)")
    env = {**os.environ, "KGIR_RESULTS_DIR": str(tmp_path / "results"), "KGIR_FIGURES_DIR": str(tmp_path / "figs"),
           "TMPDIR": str(tmp)}
    env.pop("KGIR_PROFILE", None)
    proc = subprocess.Popen([sys.executable, "-m", "kgir_lib.runner", "--profile", "ci", "--notebooks-dir", str(nbs)],
                            cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # (as a terminal's)
    deadline = time.monotonic() + 240
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert started.exists(), proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == [f"error: {runner.INTERRUPTED}"]
    assert "removed 2 kernel connection file(s) or socket folder(s) left by killed runs" in stdout
    assert sorted(os.listdir(tmp)) == before
    assert (tmp_path / "results" / "ci" / "notebooks" / "00_long.partial.ipynb").exists()
    assert not (tmp_path / "results" / "ci" / "notebooks" / "00_long.ipynb").exists()
