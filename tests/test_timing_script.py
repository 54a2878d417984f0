"""``benchmarks/test_timing.py``: its arguments, and what its record says it measured (the timings come from a run
on an idle machine, not from here: no test asserts a time)."""
from __future__ import annotations

import importlib.util

import pytest

from kgir_lib.config import PROJECT_ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("test_timing_bench", PROJECT_ROOT / "benchmarks" / "test_timing.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_arguments_default_to_three_runs_of_every_step_in_a_fresh_clone(bench):
    args = bench.parse_args([])
    assert (args.only, args.repeat, args.in_place) == (list(bench.STEPS), 3, False)
    assert bench.command_line(args) == ".venv/bin/python benchmarks/test_timing.py"
    args = bench.parse_args(["--only", "fast", "rerun", "--repeat", "5", "--in-place"])
    assert bench.command_line(args) == ".venv/bin/python benchmarks/test_timing.py --only fast rerun --repeat 5 " \
                                       "--in-place"


@pytest.mark.parametrize("bad", [["--repeat", "0"], ["--repeat", "two"], ["--repeat", "-1"], ["--only", "slow"]])
def test_bad_arguments_are_refused_naming_them(bench, bad, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(bad)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert ("--repeat" in err and "at least 1" in err) or "invalid choice: 'slow'" in err


def test_the_record_gives_every_run_its_minimum_and_median_and_what_was_warm(bench):
    runs = [{"seconds": s, "cpu": c, "rc": 0, "load": (1.0, 2.0), "stdout": "", "stderr": "", "failed": [],
             "command": "bash scripts/test.sh --fast", "summary": "9 passed", "slowest": []}
            for s, c in ((80.0, 100.0), (40.0, 60.0), (45.0, 62.0))]
    r = bench.summarise(runs)
    assert (r["min_wall"], r["median_wall"], r["min_cpu"], r["median_cpu"]) == (40.0, 45.0, 60.0, 62.0)
    text = bench.markdown({"fast": r}, "cmd", "in a fresh clone", ["compiled modules: cold"])
    assert "| fast | `bash scripts/test.sh --fast` | 3 | **40.0 s** / 45.0 s | 60.0 s / 62.0 s |" in text
    assert "80.0 (100.0), 1.00 → 2.00, 40.0 (60.0)" in text
    assert "Warm before the first run: compiled modules: cold." in text and "in a fresh clone" in text
    assert bench.summarise([{**runs[0], "rc": 0}, {**runs[1], "rc": 1}])["rc"] == 1  # a failed run is not hidden


def test_warm_state_names_the_compiled_modules_of_a_new_path_cold(bench, tmp_path):
    prefix = tmp_path / "pycache"
    (prefix / "site").mkdir(parents=True)
    said = bench.warm_state(tmp_path / "repo", {"PYTHONPYCACHEPREFIX": str(prefix),
                                                "HF_HUB_CACHE": str(tmp_path / "hf"), "KGIR_DATA_DIR": str(tmp_path)})
    assert said[0].endswith("the environment's warm; this checkout's library and tests cold (first run compiles them)")
    assert said[1].startswith("mypy's cache: cold") and said[2] == "`PYTHONDONTWRITEBYTECODE`: unset"
    assert said[3] == "Hugging Face cache: absent" and said[4] == "data samples: present"
    (tmp_path / "mypy").mkdir()
    said = bench.warm_state(tmp_path / "repo", {"MYPY_CACHE_DIR": str(tmp_path / "mypy"),
                                                "PYTHONDONTWRITEBYTECODE": "1"})
    assert said[1].startswith("mypy's cache: warm") and said[2].startswith("`PYTHONDONTWRITEBYTECODE`: set")


def test_the_longest_units_of_work_add_up_their_tests_as_the_scheduler_groups_them(bench, tmp_path):
    """A notebook's cells and the table checks are one unit, a module another, a fresh-clone test a unit of its own."""
    junit = tmp_path / "junit.xml"
    junit.write_text("""<testsuites><testsuite>
      <testcase classname="notebooks.01_extract_kg.ipynb" name="Cell 1" time="3.0"/>
      <testcase classname="notebooks.02_index.ipynb" name="Cell 0" time="2.0"/>
      <testcase classname="tests.test_notebook_tables" name="test_notebook_tables[01_extract_kg]" time="0.5"/>
      <testcase classname="tests.test_runner" name="test_a" time="1.0"/>
      <testcase classname="tests.test_runner.TestB" name="test_b" time="1.5"/>
      <testcase classname="tests.test_fresh_clone" name="test_main_job" time="4.0"/>
      <testcase classname="tests.test_fresh_clone" name="test_one_notebook" time="2.0"/>
    </testsuite></testsuites>""")
    assert bench.slowest_units(junit) == [(5.5, "notebooks", 3), (4.0, "tests/test_fresh_clone.py::test_main_job", 1),
                                          (2.5, "tests/test_runner.py", 2),
                                          (2.0, "tests/test_fresh_clone.py::test_one_notebook", 1)]
    assert len(bench.slowest_units(junit, 2)) == 2


def test_the_rerun_is_split_into_the_notebook_as_the_runner_logs_it_and_the_rest(bench, tmp_path):
    stdout = "scratch run (parameters top_k given): results go to sample-67a5fa36/, the profile's own results ...\n"
    assert bench.notebook_seconds(stdout, tmp_path) is None  # no timings file: nothing is made up
    runtime = tmp_path / "sample-67a5fa36" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "timings.tsv").write_text("03_subgraph_mst.ipynb\t5.9\n03_subgraph_mst.ipynb\t4.3\n")
    assert bench.notebook_seconds(stdout, tmp_path) == 4.3  # the last run's line (the file is appended to)
    assert bench.notebook_seconds("no scratch line", tmp_path) is None
    run = {"seconds": 5.0, "cpu": 5.2, "rc": 0, "load": (1.0, 1.0), "stdout": stdout, "stderr": "", "failed": [],
           "command": " ".join(bench.RERUN), "summary": "done: 1 notebooks in 4 s (0.1 min)", "notebook": 4.3}
    text = bench.markdown({"rerun": {**bench.summarise([run]), "warm_up": 9.0}}, "cmd", "here", ["cold"])
    assert "Where the rerun's time goes, its last run (5.0 s): the notebook 4.3 s" in text
    assert "before and after it 0.7 s" in text


def test_the_record_says_how_many_workers_ran_and_how_much_of_the_tests_time_was_waiting(bench, tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text("""<testsuites><testsuite>
      <testcase classname="tests.test_a" name="test_one" time="30.0"/>
      <testcase classname="tests.test_b" name="test_two" time="12.5"/>
    </testsuite></testsuites>""")
    assert bench.added_up(junit) == 42.5
    stdout = "test: 3 pytest-xdist workers\n...\n9 passed in 20.0s\n"
    assert bench.worker_count(stdout) == 3 and bench.worker_count("9 passed") is None
    run = {"seconds": 25.0, "cpu": 40.0, "rc": 0, "load": (1.0, 1.0), "stdout": stdout, "stderr": "", "failed": [],
           "command": "bash scripts/test.sh --fast", "summary": "9 passed", "slowest": [(30.0, "tests/test_a.py::t")],
           "units": [], "added_up": 42.5, "workers": 3}
    text = bench.markdown({"fast": bench.summarise([run])}, "cmd", "here", ["cold"])
    assert "3 pytest-xdist workers" in text and "added up (setup, call and teardown) 42.5 s, against 40.0 s" in text
    assert "at least 2.5 s of the tests' time was spent waiting" in text
    assert "xdist runs 3 at a time" in text
    text = bench.markdown({"fast": bench.summarise([{**run, "added_up": 30.0}])}, "cmd", "here", ["cold"])
    assert "at least 0.0 s" in text  # never a negative wait
