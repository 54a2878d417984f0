"""Each method run reads notebook 01's graph plus its own on-demand passages (Workspace.method_view), so the
order in which methods run, and which of them a resumed run reads back, changes no method's graph."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import ClassVar

from kgir_lib.eval import evaluate as ev
from kgir_lib.kg import KnowledgeGraph
from kgir_lib.kg.store import load_base, save_base, save_kg
from kgir_lib.methods.base import MethodBase, MethodOutput


@dataclass
class Reads(MethodBase):
    """A method that reads the KG for fixed passages (by title) and records the graph it saw."""

    name: ClassVar[str] = "reads"
    key: ClassVar[str] = "reads"
    uses_kg: ClassVar[bool] = True
    titles: str = ""
    seen: ClassVar[dict] = {}

    def run(self, ws, questions):
        pids = [p.pid for p in ws.dataset.corpus.passages if p.title in self.titles.split(",")]
        kg = ws.kg_for(pids)
        type(self).seen[self.titles] = sorted(kg.extracted)
        return [MethodOutput(q.qid, "x", pids) for q in questions]


def titled(ws, *titles):
    return sorted(p.pid for p in ws.dataset.corpus.passages if p.title in titles)


def shared_workspace(tiny_workspace, tiny_kg, base_titles=("Compaq", "Hewlett-Packard")):
    """A workspace whose shared graph holds only ``base_titles`` and extracts the rest from ``tiny_kg``."""
    ws = tiny_workspace(lambda req: "unused")
    base = [p.pid for p in ws.dataset.corpus.passages if p.title in base_titles]
    shared = tiny_kg.subset(base)
    asked: list = []

    def ensure(pids):
        asked.append(list(pids))
        for pid in shared.missing(pids):
            shared.add(pid, tiny_kg.triples_of([pid]))

    ws.kg, ws.ensure_kg, ws.kg_base = shared, ensure, tuple(base)
    return ws, asked


def test_a_method_sees_the_base_and_its_own_passages_whichever_methods_ran_before(tiny_workspace, tiny_kg):
    alone, _ = shared_workspace(tiny_workspace, tiny_kg)
    qs = alone.dataset.questions
    ev.run_method(alone, Reads(titles="Dell"), qs)
    fp_alone = json.loads(ev.trace_path(alone.cfg, Reads(), "tiny").with_suffix(".meta.json").read_text())
    seen_alone = Reads.seen["Dell"]
    assert seen_alone == titled(alone, "Compaq", "Hewlett-Packard", "Dell")

    after, _ = shared_workspace(tiny_workspace, tiny_kg)
    ev.run_method(after, Reads(titles="IBM,Lenovo"), qs)
    ev.run_method(after, Reads(titles="Dell"), qs, resume=False)
    assert Reads.seen["Dell"] == seen_alone  # IBM and Lenovo, extracted by the run before, are not in its graph
    assert after.kg.extracted == set(titled(after, "Compaq", "Hewlett-Packard", "IBM", "Lenovo", "Dell"))
    meta = json.loads(ev.trace_path(after.cfg, Reads(), "tiny").with_suffix(".meta.json").read_text())
    assert meta["fingerprint"] == fp_alone["fingerprint"]
    assert meta["kg_on_demand"] == titled(after, "Dell")


def test_a_resumed_run_extracts_its_on_demand_passages_into_the_shared_graph_again(tiny_workspace, tiny_kg):
    first, _ = shared_workspace(tiny_workspace, tiny_kg)
    qs = first.dataset.questions
    Reads.seen.clear()
    ev.run_method(first, Reads(titles="IBM,Lenovo"), qs)
    meta = json.loads(ev.trace_path(first.cfg, Reads(), "tiny").with_suffix(".meta.json").read_text())
    ibm, lenovo = (p.pid for t in ("IBM", "Lenovo") for p in first.dataset.corpus.passages if p.title == t)
    assert meta["kg_on_demand"] == [ibm, lenovo]  # in the order the run asked for them

    fresh, asked = shared_workspace(tiny_workspace, tiny_kg)
    Reads.seen.clear()
    ev.run_method(fresh, Reads(titles="IBM,Lenovo"), qs)  # same fingerprint: read back, not run
    assert Reads.seen == {}
    assert asked == [[ibm, lenovo]]
    assert fresh.kg.extracted == set(titled(fresh, "Compaq", "Hewlett-Packard", "IBM", "Lenovo"))


def test_the_view_passes_every_request_to_the_shared_ensure_and_leaves_the_base_alone(tiny_workspace, tiny_kg):
    ws, asked = shared_workspace(tiny_workspace, tiny_kg)
    view = ws.method_view()
    base_pids = titled(ws, "Compaq", "Hewlett-Packard")
    dell = titled(ws, "Dell")
    got = view.kg_for(base_pids + dell)
    assert asked == [base_pids + dell]  # a recording wrapper (robustness study, scope "read") sees the base too
    assert got.extracted == set(base_pids + dell) and view.on_demand() == dell
    assert got.triples_of(dell) == tiny_kg.triples_of(dell)
    assert ws.method_view().kg.extracted == set(base_pids)  # the next run starts from the base again
    assert ws.method_view().on_demand() == []


def test_without_a_base_the_view_is_the_workspace_itself(tiny_workspace):
    ws = tiny_workspace(lambda req: "unused")
    assert ws.kg_base is None and ws.method_view() is ws and ws.on_demand() == []


def test_base_file_round_trip_keeps_the_stored_order_and_only_the_pool(tmp_path, tiny_kg, tiny_dataset):
    pids = [p.pid for p in tiny_dataset.corpus.passages]
    kg = KnowledgeGraph(tiny_kg.triples_of(pids[:4]), [pids[5], *pids[:4]])  # Apple processed, no triple
    save_kg(kg, tmp_path)
    assert load_base(tmp_path) is None  # a graph stored without a base
    base = save_base(tmp_path, kg, [pids[5], pids[2], pids[0]])
    assert base == [pids[0], pids[2], pids[5]]  # passages with triples in triple order, then those without
    assert load_base(tmp_path) == base



def test_which_methods_notebook_05_runs_is_not_part_of_a_methods_fingerprint(tiny_workspace, tiny_kg):
    ws, _ = shared_workspace(tiny_workspace, tiny_kg)
    fp = ev.run_fingerprint(ws, Reads(titles="Dell"))
    narrowed = replace(ws, cfg=replace(ws.cfg, eval_methods=["kgir"]))
    assert narrowed.cfg.eval_methods == ["kgir"] and ev.run_fingerprint(narrowed, Reads(titles="Dell")) == fp
    other = replace(ws, cfg=replace(ws.cfg, top_k=ws.cfg.top_k + 1))
    assert ev.run_fingerprint(other, Reads(titles="Dell")) != fp  # a field that does change outputs
