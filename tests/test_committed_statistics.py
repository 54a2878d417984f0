"""Every committed table's cells that follow from its other columns are recomputed from them: differences from
the means, McNemar's exact p from its discordant counts, Holm from the raw p-values of the declared family, and
the minimum detectable EM difference from n and the discordance. A hand-edited cell, or code that wrote one
column inconsistently with another, fails here without running anything (the tables of every profile whose
tables are committed: ``sample`` and ``local``)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT
from kgir_lib.eval.claims import ALPHA, POWER
from kgir_lib.eval.mechanism import step_attribution as sa
from kgir_lib.eval.stats import holm, mcnemar_exact, mde_mcnemar

PROFILES = ("sample", "local")
DIFF = 3  # a difference of two cells rounded to 4 decimals is itself within 1.5e-4 of theirs


def table(profile: str, name: str) -> pd.DataFrame:
    path = PROJECT_ROOT / "results" / profile / "tables" / f"{name}.csv"
    if not path.is_file():
        pytest.skip(f"no committed {profile} table {name}")
    return pd.read_csv(path, keep_default_na=True)


def counts(cell: str) -> tuple:
    b, c = (int(x) for x in str(cell).split("/"))
    return b, c


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact p of ``b`` questions only the first got right and ``c`` only the second."""
    return mcnemar_exact([1.0] * b + [0.0] * c, [0.0] * b + [1.0] * c).p


def close(committed: float, recomputed: float, decimals: int = 4) -> bool:
    """Whether a committed cell is the recomputed value as the table rounds it (``decimals``; both NaN or both
    infinite count as equal)."""
    if pd.isna(committed) and pd.isna(recomputed):
        return True
    if math.isinf(committed) or math.isinf(recomputed):
        return committed == recomputed
    return bool(abs(committed - recomputed) <= 0.5 * 10 ** -decimals + 1e-9)


@pytest.mark.parametrize("profile", PROFILES)
def test_step_attribution_cells_follow_from_their_columns(profile):
    t = table(profile, "04_step_attribution")
    checked = 0
    for dataset, rows in t.groupby("dataset", sort=False):
        raw, adjusted = [], []
        for _, r in rows.iterrows():
            for m in sa.METRICS:
                assert close(r[f"Δ{m}"], r[m] - r[f"{m} full"], DIFF), (dataset, r["key"], m)
                if not pd.isna(r[f"p {m}"]):
                    raw.append(r[f"p {m}"])
                    adjusted.append(r[f"p {m} (Holm)"])
            if isinstance(r["EM discordant"], str) and "/" in r["EM discordant"]:
                b, c = counts(r["EM discordant"])
                assert close(r["p EM"], mcnemar_p(b, c)), (dataset, r["key"])
                mde = 100.0 * mde_mcnemar(int(r["n"]), (b + c) / r["n"], ALPHA / sa.FAMILY_SIZE, POWER)
                assert close(r[sa.MDE_COLUMN], mde), (dataset, r["key"], r[sa.MDE_COLUMN], mde)
                checked += 1
        assert len(raw) <= sa.FAMILY_SIZE
        expect = holm(raw + [1.0] * (sa.FAMILY_SIZE - len(raw)))[:len(raw)]
        # Holm multiplies a raw p rounded to 4 decimals by at most the family's size
        tol = (sa.FAMILY_SIZE + 1) * 0.5e-4
        assert all(abs(a - e) <= tol for a, e in zip(adjusted, expect)), dataset
    assert checked


@pytest.mark.parametrize("profile", PROFILES)
def test_claims_cells_follow_from_their_columns(profile):
    for name in ("05_claims", "05_claims_without_tuning_questions"):
        try:
            t = table(profile, name)
        except pytest.skip.Exception:
            continue
        mde_col = next(c for c in t.columns if c.startswith("MDE"))
        for claim, rows in t.groupby("claim", sort=False):
            tested = rows[rows["n"] > 0]
            assert all(close(a, e) for a, e in zip(tested["p (Holm)"], holm(tested["p"].tolist()))), claim
            for _, r in tested.iterrows():
                assert close(r["diff"], r["KGIR-RAG"] - r["other"]), (claim, r["dataset"], r["metric"])
                if r["test"] == "McNemar":
                    b, c = counts(r["discordant"])
                    assert close(r["p"], mcnemar_p(b, c)), (claim, r["dataset"])
                    mde = 100.0 * mde_mcnemar(int(r["n"]), (b + c) / r["n"], ALPHA / len(tested), POWER)
                    assert close(r[mde_col], mde), (claim, r["dataset"], r[mde_col], mde)


@pytest.mark.parametrize("profile", PROFILES)
def test_forced_rounds_p_follows_from_mcnemar_counts(profile):
    for name in ("04_forced_rounds", "06_kgir_forced_rounds"):
        try:
            t = table(profile, name)
        except pytest.skip.Exception:
            continue
        for _, r in t[t["McNemar b"].notna()].iterrows():
            p = mcnemar_p(int(r["McNemar b"]), int(r["McNemar c"]))
            assert close(r["EM p vs round 1"], p, decimals=2 if name == "04_forced_rounds" else 3), r.to_dict()


@pytest.mark.parametrize("profile", PROFILES)
def test_ablation_differences_follow_from_the_full_rows(profile):
    for name in ("06_kgir_ablation", "06_kg2rag_ablation"):
        try:
            t = table(profile, name)
        except pytest.skip.Exception:
            continue
        for dataset, rows in t.groupby("dataset", sort=False):
            full = rows.iloc[0]
            for _, r in rows.iterrows():
                # full minus the variant (report.TABLE7_SIGN)
                assert close(r["ΔEM (ours)"], full["EM"] - r["EM"]), (name, dataset, r["variant"])
                assert close(r["ΔF1 (ours)"], full["F1"] - r["F1"]), (name, dataset, r["variant"])


@pytest.mark.parametrize("profile", PROFILES)
def test_loss_decomposition_cells_follow_from_their_columns(profile):
    from kgir_lib.eval.mechanism import loss_decomposition as ld

    t = table(profile, "04_loss_decomposition")
    for dataset, rows in t.groupby("dataset", sort=False):
        readers = list(dict.fromkeys(rows["reader"]))
        keyed = rows.set_index(["reader", "condition"])
        raw, adjusted = [], []
        for reader, condition, against in ld.family(readers):
            r = keyed.loc[(reader, condition)]
            if against == "previous":
                prev = keyed.loc[(reader, ld.CONDITIONS[ld.CONDITIONS.index(condition) - 1])]
                assert close(r["ΔEM"], r["EM"] - prev["EM"], DIFF), (dataset, reader, condition)
                b, c = counts(r["EM b/c"])
                assert close(r["p"], mcnemar_p(b, c)), (dataset, reader, condition)
                raw.append(mcnemar_p(b, c))  # from the counts: the committed p is rounded to 4 digits
                adjusted.append(r["p (Holm)"])
            else:
                first = keyed.loc[(against, condition)]
                assert close(r["ΔEM vs first reader"], r["EM"] - first["EM"], DIFF), (dataset, reader, condition)
                b, c = counts(r["EM b/c vs first reader"])
                assert close(r["p vs first reader"], mcnemar_p(b, c)), (dataset, reader, condition)
                raw.append(mcnemar_p(b, c))
                adjusted.append(r["p vs first reader (Holm)"])
        assert all(close(a, e) for a, e in zip(adjusted, holm(raw))), dataset


def test_the_mde_reads_discordance_in_both_directions():
    """The MDE of a row comes from the share of questions on which the two disagree, whichever got it right:
    30 disagreements split 15/15 or 30/0 give the same MDE (22 points at n = 100, level 0.05 / 23, power 0.8)."""
    ref = [1.0] * 30 + [0.0] * 70
    both_ways = [0.0] * 15 + [1.0] * 15 + [1.0] * 15 + [0.0] * 55  # 15 lost, 15 gained
    one_way = [1.0] * 30 + [1.0] * 30 + [0.0] * 40  # 30 gained
    runs = {key: [{"qid": f"q{i}", "answer": "yes" if x else "no",
                   "trace": {"gold_answers": ["yes"], "gold_pids": [], "rounds": []}} for i, x in enumerate(v)]
            for key, v in (("kgir", ref), ("kgir_oracle_rewrite", both_ways), ("kgir_oracle_next_hop", one_way))}
    t = sa.step_attribution_table(runs, {}, "d", n_ctx=5).set_index("key")
    assert t.loc["kgir_oracle_rewrite", "EM discordant"] == "15/15"
    assert t.loc["kgir_oracle_next_hop", "EM discordant"] == "30/0"
    mde = 100.0 * mde_mcnemar(100, 0.3, ALPHA / sa.FAMILY_SIZE, POWER)
    assert mde == pytest.approx(22.0)
    assert t.loc["kgir_oracle_rewrite", sa.MDE_COLUMN] == t.loc["kgir_oracle_next_hop", sa.MDE_COLUMN] == mde
