from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from agent_runtime.errors import PolicyError
from agent_runtime.policy import BUNDLED_POLICY, Policy, load_policy

GROUPS = {"S0RELMGR": frozenset({"U0GROUPIE"})}


def members(group: str) -> frozenset[str]:
    return GROUPS.get(group, frozenset())


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_bundled_policy_loads_with_its_rules():
    policy = load_policy(None)
    assert policy.version == "2026-12-02.1"
    publish = policy.rule_for("publish_report")
    assert (publish.risk, publish.approvals_required, publish.self_approval) == ("high", 2, False)
    assert policy.rule_for("read_public_report").gated is False
    assert policy.defaults.expires_after == dt.timedelta(hours=4)


def test_deep_agents_builtins_reads_run_without_a_card_writes_and_commands_are_reviewed():
    """Approval fatigue: nobody is asked to approve an ``ls``; a write or a command is asked."""
    policy = load_policy(None)
    for read_only in ("ls", "read_file", "glob", "grep", "write_todos"):
        assert policy.rule_for(read_only).gated is False, read_only
    for changes in ("write_file", "edit_file", "execute"):
        assert policy.rule_for(changes).gated is True, changes
    assert policy.rule_for("execute").risk == "high"


def test_unknown_tool_is_gated_approve_reject_by_every_role():
    rule = load_policy(None).rule_for("drop_database")
    assert rule.gated
    assert rule.decisions == ("approve", "reject")
    assert set(rule.approvers) == {"release-managers", "security"}


@pytest.mark.parametrize(
    ("user", "role", "expected"),
    [
        ("U0REL1", "release-managers", True),
        ("U0GROUPIE", "release-managers", True),
        ("U0SEC1", "release-managers", False),
        ("U0SEC1", "security", True),
        ("U0REL1", "no-such-role", False),
    ],
)
def test_role_membership_by_user_id_and_usergroup(user, role, expected):
    assert load_policy(None).is_member(user, role, usergroup_members=members) is expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version: ''\n", "version"),
        ("version: v1\ntools: {x: {risk: extreme}}\n", "tools.x.risk"),
        ("version: v1\ntools: {x: {approvers: [ghosts]}}\n", "unknown role 'ghosts'"),
        ("version: v1\ndefaults: {expires_after: soon}\n", "defaults.expires_after"),
        ("version: v1\ntools: {x: {approvals_required: 0}}\n", "tools.x.approvals_required"),
        ("version: v1\nsurprise: 1\n", "surprise"),
        ("- just\n- a list\n", "mapping"),
        ("version: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_policy_is_refused_naming_the_field(tmp_path, text, fragment):
    with pytest.raises(PolicyError) as err:
        load_policy(write(tmp_path, text))
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_policy_file_is_a_clear_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "absent.yaml")


def test_requesters_restrict_who_may_start_runs(tmp_path):
    policy = load_policy(
        write(tmp_path, "version: v1\nroles: {ops: {users: [U0OPS]}}\nrequesters: [ops]\n")
    )
    assert policy.may_request("U0OPS", usergroup_members=members)
    assert not policy.may_request("U0OTHER", usergroup_members=members)


def test_expiry_is_the_most_urgent_action(tmp_path):
    policy = load_policy(
        write(
            tmp_path,
            "version: v1\nroles: {r: {users: [U1]}}\n"
            "tools: {fast: {expires_after: 10m}, slow: {expires_after: 2d}}\n",
        )
    )
    assert policy.expires_after(["slow", "fast"]) == dt.timedelta(minutes=10)
    assert policy.expires_after(["unknown"]) == dt.timedelta(hours=4)


WHEN_POLICY = """
version: v1
roles: {r: {users: [U1]}}
tools:
  publish: {when: {channel: public}}
  send: {when: {recipient: {not_in: [team@example.com]}, urgent: {in: [true]}}}
  wipe: {approval: none}
  audit: {risk: none}
"""


@pytest.mark.parametrize(
    ("tool", "args", "gated"),
    [
        ("publish", {"channel": "public"}, True),
        ("publish", {"channel": "internal"}, False),
        ("publish", {}, True),  # a missing argument never exempts (fail closed)
        ("send", {"recipient": "x@example.com", "urgent": True}, True),
        ("send", {"recipient": "team@example.com", "urgent": True}, False),
        ("send", {"recipient": "x@example.com", "urgent": False}, False),
        ("wipe", {"anything": 1}, False),
        ("audit", {}, False),
        ("unknown_tool", {"x": 1}, True),
    ],
)
def test_when_is_a_deterministic_test_of_the_arguments(tmp_path, tool, args, gated):
    policy = load_policy(write(tmp_path, WHEN_POLICY))
    assert policy.rule_for(tool).applies_to(args) is gated


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version: v1\ntools: {x: {when: {a: {between: [1, 2]}}}}\n", "between"),
        ("version: v1\ndefaults: {escalation_channel: general}\n", "escalation_channel"),
    ],
)
def test_bad_when_and_escalation_channel_are_refused(tmp_path, text, fragment):
    with pytest.raises(PolicyError, match=fragment):
        load_policy(write(tmp_path, text))


def test_respond_is_refused_on_a_tool_that_can_be_approved(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        'version: "1"\nroles: {a: {users: [U1]}}\n'
        "tools: {send: {decisions: [approve, respond], approvers: [a]}}\n"
    )
    with pytest.raises(PolicyError, match="respond answers in place of the tool"):
        load_policy(path)


def test_constraints_are_part_of_the_policy_and_checked_at_load(tmp_path):
    bundled = load_policy(None)
    assert bundled.rule_for("replace_text_file").constraints["path"].locked
    assert bundled.rule_for("send_external_message").constraints["recipient"].domains == (
        "example.com",
    )
    path = tmp_path / "p.yaml"
    path.write_text(
        'version: "1"\nroles: {a: {users: [U1]}}\n'
        "tools: {send: {approvers: [a], constraints: {to: {pattern: '(unclosed'}}}}\n"
    )
    with pytest.raises(PolicyError, match="not a valid regular expression"):
        load_policy(path)


def test_the_requester_role_cannot_approve_a_tool_that_acts(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        'version: "1"\nroles: {a: {users: [U1]}}\n'
        "tools: {send: {decisions: [approve, reject], approvers: [requester, a]}}\n"
    )
    with pytest.raises(PolicyError, match="requester role may only answer"):
        load_policy(path)


DIGEST_POLICY = """
version: v1
defaults: {expires_after: 4h}
digest: {risks: [medium], every: 1h}
roles: {ops: {users: [U0OPS]}}
tools:
  notify: {risk: medium, decisions: [approve, reject]}
  fix: {risk: medium, decisions: [approve, edit, reject]}
  pair: {risk: medium, approvals_required: 2}
  wipe: {risk: high}
  tidy: {risk: low}
"""


def test_digest_takes_only_single_sign_off_approve_reject_tools_of_its_risks(tmp_path):
    policy = load_policy(write(tmp_path, DIGEST_POLICY))
    assert policy.digest is not None and policy.digest.every == dt.timedelta(hours=1)
    assert policy.digested("notify") and policy.digested("unnamed_tool")
    assert not policy.digested("fix"), "an edit needs the card's form"
    assert not policy.digested("pair"), "a tally of sign-offs needs the card"
    assert not policy.digested("wipe") and not policy.digested("tidy")
    assert not load_policy(None).digested("notify"), "no digest section: cards only"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("every: 1h", "digest.every (1:00:00) must be shorter than defaults.expires_after"),
        ("every: 30m\ntools: {notify: {expires_after: 30m}}", "tools.notify.expires_after"),
        ("every: 10m\ndigest_risks: [high]", "digest.risks"),
        ("every: 0s", "every must be a positive duration"),
    ],
)
def test_a_digest_that_could_outlive_its_approvals_is_refused_at_load(tmp_path, change, fragment):
    every, _, rest = change.partition("\n")
    risks = "[high]" if "digest_risks" in rest else "[medium]"
    tools = rest if rest.startswith("tools") else ""
    text = (
        f"version: v1\ndefaults: {{expires_after: 1h}}\nroles: {{ops: {{users: [U0OPS]}}}}\n"
        f"digest: {{risks: {risks}, {every}}}\n{tools}\n"
    )
    with pytest.raises(PolicyError) as caught:
        load_policy(write(tmp_path, text))
    assert fragment in str(caught.value)


def test_a_review_kind_routed_to_an_unknown_role_is_refused(tmp_path):
    text = BUNDLED_POLICY.read_text() + "reviews:\n  sensitive_file_change: {approvers: [nobody]}\n"
    unknown = r"reviews\.sensitive_file_change\.approvers names unknown role"
    with pytest.raises(PolicyError, match=unknown):
        load_policy(write(tmp_path, text))


def test_a_workspace_section_replaces_roles_of_the_same_name_there_only():
    policy = Policy.model_validate(
        {
            "version": "teams-1",
            "roles": {"release-managers": {"users": ["U0REL1"]}, "security": {"users": ["U0S"]}},
            "teams": {"T0BETA": {"roles": {"release-managers": {"users": ["U0BRAVI"]}}}},
        }
    )
    beta = policy.for_team("T0BETA")
    assert beta.roles["release-managers"].users == ("U0BRAVI",)
    assert beta.roles["security"].users == ("U0S",), "roles it does not name stay as they are"
    assert policy.for_team("T0ACME") is policy and policy.for_team(None) is policy
    assert beta.version == policy.version


@pytest.mark.parametrize(
    ("teams", "message"),
    [
        ({"T0BETA": {"roles": {"auditors": {"users": ["U0A"]}}}}, "names role 'auditors'"),
        ({"not-a-team": {"roles": {}}}, "teams.not-a-team"),
    ],
)
def test_workspace_sections_are_checked(tmp_path, teams, message):
    path = tmp_path / "policy.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "version": "teams-2",
                "roles": {"release-managers": {"users": ["U0R"]}},
                "teams": teams,
            }
        )
    )
    with pytest.raises(PolicyError, match=message):
        load_policy(path)


def test_redacted_text_finds_a_secret_however_the_text_quotes_it():
    """Deep Agents' own description is ``f"...Args: {tool_args}"`` (Python's repr, which escapes
    newlines and backslashes); a constraint's message quotes a long value clipped. Neither may
    carry a redacted value into the audit log."""
    from agent_runtime.constraints import SHOWN_CHARS
    from agent_runtime.policy import REDACTED, ToolRule

    rule = ToolRule(redact=("key", "conf"))
    pem = "-----BEGIN KEY-----\nMIIEow\\IBAAK\n-----END KEY-----"
    args = {"key": pem, "conf": {"token": "tok-123"}, "to": "ops"}
    description = f"Tool execution requires approval\n\nTool: deploy\nArgs: {args}"
    shown = rule.redacted_text(description, args)
    assert "MIIEow" not in shown and "tok-123" not in shown and "'ops'" in shown
    assert REDACTED in shown
    long = "s3cr3t" * 40
    clipped = f"key: {long[:SHOWN_CHARS]!r}… does not match the required pattern."
    assert "s3cr3t" not in rule.redacted_text(clipped, {"key": long})


def test_redact_reaches_values_nested_in_objects_and_lists():
    """``headers.authorization`` names a key inside an argument; a list met on the way is
    entered element by element, a value that is not an object there is taken out whole, and
    names match whatever their case. Nothing else changes, and the call itself is not touched
    (the tool and the action hash see the real values)."""
    from agent_runtime.policy import REDACTED, ToolRule

    rule = ToolRule(redact=("headers.authorization", "items.token", "key"))
    args = {
        "headers": {"Authorization": "Bearer abc-123", "accept": "json"},
        "items": [{"token": "tok-1", "n": 1}, [{"TOKEN": {"v": "tok-2"}}], "tok-3 raw"],
        "key": "k-4",
        "to": "ops",
    }
    original = json.dumps(args)
    assert rule.redacted(args) == {
        "headers": {"Authorization": REDACTED, "accept": "json"},
        "items": [{"token": REDACTED, "n": 1}, [{"TOKEN": REDACTED}], REDACTED],
        "key": REDACTED,
        "to": "ops",
    }
    assert rule.redacted({"headers": "authorization: Bearer abc-123"}) == {"headers": REDACTED}
    assert rule.redacted({"headers": {"accept": "json"}}) == {"headers": {"accept": "json"}}
    assert json.dumps(args) == original


def test_redacted_text_takes_out_nested_values_however_the_text_quotes_them():
    from agent_runtime.policy import ToolRule

    rule = ToolRule(redact=("headers.authorization", "items.token"))
    proposed = {"headers": {"authorization": "Bearer abc-123"}, "to": "ops"}
    edited = {"items": [{"token": "tok-1"}, {"token": {"inner": "tok-2"}}]}
    text = (
        f"Args: {proposed} {edited}\nas JSON: {json.dumps([proposed, edited])}\n"
        "the reviewer said: do not use tok-2 or Bearer abc-123"
    )
    shown = rule.redacted_text(text, proposed, edited)
    for secret in ("abc-123", "tok-1", "tok-2"):
        assert secret not in shown
    assert "'ops'" in shown and "the reviewer said" in shown


ROLE_A = {"version": "1", "roles": {"a": {"users": ["U1"]}}}


@pytest.mark.parametrize(
    "path",
    ["headers..authorization", ".token", "token.", "", "items[0].token", "items.*.token", " a"],
)
def test_a_malformed_redact_path_is_refused_at_load(tmp_path, path):
    policy = {**ROLE_A, "tools": {"call_api": {"approvers": ["a"], "redact": ["key", path]}}}
    with pytest.raises(PolicyError, match=r"tools\.call_api\.redact.*dotted path"):
        load_policy(write(tmp_path, yaml.safe_dump(policy)))


def test_redact_paths_load_from_the_policy_file(tmp_path):
    tool = {"approvers": ["a"], "redact": ["headers.x-api-key", "key"]}
    policy = {**ROLE_A, "tools": {"call_api": tool}}
    rule = load_policy(write(tmp_path, yaml.safe_dump(policy))).rule_for("call_api")
    assert rule.redact == ("headers.x-api-key", "key")
