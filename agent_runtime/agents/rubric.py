"""The publish workflow's checks: deterministic validation and the offline rubric grader.

Statuses follow Deep Agents' RubricMiddleware: ``satisfied``, ``needs_revision``, ``failed``,
plus ``max_iterations_reached`` and ``grader_error``. Only ``satisfied`` lets a report go on to
human approval. With a real model the grader is ``rubric_grader.ModelRubricGrader``; both
graders answer with a ``Grading``.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

Verdict = Literal["satisfied", "needs_revision", "failed"]
RubricStatus = Literal[
    "satisfied", "needs_revision", "failed", "max_iterations_reached", "grader_error"
]
SOURCE_DATA = "data/sales.csv"
SEED_SALES = "region,amount\nnorth,1200\nsouth,800\neast,450\nwest,950\n"
REQUIRED_FIELDS = ("# ", "Period:", "Total:")
_BANNED = (
    "TODO",
    "TBD",
    "lorem ipsum",
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "@here",
    "@channel",
)


@dataclass(frozen=True)
class CriterionResult:
    name: str
    verdict: Literal["pass", "fail"]
    gap: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Grading:
    """One evaluation of one draft. ``memory`` is the grader's own bookkeeping, which the
    workflow keeps in its state and hands back with the next draft; ``iteration`` counts the
    evaluations of this grading run, this one included."""

    status: RubricStatus
    criteria: tuple[CriterionResult, ...]
    iteration: int
    explanation: str = ""
    grader: str = "rules"
    memory: Mapping[str, Any] = field(default_factory=dict)


class Grader(Protocol):
    def __call__(self, report: str, sales: dict[str, int], *, memory: Mapping[str, Any]) -> Grading:
        """Grade ``report`` against the workflow's own rubric."""


def load_sales(path: Path) -> dict[str, int]:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SEED_SALES, encoding="utf-8")
    with path.open(encoding="utf-8") as fh:
        return {row["region"]: int(row["amount"]) for row in csv.DictReader(fh)}


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate(report: str, sales: dict[str, int]) -> list[str]:
    """Deterministic: required fields present, numbers recomputed from the source data."""
    problems = [f"missing required field {f.strip()!r}" for f in REQUIRED_FIELDS if f not in report]
    total = re.search(r"Total:\s*([\d,]+)", report)
    if total and int(total.group(1).replace(",", "")) != sum(sales.values()):
        problems.append(
            f"Total is {total.group(1)} but the source data sums to {sum(sales.values())}"
        )
    for region, amount in sales.items():
        found = re.search(rf"\b{re.escape(region)}\b\D*([\d,]+)", report, re.IGNORECASE)
        if found and int(found.group(1).replace(",", "")) != amount:
            problems.append(f"{region} is {found.group(1)} but the source data says {amount}")
    return problems


def forbidden(report: str) -> list[str]:
    """Placeholder text and Slack broadcasts: found by matching, never left to a model."""
    lowered = report.lower()
    return [f"remove {b!r}" for b in _BANNED if b.lower() in lowered]


def grade(report: str, sales: dict[str, int]) -> tuple[Verdict, list[CriterionResult]]:
    """The rubric: each criterion passes or fails with the gap to close."""
    lowered = report.lower()
    criteria = [
        CriterionResult(
            "has a summary section",
            "pass" if "## summary" in lowered else "fail",
            "" if "## summary" in lowered else "add a '## Summary' section",
        ),
        CriterionResult(
            "covers every region",
            "pass" if all(r in lowered for r in sales) else "fail",
            ", ".join(f"mention {r}" for r in sales if r not in lowered),
        ),
        CriterionResult(
            "no placeholders or broadcasts",
            "fail" if forbidden(report) else "pass",
            "remove placeholder text and @-broadcasts" if forbidden(report) else "",
        ),
    ]
    if any(c.name == "no placeholders or broadcasts" and c.verdict == "fail" for c in criteria):
        return "failed", criteria
    if all(c.verdict == "pass" for c in criteria):
        return "satisfied", criteria
    return "needs_revision", criteria


def grade_by_rules(report: str, sales: dict[str, int], *, memory: Mapping[str, Any]) -> Grading:
    """The offline grader: ``grade`` with the same shape as the model's grader."""
    verdict, criteria = grade(report, sales)
    count = int(memory.get("evaluations", 0)) + 1
    return Grading(verdict, tuple(criteria), count, memory={"evaluations": count})


def offline_draft(request: str, sales: dict[str, int], feedback: list[str]) -> str:
    """A deterministic drafter: the first draft leaves out the summary; feedback adds it."""
    title = request.strip().splitlines()[0][:80] if request.strip() else "Sales report"
    lines = [f"# {title}", "", "Period: last week", f"Total: {sum(sales.values())}", ""]
    lines += [f"- {region}: {amount}" for region, amount in sales.items()]
    if any("summary" in item.lower() for item in feedback):
        best = max(sales, key=lambda r: sales[r])
        lines += ["", "## Summary", f"{best} led with {sales[best]}."]
    return "\n".join(lines) + "\n"
