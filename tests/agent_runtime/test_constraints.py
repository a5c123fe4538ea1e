from __future__ import annotations

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from agent_runtime.constraints import ArgConstraint, Constraints, describe, violations

POLICY_YAML = r"""
tools:
  send_external_message:
    constraints:
      recipient: {domains: [Example.COM, partner.org]}
  replace_text_file:
    constraints:
      path: {locked: true}
  publish_report:
    constraints:
      channel: {allowed: [public, internal]}
      path: {pattern: '^reports/[\w./-]+\.md$', max_length: 200}
"""

ADAPTER = TypeAdapter(Constraints)


def load(tool: str) -> Constraints:
    data = yaml.safe_load(POLICY_YAML)
    return ADAPTER.validate_python(data["tools"][tool]["constraints"])


SEND = load("send_external_message")
REPLACE = load("replace_text_file")
PUBLISH = load("publish_report")


# --- loading ---------------------------------------------------------------------------------


def test_yaml_policy_loads_into_frozen_constraints_with_lowercased_domains():
    assert SEND["recipient"].domains == ("example.com", "partner.org")
    assert REPLACE["path"].locked is True
    assert PUBLISH["channel"].allowed == ("public", "internal")
    assert PUBLISH["path"].max_length == 200
    with pytest.raises(ValidationError):
        PUBLISH["path"].max_length = 5  # type: ignore[misc]


def test_yaml_scalars_keep_their_types_in_allowed():
    constraint = ArgConstraint.model_validate(yaml.safe_load("allowed: [true, 1, 1.5, null, 'x']"))
    assert constraint.allowed == (True, 1, 1.5, None, "x")
    assert [type(v) for v in constraint.allowed] == [bool, int, float, type(None), str]


def test_bad_regex_is_refused_naming_the_pattern():
    with pytest.raises(ValidationError) as info:
        ADAPTER.validate_python({"path": {"pattern": "^reports/([a-z]+$"}})
    message = str(info.value)
    assert "'^reports/([a-z]+$' is not a valid regular expression" in message
    assert info.value.errors()[0]["loc"] == ("path", "pattern")


@pytest.mark.parametrize(
    "domain",
    ["not a domain", "evil.com/path", "@example.com", "example..com", "-x.com", "com", "1.2.3.4"],
)
def test_bad_domain_is_refused(domain):
    with pytest.raises(ValidationError) as info:
        ArgConstraint(domains=(domain,))
    assert f"domains entry {domain.lower()!r} is not a hostname" in str(info.value)


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"recipient": {"domains": ["example.com"], "domain": ["x.org"]}}, ("recipient", "domain")),
        ({"path": {"locked": True, "readonly": True}}, ("path", "readonly")),
    ],
)
def test_unknown_key_is_refused(data, loc):
    with pytest.raises(ValidationError) as info:
        ADAPTER.validate_python(data)
    error = info.value.errors()[0]
    assert (error["type"], error["loc"]) == ("extra_forbidden", loc)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"max_length": 0}, "max_length"),
        ({"allowed": []}, "allowed"),
        ({"domains": []}, "domains"),
    ],
)
def test_out_of_range_or_empty_values_are_refused(data, field):
    with pytest.raises(ValidationError) as info:
        ArgConstraint.model_validate(data)
    assert info.value.errors()[0]["loc"] == (field,)


def test_a_constraint_that_checks_nothing_is_refused():
    with pytest.raises(ValidationError, match="must set at least one of"):
        ArgConstraint.model_validate({})
    with pytest.raises(ValidationError, match="must set at least one of"):
        ArgConstraint.model_validate({"locked": False})


# --- allowed ---------------------------------------------------------------------------------


def test_allowed_value_passes():
    assert violations(PUBLISH, {"channel": "internal", "path": "reports/q3.md"}) == {}


def test_value_outside_allowed_is_named_with_the_allowed_list():
    assert violations(PUBLISH, {"channel": "secret", "path": "reports/q3.md"}) == {
        "channel": "channel: 'secret' is not one of the allowed values (allowed: public, internal)."
    }


@pytest.mark.parametrize(
    ("allowed", "value", "ok"),
    [
        ((1,), True, False),
        ((True,), 1, False),
        ((0,), False, False),
        ((False,), 0, False),
        ((True,), True, True),
        ((1,), 1, True),
        ((1,), 1.0, True),
        ((None,), None, True),
        (("1",), 1, False),
    ],
)
def test_allowed_does_not_confuse_bool_with_int(allowed, value, ok):
    constraints = {"flag": ArgConstraint(allowed=allowed)}
    assert (violations(constraints, {"flag": value}) == {}) is ok


# --- pattern and max_length ------------------------------------------------------------------


def test_pattern_must_fully_match():
    assert violations(PUBLISH, {"channel": "public", "path": "reports/2026/q3.md"}) == {}
    assert violations(PUBLISH, {"channel": "public", "path": "reports/q3.md.exe"}) == {
        "path": r"path: 'reports/q3.md.exe' does not match the required pattern "
        r"^reports/[\w./-]+\.md$."
    }
    # fullmatch, not search: a prefix before an unanchored pattern is refused too
    constraints = {"name": ArgConstraint(pattern=r"[a-z]+")}
    assert violations(constraints, {"name": "abc"}) == {}
    assert "name" in violations(constraints, {"name": "abc1"})
    assert "name" in violations(constraints, {"name": "1abc"})


def test_pattern_refuses_non_text_values():
    constraints = {"count": ArgConstraint(pattern=r"\d+")}
    assert violations(constraints, {"count": 12}) == {
        "count": "count: 12 is not text, so it cannot match the required pattern."
    }
    assert violations(constraints, {"count": "12"}) == {}


def test_max_length_counts_characters_of_the_value():
    constraints = {"title": ArgConstraint(max_length=5)}
    assert violations(constraints, {"title": "abcde"}) == {}
    assert violations(constraints, {"title": "abcdef"}) == {
        "title": "title: the value is 6 characters long; the policy allows at most 5."
    }
    assert violations(constraints, {"title": 123456}) == {
        "title": "title: the value is 6 characters long; the policy allows at most 5."
    }


def test_max_length_is_checked_before_the_pattern():
    path = "reports/" + "a" * 300 + ".md"
    assert violations(PUBLISH, {"channel": "public", "path": path}) == {
        "path": "path: the value is 311 characters long; the policy allows at most 200."
    }


def test_messages_never_echo_more_than_100_characters_of_the_value():
    value = "x" * 99 + "SECRET-TAIL" + "y" * 5000
    found = violations(PUBLISH, {"channel": value, "path": "reports/a.md"})
    message = found["channel"]
    assert "x" * 99 + "S…" in message
    assert "ECRET" not in message
    assert "y" not in message.split("(allowed")[0]
    assert len(message) < 200
    huge = ["a" * 500]
    assert len(violations({"t": ArgConstraint(pattern="b")}, {"t": huge})["t"]) < 200


# --- domains ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "recipient",
    [
        "alice@example.com",
        "a@EXAMPLE.COM",
        "bob.smith+tag@mail.example.com",
        "carol@partner.org",
        "dave@example.com.",
        "https://example.com/",
        "http://docs.partner.org:8080/a/b?q=1#top",
        "HTTPS://Sub.Example.Com/path/@user",
        "https://example.com",
    ],
)
def test_allowed_recipient_passes(recipient):
    assert violations(SEND, {"recipient": recipient}) == {}


@pytest.mark.parametrize(
    ("recipient", "host"),
    [
        ("a@evil.com", "evil.com"),
        ("a@example.com.evil.com", "example.com.evil.com"),
        ("a@notexample.com", "notexample.com"),
        ("https://evil.com/?x=@example.com", "evil.com"),
        ("https://evil.com/#@example.com", "evil.com"),
        ("https://example.com.evil.com/", "example.com.evil.com"),
        ("https://EVIL.com./", "evil.com"),
    ],
)
def test_recipient_at_another_domain_is_a_violation(recipient, host):
    assert violations(SEND, {"recipient": recipient}) == {
        "recipient": f"recipient: {host} is not an allowed domain "
        "(allowed: example.com, partner.org)."
    }


@pytest.mark.parametrize(
    "recipient",
    [
        "a@evil.com@example.com",
        "https://example.com@evil.com/",
        "https://user:pw@example.com/",
        "https://evil.com\\@example.com/",
        "Bob <bob@evil.com>",
        "<bob@example.com>",
        "Bob <bob@example.com>",
        " a@example.com",
        "a@example.com ",
        "a@example.com\n",
        "a@example.com,b@evil.com",
        '"a@evil.com"@example.com',
        "a..b@example.com",
        ".a@example.com",
        "@example.com",
        "a@",
        "a@example..com",
        "a@exa_mple.com",
        "a@[127.0.0.1]",
        "a@ex\u0430mple.com",
        "mailto:a@example.com",
        "ftp://example.com/",
        "javascript://example.com/",
        "https://",
        "https:///example.com",
        "https://example.com:notaport/",
        "https://[::1]/",
        "https://example.com%2eevil.com/",
        "example.com",
        "",
    ],
)
def test_ambiguous_or_unparseable_recipient_is_refused(recipient):
    found = violations(SEND, {"recipient": recipient})
    assert list(found) == ["recipient"]
    assert found["recipient"].endswith("is not a plain email address or http(s) URL.")


def test_refused_address_is_quoted_in_the_message():
    assert violations(SEND, {"recipient": "Bob <bob@evil.com>"}) == {
        "recipient": "recipient: 'Bob <bob@evil.com>' is not a plain email address or http(s) URL."
    }


def test_list_of_recipients_all_must_be_allowed():
    good = ["a@example.com", "https://partner.org/x", "b@team.partner.org"]
    assert violations(SEND, {"recipient": good}) == {}
    assert violations(SEND, {"recipient": (*good, "c@evil.com")}) == {
        "recipient": "recipient: evil.com is not an allowed domain "
        "(allowed: example.com, partner.org)."
    }
    assert violations(SEND, {"recipient": ["a@example.com", "Eve <e@example.com>"]}) == {
        "recipient": "recipient: 'Eve <e@example.com>' is not a plain email address or http(s) URL."
    }


def test_empty_or_non_text_recipients_are_refused():
    assert violations(SEND, {"recipient": []}) == {
        "recipient": "recipient: no email address or URL was given."
    }
    assert violations(SEND, {"recipient": ["a@example.com", 42]}) == {
        "recipient": "recipient: 42 is not an email address or URL."
    }
    assert violations(SEND, {"recipient": None}) == {
        "recipient": "recipient: None is not an email address or URL."
    }
    assert violations(SEND, {"recipient": {"to": "a@example.com"}}) == {
        "recipient": "recipient: {'to': 'a@example.com'} is not an email address or URL."
    }


# --- locked ----------------------------------------------------------------------------------

LOCKED_MESSAGE = "path: this argument is locked by the policy and cannot be edited."


def test_locked_argument_unchanged_by_edit_passes():
    original = {"path": "notes/a.txt", "text": "old"}
    assert violations(REPLACE, {"path": "notes/a.txt", "text": "new"}, original=original) == {}


def test_locked_argument_changed_by_edit_is_a_violation():
    original = {"path": "notes/a.txt", "text": "old"}
    edited = {"path": "/etc/passwd", "text": "old"}
    assert violations(REPLACE, edited, original=original) == {"path": LOCKED_MESSAGE}


def test_locked_argument_is_free_when_first_proposed():
    assert violations(REPLACE, {"path": "/anything"}) == {}
    assert violations(REPLACE, {}) == {}


@pytest.mark.parametrize(
    ("original", "edited", "ok"),
    [
        ({}, {}, True),
        ({"path": "a"}, {}, False),
        ({}, {"path": "a"}, False),
        ({"path": None}, {}, False),
        ({}, {"path": None}, False),
        ({"path": None}, {"path": None}, True),
        ({"path": 1}, {"path": True}, False),
        ({"path": [1, 0]}, {"path": [True, False]}, False),
        ({"path": {"a": [1]}}, {"path": {"a": [1]}}, True),
        ({"path": {"a": [1]}}, {"path": {"a": [2]}}, False),
    ],
)
def test_locked_compares_presence_and_value(original, edited, ok):
    assert (violations(REPLACE, edited, original=original) == {}) is ok


def test_locked_with_other_checks_reports_the_lock_first():
    constraints = {"path": ArgConstraint(locked=True, pattern=r"docs/.*")}
    assert violations(constraints, {"path": "x"}, original={"path": "docs/a"}) == {
        "path": LOCKED_MESSAGE
    }
    assert violations(constraints, {"path": "x"}, original={"path": "x"}) == {
        "path": "path: 'x' does not match the required pattern docs/.*."
    }


# --- absent arguments ------------------------------------------------------------------------


def test_absent_argument_fails_closed_for_value_checks():
    assert violations(PUBLISH, {}) == {
        "channel": "channel: this argument is required by the policy but was not given.",
        "path": "path: this argument is required by the policy but was not given.",
    }
    assert violations(SEND, {"to": "a@example.com"}) == {
        "recipient": "recipient: this argument is required by the policy but was not given."
    }


def test_absent_argument_with_only_max_length_passes():
    assert violations({"title": ArgConstraint(max_length=3)}, {}) == {}


def test_no_constraints_means_no_violations():
    assert violations(None, {"anything": "goes"}) == {}
    assert violations({}, {"anything": "goes"}, original={}) == {}


# --- describe --------------------------------------------------------------------------------


def test_describe_lists_one_line_per_argument():
    assert describe(SEND) == ["recipient: only example.com, partner.org"]
    assert describe(REPLACE) == ["path: locked"]
    assert describe(PUBLISH) == [
        "channel: one of public, internal",
        r"path: must match ^reports/[\w./-]+\.md$; at most 200 characters",
    ]


def test_describe_combines_checks_and_writes_values_as_yaml():
    constraints = {
        "mode": ArgConstraint(locked=True, allowed=(True, None, 3)),
        "long": ArgConstraint(pattern="a" * 150),
    }
    assert describe(constraints) == [
        "mode: locked; one of true, null, 3",
        "long: must match " + "a" * 100 + "…",
    ]
    assert describe(None) == []
