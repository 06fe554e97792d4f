"""GitHub Actions expressions (`${{ ... }}`), evaluated as GitHub evaluates them, so that the
workflow tests can ask what a run of a given event, ref and input does: which jobs run,
which steps, and what each step's `env:` holds.

The language as GitHub documents it ("Evaluate expressions in workflows and actions"):
literals (null, booleans, numbers, 'strings' with '' for a quote), property access
(`a.b`, `a['b']`, case-insensitive) and the object filter (`needs.*.result`), the operators
`! < <= > >= == != && ||` (in that order of precedence), loose equality (operands of
different types compared as numbers, strings compared ignoring case), `&&` and `||` giving
one of their operands, and the functions contains, startsWith, endsWith, format, join,
toJSON, fromJSON, hashFiles and the status functions success, failure, cancelled, always.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>0x[0-9a-fA-F]+|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,*]))"
)
STATUS_FUNCTIONS = re.compile(r"\b(?:success|failure|cancelled|always)\s*\(", re.IGNORECASE)
TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


class ExpressionError(Exception):
    """Not an expression, or one that names what no context or function has."""


class Filtered(list[Any]):
    """The array an object filter (`*`) gives: a property of it is that of each element."""


@dataclass(frozen=True)
class Status:
    """What the status functions answer for the job or step being evaluated."""

    success: bool = True
    failure: bool = False
    cancelled: bool = False


def truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return True


def as_number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(text)
        except ValueError:  # float's own
            return math.nan
    return math.nan


def loosely_equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if isinstance(left, (dict, list)) or isinstance(right, (dict, list)):
        return left is right
    if type(left) is type(right) and not isinstance(left, (int, float)):
        return bool(left == right)
    return as_number(left) == as_number(right)


def compare(operator: str, left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        a: Any = left.casefold()
        b: Any = right.casefold()
    else:
        a, b = as_number(left), as_number(right)
        if math.isnan(a) or math.isnan(b):
            return False
    answers: dict[str, bool] = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
    return answers[operator]


def text_of(value: Any) -> str:
    """A value as `${{ }}` puts it into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2)
    return str(value)


def member(value: Any, key: Any) -> Any:
    if isinstance(value, Filtered):
        return Filtered(m for m in (member(v, key) for v in value) if m is not None)
    if isinstance(value, Mapping) and isinstance(key, str):
        for name, found in value.items():
            if name.casefold() == key.casefold():
                return found
        return None
    if isinstance(value, list) and isinstance(key, (int, float)) and not isinstance(key, bool):
        index = int(key)
        return value[index] if 0 <= index < len(value) else None
    return None


def star(value: Any) -> Filtered:
    if isinstance(value, Mapping):
        return Filtered(value.values())
    if isinstance(value, list):
        return Filtered(value)
    return Filtered()


def _format(template: Any, *args: Any) -> str:
    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        return text_of(args[int(token[1:-1])])

    return re.sub(r"\{\{|\}\}|\{\d+\}", one, text_of(template))


def _contains(search: Any, item: Any) -> bool:
    if isinstance(search, list):
        return any(loosely_equal(element, item) for element in search)
    return text_of(item).casefold() in text_of(search).casefold()


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "contains": _contains,
    "startswith": lambda s, v: text_of(s).casefold().startswith(text_of(v).casefold()),
    "endswith": lambda s, v: text_of(s).casefold().endswith(text_of(v).casefold()),
    "format": _format,
    "join": lambda a, sep=",": text_of(sep).join(map(text_of, a)) if isinstance(a, list) else a,
    "tojson": lambda v: json.dumps(v, indent=2),
    "fromjson": lambda v: json.loads(text_of(v)),
    "hashfiles": lambda *patterns: "0" * 64,
}


class Parser:
    def __init__(self, text: str, context: Mapping[str, Any], status: Status) -> None:
        self.text, self.context, self.status = text, context, status
        self.tokens = self._tokens(text)
        self.position = 0

    @staticmethod
    def _tokens(text: str) -> list[tuple[str, str]]:
        tokens, at = [], 0
        while text[at:].strip():
            match = TOKEN.match(text, at)
            if match is None or match.lastgroup is None:
                raise ExpressionError(f"not an expression at {text[at:]!r}")
            tokens.append((match.lastgroup, match.group(match.lastgroup)))
            at = match.end()
        return tokens

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, *ops: str) -> str | None:
        token = self.peek()
        if token is not None and token[0] == "op" and token[1] in ops:
            self.position += 1
            return token[1]
        return None

    def expect(self, op: str) -> None:
        if self.take(op) is None:
            raise ExpressionError(f"expected {op!r} in {self.text!r}")

    def parse(self) -> Any:
        value = self.either()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()} in {self.text!r}")
        return value

    def either(self) -> Any:
        value = self.both()
        while self.take("||"):
            right = self.both()
            value = value if truthy(value) else right
        return value

    def both(self) -> Any:
        value = self.equality()
        while self.take("&&"):
            right = self.equality()
            value = right if truthy(value) else value
        return value

    def equality(self) -> Any:
        value = self.comparison()
        while (op := self.take("==", "!=")) is not None:
            equal = loosely_equal(value, self.comparison())
            value = equal if op == "==" else not equal
        return value

    def comparison(self) -> Any:
        value = self.unary()
        while (op := self.take("<", "<=", ">", ">=")) is not None:
            value = compare(op, value, self.unary())
        return value

    def unary(self) -> Any:
        if self.take("!"):
            return not truthy(self.unary())
        return self.postfix(self.primary())

    def postfix(self, value: Any) -> Any:
        while True:
            if self.take("."):
                if self.take("*"):
                    value = star(value)
                    continue
                kind, name = self.tokens[self.position]
                if kind != "name":
                    raise ExpressionError(f"expected a property name in {self.text!r}")
                self.position += 1
                value = member(value, name)
            elif self.take("["):
                key = self.either()
                self.expect("]")
                value = star(value) if key == "*" else member(value, key)
            else:
                return value

    def primary(self) -> Any:
        token = self.peek()
        if token is None:
            raise ExpressionError(f"unexpected end of {self.text!r}")
        self.position += 1
        kind, text = token
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        if kind == "op" and text == "(":
            value = self.either()
            self.expect(")")
            return value
        if kind == "op" and text == "*":
            return "*"
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in {self.text!r}")
        lowered = text.lower()
        if lowered in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[lowered]
        if self.take("("):
            return self.call(lowered)
        if lowered not in {k.lower() for k in self.context}:
            raise ExpressionError(f"unknown context {text!r} in {self.text!r}")
        return member(self.context, text)

    def call(self, name: str) -> Any:
        args: list[Any] = []
        if self.take(")") is None:
            args.append(self.either())
            while self.take(","):
                args.append(self.either())
            self.expect(")")
        status = {
            "success": self.status.success and not self.status.cancelled,
            "failure": self.status.failure,
            "cancelled": self.status.cancelled,
            "always": True,
        }
        if name in status:
            return status[name]
        if name not in FUNCTIONS:
            raise ExpressionError(f"unknown function {name!r} in {self.text!r}")
        return FUNCTIONS[name](*args)


def evaluate(expression: str, context: Mapping[str, Any], status: Status = Status()) -> Any:
    """The value of one expression (the text inside `${{ }}`)."""
    return Parser(expression, context, status).parse()


def substitute(value: object, context: Mapping[str, Any]) -> str:
    """A string with `${{ }}` in it, as GitHub fills it in."""
    return TEMPLATE.sub(lambda m: text_of(evaluate(m.group(1), context)), str(value))


def condition_holds(
    condition: object, context: Mapping[str, Any], status: Status = Status()
) -> bool:
    """An `if:` of a job or step: with no status function in it, success() comes first."""
    if condition is None:
        return status.success and not status.cancelled
    text = str(condition).strip()
    whole = TEMPLATE.fullmatch(text)
    if whole is not None:
        text = whole.group(1)
    if STATUS_FUNCTIONS.search(text) is None:
        text = f"success() && ({text})"
    return truthy(evaluate(text, context, status))


def needs_of(job: Mapping[str, Any]) -> Sequence[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)
