"""The publish workflow's checks: deterministic validation and a rubric grader.

Verdicts follow Deep Agents' RubricMiddleware: ``satisfied``, ``needs_revision``, ``failed``,
plus ``max_iterations_reached`` and ``grader_error`` set by the workflow. Only ``satisfied``
lets a report go on to human approval.
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

Verdict = Literal["satisfied", "needs_revision", "failed"]
SOURCE_DATA = "data/sales.csv"
SEED_SALES = "region,amount\nnorth,1200\nsouth,800\neast,450\nwest,950\n"
REQUIRED_FIELDS = ("# ", "Period:", "Total:")
_BANNED = ("TODO", "TBD", "lorem ipsum", "<!channel>", "@here")


@dataclass(frozen=True)
class CriterionResult:
    name: str
    verdict: Literal["pass", "fail"]
    gap: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


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
            "pass" if not any(b.lower() in lowered for b in _BANNED) else "fail",
            "remove placeholder text and @-broadcasts",
        ),
    ]
    if any(c.name == "no placeholders or broadcasts" and c.verdict == "fail" for c in criteria):
        return "failed", criteria
    if all(c.verdict == "pass" for c in criteria):
        return "satisfied", criteria
    return "needs_revision", criteria


def offline_draft(request: str, sales: dict[str, int], feedback: list[str]) -> str:
    """A deterministic drafter: the first draft leaves out the summary; feedback adds it."""
    title = request.strip().splitlines()[0][:80] if request.strip() else "Sales report"
    lines = [f"# {title}", "", "Period: last week", f"Total: {sum(sales.values())}", ""]
    lines += [f"- {region}: {amount}" for region, amount in sales.items()]
    if any("summary" in item.lower() for item in feedback):
        best = max(sales, key=lambda r: sales[r])
        lines += ["", "## Summary", f"{best} led with {sales[best]}."]
    return "\n".join(lines) + "\n"
