"""README keys no other pilot test pressed: `shift+tab`, `←`/`→`, `q`, and `p` on a live dashboard.

The rest are in test_dashboard.py, test_sort_keys.py, test_rowtable.py, test_layout_sizes.py,
test_screenshot.py, test_replay_jump.py and test_replay_back.py (tests/README_CLAIMS.md maps each key), and
all of them once more in a real terminal in tests/tmux/.
"""

from __future__ import annotations

from ietop.tui.run import replay_app
from ietop.tui.widgets.engines import EnginesBar
from ietop.tui.widgets.requests import RequestsTable
from parsers.events import HttpAccess
from tests.tui.support import INCIDENT, bare_app, chat, moment, replay_settled, until


async def test_shift_tab_moves_back_to_the_panel_tab_left() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_settled(pilot)
        requests = app.query_one(RequestsTable)
        requests.focus()
        await pilot.pause()
        await pilot.press("tab")
        assert app.focused is not requests and app.focused is not None
        await pilot.press("shift+tab")
        assert app.focused is requests


async def test_left_and_right_scroll_a_table_whose_kept_columns_do_not_fit() -> None:
    """At 30 columns even time, model and status (the columns Requests never drops) are wider than the
    panel: → shows what is off to the right, ← comes back."""
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(30, 40)) as pilot:
        await replay_settled(pilot)
        requests = app.query_one(RequestsTable)
        requests.focus()
        await pilot.pause()
        assert requests.max_scroll_x > 0, "the kept columns fit: nothing to scroll at this width"
        assert requests.scroll_x == 0
        await pilot.press("right")
        await until(pilot, lambda: requests.scroll_x > 0)
        await pilot.press("left")
        await until(pilot, lambda: requests.scroll_x == 0)


async def test_q_quits_with_status_0() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_settled(pilot)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
    assert app.return_code == 0


def _at(src: int, event: HttpAccess) -> tuple[int, float, HttpAccess]:
    assert event.ts is not None
    return src, event.ts.timestamp(), event


async def test_p_freezes_a_live_screen() -> None:
    """Live, `p` freezes the screen: requests that arrive meanwhile are kept, and shown once `p` again plays."""
    app, src = bare_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.store.apply_all([_at(src, chat(1))])
        app.refresh_view()
        await pilot.pause()
        requests = app.query_one(RequestsTable)
        assert requests.row_count == 1
        await pilot.press("p")
        app.store.apply_all([_at(src, chat(2))])
        app.refresh_view()
        await pilot.pause()
        assert requests.row_count == 1, "a paused live screen must not change"
        assert len(app.view.snapshot(app.now(), 300.0).requests) == 2, "the store took it meanwhile"
        await pilot.press("p")
        app.refresh_view()
        await pilot.pause()
        assert requests.row_count == 2


async def test_p_says_paused_in_the_live_header() -> None:
    """`p` redrew through refresh_view(), which skips an unchanged snapshot: live, the header never said PAUSED
    (found by tests/tmux/play_keys.py, where a replay sometimes kept its state before the key)."""
    app, _src = bare_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bar = app.query_one(EnginesBar)
        await pilot.press("p")
        await pilot.pause()
        assert app.paused and "PAUSED" in bar.status
        await pilot.press("p")
        await pilot.pause()
        assert not app.paused and "PAUSED" not in bar.status
