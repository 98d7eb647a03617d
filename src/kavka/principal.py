"""Kafka's SSL principal mapping (`ssl.principal.mapping.rules`, KIP-371): a client certificate's
distinguished name to the user name of its principal `User:<name>`. Pure: strings in, strings out.

Syntax, as Kafka's SslPrincipalMapper parses it: a comma-separated list of rules, tried in order;
the first that matches the whole DN gives the name.

- `DEFAULT` -- the DN itself (RFC 2253 form, most specific RDN first: `CN=alice,OU=eng,O=acme`).
- `RULE:pattern/replacement/` -- if the regular expression `pattern` matches the whole DN, the
  name is `replacement` with `$1`, `$2`... replaced by the groups (Java's Matcher.replaceAll).
  A trailing `L` or `U` after the last slash lowercases or uppercases the result.
  `\\/` and `\\,`-style escapes inside pattern and replacement are kept as regex escapes.

No rule matching is an error (Kafka fails the authentication): `NoMatchingRule`. The built-in value
is `DEFAULT`, which always matches. Java regex and Python `re` agree on the patterns these rules
use (character classes, groups, anchors, `.*`); lookbehind and possessive quantifiers are not
supported by both, and a pattern `re` cannot compile is refused when the config is parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# Kafka's RULE_PATTERN: DEFAULT, or RULE:pattern/replacement/[LU] with \-escapes, or anything (an error).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_JAVA_GROUP = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules matches a DN (the client is not authenticated)."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        name = self.pattern.sub(self.replacement, dn, count=1)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Parse `ssl.principal.mapping.rules`; ValueError says which rule is malformed."""
    text = text.strip()
    if not text:
        return (Rule(None),)
    rules: list[Rule] = []
    pos = 0
    while pos < len(text):
        m = _SPLITTER.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid rule at {text[pos:]!r}")
        pos = m.end()
        rule = _PARSER.fullmatch(m[1])
        assert rule is not None  # the splitter matched the same expression
        if rule[1]:
            rules.append(Rule(None))
        elif rule[2] is not None and m[1].startswith("RULE:"):
            try:
                pattern = re.compile(rule[2])
            except re.error as e:
                raise ValueError(f"invalid pattern in rule {m[1]!r}: {e}") from None
            # Java's $n group references become Python's \g<n>; a literal backslash stays one.
            replacement = _JAVA_GROUP.sub(r"\\g<\1>", rule[3].replace("\\", "\\\\"))
            rules.append(Rule(pattern, replacement, rule[4]))
        else:
            raise ValueError(f"invalid rule {m[1]!r}: expected DEFAULT or RULE:pattern/replacement/[LU]")
    return tuple(rules)


def rules_problem(text: str) -> str | None:
    """The config validator: None if `text` parses, else why not."""
    try:
        parse_rules(text)
    except ValueError as e:
        return str(e)
    return None


def map_dn(rules: tuple[Rule, ...], dn: str) -> str:
    """The user name for `dn` under `rules` (NoMatchingRule if none matches)."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules matches {dn!r}")
