"""Kafka's SSL principal mapping (`ssl.principal.mapping.rules`, KIP-371): a client certificate's
distinguished name to the user name of its principal `User:<name>`. Pure: strings in, strings out.

Syntax, as Kafka's SslPrincipalMapper parses it: a comma-separated list of rules, tried in order;
the first that matches the whole DN gives the name.

- `DEFAULT` -- the DN itself (RFC 2253 form, most specific RDN first: `CN=alice,OU=eng,O=acme`).
- `RULE:pattern/replacement/` -- if the regular expression `pattern` matches the whole DN, the
  name is the DN with every match of `pattern` replaced by `replacement` (Java's
  String.replaceAll): `$n` is group n, a backslash makes the next character literal, and a `$n`
  beyond the pattern's groups is literal text (Kafka escapes those first). A trailing `L` or `U`
  after the last slash lowercases or uppercases the result. A backslash-escaped slash may appear
  inside pattern or replacement.

No rule matching is an error (Kafka fails the authentication): `NoMatchingRule`. The built-in value
is `DEFAULT`, which always matches; an empty value has no rules, so every certificate fails, as
in Kafka. Java regex and Python `re` agree on the patterns these rules use (character classes,
groups, anchors, `.*`); a pattern `re` cannot compile is refused when the config is parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# Kafka's RULE_PATTERN: DEFAULT, or RULE:pattern/replacement/[LU] with \-escapes, or anything (an error).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules matches a DN (the client is not authenticated)."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""  # Java's replacement syntax
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        name = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _expand(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement, after Kafka's escaping of references to missing groups."""
    out: list[str] = []
    groups = m.re.groups
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit() and int(replacement[i + 1]) <= groups:
            # Java reads the first digit, then more digits while the number is still a group.
            ref, i = int(replacement[i + 1]), i + 2
            while i < len(replacement) and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                ref, i = ref * 10 + int(replacement[i]), i + 1
            out.append(m.group(ref) or "")
        else:  # includes a $ before a group the pattern lacks: literal
            out.append(c)
            i += 1
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Parse `ssl.principal.mapping.rules`; ValueError says which rule is malformed."""
    text = text.strip()
    rules: list[Rule] = []
    pos = 0
    while pos < len(text):
        m = _SPLITTER.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid rule at {text[pos:]!r}")
        pos = m.end()
        # Kafka's parser: the rule must be all of what the (lazy) rule expression matches at its
        # start, so trailing text (`DEFAULT/L`, `.../L/U`) is an error; an empty rule is skipped.
        rule = _PARSER.match(m[1])
        if rule is None or rule.end() != len(m[1]):
            raise ValueError(f"invalid rule {m[1]!r}: expected DEFAULT or RULE:pattern/replacement/[LU]")
        if rule[1]:
            rules.append(Rule(None))
        elif rule[2] is not None:
            try:
                pattern = re.compile(rule[2])
            except re.error as e:
                raise ValueError(f"invalid pattern in rule {m[1]!r}: {e}") from None
            rules.append(Rule(pattern, rule[3], rule[4]))
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
