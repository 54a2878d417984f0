"""Config: profiles, ``extends``, overrides, type checks, run directory, no secrets."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from kgir_lib.config import PROFILE_DIR, Config, ConfigError, load_config, profile_identity, start_run


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in ("KGIR_PROFILE", "KGIR_DATA_DIR", "KGIR_FIGURES_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "results"))


@pytest.mark.parametrize("name", ["sample", "ci", "local", "rehearsal", "paper", "paper_llama3"])
def test_every_shipped_profile_loads(name):
    cfg = load_config(name)
    assert cfg.profile == name
    assert cfg.description


def test_profile_values():
    sample, ci, paper, llama3 = (load_config(p) for p in ("sample", "ci", "paper", "paper_llama3"))
    assert (sample.llm_backend, sample.embed_model, sample.n_questions) == ("llamacpp", "all-MiniLM-L6-v2", 10)
    assert sample.llm_model == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M" and "Qwen2.5-Coder-0.5B" in sample.description
    local = load_config("local")
    assert local.llm_model == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    from kgir_lib.registry import DEFAULT_METHODS
    # every default method, in the default order, and our deployable repair after KGIR-RAG's ablations
    assert [m for m in local.eval_methods if m != "kgir_first_and_new"] == DEFAULT_METHODS
    assert local.eval_methods.index("kgir_first_and_new") == local.eval_methods.index("kgir_no_rewrite") + 1
    # the paper profile runs every method on the paper's two datasets, whatever the CPU sample narrows
    assert (paper.eval_methods, paper.datasets) == (None, ["musique", "hotpotqa"])
    assert sample.eval_methods and set(sample.eval_methods) >= {"kgir", "kgir_no_subgraph", "kgir_no_reflection",
                                                                 "kgir_no_rewrite", "naive_rag", "ircot", "kg2rag",
                                                                 "hipporag2"}
    # ci extends sample: its own fields, the rest inherited
    assert (ci.n_questions, ci.extract_max_passages, ci.max_new_tokens) == (2, 12, 96)
    assert (ci.embed_model, ci.top_k) == (sample.embed_model, sample.top_k)
    # the test run's notebooks 02-05 and 07 read hotpotqa alone; musique_train's imported graph is notebook 06's
    assert (ci.datasets, ci.ablation_datasets, sample.datasets) == (["hotpotqa"], ["musique_train"],
                                                                    ["hotpotqa", "musique_train"])
    assert (paper.llm_backend, paper.llm_json_mode, paper.embed_model) == ("openai", "vllm", "BAAI/bge-m3")
    assert (paper.n_questions, paper.extract_max_passages, paper.passage_chars) == (1000, None, None)
    assert (paper.iter_retgen_rounds, sample.iter_retgen_rounds) == (3, 2)  # ITER-RETGEN T=3 at paper scale
    # paper_llama3 extends paper, which extends sample
    assert llama3.llm_model == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert (llama3.llm_backend, llama3.embed_model, llama3.llm_max_concurrency) == ("openai", "BAAI/bge-m3", 128)
    assert llama3.ngram_n == sample.ngram_n


def test_profile_files_name_only_known_fields():
    known = {f.name for f in fields(Config)} | {"extends"}
    for path in PROFILE_DIR.glob("*.yaml"):
        assert set(yaml.safe_load(path.read_text())) <= known, path


def test_env_profile_and_default(monkeypatch):
    assert load_config().profile == "sample"
    monkeypatch.setenv("KGIR_PROFILE", "ci")
    assert load_config().profile == "ci"
    assert load_config("paper").profile == "paper"


def test_overrides_and_none_keeps_profile_value():
    cfg = load_config("ci", n_questions=5, top_k=None, embed_model=None, temperature=None)
    base = load_config("ci")
    assert cfg.n_questions == 5
    assert (cfg.top_k, cfg.embed_model, cfg.temperature) == (base.top_k, base.embed_model, base.temperature)


def test_override_coercions():
    cfg = load_config("ci", llm_timeout_s=30, n_questions=4.0, datasets="hotpotqa")
    assert cfg.llm_timeout_s == 30.0 and isinstance(cfg.llm_timeout_s, float)
    assert cfg.n_questions == 4 and isinstance(cfg.n_questions, int)
    assert cfg.datasets == ["hotpotqa"]


@pytest.mark.parametrize("field, value, needle", [
    ("top_k", "ten", "'top_k'"),
    ("top_k", True, "'top_k'"),
    ("top_k", 2.5, "'top_k'"),
    ("n_questions", "all", "'n_questions'"),
    ("embed_model", 3, "'embed_model'"),
    ("datasets", 7, "'datasets'"),
    ("datasets", ["musique", 2], "'datasets'"),
    ("temperature", "hot", "'temperature'"),
    ("top_k", 0, "'top_k'"),
    ("n_questions", -1, "'n_questions'"),
    ("ngram_threshold", 1.5, "'ngram_threshold'"),
    ("llm_backend", "gpt", "'llm_backend'"),
    ("llm_json_mode", "xml", "'llm_json_mode'"),
    ("llm_timeout_s", 0, "'llm_timeout_s'"),
    ("datasets", [], "'datasets'"),
    ("match_method", "jaccard", "'match_method': unknown value 'jaccard' \\(dice \\| overlap \\| containment \\| "
                                "overlap_len \\| overlap_best \\| dice_best \\| tokens\\)"),
    ("gtmp_reading", "star", "'gtmp_reading': unknown value 'star' \\(passages \\| seed_star\\)"),
])
def test_bad_values_name_the_field(field, value, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config("ci", **{field: value})


def test_every_similarity_and_reading_is_accepted():
    from kgir_lib.config.fields import GTMP_READINGS, MATCH_METHODS
    from kgir_lib.kgir.entity_matching import SIMILARITIES

    assert SIMILARITIES == MATCH_METHODS  # the config allows exactly the rules implemented, in their order
    for m in MATCH_METHODS:
        assert load_config("ci", match_method=m).match_method == m
    for r in GTMP_READINGS:
        assert load_config("ci", gtmp_reading=r).gtmp_reading == r


def test_unknown_field_and_profile():
    with pytest.raises(ConfigError, match="'no_such_field'"):
        load_config("ci", no_such_field=1)
    with pytest.raises(ConfigError, match="'nonexistent'") as exc:
        load_config("nonexistent")
    assert "sample" in str(exc.value)  # lists the known profiles


def test_openai_needs_a_base_url():
    with pytest.raises(ConfigError, match="llm_base_urls"):
        load_config("sample", llm_backend="openai")
    with pytest.raises(ConfigError, match="ftp://x"):
        load_config("paper", llm_base_urls=["ftp://x"])


def _write(path: Path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_profile_file_extends_and_errors(tmp_path):
    good = _write(tmp_path / "mine.yaml", {"extends": "ci", "top_k": 3})
    cfg = load_config(good)
    assert (cfg.top_k, cfg.n_questions) == (3, 2)
    assert cfg.profile == profile_identity(good) and cfg.profile.startswith("mine-")

    bad_field = _write(tmp_path / "badfield.yaml", {"extends": "ci", "topk": 3})
    with pytest.raises(ConfigError, match="'topk'") as exc:
        load_config(bad_field)
    assert "badfield.yaml" in str(exc.value)

    bad_type = _write(tmp_path / "badtype.yaml", {"extends": "ci", "max_iterations": "three"})
    with pytest.raises(ConfigError, match="'max_iterations'"):
        load_config(bad_type)

    null_required = _write(tmp_path / "nulled.yaml", {"extends": "ci", "top_k": None})
    with pytest.raises(ConfigError, match="'top_k'.*null"):
        load_config(null_required)

    bad_parent = _write(tmp_path / "orphan.yaml", {"extends": "missing_parent"})
    with pytest.raises(ConfigError, match="'missing_parent'"):
        load_config(bad_parent)

    (tmp_path / "broken.yaml").write_text("top_k: [1,\n")
    with pytest.raises(ConfigError, match="broken.yaml.*not valid YAML"):
        load_config(str(tmp_path / "broken.yaml"))

    (tmp_path / "alist.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="alist.yaml.*mapping"):
        load_config(str(tmp_path / "alist.yaml"))


def test_extends_cycle_is_reported(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    _write(a, {"extends": str(b)})
    _write(b, {"extends": str(a)})
    with pytest.raises(ConfigError, match="cycle"):
        load_config(str(a))


def test_no_secret_fields(tmp_path, monkeypatch):
    names = [f.name for f in fields(Config)]
    budgets = [n for n in names if n == "max_new_tokens" or n.startswith("max_tokens_")]  # token budgets
    assert [n for n in names if n not in budgets and ("key" in n or "secret" in n or "token" in n)] \
        == ["llm_api_key_env"]
    with pytest.raises(ConfigError, match="environment"):
        load_config("ci", llm_api_key="sk-123")
    profile = _write(tmp_path / "leaky.yaml", {"extends": "paper", "api_key": "sk-123"})
    with pytest.raises(ConfigError, match="environment"):
        load_config(profile)
    # the key's value never reaches the recorded config
    monkeypatch.setenv("KGIR_LLM_API_KEY", "sk-very-secret")
    cfg = load_config("paper", results_dir=str(tmp_path / "res"))
    written = start_run(cfg, "00_test").read_text()
    assert "sk-very-secret" not in written
    assert "KGIR_LLM_API_KEY" in written


def test_locations_from_env_and_params(tmp_path, monkeypatch):
    monkeypatch.setenv("KGIR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KGIR_FIGURES_DIR", str(tmp_path / "figs"))
    cfg = load_config("ci")
    assert cfg.data_path == tmp_path / "data"
    assert cfg.run_dir == tmp_path / "results" / "ci"
    assert cfg.fig_dir == tmp_path / "figs" / "ci"
    other = load_config("ci", results_dir=str(tmp_path / "elsewhere"))
    assert other.run_dir == tmp_path / "elsewhere" / "ci"


def test_default_data_dir_is_the_shared_data_else_the_downloaded_samples(monkeypatch, tmp_path):
    from kgir_lib.config import fields

    monkeypatch.delenv("KGIR_DATA_DIR", raising=False)
    monkeypatch.setattr(fields, "PROJECT_ROOT", tmp_path / "project")
    assert load_config("ci").data_path == tmp_path / "project" / "data" / "samples"  # a clone without ../shared
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert load_config("ci").data_path == tmp_path / "shared" / "data"
    monkeypatch.setenv("KGIR_DATA_DIR", str(tmp_path / "mine"))
    assert load_config("ci").data_path == tmp_path / "mine"


def test_path_creates_parents(tmp_path):
    cfg = load_config("ci")
    p = cfg.path("traces", "kgir", "musique.jsonl")
    assert p == tmp_path / "results" / "ci" / "traces" / "kgir" / "musique.jsonl"
    assert p.parent.is_dir() and not p.exists()


def test_start_run_writes_the_effective_config(tmp_path):
    cfg = load_config("ci", top_k=7, n_questions=None)
    path = start_run(cfg, "03_kgir")
    assert path == tmp_path / "results" / "ci" / "config" / "03_kgir.yaml"
    written = yaml.safe_load(path.read_text())
    # locations are where this machine keeps files, not part of what was computed: recorded as null
    assert written == {**cfg.to_dict(), "data_dir": None, "results_dir": None, "figures_dir": None}
    assert cfg.results_dir  # (set by the test environment, yet not recorded)
    assert written["top_k"] == 7 and written["n_questions"] == 2 and written["profile"] == "ci"
    # the written file is itself a loadable profile that reproduces the run's values
    again = load_config(str(path))
    assert {k: v for k, v in again.to_dict().items() if k != "profile"} == \
        {k: v for k, v in cfg.to_dict().items() if k != "profile"}


# ------------------------------------------------------------------ bad values refused
def test_relative_extends_resolves_against_the_profile_folder(tmp_path, monkeypatch):
    (tmp_path / "profiles").mkdir()
    _write(tmp_path / "profiles" / "base.yaml", {"extends": "ci", "top_k": 3})
    child = _write(tmp_path / "profiles" / "child.yaml", {"extends": "base.yaml", "seed": 5})
    monkeypatch.chdir(tmp_path)  # not the profiles' folder
    cfg = load_config(child)
    assert (cfg.top_k, cfg.seed, cfg.n_questions) == (3, 5, 2)
    _write(tmp_path / "profiles" / "loop.yaml", {"extends": "./loop.yaml"})
    with pytest.raises(ConfigError, match="cycle"):
        load_config(str(tmp_path / "profiles" / "loop.yaml"))


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_numbers_in_a_profile_are_refused(tmp_path, value):
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: ci\nllm_timeout_s: {value}\n")
    with pytest.raises(ConfigError, match="'llm_timeout_s'.*finite"):
        load_config(str(path))


def test_numbers_written_as_text_with_an_exponent(tmp_path):
    assert load_config("ci", top_k="1e2", temperature="5e-1").top_k == 100
    with pytest.raises(ConfigError, match="'top_k'.*whole number, got 1.5"):
        load_config("ci", top_k="1.5")
    with pytest.raises(ConfigError, match="'top_k'.*expected a number, got the text 'ten'"):
        load_config("ci", top_k="ten")


def test_environment_wins_over_a_profile_location_and_a_parameter_over_both(tmp_path, monkeypatch):
    profile = _write(tmp_path / "p.yaml", {"extends": "ci", "results_dir": str(tmp_path / "from_profile")})
    monkeypatch.setenv("KGIR_RESULTS_DIR", str(tmp_path / "from_env"))
    name = profile_identity(profile)
    assert load_config(profile).run_dir == tmp_path / "from_env" / name
    assert load_config(profile, results_dir=str(tmp_path / "param")).run_dir == tmp_path / "param" / name
    monkeypatch.delenv("KGIR_RESULTS_DIR")
    assert load_config(profile).run_dir == tmp_path / "from_profile" / name


@pytest.mark.parametrize("url, needle", [("http://", "names no host"), ("http:///v1", "names no host"),
                                         ("ftp://host/v1", "not an http"), ("http://h:x/v1", "bad port")])
def test_base_urls_need_a_host(url, needle):
    with pytest.raises(ConfigError, match=f"'llm_base_urls'.*{needle}"):
        load_config("paper", llm_base_urls=[url])


def test_model_path_must_exist_for_llamacpp(tmp_path):
    with pytest.raises(ConfigError, match="'llm_model_path'.*does not exist"):
        load_config("ci", llm_model_path=str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="'llm_model_path'.*is a directory"):
        load_config("ci", llm_model_path=str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert load_config("ci", llm_model_path=str(tmp_path / "m.gguf")).llm_model_path.endswith("m.gguf")


@pytest.mark.parametrize("value", ["sk-proj-AbC123secretvalue", "hf_AbCdEf123456", "Bearer xyz", "my key",
                                   "SKRELFOURUPPER0123456789", "AKIAIOSFODNN7EXAMPLE", "KGIR_AB12CD34EF"])
def test_a_secret_pasted_as_the_key_variable_name_is_refused_and_not_echoed(tmp_path, value):
    with pytest.raises(ConfigError, match="'llm_api_key_env'.*NAME of an environment variable") as exc:
        load_config("ci", llm_api_key_env=value, results_dir=str(tmp_path))
    assert value not in str(exc.value)
    assert not (tmp_path / "ci" / "config").exists()


def test_key_variable_names_that_are_fine():
    assert load_config("ci", llm_api_key_env="OPENAI_API_KEY").llm_api_key_env == "OPENAI_API_KEY"
    assert load_config("ci", llm_api_key_env="").llm_api_key_env == ""
    for name in ("KGIR_LLM_API_KEY", "HF_TOKEN", "AZURE_OPENAI_API_KEY", "GPU2_KEY", "OPENROUTERAPIKEY", "KEY2024"):
        assert load_config("ci", llm_api_key_env=name).llm_api_key_env == name


def test_retry_window_per_profile():
    assert load_config("ci").llm_retry_window_s < 60 <= load_config("paper").llm_retry_window_s
    with pytest.raises(ConfigError, match="'llm_retry_window_s'.*>= 0"):
        load_config("ci", llm_retry_window_s=-1)


def test_eval_methods_are_checked_against_the_registry_where_methods_are_built():
    """The config sits below the methods: it refuses an empty list; the registry refuses an unknown key."""
    from kgir_lib.registry import check_method_keys
    from kgir_lib.runner import validate

    assert load_config("sample", eval_methods=["kgir", "naive_rag"]).eval_methods == ["kgir", "naive_rag"]
    with pytest.raises(ConfigError, match="eval_methods.*at least one"):
        load_config("sample", eval_methods=[])
    check_method_keys(["kgir", "naive_rag"])
    check_method_keys(None)
    with pytest.raises(ConfigError, match="eval_methods.*kgirr"):
        check_method_keys(["kgirr"])
    with pytest.raises(ConfigError, match="'methods'.*kgirr"):
        check_method_keys(["kgirr"], "methods")
    with pytest.raises(ConfigError, match="eval_methods.*kgirr"):
        validate("ci", {"eval_methods": ["kgirr"]})


def test_kgir_settings_are_checked_and_set_as_the_paper_implies():
    for name, bad in (("reflection_passages", "some"), ("kgir_answer_source", "judge"),
                      ("reflect_prompt", "kgir_reflect_v9"), ("max_evidence_triples", 0), ("embed_max_length", 0)):
        with pytest.raises(ConfigError, match=name):
            load_config("ci", **{name: bad})
    paper = load_config("paper")
    assert paper.max_evidence_triples is None and paper.reflection_passages == "new"
    assert (paper.reflect_prompt, paper.embed_max_length, paper.kgir_answer_source) == \
        ("kgir_reflect_paper", 8192, "reader")
    sample = load_config("sample")
    assert (sample.max_evidence_triples, sample.reflect_prompt) == (20, "kgir_reflect")


# ------------------------------------------------------------------ one table of allowed ranges
def test_every_number_field_has_a_range_and_every_profile_is_inside():
    from kgir_lib.config import RANGES, field_range
    from kgir_lib.config.fields import _field_kind

    numbers = [f.name for f in fields(Config) if _field_kind(f.name)[0] in ("int", "float")]
    assert numbers and [n for n in numbers if field_range(n) is None] == []
    assert all(key.endswith("*") or key in numbers for key in RANGES)  # no entry for a field that is gone
    for path in PROFILE_DIR.glob("*.yaml"):
        load_config(path.stem)  # raises if a shipped profile is out of range


@pytest.mark.parametrize("field, value, allowed", [
    ("llm_timeout_s", 0, "> 0 and <= 86400"), ("temperature", 2.5, ">= 0 and <= 2"),
    ("llm_seed", -1, ">= 0 and <= 4294967295"), ("passage_chars", 0, ">= 1 and <= 10000000"),
    ("ngram_threshold", 1.01, ">= 0 and <= 1"), ("max_tokens_hyde", 10**9, ">= 1 and <= 131072"),
    ("max_new_tokens", 0, ">= 1 and <= 131072"),
])
def test_out_of_range_values_name_the_field_and_the_range(field, value, allowed):
    with pytest.raises(ConfigError, match=f"'{field}': must be {allowed}, got {value}"):
        load_config("ci", **{field: value})


# ------------------------------------------------------------------ which run directory a profile writes
def test_two_profile_files_with_one_name_never_share_a_run_directory(tmp_path):
    """Old behaviour: the directory was the file's stem, so pa/fake.yaml and pb/fake.yaml ran into one results/fake."""
    (tmp_path / "pa").mkdir()
    (tmp_path / "pb").mkdir()
    a = load_config(_write(tmp_path / "pa" / "fake.yaml", {"extends": "ci"}))
    b = load_config(_write(tmp_path / "pb" / "fake.yaml", {"extends": "ci"}))
    assert a.run_dir != b.run_dir and a.fig_dir != b.fig_dir
    assert a.run_dir.name.startswith("fake-") and b.run_dir.name.startswith("fake-")
    assert load_config(str(tmp_path / "pa" / "fake.yaml")).run_dir == a.run_dir  # stable for one file


def test_a_profile_file_named_like_a_built_in_profile_never_writes_its_results(tmp_path):
    """Old behaviour: --profile /anywhere/sample.yaml reported (and wrote) results/sample."""
    copy = _write(tmp_path / "sample.yaml", yaml.safe_load((PROFILE_DIR / "sample.yaml").read_text()))
    cfg = load_config(copy)
    assert cfg.run_dir != tmp_path / "results" / "sample" and cfg.run_dir.name.startswith("sample-")
    assert load_config(str(PROFILE_DIR / "sample.yaml")).run_dir == tmp_path / "results" / "sample"  # it IS sample
    (tmp_path / "link.yaml").symlink_to(PROFILE_DIR / "ci.yaml")
    assert load_config(str(tmp_path / "link.yaml")).profile == "ci"  # a link to a built-in file is that profile


@pytest.mark.parametrize("run_name, needle", [("sample", "built-in profile 'sample'"), ("../up", "plain folder"),
                                              ("a/b", "plain folder"), (".hidden", "plain folder")])
def test_run_name_may_not_point_into_another_profile_or_outside(run_name, needle):
    with pytest.raises(ConfigError, match=f"'run_name'.*{needle}"):
        load_config("ci", run_name=run_name)
    assert load_config("ci", run_name="ci").run_dir.name == "ci"
    assert load_config("ci", run_name="ci-0a1b2c3d").run_dir.name == "ci-0a1b2c3d"


@pytest.mark.parametrize("line", ["5: 3", "yes: 3"])
def test_a_profile_key_that_yaml_reads_as_no_text_is_an_error_naming_the_file(tmp_path, line):
    path = tmp_path / "odd.yaml"
    path.write_text(f"extends: ci\n{line}\n")
    with pytest.raises(ConfigError, match=r"odd\.yaml: field names are text, got (5|True)"):
        load_config(path)  # a Path works as well as its string


def test_a_field_written_twice_in_a_profile_is_an_error_naming_it(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("extends: ci\ntop_k: 3\nmax_iterations: 2\ntop_k: 5\n")
    with pytest.raises(ConfigError, match=r"twice\.yaml: not valid YAML: .*field 'top_k' is written twice"):
        load_config(path)


def test_decomposition_datasets_narrow_the_runs_datasets_and_change_no_method_run():
    from kgir_lib.eval.evaluate.run import _NEUTRAL_FIELDS
    sample = load_config("sample")
    assert sample.decomposition_datasets is None and sample.decomposition_scope == sample.datasets
    cfg = load_config("sample", datasets=["hotpotqa", "musique_train"], decomposition_datasets=["musique_train"])
    assert cfg.decomposition_scope == ["musique_train"]
    assert load_config("sample", decomposition_datasets=[]).decomposition_scope == []
    assert "decomposition_datasets" in _NEUTRAL_FIELDS  # a notebook-04 selection: no method's output depends on it
    with pytest.raises(ConfigError, match="decomposition_datasets.*list of strings"):
        load_config("sample", decomposition_datasets=5)


def test_attribution_datasets_narrow_the_runs_datasets():
    sample = load_config("sample")
    assert sample.attribution_datasets is None and sample.attribution_scope == sample.datasets  # every one
    cfg = load_config("sample", datasets=["hotpotqa", "musique_train"], attribution_datasets=["musique_train"])
    assert cfg.attribution_scope == ["musique_train"]
    assert load_config("sample", attribution_datasets=[]).attribution_scope == []
    # a run narrowed to other datasets covers none of them, and is no error: the profile's list is a filter
    assert load_config("sample", datasets=["hotpotqa"], attribution_datasets=["musique_train"]).attribution_scope == []
    both = load_config("sample", datasets=["musique_train", "hotpotqa"], attribution_datasets=["hotpotqa", "x"])
    assert both.attribution_scope == ["hotpotqa"]  # in the run's order, names outside the run left out
    assert load_config("sample", attribution_datasets="hotpotqa").attribution_datasets == ["hotpotqa"]
    with pytest.raises(ConfigError, match="attribution_datasets.*list of strings"):
        load_config("sample", attribution_datasets=5)
