"""Argument constraints of the approval policy: what a gated tool call may carry.

Checked when a tool call is recorded for review and again on every reviewer edit, so neither the
agent nor an editing reviewer can push an argument outside what the policy author allowed.
Pure data and pure functions; anything that cannot be judged unambiguously counts as a violation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_Scalar = str | int | float | bool | None

SHOWN_CHARS = 100
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_LOCAL_ATOM = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+")
_MAX_HOSTNAME = 253
_URL_SCHEMES = ("http", "https")


class ArgConstraint(BaseModel):
    """What one argument of a tool call must satisfy; every check that is set must pass."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed: tuple[_Scalar, ...] | None = Field(default=None, min_length=1)
    pattern: str | None = None
    domains: tuple[str, ...] | None = Field(default=None, min_length=1)
    locked: bool = False
    max_length: int | None = Field(default=None, ge=1)

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        """A bad regex is refused at load, not discovered on the first tool call."""
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(
                    f"pattern {value!r} is not a valid regular expression ({exc})"
                ) from exc
        return value

    @field_validator("domains")
    @classmethod
    def _domains_are_hostnames(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Lower-cased so matching is case-blind; a typo must not silently allow nothing."""
        if value is None:
            return None
        lowered = tuple(domain.lower() for domain in value)
        for domain in lowered:
            if not _is_hostname(domain) or "." not in domain or domain.rsplit(".", 1)[1].isdigit():
                raise ValueError(f"domains entry {domain!r} is not a hostname like example.com")
        return lowered

    @model_validator(mode="after")
    def _constrains_something(self) -> ArgConstraint:
        """An empty constraint is most likely a mistake in the policy file."""
        if not (self.locked or _needs_value(self) or self.max_length is not None):
            raise ValueError(
                "a constraint must set at least one of allowed, pattern, domains, locked, "
                "max_length"
            )
        return self


Constraints = dict[str, ArgConstraint]


def violations(
    constraints: Mapping[str, ArgConstraint] | None,
    args: Mapping[str, Any],
    *,
    original: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Errors by argument name (a reviewer-facing sentence each); empty when the args satisfy
    every constraint. ``original``: the arguments as first proposed; when given (an edit),
    locked arguments must be unchanged."""
    found: dict[str, str] = {}
    for name, constraint in (constraints or {}).items():
        problem = _first_problem(name, constraint, args, original)
        if problem is not None:
            found[name] = f"{name}: {problem}"
    return found


def describe(constraints: Mapping[str, ArgConstraint] | None) -> list[str]:
    """Short human lines for an approval card, e.g. 'recipient: only example.com, partner.org',
    'path: locked', so a reviewer sees what the policy already guarantees."""
    lines = []
    for name, constraint in (constraints or {}).items():
        parts = []
        if constraint.locked:
            parts.append("locked")
        if constraint.allowed is not None:
            parts.append("one of " + ", ".join(_literal(v) for v in constraint.allowed))
        if constraint.domains is not None:
            parts.append("only " + ", ".join(constraint.domains))
        if constraint.pattern is not None:
            parts.append(f"must match {_clip(constraint.pattern)}")
        if constraint.max_length is not None:
            parts.append(f"at most {constraint.max_length} characters")
        lines.append(f"{name}: {'; '.join(parts)}")
    return lines


def _needs_value(constraint: ArgConstraint) -> bool:
    """Checks that an absent argument cannot satisfy, so absence fails closed."""
    return (
        constraint.allowed is not None
        or constraint.pattern is not None
        or constraint.domains is not None
    )


def _first_problem(
    name: str,
    constraint: ArgConstraint,
    args: Mapping[str, Any],
    original: Mapping[str, Any] | None,
) -> str | None:
    """One problem per argument, the most fundamental first; length before pattern so an
    oversized value never reaches the regex."""
    if constraint.locked and original is not None:
        unchanged = (name in args) == (name in original) and _same(
            args.get(name), original.get(name)
        )
        if not unchanged:
            return "this argument is locked by the policy and cannot be edited."
    if name not in args:
        if _needs_value(constraint):
            return "this argument is required by the policy but was not given."
        return None
    value = args[name]
    if constraint.max_length is not None:
        length = len(str(value))
        if length > constraint.max_length:
            return (
                f"the value is {length} characters long; "
                f"the policy allows at most {constraint.max_length}."
            )
    if constraint.allowed is not None and not any(_same(value, a) for a in constraint.allowed):
        listed = ", ".join(_literal(a) for a in constraint.allowed)
        return f"{_show(value)} is not one of the allowed values (allowed: {listed})."
    if constraint.pattern is not None:
        if not isinstance(value, str):
            return f"{_show(value)} is not text, so it cannot match the required pattern."
        if re.fullmatch(constraint.pattern, value) is None:
            return (
                f"{_show(value)} does not match the required pattern {_clip(constraint.pattern)}."
            )
    if constraint.domains is not None:
        return _domain_problem(value, constraint.domains)
    return None


def _domain_problem(value: object, domains: tuple[str, ...]) -> str | None:
    """Every recipient (one string or a list of them) must be at an allowed domain."""
    recipients = list(value) if isinstance(value, list | tuple) else [value]
    if not recipients:
        return "no email address or URL was given."
    for recipient in recipients:
        if not isinstance(recipient, str):
            return f"{_show(recipient)} is not an email address or URL."
        host = _host_of(recipient)
        if host is None:
            return f"{_show(recipient)} is not a plain email address or http(s) URL."
        if not any(host == d or host.endswith("." + d) for d in domains):
            return f"{_clip(host)} is not an allowed domain (allowed: {', '.join(domains)})."
    return None


def _host_of(text: str) -> str | None:
    """The host of a plain email address or http(s) URL, lower-cased without a trailing dot;
    None for anything else, including display names, credentials in URLs and odd characters
    that different parsers might read differently."""
    if not text or not all(33 <= ord(ch) <= 126 for ch in text) or "\\" in text:
        return None
    lowered = text.lower()
    if lowered.startswith(("http://", "https://")):
        return _url_host(text)
    if "://" in text:
        return None
    return _email_host(text)


def _email_host(text: str) -> str | None:
    if text.count("@") != 1:
        return None
    realname, address = parseaddr(text)
    if realname or address != text:
        return None
    local, host = address.split("@")
    if not all(_LOCAL_ATOM.fullmatch(atom) for atom in local.split(".")):
        return None
    return _normal_host(host)


def _url_host(text: str) -> str | None:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return None
    if parts.scheme not in _URL_SCHEMES or "@" in parts.netloc or parts.hostname is None:
        return None
    return _normal_host(parts.hostname)


def _normal_host(host: str) -> str | None:
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    return host if _is_hostname(host) else None


def _is_hostname(text: str) -> bool:
    return len(text) <= _MAX_HOSTNAME and all(_LABEL.fullmatch(p) for p in text.split("."))


def _same(left: object, right: object) -> bool:
    """Equality that does not let True stand in for 1 (or False for 0), at any depth."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return (
            type(left) is type(right)
            and len(left) == len(right)
            and all(_same(a, b) for a, b in zip(left, right, strict=True))
        )
    return left == right


def _literal(value: _Scalar) -> str:
    """Policy values as written in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def _show(value: object) -> str:
    """A value for a message: at most SHOWN_CHARS of it, quoted so whitespace is visible."""
    if isinstance(value, str):
        return repr(_clip(value))
    return _clip(repr(value))
