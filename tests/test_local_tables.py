"""The committed ``local`` tables rebuilt by the library from what the repository commits, with no model.

The ``local`` run commits its tables and its response log, not its per-question traces (``.gitignore``: they are
rebuilt from the log with the encoder, a model load). So each table is rebuilt here as far as its committed inputs
reach, through the library functions the notebooks call (a change to one of them that moves a committed number
fails here):

- ``04_passage_cut``: from the shared data and the profile alone (:func:`loss_decomposition.cut_table` over the
  profile's question sample, cut at its ``passage_chars``): every cell;
- ``05_claims`` and ``05_claims_without_tuning_questions``: every EM row's exact McNemar p and MDE from its
  discordant counts (questions only KGIR-RAG / only the other got right) by :func:`claims.exact_test` and
  :func:`claims.minimum_detectable` on paired scores with those counts; every family's Holm adjustment, every
  verdict and the MDE column's header by :func:`claims.claims_table`'s own rules; the per-dataset n from the data;
- ``04_loss_decomposition``: every test's Holm adjustment within :func:`loss_decomposition.family`, every McNemar
  p from its counts, and the n of each dataset from the data.

The bootstrap intervals and the F1 / recall tests need each question's scores: the committed question explorer
holds EM and F1 of KGIR-RAG and the twelve other methods of notebook 05, from which
``tests/test_local_explorer_scores.py`` rebuilds those rows; the ablation variants' and recall's per-question scores
only the traces hold, so they are pinned on the ``sample`` run, whose traces are committed
(``tests/test_pinned_tables.py``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kgir_lib.config import PROJECT_ROOT, default_data_dir, load_config
from kgir_lib.data import load_dataset, sample_questions, tuning_questions
from kgir_lib.eval import claims as cl
from kgir_lib.eval.mechanism import loss_decomposition as ld
from kgir_lib.eval.stats import holm

TABLES = PROJECT_ROOT / "results" / "local" / "tables"
DATA = default_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared data at {DATA} (set KGIR_DATA_DIR)")


def committed(name: str) -> pd.DataFrame:
    path = TABLES / f"{name}.csv"
    assert path.is_file(), f"no committed local table {path.name}"
    return pd.read_csv(path)


def local_questions() -> dict:
    """``{dataset: the local profile's question sample}``, as notebooks 04 and 05 draw it."""
    cfg = load_config("local", data_dir=str(DATA))
    return {d: sample_questions(load_dataset(d, cfg.data_path).questions, cfg.n_questions, cfg.seed)
            for d in cfg.datasets}


def paired_em(n: int, ref_right: int, b: int, c: int) -> tuple:
    """Two EM vectors (0/100) over ``n`` questions with ``b`` right only in the first, ``c`` only in the second and
    ``ref_right`` right in the first: what a McNemar test and the EM MDE read of a pair."""
    both = ref_right - b
    assert 0 <= both and both + b + c <= n, (n, ref_right, b, c)
    a = np.array([100.0] * both + [100.0] * b + [0.0] * c + [0.0] * (n - both - b - c))
    o = np.array([100.0] * both + [0.0] * b + [100.0] * c + [0.0] * (n - both - b - c))
    return a, o


# ---------------------------------------------------------------------------- 04_passage_cut
def test_the_local_passage_cut_is_rebuilt_from_the_data():
    cfg = load_config("local", data_dir=str(DATA))
    rows = []
    for d, questions in local_questions().items():
        corpus = {p.pid: p for p in load_dataset(d, cfg.data_path).corpus.passages}
        rows.append(ld.cut_table(questions, corpus, cfg.passage_chars, d))
    rebuilt = pd.concat(rows, ignore_index=True)
    pd.testing.assert_frame_equal(rebuilt, committed("04_passage_cut"), check_dtype=False)


# ---------------------------------------------------------------------------- 05_claims
def claim_tables() -> list:
    return [(name, committed(name)) for name in ("05_claims", "05_claims_without_tuning_questions")]


def test_the_local_claims_count_each_datasets_questions_from_the_data():
    questions = local_questions()
    tuned = {d: {q.qid for q in tuning_questions(load_dataset(d, load_config("local").data_path).questions,
                                                  seed=load_config("local").seed)} for d in ("musique_train",)}
    for name, t in claim_tables():
        left_out = tuned if name.endswith("without_tuning_questions") else {}
        for d, qs in questions.items():
            expect = len([q for q in qs if q.qid not in left_out.get(d, set())])
            # EM is defined on every question: every EM row of a dataset pairs all of them
            em = t[(t["dataset"] == d) & (t["metric"] == "EM")]
            assert set(em["n"]) == {expect}, (name, d, sorted(set(em["n"])), expect)
        pooled = t[(t["dataset"] == "all") & (t["metric"] == "EM")]
        assert set(pooled["n"]) == {sum(set(t.loc[(t["dataset"] == d) & (t["metric"] == "EM"), "n"]).pop()
                                        for d in questions)}, name


def test_the_local_claims_em_tests_and_mdes_are_the_librarys_on_their_counts():
    checked = 0
    for name, t in claim_tables():
        mde = cl.mde_column(t)
        for claim, rows in t.groupby("claim", sort=False):
            k = int((rows["n"] > 0).sum())
            for r in rows[(rows["metric"] == "EM") & (rows["n"] > 0)].to_dict("records"):
                b, c = (int(x) for x in r["discordant"].split("/"))
                n = int(r["n"])
                a, o = paired_em(n, round(r["KGIR-RAG"] * n / 100), b, c)
                assert a.mean() == pytest.approx(r["KGIR-RAG"]) and o.mean() == pytest.approx(r["other"])
                test = cl.exact_test(a, o, "EM")
                assert (test["test"], test["discordant"], test["p"]) == ("McNemar", r["discordant"], r["p"]), \
                    (name, claim, r["dataset"])
                assert cl.minimum_detectable(a, o, "EM", cl.ALPHA / k) == r[mde], (name, claim, r["dataset"])
                checked += 1
    assert checked >= 2 * 21  # 7 claim rows of EM a dataset and pooled, in both tables


def test_the_local_claims_holm_verdicts_and_mde_header_follow_the_librarys_rules():
    for name, t in claim_tables():
        sizes = []
        for claim, rows in t.groupby("claim", sort=False):
            tested = rows[rows["n"] > 0]
            sizes.append(len(tested))
            assert list(tested["p (Holm)"]) == list(holm(tested["p"].tolist())), (name, claim)
            for r in tested.to_dict("records"):
                assert r["reading"] == cl.verdict(r["diff"], r["p (Holm)"]), (name, claim, r["dataset"], r["metric"])
            assert set(rows.loc[rows["n"] == 0, "reading"]) <= {cl.NOT_RUN}
        assert cl.mde_column(t) == cl.mde_label(cl.ALPHA, cl.POWER, sizes), name
        assert {c.name for c in cl.PAPER_CLAIMS} == set(t["claim"]), name


def test_the_local_claims_headline_has_each_datasets_true_count():
    t = committed("05_claims")
    head = cl.claims_headline(t).splitlines()[0]
    for d, qs in local_questions().items():
        assert f"{d} (n = {len(qs)})" in head, (head, d, len(qs))


# ---------------------------------------------------------------------------- 04_loss_decomposition
def test_the_local_loss_decomposition_tests_follow_the_librarys_family():
    t = committed("04_loss_decomposition")
    questions = local_questions()
    for dataset, rows in t.groupby("dataset", sort=False):
        with_gold = sum(bool(q.gold_pids) for q in questions[dataset])
        assert set(rows["n"]) <= {with_gold} and len(set(rows["n"])) == 1, (dataset, set(rows["n"]), with_gold)
        readers = list(dict.fromkeys(rows["reader"]))
        keyed = rows.set_index(["reader", "condition"])
        raw, adjusted = [], []
        for reader, condition, against in ld.family(readers):
            r = keyed.loc[(reader, condition)]
            col = "" if against == "previous" else " vs first reader"
            b, c = (int(x) for x in r[f"EM b/c{col}"].split("/"))
            n = int(r["n"])
            p = ld._mcnemar(*(pd.Series(v) for v in paired_em(n, b, b, c)))[0]
            assert p == pytest.approx(r[f"p{col}"], abs=0.5e-4), (dataset, reader, condition, against)
            raw.append(p)
            adjusted.append(r[f"p{col} (Holm)"])
        assert np.allclose(adjusted, holm(raw), atol=0.5e-4, rtol=0), dataset


# ---------------------------------------------------------------------------- the counts every caption states
def test_the_local_notes_and_captions_state_each_datasets_true_count():
    """hotpotqa has 84 questions, not the profile's n_questions (100): the model note, the opening line and every
    committed local caption that states the count give each dataset's, counted from the data."""
    from kgir_lib import report

    cfg = load_config("local", data_dir=str(DATA))
    true = {d: len(qs) for d, qs in local_questions().items()}
    assert report.question_counts(cfg) == true
    phrase = ", ".join(f"{d} {n}" for d, n in true.items()) + " questions"
    assert report.questions_phrase(cfg) == phrase
    assert f"profile 'local', {phrase})" in report.model_note(cfg, short=True)
    assert f"{phrase} (seed {cfg.seed})" in report.run_header(cfg, "05_eval")
    stated = 0
    for path in sorted(TABLES.glob("*.md")):
        caption = path.read_text(encoding="utf-8").split("\n\n", 1)[0]
        assert not any(f"{n} questions {each}" in caption for n in {cfg.n_questions, *true.values()}
                       for each in ("a dataset", "each")), path.name  # one count for datasets of two sizes
        stated += phrase in caption
    assert stated >= 20


# ---------------------------------------------------------------------------- 05_first_and_new
def test_the_local_repair_tests_are_the_librarys_on_their_counts():
    """The deployable repair's four declared tests a dataset: each EM row's McNemar p and MDE from its discordant
    counts (questions only the repair / only the reference got right), every n from the data, Holm within the
    dataset's four tests. The F1 rows' sign-flip p need each question's F1, which only the traces hold (not
    committed for local): their F1 means are checked against Tables 4/5 in the next test."""
    from kgir_lib.eval.mechanism import repair
    from kgir_lib.eval.stats import mcnemar_exact, mde_mcnemar
    from kgir_lib.kgir.first_retrieval import FAMILY

    t = committed("05_first_and_new")
    questions = local_questions()
    assert list(t["dataset"].drop_duplicates()) == list(questions)
    for dataset, rows in t.groupby("dataset", sort=False):
        assert list(zip(rows["against"], rows["metric"])) == list(FAMILY), dataset
        assert set(rows["n"]) == {len(questions[dataset])}, dataset
        for r in rows[rows["metric"] == "EM"].to_dict("records"):
            b, c = (int(x) for x in r["b/c"].split("/"))
            n = int(r["n"])
            mine, ref = paired_em(n, round(r["repair"] * n / 100), b, c)
            assert (mine.mean(), ref.mean()) == pytest.approx((r["repair"], r["reference"]), abs=0.5e-4)
            assert np.round(mcnemar_exact(mine > 0, ref > 0).p, 4) == r["p"], (dataset, r["against"])  # as rounded
            mde = 100 * mde_mcnemar(n, (b + c) / n, repair.ALPHA / len(FAMILY), repair.POWER)
            assert mde == pytest.approx(r[repair.MDE_COLUMN], abs=0.5e-4), (dataset, r["against"])
        # the table rounds p to 4 decimals; Holm multiplies a p by up to the family's size; its own rounding adds one
        rounding = (len(FAMILY) + 1) * 0.5e-4
        assert np.allclose(rows["p (Holm)"], holm(rows["p"].tolist()), atol=rounding, rtol=0), dataset
        assert (rows["Δ"] - (rows["repair"] - rows["reference"])).abs().max() <= 1.5e-4, dataset  # three roundings


def test_the_local_repair_scores_are_its_rows_in_tables_4_5_and_the_ablation():
    """Each EM and F1 of ``05_first_and_new`` is the repair's and its reference's in notebook 05's Tables 4/5
    (KGIR-RAG's and Naive RAG's rows are rebuilt from the explorer's scores in tests/test_local_explorer_scores.py),
    and the repair's row of notebook 06's KGIR-RAG ablation (the full method minus the repair there)."""
    from kgir_lib.kgir.first_retrieval import KEY
    from kgir_lib.registry import LABELS

    t = committed("05_first_and_new")
    qa = committed("05_table4_5_qa_Qwen2.5-Coder-1.5B-Instruct-Q4_K_M").set_index("method")
    ablation = committed("06_kgir_ablation").set_index(["dataset", "variant"])

    def column(dataset: str, metric: str) -> str:
        [name] = [c for c in qa.columns if c.startswith("ours (") and c.endswith(f" / {dataset} / {metric}")]
        return name

    for r in t.to_dict("records"):
        col = column(r["dataset"], r["metric"])
        assert qa.loc[LABELS[KEY], col] == pytest.approx(r["repair"], abs=0.5e-4), (r["dataset"], r["metric"])
        assert qa.loc[LABELS[r["against"]], col] == pytest.approx(r["reference"], abs=0.5e-4), (r["dataset"], col)
        row = ablation.loc[(r["dataset"], "+ D_1 beside D'_t (ours, a repair)")]
        assert row[r["metric"]] == pytest.approx(r["repair"], abs=0.05), (r["dataset"], r["metric"])
        if r["against"] == "kgir":
            assert row[f"Δ{r['metric']} (ours)"] == pytest.approx(-r["Δ"], abs=0.05), (r["dataset"], r["metric"])


def test_the_words_on_the_local_repair_are_its_table():
    """README and docs/results.md: the repair's +6.0 EM over KGIR-RAG on both datasets, no row surviving Holm, its
    difference from Naive RAG per dataset and the EM MDE being ∞ on three of the four EM rows."""
    from kgir_lib.config import PROJECT_ROOT as ROOT
    from kgir_lib.eval.mechanism import repair

    t = committed("05_first_and_new")
    em = t[t["metric"] == "EM"].set_index(["dataset", "against"])
    assert [round(em.loc[(d, "kgir"), "Δ"], 1) for d in ("musique_train", "hotpotqa")] == [6.0, 6.0]
    assert [round(em.loc[(d, "naive_rag"), "Δ"], 1) for d in ("musique_train", "hotpotqa")] == [6.0, -2.4]
    assert (t["p (Holm)"] >= 0.05).all() and int(np.isinf(em[repair.MDE_COLUMN]).sum()) == 3
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert ("No row survives Holm: on these questions the repair's +6.0 EM over KGIR-RAG on both datasets cannot be "
            "told from noise") in readme
    text = " ".join((ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    assert ("On both datasets the repair answers 6.0 EM points more than KGIR-RAG, and neither difference survives "
            "Holm; beside Naive RAG it is +6.0 on musique_train and -2.4 on hotpotqa") in text
    assert "is ∞ on three of the four EM rows" in text


# ---------------------------------------------------------------------------- 04_loss_orders
def test_the_local_loss_orders_tests_follow_the_librarys_family():
    """The split decomposition in both orders: every declared test's McNemar p from its discordant counts, each
    adjacent step's ΔEM from the EM of the two conditions and its MDE from its discordance, Holm within the
    dataset's declared family (:func:`loss_orders.family`), and each dataset's n: its questions with gold passages."""
    from kgir_lib.eval.mechanism import loss_orders as lo
    from kgir_lib.eval.stats import mcnemar_exact, mde_mcnemar

    t = committed("04_loss_orders")
    questions = local_questions()
    mde = [c for c in t.columns if c.startswith("MDE EM")][0]
    for dataset, rows in t.groupby("dataset", sort=False):
        with_gold = sum(bool(q.gold_pids) for q in questions[dataset])
        assert set(rows["n"]) == {with_gold}, dataset
        readers = list(dict.fromkeys(rows["reader"]))
        size = lo.family_size(readers)
        raw, adjusted = [], []
        for reader, order, condition, against in lo.family(readers):
            if against == "previous":
                r = rows[(rows["reader"] == reader) & (rows["order"] == order) & (rows["condition"] == condition)]
                col = ""
            else:
                r = rows[(rows["reader"] == reader) & (rows["condition"] == condition)
                         & rows["p vs first reader"].notna()]
                col = " vs first reader"
            assert len(r) == 1, (dataset, reader, order, condition, against)
            r = r.iloc[0]
            b, c = (int(x) for x in r[f"EM b/c{col}"].split("/"))
            n = int(r["n"])
            mine, other = paired_em(n, b, b, c)
            p = mcnemar_exact(mine > 0, other > 0).p
            assert np.round(p, 4) == r[f"p{col}"], (dataset, reader, order, condition, against)  # as the table rounds
            if against == "previous":
                assert 100 * mde_mcnemar(n, (b + c) / n, lo.ALPHA / size, lo.POWER) == pytest.approx(r[mde], abs=0.5e-4)
                assert r["ΔEM"] == pytest.approx(100 * (b - c) / n, abs=1e-3), (dataset, reader, order, condition)
            raw.append(p)
            adjusted.append(r[f"p{col} (Holm)"])
        # p rounded to 4 decimals; Holm multiplies one by up to the family's size
        assert np.allclose(adjusted, holm(raw), atol=(size + 1) * 0.5e-4, rtol=0), dataset


def test_the_results_page_reading_of_the_local_orders_is_the_tables():
    """docs/results.md: which of the 60 tests survive Holm (three, each restoring the withheld gold), the range of
    each of the two retrieval-side fixes over datasets, readers and orders, and no reader difference surviving."""
    from kgir_lib.config import PROJECT_ROOT as ROOT

    t = committed("04_loss_orders")
    tested = t["p"].notna().sum() + t["p vs first reader"].notna().sum()
    held = t[t["p (Holm)"] < 0.05]
    survivors = sorted(zip(held["dataset"], held["reader"].str.extract(r"(\d\.\dB)")[0], held["order"],
                           held["EM b/c"], held["p (Holm)"].round(4)))
    assert tested == 60 and survivors == [
        ("hotpotqa", "0.5B", "reverse", "19/2", 0.0066), ("musique_train", "0.5B", "forward", "12/0", 0.0142),
        ("musique_train", "1.5B", "reverse", "17/0", 0.0005)]
    assert set(held["step"]) == {"the context rule"}
    assert (t["p vs first reader (Holm)"].dropna() >= 0.05).all()
    gains = {step: (round(rows["ΔEM"].min(), 1), round(rows["ΔEM"].max(), 1))
             for step, rows in t[t["step"].isin(["the context rule", "retrieval"])].groupby("step")}
    assert gains == {"the context rule": (4.8, 20.2), "retrieval": (2.4, 8.0)}
    text = " ".join((ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    assert ("Three of the 60 tests survive Holm, and all three restore the withheld gold: - musique_train, 0.5B, first "
            "in the forward order: 12/0, Holm p 0.014; - musique_train, 1.5B, last in the reverse order: 17/0, Holm p "
            "0.0005; - hotpotqa, 0.5B, last in the reverse order: 19/2, Holm p 0.0066.") in text
    assert "restoring the withheld gold adds +4.8 to +20.2 EM and adding the never-retrieved gold +2.4 to +8.0" in text
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert ("The only steps that survive Holm restore gold that `D_1` had found and the rule withheld (3 of 60 tests). "
            "Adding the gold no retrieval found adds +2.4 to +8.0 EM, and none of its tests survives.") in readme
