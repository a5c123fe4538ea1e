"""The audit keeps what reviewers saw and decided (secrets redacted as the policy says), and an
auditor exports one run's story. Over signed HTTP, then the command line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from sqlalchemy import select

from agent_runtime.policy import BUNDLED_POLICY, REDACTED
from bot.cli import main
from bot.sandbox import people
from store.audit_models import AuditEvent
from store.models import Run
from tests.bot.flows import SEND, button, result_message, start_run


def redacting_policy(tmp_path: Path) -> Path:
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["tools"]["send_external_message"]["redact"] = ["text"]
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


def test_the_audit_keeps_the_call_as_reviewed_with_secrets_redacted(
    serve_bot, sqlite_url, tmp_path, monkeypatch, capsys
):
    h = serve_bot(sqlite_url, policy_file=redacting_policy(tmp_path))
    root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert "message sent to partner@example.com" in result_message(h, root).text
    assert h.workspace.effects()[0]["text"] == "Release is out"  # the real value ran
    with h.bot.db.transaction() as s:
        run_id = s.scalars(select(Run.id)).one()
        recorded = s.scalars(
            select(AuditEvent).where(AuditEvent.kind == "interrupt_recorded")
        ).one()
        decided = s.scalars(select(AuditEvent).where(AuditEvent.kind == "decision_recorded")).one()
    (action,) = recorded.detail["actions"]
    assert action["args"] == {"recipient": "partner@example.com", "text": REDACTED}
    assert action["tool_call_id"] and action["tool_call_id"] == decided.detail["tool_call_id"]
    assert decided.detail["tool"] == "send_external_message"
    assert "Release is out" not in json.dumps([recorded.detail, decided.detail])

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    capsys.readouterr()
    assert main(["audit", "export", "--run", run_id, "--tool", "send_external_message"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["run_id"] for r in rows} == {run_id}
    assert {"interrupt_recorded", "decision_recorded"} <= {r["kind"] for r in rows}
    assert main(["audit", "export", "--actor", people.RELEASE_MANAGER]) == 0
    by_reviewer = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in by_reviewer] == ["decision_recorded"]


def _policy_redacting(tmp_path: Path, *names: str) -> Path:
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["tools"]["send_external_message"]["redact"] = list(names)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


def _audit_text(h) -> str:  # type: ignore[no-untyped-def]
    """Every event but ``run_started``, which keeps the requester's own words (here, the
    offline model's call written out in full)."""
    with h.bot.db.transaction() as s:
        rows = s.scalars(select(AuditEvent).where(AuditEvent.kind != "run_started")).all()
        return json.dumps([[e.kind, e.reason, e.detail] for e in rows])


def test_a_tool_result_quoting_a_redacted_argument_is_redacted_in_the_audit(
    serve_bot, sqlite_url, tmp_path
):
    """The tool's result ("message sent to <recipient>") echoes the argument the policy keeps
    out of the audit log: its ``tool_outcome`` preview must not carry it back in."""
    h = serve_bot(sqlite_url, policy_file=_policy_redacting(tmp_path, "recipient"))
    root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert "message sent to partner@example.com" in result_message(h, root).text
    audit = _audit_text(h)
    assert "tool_outcome" in audit
    assert "partner@example.com" not in audit


def test_a_reviewers_reason_quoting_a_redacted_argument_is_redacted_in_the_audit(
    serve_bot, sqlite_url, tmp_path
):
    h = serve_bot(sqlite_url, policy_file=_policy_redacting(tmp_path, "text"))
    root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.RELEASE_MANAGER))[-1]
    h.driver.submit_view(
        user=people.RELEASE_MANAGER,
        view_id=modal.id,
        values={"reject_reason": {"reason": "never send 'Release is out' yet"}},
    )
    assert "rejected" in result_message(h, root).text
    audit = _audit_text(h)
    assert "decision_recorded" in audit and "never send" in audit
    assert "Release is out" not in audit


def test_a_secret_nested_in_an_argument_stays_out_of_the_audit_and_its_export(
    serve_bot, sqlite_url, tmp_path, monkeypatch, capsys
):
    """The policy names a key inside an argument (``text.headers.authorization``) and one
    inside each element of a list (``text.parts.token``); the call carries an object where the
    tool expects text, so it is recorded as proposed. The call as recorded, the interrupt's
    description, the reviewer's reason and the export never carry those values."""
    path = _policy_redacting(tmp_path, "text.headers.authorization", "text.parts.token")
    h = serve_bot(sqlite_url, policy_file=path)
    text = {
        "headers": {"Authorization": "Bearer nested-s3cret", "accept": "json"},
        "parts": [{"token": "listed-s3cret", "body": "hello"}],
    }
    call = {"recipient": "partner@example.com", "text": text}
    root, card = start_run(h, f"send_external_message {json.dumps(call)}")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.RELEASE_MANAGER))[-1]
    h.driver.submit_view(
        user=people.RELEASE_MANAGER,
        view_id=modal.id,
        values={"reject_reason": {"reason": "never send 'Bearer nested-s3cret' or listed-s3cret"}},
    )
    assert "rejected" in result_message(h, root).text
    with h.bot.db.transaction() as s:
        run_id = s.scalars(select(Run.id)).one()
        recorded = s.scalars(
            select(AuditEvent).where(AuditEvent.kind == "interrupt_recorded")
        ).one()
    (action,) = recorded.detail["actions"]
    assert action["args"]["text"] == {
        "headers": {"Authorization": REDACTED, "accept": "json"},
        "parts": [{"token": REDACTED, "body": "hello"}],
    }
    audit = _audit_text(h)
    assert "decision_recorded" in audit and "never send" in audit

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    capsys.readouterr()
    assert main(["audit", "export", "--run", run_id]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # run_started keeps the requester's own words (here, the offline model's call in full).
    exported = json.dumps([r for r in rows if r["kind"] != "run_started"])
    assert "decision_recorded" in exported and "partner@example.com" in exported
    for secret in ("nested-s3cret", "listed-s3cret"):
        assert secret not in audit and secret not in exported
