"""ctrl+p → Screenshot (issue 22): Textual saved to ~/Downloads, which a server often lacks, and said only
"Failed to save screenshot". It now saves in the current directory and the toast names the file or the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.support import bare_app


async def test_the_screenshot_lands_in_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app, _src = bare_app()
    async with app.run_test(size=(120, 40)) as pilot:
        saved = app.deliver_screenshot()
        await pilot.pause()
        assert saved is not None and Path(saved).parent == tmp_path and Path(saved).suffix == ".svg"
        with open(saved, encoding="utf-8") as f:  # noqa: ASYNC230 - a test reading what it just wrote
            assert f.read(4) == "<svg"
        assert any(f"screenshot saved: {saved}" in n.message for n in app._notifications)


async def test_a_directory_that_cannot_take_it_is_named(tmp_path: Path) -> None:
    app, _src = bare_app()
    missing = tmp_path / "no" / "such" / "dir"
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.deliver_screenshot(path=str(missing)) is None
        await pilot.pause()
        assert any(f"screenshot not saved in {missing}" in n.message and n.severity == "error"
                   for n in app._notifications)
