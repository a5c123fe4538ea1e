"""Reading the admin endpoints as a scraper and a probe do."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str) -> dict[str, object]:
    """Parsed by prometheus_client's own parser: family name -> family."""
    with urllib.request.urlopen(url + "/metrics") as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def sample(families: dict, family: str, suffix: str = "", **labels: str) -> float:  # type: ignore[type-arg]
    name = f"approval_bot_{family}"
    found = [
        s.value
        for s in families[name].samples
        if s.name == name + suffix and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (family, suffix, labels, families[name].samples)
    return found[0]


def status(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
