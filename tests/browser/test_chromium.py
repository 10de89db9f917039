"""The browser fixtures themselves: chromium runs a page's script, contexts are separate
users, the viewports are the sizes they say, and screenshots land as PNGs."""

from __future__ import annotations

import struct
from html import escape
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .conftest import NewContext, Serve

PAGE = """<!doctype html>
<html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<title>smoke</title></head>
<body>
<p id="user">{user}</p>
<button id="more" onclick="count.textContent = Number(count.textContent) + 1">more</button>
<p id="count">0</p>
</body></html>"""


async def home(request: Request) -> Response:
    return HTMLResponse(PAGE.format(user=escape(request.cookies.get("user", "nobody"))))


async def login(request: Request) -> Response:
    response = RedirectResponse("/", status_code=303)
    response.set_cookie("user", request.path_params["name"])
    return response


APP = Starlette(routes=[Route("/", home), Route("/login/{name}", login)])


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


def test_a_click_runs_the_pages_script_and_the_screenshot_is_a_png(
    serve: Serve, browser_context: NewContext, screenshots: Path
) -> None:
    page = browser_context().new_page()
    page.goto(serve(APP))

    page.click("#more")
    page.click("#more")

    assert page.text_content("#count") == "2"
    shot = screenshots / "smoke-desktop.png"
    page.screenshot(path=shot)
    assert png_size(shot) == (1280, 800)


def test_each_context_is_its_own_user(serve: Serve, browser_context: NewContext) -> None:
    url = serve(APP)
    alice, bob, stranger = (browser_context().new_page() for _ in range(3))

    alice.goto(f"{url}login/alice")
    bob.goto(f"{url}login/bob")
    stranger.goto(url)
    alice.reload()

    assert [p.text_content("#user") for p in (alice, bob, stranger)] == ["alice", "bob", "nobody"]


def test_the_phone_viewport_is_a_phone_screen(
    serve: Serve, browser_context: NewContext, screenshots: Path
) -> None:
    page = browser_context(viewport="phone").new_page()
    page.goto(serve(APP))

    page.tap("#more")

    assert page.text_content("#count") == "1"
    assert page.evaluate("[innerWidth, innerHeight, navigator.maxTouchPoints > 0]") == [
        390,
        844,
        True,
    ]
    shot = screenshots / "smoke-phone.png"
    page.screenshot(path=shot)
    assert png_size(shot) == (390, 844)
