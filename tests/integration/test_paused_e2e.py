"""A camera paused through the control API shows ``paused`` everywhere a state is shown: on
the status page in real headless Chromium (its own look, not a fault's), and on its MQTT
state topic in a real mosquitto (retained, so that a late subscriber sees it too); resumed,
it streams again in both. (``vidpipe_camera_state`` is tested in test_control_api.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.integration.test_control_api import call, file_camera
from tests.integration.test_web_browser import browser
from tests.mosquitto import Mosquitto, Subscriber

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["browser"]  # fixture

READER = "Paused-Reader-Token-0123456789"
ADMIN = "Paused-Admin-Token-0123456789"
FAULT_BADGE = "rgb(229, 72, 77)"  # app.css --bad: backoff, stopped


def tiles(driver: Any) -> dict[str, dict[str, Any]]:
    """Each tile's state text, classes and state badge colour, as Chromium renders them."""
    return dict(
        driver.execute_script(
            "const out = {}; for (const t of document.querySelectorAll('.tile')) {"
            " const s = t.querySelector('.state');"
            " out[t.dataset.camera] = {text: s.textContent, tile: [...t.classList],"
            "  badge: getComputedStyle(s).backgroundColor}; } return out;"
        )
    )


def last_state(sub: Subscriber, camera: str) -> bytes | None:
    got = sub.on(f"site/{camera}/state")
    return got[-1].payload if got else None


def test_a_paused_camera_is_paused_on_the_page_and_on_mqtt(
    assets_dir: Path, tmp_path: Path, run_daemon, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    port = free_port()
    with Mosquitto(tmp_path / "broker") as broker:
        sub = Subscriber(broker.port, "site/#")
        mqtt = {"type": "mqtt", "host": "127.0.0.1", "port": broker.port, "topic_prefix": "site"}
        models = assets_dir / "models"
        config = {
            "model": {
                "path": str(models / "yolox_nano.onnx"),
                "labels": str(models / "coco80.txt"),
            },
            "http": {"port": port, "token": READER, "admin_token": ADMIN},
            "sinks": [mqtt],
            "cameras": [file_camera(assets_dir, "main", realtime=True, detect_fps=2)],
        }
        daemon = run_daemon(config)
        wait_for(lambda: last_state(sub, "main") == b"streaming", 120, "main streaming on MQTT")
        door = file_camera(assets_dir, "door", realtime=True, detect_fps=2)
        assert call(port, "PUT", "/cameras/door", door, token=ADMIN)[0] == 201
        wait_for(lambda: last_state(sub, "door") == b"streaming", 60, "door streaming on MQTT")

        browser.get(f"http://127.0.0.1:{port}/login")
        browser.find_element(By.ID, "token").send_keys(READER)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: tiles(browser).get("door", {}).get("text") == "streaming", 30, "door")
        streaming = tiles(browser)["door"]

        status, _, view = call(port, "POST", "/cameras/door/pause", token=ADMIN)
        assert status == 200 and view["state"] == "paused", view
        wait_for(lambda: tiles(browser)["door"]["text"] == "paused", 30, "door paused on the page")
        paused = tiles(browser)["door"]
        assert "paused" in paused["tile"] and "down" not in paused["tile"], paused
        assert paused["badge"] not in (streaming["badge"], FAULT_BADGE), paused
        wait_for(lambda: last_state(sub, "door") == b"paused", 30, "paused on MQTT")
        time.sleep(1.0)  # a late "stopped" from the worker going away would overwrite it
        assert last_state(sub, "door") == b"paused"
        late = Subscriber(broker.port, "site/door/state", client_id="late-subscriber")
        try:  # retained: whoever subscribes later sees paused
            wait_for(lambda: late.on("site/door/state"), 30, "the retained state")
            assert [m.payload for m in late.on("site/door/state")] == [b"paused"]
        finally:
            late.close()
        down = tiles(browser)  # a camera that failed looks different from a paused one
        assert down["main"]["text"] == "streaming" and "paused" not in down["main"]["tile"]
        browser.save_screenshot(str(tmp_path / "paused.png"))

        assert call(port, "POST", "/cameras/door/resume", token=ADMIN)[0] == 200
        wait_for(lambda: last_state(sub, "door") == b"streaming", 60, "door streaming again")
        wait_for(lambda: tiles(browser)["door"]["text"] == "streaming", 30, "door on the page")
        assert "paused" not in tiles(browser)["door"]["tile"]
        sub.close()
        assert daemon.terminate(60) == 0, daemon.log()[-3000:]
