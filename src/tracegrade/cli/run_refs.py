"""What ``diff`` and ``gate`` accept as a run: a recorded run id (or unique prefix), ``latest`` / ``latest~N``
(the newest recorded run, the one N before it), or a saved report JSON file; each read as the outcomes they
compare (:mod:`tracegrade.evaluation.run_outcomes`), not as a full report."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import ValidationError

from tracegrade.cli.common import UsageProblem
from tracegrade.cli.grading_store import open_grading_store
from tracegrade.cli.report import load_report
from tracegrade.errors import InvalidValueError, TracegradeError
from tracegrade.evaluation.run_outcomes import Run, run_outcomes
from tracegrade.evaluation.run_records import list_runs, load_run_outcomes
from tracegrade.models.file_text import MAX_REPORT_BYTES

__all__ = ["load_runs"]

_LATEST = re.compile(r"latest(?:~(\d+))?")
_FORMS = (
    "a run id or a unique prefix of one, latest, latest~N (N runs before the latest: latest~1) or a report JSON file"
)


def load_runs(refs: list[str], store_path: Path | str, token: str | None) -> list[tuple[str, Run]]:
    """Each reference's ``(display name, run)``, in order; the store is opened only when a reference needs it.

    A reference that names an existing file is read as a report; anything else is looked up in the store.
    """
    loaded: dict[int, tuple[str, Run]] = {}
    stored = []
    for i, ref in enumerate(refs):
        if Path(ref).is_file():
            loaded[i] = (ref, _report_file(Path(ref)))
        else:
            stored.append(i)
    if stored:
        # a missing report file would otherwise be looked up as a run, and the error named only the store
        paths = [refs[i] for i in stored if _looks_like_a_path(refs[i])]
        try:
            with open_grading_store(store_path, token, writable=False) as store:
                for i in stored:
                    run_id = _run_id(store.reader, refs[i])
                    try:
                        loaded[i] = (run_id, load_run_outcomes(store.reader, run_id))
                    except (KeyError, InvalidValueError) as exc:
                        raise UsageProblem(f"{exc.args[0]} (or give a report JSON file)") from None
        except TracegradeError as exc:
            if not paths:
                raise
            raise UsageProblem(
                f"report file {paths[0]} does not exist (looked up as a run instead: {exc}); check the path"
            ) from None
    return [loaded[i] for i in range(len(refs))]


def _report_file(path: Path) -> Run:
    """The outcomes of the report file at ``path``, validated from its bytes as they are. Anything they do not
    take (a file that is no report or too large, JSON the parser refuses, a lone surrogate escape, a value of the
    wrong type) is read by :func:`load_report` instead, whose error says what is wrong, where, and how to fix it;
    the few files only it accepts are compared as the full report it returns."""
    data: bytes | None = None
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            # a file of no size may be one that tells none (/proc), and one that grew while being read is one
            # whose size load_report says
            if 0 < size <= MAX_REPORT_BYTES:
                data = handle.read(size + 1)
                data = data.removeprefix(_BYTE_ORDER_MARK) if len(data) == size else None
    except OSError:
        pass
    if data is not None:
        try:
            outcomes = run_outcomes(data)
        except ValidationError:
            pass
        else:
            if "results" in outcomes.model_fields_set:  # only a report has results (cli.file_kinds.document_kind)
                return outcomes
    return load_report(path)


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def _looks_like_a_path(ref: str) -> bool:
    """A reference with a directory part or a ``.json`` name is meant as a report file (run ids hold no ``/``)."""
    return "/" in ref or "\\" in ref or ref.lower().endswith(".json")


def _run_id(reader: object, ref: str) -> str:
    if not ref.strip():  # a prefix of every run id: say what is wanted rather than "ambiguous"
        raise UsageProblem(f"an empty run reference: give {_FORMS}")
    match = _LATEST.fullmatch(ref)
    if match is None and ref.startswith("latest~"):
        raise UsageProblem(f"{ref!r} is not a run reference: latest~N takes a whole number N; give {_FORMS}")
    if match is None:
        return ref
    back = int(match.group(1) or 0)
    runs = list_runs(reader, limit=back + 1)  # type: ignore[arg-type]
    if len(runs) <= back:
        raise UsageProblem(
            f"{ref!r} needs at least {back + 1} recorded run(s), the store has {len(runs)} "
            "(list them with `tracegrade runs`)"
        )
    return runs[back].run_id
