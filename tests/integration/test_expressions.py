"""The expression evaluator the workflow tests decide with (tests/integration/expressions.py),
held to GitHub's documented rules: loose equality and its coercions, case-insensitive
strings and property names, `&&` and `||` giving an operand, precedence, the object filter,
format's escapes, and `if:` as GitHub reads it (success() first unless a status function
is named)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.expressions import (
    ExpressionError,
    Status,
    condition_holds,
    evaluate,
    substitute,
)

CONTEXT: dict[str, Any] = {
    "github": {"event_name": "push", "ref": "refs/heads/main", "event": {}},
    "inputs": {"channel": "nightly", "days": 7},
    "needs": {
        "build": {"result": "success", "outputs": {"publish": "true"}},
        "gpu": {"result": "skipped", "outputs": {}},
    },
}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("null == 0", True),  # null is 0
        ("'' == 0", True),  # an empty string is 0
        ("'1.5e1' == 15", True),  # any JSON number
        ("0xff == 255", True),  # a hex literal
        ("true == 1 && false == 0", True),
        ("'abc' == 1", False),  # NaN equals nothing
        ("'abc' != 1", True),
        ("'NIGHTLY' == inputs.channel", True),  # strings ignore case
        ("fromJSON('[]') == fromJSON('[]')", False),  # arrays: only the same one
        ("1 && 'x'", "x"),
        ("0 || 'y'", "y"),
        ("'' && 'x'", ""),
        ("!'' == true", True),  # ! binds tighter than ==
        ("1 < 2 == true", True),  # < binds tighter than ==
        ("'a' == 'b' || 'c' == 'c' && 'd'", "d"),  # && binds tighter than ||
        ("GitHub.Event_Name", "push"),  # property names ignore case
        ("github.event.repository.default_branch", None),  # a missing property is null
        ("inputs['channel']", "nightly"),
        ("contains(needs.*.result, 'skipped')", True),
        ("contains(needs.*.result, 'failure')", False),
        ("contains('Hello', 'ell')", True),
        ("startsWith(github.ref, 'REFS/heads/')", True),
        ("format('refs/heads/{0} {{1}}', 'main')", "refs/heads/main {1}"),
        ("github.ref == format('refs/heads/{0}', 'main')", True),
        ("inputs.days", 7),
    ],
)
def test_an_expression_has_the_value_github_gives_it(expression: str, value: object) -> None:
    assert evaluate(expression, CONTEXT) == value


def test_a_value_is_put_into_text_as_github_writes_it() -> None:
    assert substitute("x-${{ inputs.channel }}-${{ inputs.days }}", CONTEXT) == "x-nightly-7"
    assert substitute("${{ github.event_name == 'push' }}", CONTEXT) == "true"
    assert substitute("${{ github.nothing }}", CONTEXT) == ""


def test_an_unknown_context_or_function_is_an_error_not_a_null() -> None:
    for expression, why in (
        ("input.channel", "unknown context 'input'"),
        ("nope('x')", "unknown function 'nope'"),
        ("inputs.channel ==", "unexpected end"),
        ("'a' = 'b'", "not an expression at"),
    ):
        with pytest.raises(ExpressionError, match=why):
            evaluate(expression, CONTEXT)


def test_an_if_without_a_status_function_needs_success_first() -> None:
    skipped_need = Status(success=False)
    assert condition_holds("inputs.channel == 'nightly'", CONTEXT)
    assert not condition_holds("inputs.channel == 'nightly'", CONTEXT, skipped_need)
    assert condition_holds("${{ always() && inputs.days > 1 }}", CONTEXT, skipped_need)
    assert condition_holds("!cancelled() && inputs.days", CONTEXT, skipped_need)
    assert not condition_holds("!cancelled()", CONTEXT, Status(cancelled=True))
    assert condition_holds(None, CONTEXT)
    assert not condition_holds(None, CONTEXT, skipped_need)
