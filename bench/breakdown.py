"""The tables under the ratios: where click -> result goes (the plain resume, the durable
floor, the bot) and the CPU each part of the machine spent per approval."""

from __future__ import annotations

import os
import statistics

from bench.common import pct, table
from bench.figures import Measured


def bursts_line(m: Measured) -> str:
    """Every burst's figures, in the order they ran: how far one burst is from the next."""

    def p99s(bursts: list[list[float]]) -> str:
        return ", ".join(f"{pct(acks, 99) * 1000:.0f}" for acks in bursts)

    def rates(values: list[float]) -> str:
        return ", ".join(f"{rate:.1f}" for rate in values)

    return (
        f"Each burst: ack p99 ms bot {p99s(m.acks)}, bare Bolt {p99s(m.floor_acks)}; "
        f"approvals/s bot {rates(m.rates)}, plain {rates(m.floor_rates)}"
    )


def to_result_table(m: Measured) -> str:
    """Click -> result of the plain resume, the durable floor and the bot, each against the
    plain resume; what the bot adds over the durable floor is its own work."""
    plain = statistics.median(m.floor_resumes) * 1000
    durable = statistics.median(m.durable_resumes) * 1000
    bot = statistics.median(m.to_result) * 1000
    rows = [
        ("plain `Command(resume=...)` (no click, no card)", f"{plain:.1f}", "1.00"),
        (
            "durable floor: click stored, decision, checks, resume, outcome, card",
            f"{durable:.1f}",
            f"{durable / plain:.2f}",
        ),
        ("the bot", f"{bot:.1f}", f"{bot / plain:.2f}"),
    ]
    title = f"Click -> result, median of {len(m.to_result)} (ms, and x the plain resume)"
    return "\n".join(
        [
            "\n" + table(title, ["what runs", "ms", "x plain"], rows),
            f"The bot over the durable floor: {bot - durable:.1f} ms ({bot / durable:.2f}x); "
            f"the 1.5x goal leaves {1.5 * plain - durable:.1f} ms beyond the durable floor",
        ]
    )


def cpu_table(m: Measured) -> str:
    """CPU per approval by part, against a plain resume's; and what the cores allow at most."""
    cores = os.cpu_count() or 1
    parts = [p for p in m.cpu if p != "total"]
    rows = [(p, f"{m.cpu[p]:.1f}", f"{m.floor_cpu.get(p, 0.0):.1f}") for p in parts]
    rows.append(("total", f"{m.cpu['total']:.1f}", f"{m.floor_cpu['total']:.1f}"))
    rows.append(
        (
            f"most approvals/s {cores} cores allow at that CPU",
            f"{cores * 1000 / m.cpu['total']:.1f}",
            f"{cores * 1000 / m.floor_cpu['total']:.1f}",
        )
    )
    budget = m.floor_cpu["total"] * (1 / 0.9 - 1)
    title = "CPU ms per approval while they were clicked at once (bot) or resumed (plain)"
    return "\n".join(
        [
            table(title, ["part", "bot", "plain LangGraph"], rows),
            f"CPU a bot may add to a plain resume and keep 0.9x its rate: {budget:.1f} ms; "
            f"the bare Bolt app's CPU per click: {m.bolt_cpu_ms:.1f} ms; one small row "
            f"written and committed (client and server): {m.write_cpu_ms:.2f} ms",
        ]
    )
