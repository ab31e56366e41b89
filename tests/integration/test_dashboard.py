"""The dashboard (GET /) in headless Chromium: send a chat message, see streamed text, see the charts fill
with non-zero values; saves a screenshot under tests/artifacts/."""
import json
import os
import shutil

import pytest

from conftest import ROOT

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def test_dashboard_page_is_self_contained(stories):
    st, h, data = stories.request("GET", "/")
    assert st == 200 and h["Content-Type"].startswith("text/html")
    page = data.decode()
    assert "<canvas" in page or "canvas" in page
    for bad in ["http://", "https://", "src=\"//"]:  # no external resources
        assert bad not in page, bad


def test_dashboard_chat_and_charts(stories):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed")
    os.makedirs(os.path.join(ROOT, "tests", "artifacts"), exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(stories.base + "/")
        page.fill("#maxtok", "48")
        page.fill("#temp", "0")
        page.fill("#prompt", "Tell me a story about a dog.")
        page.click("#send")
        page.wait_for_selector(".msg.assistant[data-done='1']", timeout=30000)
        text = page.inner_text(".msg.assistant")
        assert len(text.strip()) > 0, "no streamed text"
        # the charts refresh every second from /stats; wait until TTFT and tokens/s are non-zero
        page.wait_for_function(
            "() => { const v = id => JSON.parse(document.getElementById('chart-' + id).dataset.last || '[0]');"
            " return v('ttft')[0] > 0 && v('tpot')[0] > 0 && v('kv').length == 1; }", timeout=15000)
        last = page.evaluate("() => Object.fromEntries(['ttft','tpot','itl','tps','queue','kv','prefix']"
                             ".map(id => [id, JSON.parse(document.getElementById('chart-' + id).dataset.last)]))")
        assert last["ttft"][0] > 0 and last["tpot"][0] > 0 and last["itl"][0] > 0, json.dumps(last)
        assert last["tps"][1] > 0, json.dumps(last)
        # the scheduling panel: the chat request counted as served (priority class 0) under the default fifo
        sched = json.loads(page.get_attribute("#sched", "data-last"))
        assert sched["policy"] == "fifo", sched
        c0 = [c for c in sched["classes"] if c["priority"] == "0"]
        assert c0 and c0[0]["ok"] >= 1, sched
        assert "0" in page.inner_text("#sched tbody"), page.inner_text("#sched")
        page.screenshot(path=os.path.join(ROOT, "tests", "artifacts", "dashboard.png"), full_page=True)
        assert not errors, errors
        browser.close()
