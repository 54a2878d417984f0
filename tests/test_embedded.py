"""The embedded-model locator, the portable build flags and set-up's self-check."""
from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

import pytest

from kgir_lib.llm import build, embedded, selfcheck
from kgir_lib.llm.embedded import EmbeddedModel, EmbeddedModelError

AMX_CPU = "processor : 0\nflags : fpu sse4_2 avx avx2 fma f16c avx512f avx512_vnni avx512_bf16 amx_int8 amx_tile amx_bf16\n"
AVX2_CPU = "processor : 0\nflags : fpu sse4_2 avx avx2 fma f16c\n"


# ---------------------------------------------------------------- build flags
def test_amx_cpu_gets_avx512_and_never_amx_or_native():
    args = build.cmake_args(build.cpu_flags(AMX_CPU))
    assert "-DGGML_NATIVE=OFF" in args
    for amx in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"):
        assert f"-D{amx}=OFF" in args and f"-D{amx}=ON" not in args
    for on in ("GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16"):
        assert f"-D{on}=ON" in args


def test_cpu_without_avx512_gets_a_build_without_it():
    args = build.cmake_args(build.cpu_flags(AVX2_CPU))
    assert "-DGGML_AVX2=ON" in args and "-DGGML_AVX512=OFF" in args and "-DGGML_AVX512_VNNI=OFF" in args


def test_wheel_tag_depends_on_the_flags():
    a = build.build_tag(build.cmake_args(build.cpu_flags(AMX_CPU)))
    b = build.build_tag(build.cmake_args(build.cpu_flags(AVX2_CPU)))
    assert a != b and a.startswith(build.LLAMA_CPP_VERSION)


def test_no_flags_line_means_no_extensions():
    args = build.cmake_args(build.cpu_flags("processor : 0\n"))
    assert all(a.endswith("=OFF") for a in args)


# ---------------------------------------------------------------- locator
def _fake_dist(site: Path, package: str, payload: bytes) -> None:
    """A minimal installed distribution holding ``<module>/data/part01.bin``."""
    module = package.replace("-", "_")
    (site / module / "data").mkdir(parents=True)
    (site / module / "data" / "part01.bin").write_bytes(payload)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "RECORD").write_text(f"{module}/data/part01.bin,,\n{module}-0.1.dist-info/METADATA,,\n")


@pytest.fixture()
def fake_parts(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    parts = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]
    names = [f"kgir-fake-model-part{i}" for i in range(1, 4)]
    for name, payload in zip(names, parts):
        _fake_dist(site, name, payload)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(parts)
    model = EmbeddedModel(name="Fake-Model", filename="fake.gguf", packages=tuple(names), version="0.1",
                          size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    return model, whole, site


def test_assemble_concatenates_parts_in_order_and_verifies(fake_parts, tmp_path):
    model, whole, _ = fake_parts
    path = embedded.assemble(model, tmp_path / "cache")
    assert path.read_bytes() == whole
    assert (tmp_path / "cache" / "fake.gguf.verified.json").exists()


def test_assembled_file_is_reused_without_reading_parts(fake_parts, tmp_path, monkeypatch):
    model, whole, _ = fake_parts
    embedded.assemble(model, tmp_path / "cache")
    monkeypatch.setattr(embedded, "part_paths", lambda m: pytest.fail("parts read again"))
    assert embedded.assemble(model, tmp_path / "cache").read_bytes() == whole


def test_hash_mismatch_names_packages_and_expected_hash(fake_parts, tmp_path):
    model, whole, _ = fake_parts
    bad = EmbeddedModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(EmbeddedModelError) as err:
        embedded.assemble(bad, tmp_path / "cache")
    msg = str(err.value)
    assert "kgir-fake-model-part1" in msg and "0" * 64 in msg and "sha256" in msg
    assert not (tmp_path / "cache" / "fake.gguf").exists()  # nothing half-verified is left behind


def test_size_mismatch_is_an_error(fake_parts, tmp_path):
    model, whole, _ = fake_parts
    bad = EmbeddedModel(**{**model.__dict__, "size": len(whole) + 1})
    with pytest.raises(EmbeddedModelError, match="bytes, expected"):
        embedded.assemble(bad, tmp_path / "cache")


def test_missing_part_names_the_package(fake_parts, tmp_path):
    model, _, _ = fake_parts
    missing = EmbeddedModel(**{**model.__dict__, "packages": model.packages + ("kgir-fake-model-part4",)})
    with pytest.raises(EmbeddedModelError, match="kgir-fake-model-part4.*not installed"):
        embedded.assemble(missing, tmp_path / "cache")


def test_corrupted_cached_file_is_rebuilt(fake_parts, tmp_path):
    model, whole, _ = fake_parts
    path = embedded.assemble(model, tmp_path / "cache")
    path.write_bytes(b"garbage")  # size and mtime no longer match the verified marker
    assert embedded.assemble(model, tmp_path / "cache").read_bytes() == whole


def test_unknown_model_name_points_to_llm_model_path():
    with pytest.raises(EmbeddedModelError, match="llm_model_path"):
        embedded.locate("No-Such-Model")


def test_model_cache_dir_is_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("KGIR_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert embedded.model_cache_dir() == tmp_path / "xdg" / "kgir" / "models"
    monkeypatch.setenv("KGIR_MODEL_CACHE", str(tmp_path / "m"))
    assert embedded.model_cache_dir() == tmp_path / "m"


def test_registry_matches_scripts_models_txt():
    """Every chunk package of every embedded model is pinned in scripts/models.txt, at its version."""
    pins = {}
    for line in (Path(__file__).resolve().parent.parent / "scripts" / "models.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    for model in embedded.EMBEDDED_MODELS.values():
        for pkg in model.packages:
            assert pins.get(pkg) == model.version, pkg


# ---------------------------------------------------------------- self-check
def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake_python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_selfcheck_reports_a_segfaulting_child(tmp_path):
    ok, message = selfcheck.run_check("model.gguf", python=_fake_python(tmp_path, "echo boom >&2; kill -SEGV $$"))
    assert not ok
    assert "SIGSEGV" in message and "CPU flags" in message and "KGIR_LLAMA_CMAKE_ARGS" in message
    assert "boom" in message


def test_selfcheck_reports_a_failing_child(tmp_path):
    ok, message = selfcheck.run_check("model.gguf", python=_fake_python(tmp_path, "exit 3"))
    assert not ok and "exited with status 3" in message


def test_selfcheck_passes_a_healthy_child(tmp_path):
    ok, message = selfcheck.run_check("model.gguf", python=_fake_python(tmp_path, "echo 'selfcheck: fine'"))
    assert ok and "fine" in message


def test_failure_message_names_the_cpu_flags():
    msg = selfcheck.failure_message(-11, "m.gguf", cpuinfo=AMX_CPU)
    assert "amx_int8" in msg and "avx512f" in msg and "SIGSEGV" in msg


@pytest.mark.slow
def test_selfcheck_runs_the_real_build():
    """The installed llama-cpp-python generates one token in a child process on this CPU."""
    names = embedded.installed_models()
    if not names:
        pytest.skip("no embedded model installed")
    ok, message = selfcheck.run_check(str(embedded.locate(names[0])))
    assert ok, message
