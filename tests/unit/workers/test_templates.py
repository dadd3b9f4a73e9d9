import pytest

from workers.templates import TemplateError, render

CTX = {
    "event_id": "evt-1",
    "scheduled_for": "2026-03-01T09:00:00+00:00",
    "data": {"message_id": "m-42", "n": 7, "ok": True, "items": [{"id": "a"}, {"id": "b"}],
             "obj": {"b": 1, "a": 2}, "none": None},
}  # fmt: skip


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{data.message_id}", "m-42"),
        ("{event_id}", "evt-1"),
        ("msg:{data.message_id}@{scheduled_for}", "msg:m-42@2026-03-01T09:00:00+00:00"),
        ("{ data.n }", "7"),
        ("{data.ok}", "true"),
        ("{data.items.1.id}", "b"),
        ("{data.obj}", '{"a":2,"b":1}'),  # sorted keys: same content, same key
        ("{{literal}}-{event_id}", "{literal}-evt-1"),
        ("fixed", "fixed"),
    ],
)
def test_render(template: str, expected: str) -> None:
    assert render(template, CTX) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{data.missing}", "'data.missing' is not in the trigger context"),
        ("{data.none}", "'data.none' is null"),
        ("{data.items.5.id}", "not in the trigger context"),
        ("{data.message_id.x}", "not in the trigger context"),
        ("{}", "empty field"),
        ("{data", "unbalanced"),
        ("a}", "unbalanced"),
        ("", "empty key"),
    ],
)
def test_render_errors_name_the_field(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message.replace("'", ".")):
        render(template, CTX)
