"""The enclave replay's check of the attempts it does not reproduce
(audit/replay.attempt_spending_problems), on transcripts built record by record: an honest refit
and resample transcript pass; a second generator fit inside a failed refit attempt, a criterion
draw above its epsilon, a draw outside every attempt, a Gaussian draw in an attempt and a
generator draw in a resample attempt each fail (docs/audit.md, "The `replay` check")."""
from __future__ import annotations

import copy

import pytest

from dpbundle.audit.replay import attempt_spending_problems

BUDGET = {"generation": {"epsilon": 1.0}, "evaluation": {"criteria": [{"id": "kway", "epsilon": 0.1},
                                                                      {"id": "mean", "epsilon": 0.2}]}}
CONFIG = {"generator": {"type": "privsyn"}}


def _draw(purpose: str, epsilon: float, kind: str = "laplace") -> dict:
    return {"kind": kind, "purpose": purpose, "epsilon": epsilon}


def _attempt(index: int, generator: bool, passed: bool) -> list[dict]:
    out = [{"kind": "mark", "mark": "iteration", "index": index, "config": CONFIG}]
    if generator:
        out += [_draw("privsyn: InDif scores", 0.25), _draw("privsyn: 2-way marginal", 0.75)]  # binary sum 1
    out += [{"kind": "seed", "purpose": "sample round 0"}, _draw("criterion kway", 0.1),
            _draw("criterion mean all", 0.2), _draw("criterion mean group b", 0.2),    # parallel groups
            {"kind": "mark", "mark": "iteration end", "index": index, "passed": passed}]
    return out


def _refit() -> list[dict]:
    head = [_draw("record count", 0.1), {"kind": "mark", "mark": "selection", "stop_probability": 0.1}]
    return (head + _attempt(0, True, False) + [{"kind": "mark", "mark": "stop draw", "index": 0, "stop": False}]
            + _attempt(1, True, True) + [{"kind": "mark", "mark": "selected", "index": 1}])


def _resample() -> list[dict]:
    head = [_draw("record count", 0.1),
            {"kind": "mark", "mark": "selection", "stop_probability": 0.1, "retries": "resample"},
            {"kind": "mark", "mark": "fit", "config": CONFIG}, _draw("privsyn: tables", 1.0, "gaussian"),
            {"kind": "mark", "mark": "fit end"}]
    return (head + _attempt(0, False, False) + [{"kind": "mark", "mark": "stop draw", "index": 0, "stop": False}]
            + _attempt(1, False, True) + [{"kind": "mark", "mark": "selected", "index": 1}])


def test_honest_transcripts_pass():
    assert attempt_spending_problems(_refit(), BUDGET, "refit") == []
    assert attempt_spending_problems(_resample(), BUDGET, "resample") == []


def _insert_after_first_iteration(recs: list[dict], extra: list[dict]) -> list[dict]:
    i = next(k for k, r in enumerate(recs) if r.get("mark") == "iteration")
    return recs[:i + 1] + extra + recs[i + 1:]


@pytest.mark.parametrize("forge, retries, words", [
    (lambda r: _insert_after_first_iteration(r, [_draw("privsyn: 2-way marginal", 0.9)]), "refit",
     "generator draws spend more"),
    (lambda r: _insert_after_first_iteration(r, [_draw("criterion kway", 0.5)]), "refit",
     "spends more than its criterion's epsilon"),
    (lambda r: r[:-1] + [_draw("privsyn: 2-way marginal", 0.1)] + r[-1:], "refit", "lies outside"),
    (lambda r: _insert_after_first_iteration(r, [_draw("privsyn: tables", 0.1, "gaussian")]), "resample",
     "zCDP draw"),
    (lambda r: _insert_after_first_iteration(r, [_draw("privsyn: InDif scores", 0.01)]), "resample",
     "draws only for the criteria"),
])
def test_each_overspending_is_found(forge, retries, words):
    recs = forge(copy.deepcopy(_refit() if retries == "refit" else _resample()))
    problems = attempt_spending_problems(recs, BUDGET, retries)
    assert any(words in p for p in problems), problems


def test_a_resample_attempt_with_another_configuration_is_found():
    recs = _resample()
    i = next(k for k, r in enumerate(recs) if r.get("mark") == "iteration")
    recs[i] = dict(recs[i], config={"generator": {"type": "privbayes"}})
    assert any("another configuration" in p for p in attempt_spending_problems(recs, BUDGET, "resample"))
