"""Grading as an operator (every tenant's rows) when two tenants stored the same trace id: which trace to grade
is ambiguous, so the case is an error result that names the tenants and how to choose one, and nothing is graded
against a guess. Read as one tenant, the same cases grade as usual."""

from __future__ import annotations

from tests.support.store_records import FIXTURES, store_fixtures
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection, iter_executions
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import TraceStore
from tracegrade.store.tenant_scope import TenantStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True),
        contains_keywords=CriterionConfig.contains_keywords(["weather"], threshold=0.0),
    )
)


def test_a_trace_id_two_tenants_stored_is_an_error_for_the_operator_and_grades_for_each_tenant(tmp_path) -> None:
    shared_paths, own_paths = FIXTURES[:1], FIXTURES[1:2]
    with TraceStore(tmp_path / "store.duckdb") as store:
        shared = store_fixtures(store, shared_paths, tenant="acme")
        assert store_fixtures(store, shared_paths, tenant="globex") == shared
        own = store_fixtures(store, own_paths, tenant="acme") - shared
        assert shared and own
        acme, globex = TenantStore(store, "acme"), TenantStore(store, "globex")
        eval_set = cases_from_traces(acme, TraceSelection(), name="acme")
        assert len(eval_set.eval_cases) == len(shared | own)

        as_operator = TraceGrader(store, CONFIG).grade_eval_set_sync(eval_set)
        by_trace = {r.trace_ids[0]: r for r in as_operator.results}
        for tid in shared:
            error = by_trace[tid].error or ""
            assert "acme" in error and "globex" in error and "--tenant" in error, error
            assert not by_trace[tid].criterion_results  # nothing graded against a guess
        for tid in own:
            assert by_trace[tid].error is None and by_trace[tid].criterion_results

        for tenant_store in (acme, globex):
            report = TraceGrader(tenant_store, CONFIG).grade_eval_set_sync(
                eval_set if tenant_store is acme else cases_from_traces(globex, TraceSelection(), name="globex")
            )
            assert report.results and all(r.error is None for r in report.results)

        reference_free = TraceGrader(store, CONFIG).grade_traces_sync(TraceSelection())
        errors = [(r.trace_ids[0], r.error) for r in reference_free.results if r.error]
        assert sorted(tid for tid, _ in errors) == sorted(shared)  # each shared id once, not once per tenant
        assert all("globex" in (error or "") for _, error in errors)
        exported = cases_from_traces(store, TraceSelection()).eval_cases
        assert sorted(c.metadata["source_trace_id"] for c in exported) == sorted(own)  # a shared id is not exported
        assert {r.trace_ids[0] for r in reference_free.results if not r.error} == own

        loaded = {s.trace_id: s for s in iter_executions(store, sorted(shared | own))}
        assert all(loaded[t].execution is None and loaded[t].problem for t in shared)
        assert all(loaded[t].execution is not None and loaded[t].problem is None for t in own)
