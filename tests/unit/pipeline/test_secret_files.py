"""pipeline.secret_files: a secret file is read no further than its cap, and each problem
is said in words that name the path and never quote the content."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.secret_files import UnreadableFile, read_capped_text


def test_a_file_at_the_cap_is_read_and_one_byte_over_is_refused(tmp_path: Path) -> None:
    at, over = tmp_path / "at", tmp_path / "over"
    at.write_bytes(b"k" * 1024)
    over.write_bytes(b"s3cret" + b"k" * 1019)
    assert read_capped_text(at, 1024) == "k" * 1024
    with pytest.raises(UnreadableFile, match=r"over is larger than 1 KiB") as err:
        read_capped_text(over, 1024)
    assert "s3cret" not in str(err.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read .*absent: No such file"), (b"\xff\xfe s3cret", "is not UTF-8 text")],
)
def test_each_problem_names_the_path_and_not_the_content(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "absent"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UnreadableFile, match=message) as err:
        read_capped_text(path, 1 << 20)
    assert str(path) in str(err.value) and "s3cret" not in str(err.value)
