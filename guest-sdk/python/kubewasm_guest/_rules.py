"""The host's rules for names, labels and label selectors, for the native
test harness: the same rules as the host's ``kubewasm_core::validation``
and ``kubewasm_core::selector``, held to the same answers by the shared
conformance fixtures (``tests/conformance/reads.json``)."""

from __future__ import annotations

import json
import re
from typing import Optional

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def is_dns_label(s: str) -> bool:
    return len(s) <= 63 and bool(_DNS_LABEL.match(s))


def is_dns_subdomain(s: str) -> bool:
    return len(s) <= 253 and all(is_dns_label(p) for p in s.split("."))


def is_valid_name(type, name: str) -> bool:
    """Whether ``name`` can name an object of ``type``, by its type's rule."""
    rule = name_rule(type)
    if rule == "dns-label":
        return is_dns_label(name)
    if rule == "path-segment":
        return (0 < len(name) <= 253 and name not in (".", "..")
                and all(33 <= ord(c) <= 126 and c not in "/%" for c in name))
    return is_dns_subdomain(name)


# The rules' texts, as the host words them (``kubewasm_core::validation::Rule``).
RULES = {
    "dns-label": "must be a DNS label: at most 63 lowercase letters, digits or '-', starting and ending with a "
                 "letter or digit",
    "dns-subdomain": "must be a DNS subdomain: at most 253 lowercase letters, digits, '-' or '.', starting and ending "
                     "with a letter or digit",
    "path-segment": "must be a path segment name: printable ASCII, not empty, '.' or '..', without '/' or '%', at "
                    "most 253 characters",
    "label-key": "must be an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', "
                 "starting and ending with a letter or digit",
    "label-value": "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter "
                   "or digit",
    "label-string": "must be a string",
}


def name_rule(type) -> str:
    """The rule names of ``type`` follow, as a Kubernetes 1.37 server checks them
    (``kubewasm_core::validation::kind_name_rule``)."""
    if (type.group, type.kind) in (("", "Namespace"), ("", "Service"), ("apps", "StatefulSet")):
        return "dns-label"
    if type.group == "rbac.authorization.k8s.io" or (type.group, type.kind) == ("policy", "PodDisruptionBudget"):
        return "path-segment"
    return "dns-subdomain"


def _invalid(what: str, value: str, rule: str) -> str:
    return f"invalid {what} `{value[:80]}`: {RULES[rule]}"


def name_error(type, name: str) -> Optional[str]:
    """The host's refusal of ``name`` for an object of ``type``, if any."""
    return None if is_valid_name(type, name) else _invalid("name", name, name_rule(type))


def namespace_error(namespace: str) -> Optional[str]:
    return None if is_dns_label(namespace) else _invalid("namespace", namespace, "dns-label")


def labels_error(obj: dict) -> Optional[str]:
    """The host's refusal of the first invalid label of ``obj``, if any."""
    labels = (obj.get("metadata") or {}).get("labels")
    if not isinstance(labels, dict):
        return None
    for key, value in labels.items():
        if not is_label_key(key):
            return _invalid("label key", key, "label-key")
        if value is None:
            continue
        if not isinstance(value, str):
            return _invalid("label value", json.dumps(value, separators=(",", ":")), "label-string")
        if not is_label_value(value):
            return _invalid("label value", value, "label-value")
    return None


def is_label_key(key: str) -> bool:
    if "/" in key:
        prefix, name = key.split("/", 1)
        return bool(prefix) and is_dns_subdomain(prefix) and len(name) <= 63 and bool(_NAME_PART.match(name))
    return len(key) <= 63 and bool(_NAME_PART.match(key))


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(_NAME_PART.match(value)))


class SelectorError(ValueError):
    """A label selector the host refuses; the text names it."""


def parse_selector(selector: str) -> list:
    """Parses the API server's selector grammar into requirements
    ``(op, key, values)``; raises SelectorError where the host does."""

    def fail(reason: str):
        return SelectorError(f"invalid label selector `{selector}`: {reason}")

    clauses, depth, start = [], 0, 0
    for i, c in enumerate(selector):
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                raise fail("unbalanced `)`")
            depth -= 1
        elif c == "," and depth == 0:
            clauses.append(selector[start:i])
            start = i + 1
    if depth:
        raise fail("unbalanced `(`")
    clauses.append(selector[start:])
    requirements = []
    for clause in (c.strip() for c in clauses):
        if not clause:
            if not selector.strip():
                continue
            raise fail("empty requirement")
        requirements.append(_requirement(clause, fail))
    return requirements


def _key(key: str, fail) -> str:
    if not is_label_key(key):
        raise fail(f"invalid label key `{key}`")
    return key


def _value(value: str, fail) -> str:
    if not is_label_value(value):
        raise fail(f"invalid label value `{value}`")
    return value


def _requirement(clause: str, fail) -> tuple:
    if clause.startswith("!"):
        return ("!", _key(clause[1:].strip(), fail), None)
    if "!=" in clause:
        k, v = clause.split("!=", 1)
        return ("!=", _key(k.strip(), fail), _value(v.strip(), fail))
    if "==" in clause or "=" in clause:
        k, v = clause.split("==", 1) if "==" in clause else clause.split("=", 1)
        return ("=", _key(k.strip(), fail), _value(v.strip(), fail))
    words = clause.split(None, 1)
    key = _key(words[0], fail)
    if len(words) == 1:
        return ("exists", key, None)
    rest = words[1].strip()
    if rest.startswith("notin"):
        op, values = "notin", rest[len("notin"):].strip()
    elif rest.startswith("in"):
        op, values = "in", rest[len("in"):].strip()
    else:
        raise fail(f"unknown operator in `{clause}`")
    if not (values.startswith("(") and values.endswith(")")):
        raise fail(f"expected a parenthesised set of values in `{clause}`")
    return (op, key, {_value(v.strip(), fail) for v in values[1:-1].split(",")})


def matches(requirements: list, obj: dict) -> bool:
    """Whether an object's labels satisfy every requirement."""
    labels = (obj.get("metadata") or {}).get("labels") or {}

    def label(key: str) -> Optional[str]:
        value = labels.get(key)
        return value if isinstance(value, str) else None

    for op, key, values in requirements:
        value = label(key)
        ok = {
            "=": lambda: value == values,
            "!=": lambda: value != values,
            "in": lambda: value is not None and value in values,
            "notin": lambda: value is None or value not in values,
            "exists": lambda: value is not None,
            "!": lambda: value is None,
        }[op]()
        if not ok:
            return False
    return True
