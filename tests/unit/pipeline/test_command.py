"""``app.command.Command``: a declared subcommand becomes the argparse parser."""

from __future__ import annotations

import argparse

import pytest

from app.cli import build_parser
from app.command import Command


def _run_a(args: argparse.Namespace) -> int:
    return 3


def _run_b(args: argparse.Namespace) -> int:
    return 4


def _parser(cmd: Command) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    cmd.add_to(parser.add_subparsers(dest="command", required=True))
    return parser


def _flags_n(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int)


def test_flags_and_run_of_a_plain_command() -> None:
    cmd = Command("go", help="h", run=_run_a, flags=_flags_n)
    args = _parser(cmd).parse_args(["go", "--n", "5"])
    assert (args.command, args.n, args.func(args)) == ("go", 5, 3)


def test_actions_run_their_own_and_name_the_chosen_one() -> None:
    cmd = Command(
        "box",
        help="h",
        actions=(Command("a", help="a", run=_run_a), Command("b", help="b", run=_run_b)),
    )
    args = _parser(cmd).parse_args(["box", "b"])
    assert (args.box_command, args.func(args)) == ("b", 4)
    with pytest.raises(SystemExit) as exc:  # an action is required
        _parser(cmd).parse_args(["box"])
    assert exc.value.code == 2


def test_preformatted_keeps_the_line_breaks() -> None:
    text = "line one\n  indented two"
    for raw, kept in ((True, True), (False, False)):
        cmd = Command("x", help="h", description=text, run=_run_a, preformatted=raw)
        group = _parser(cmd)._subparsers
        assert group is not None
        subparsers = group._group_actions[0]
        assert isinstance(subparsers, argparse._SubParsersAction)
        sub = subparsers.choices["x"]
        assert (text in sub.format_help()) is kept


def test_every_ingest_command_has_a_run() -> None:
    """Each leaf of the ``ingest`` tree sets ``func``; a command of actions needs one."""

    def leaves(
        parser: argparse.ArgumentParser, path: tuple[str, ...]
    ) -> dict[tuple[str, ...], argparse.ArgumentParser]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return {path: parser}
        return {
            leaf_path: leaf
            for name, p in subs[0].choices.items()
            for leaf_path, leaf in leaves(p, (*path, name)).items()
        }

    found = leaves(build_parser(), ())
    assert {
        ("temporal", "setup"),
        ("schedules", "resume"),
        ("permits", "release"),
        ("flow", "list"),
        ("relay",),
    } <= set(found)
    assert {("activities", "pause"), ("activities", "resume"), ("flow", "release")} <= set(found)
    assert len(found) == 21
    for path, parser in found.items():
        assert callable(parser.get_default("func")), path
