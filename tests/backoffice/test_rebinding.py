"""The back office trusts no Host and no bind address (issue 26), tried as an attacker would.

DNS rebinding in the real headless Chromium: ``--host-resolver-rules`` maps ``evil.test`` to
127.0.0.1, as a rebinding DNS server would after the attacker's page loaded, so a script of the
origin ``http://evil.test:PORT`` talks to the back office. A plain TCP forwarder from another
loopback address stands for one from a LAN address (tests listen on loopback only): its peer is
loopback too, so what still protects is the Host rule, and what does not is spelled out below.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gleaner.serving.serve import WebhookServer
from tests.backoffice.conftest import SITE, Kept
from tests.backoffice.test_browser import CHROMEDRIVER, CHROMIUM

SECRET = "operator-secret-0123456789abcdef0123456789"


def chromium(tmp_path: Path, *args: str, prefs: dict[str, Any] | None = None) -> Any:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the browser tests: install chromium and chromium-driver")
        pytest.skip("needs Debian's chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path / 'chromium-rebinding'}", *args):
        options.add_argument(arg)
    if prefs:
        options.add_experimental_option("prefs", prefs)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(20)
    return driver


# What a rebinding page's script does once its name points at 127.0.0.1: read a document, block a site.
ATTACK = """
const done = arguments[arguments.length - 1];
const read = await fetch('/v1/documents/' + arguments[0]).then(r => r.status, e => 'error ' + e);
const post = await fetch('/v1/sites/' + arguments[1] + '/rules', {method: 'POST',
    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({glob: '/*', action: 'block'})}
  ).then(r => r.status, e => 'error ' + e);
done([read, post]);
"""


def test_a_rebound_name_can_neither_read_a_document_nor_post_a_rule(kept: Kept, tmp_path: Path):
    port = kept.url.rsplit(":", 1)[1]
    doc = kept.document_id("/docs/install")
    driver = chromium(tmp_path, "--host-resolver-rules=MAP evil.test 127.0.0.1")
    try:
        driver.get(f"http://evil.test:{port}/")
        assert "does not answer to the Host" in driver.page_source
        read, post = driver.execute_async_script(f"(async () => {{ {ATTACK} }})()", doc, "nowhere.test")
        assert (read, post) == (403, 403)
        read, post = driver.execute_async_script(f"(async () => {{ {ATTACK} }})()", doc, SITE)
        assert (read, post) == (403, 403)
        assert kept.get(f"/v1/sites/{SITE}/rules").json()["rules"] == []
        # The same script from the back office's own origin reads the document: the refusal is the Host's.
        driver.get(f"http://127.0.0.1:{port}/ui/")
        read = driver.execute_async_script(
            "const done = arguments[1]; fetch('/v1/documents/' + arguments[0]).then(r => done(r.status));", doc)
        assert read == 200
    finally:
        driver.quit()


class Forwarder:
    """A plain TCP forwarder (like ``socat TCP-LISTEN:…,fork TCP:127.0.0.1:…``): bytes both ways, no HTTP."""

    def __init__(self, listen: str, target: tuple[str, int]) -> None:
        self.listener = socket.create_server((listen, 0))
        self.listener.settimeout(0.5)
        self.target = target
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Forwarder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(self.target, timeout=30)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def forwarded(kept: Kept) -> Iterator[Forwarder]:
    port = int(kept.url.rsplit(":", 1)[1])
    with Forwarder("127.0.0.2", ("127.0.0.1", port)) as forwarder:
        yield forwarder


def test_through_a_forwarder_the_host_rule_still_refuses_every_browser(kept: Kept, forwarded: Forwarder,
                                                                     tmp_path: Path):
    via = f"http://127.0.0.2:{forwarded.port}"
    # A remote browser pointed at the forwarding machine's name or LAN address sends that as Host.
    for host in (f"gleaner-box.lan:{forwarded.port}", f"192.0.2.10:{forwarded.port}"):
        answer = httpx.get(via + "/v1/sites", headers={"Host": host})
        assert answer.status_code == 403, host
    driver = chromium(tmp_path, "--host-resolver-rules=MAP gleaner-box.lan 127.0.0.2")
    try:
        driver.get(f"http://gleaner-box.lan:{forwarded.port}/ui/")
        assert "does not answer to the Host" in driver.page_source
        assert SITE not in driver.page_source
    finally:
        driver.quit()
    # A proxy that says so (X-Forwarded-For, Via, ...) gets no credential-less access, whatever its Host.
    proxied = httpx.get(via + "/v1/sites", headers={"Host": "127.0.0.1", "X-Forwarded-For": "198.51.100.7"})
    assert proxied.status_code == 401
    assert httpx.get(via + "/v1/sites", headers={"Host": "127.0.0.1", "Via": "1.1 proxy"}).status_code == 401
    # What does NOT hold (docs/security.md): a non-browser client behind a silent forwarder may claim a
    # loopback Host, and its peer is loopback: it is the operator. Never forward the loopback port.
    forged = httpx.get(via + "/v1/sites", headers={"Host": "127.0.0.1"})
    assert forged.status_code == 200


def test_a_configured_public_name_is_answered_but_only_with_a_credential(make_deps: Any):
    deps = make_deps(webhook_secret=SECRET, allowed_hosts=("gleaner.example.org",))
    with WebhookServer(deps, port=0) as server:
        for host in ("gleaner.example.org", "127.0.0.1", "localhost"):
            assert httpx.get(server.url + "/v1/sites", headers={"Host": host}).status_code == 401, host
        page = httpx.get(server.url + "/ui/", headers={"Host": "gleaner.example.org"})
        assert page.status_code == 303 and page.headers["Location"] == "/ui/login"
        assert httpx.get(server.url + "/v1/sites", headers={"Host": "gleaner.example.org",
                                                            "Authorization": f"Bearer {SECRET}"}).status_code == 200
        assert httpx.get(server.url + "/v1/sites", headers={"Host": "other.example.org",
                                                            "Authorization": f"Bearer {SECRET}"}).status_code == 403
        # The webhook is behind the same gate.
        assert httpx.post(server.url + "/", json={}, headers={"Host": "evil.test",
                                                              "Authorization": f"Bearer {SECRET}"}).status_code == 403


def log_in_through_the_page(driver: Any, url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/ui/")
    form_url = driver.current_url
    driver.find_element(By.CSS_SELECTOR, 'input[name="token"]').send_keys(SECRET)
    driver.find_element(By.CSS_SELECTOR, "form button").click()
    # The click returns before the POST's redirects have been followed on a busy machine: wait for the
    # page the login lands on (the back office, or the login page saying why it did not take).
    WebDriverWait(driver, 20).until(lambda d: d.current_url != form_url
                                    and d.execute_script("return document.readyState") == "complete")


def test_a_login_over_plain_http_at_a_non_loopback_name_takes_and_logs_out(make_deps: Any, tmp_path: Path):
    """Issue 30 #4: the cookie was always Secure, which a browser drops over plain HTTP off loopback."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    deps = make_deps(webhook_secret=SECRET, allowed_hosts=("backoffice.test",))
    with WebhookServer(deps, port=0) as server:
        port = server.url.rsplit(":", 1)[1]
        driver = chromium(tmp_path, "--host-resolver-rules=MAP backoffice.test 127.0.0.1")
        try:
            log_in_through_the_page(driver, f"http://backoffice.test:{port}")
            assert driver.current_url == f"http://backoffice.test:{port}/ui/"
            driver.save_screenshot(str(tmp_path / "logged-in-over-http.png"))
            driver.find_element(By.CSS_SELECTOR, "form.logout button").click()
            WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/ui/login"))
            driver.get(f"http://backoffice.test:{port}/ui/")
            assert driver.current_url.endswith("/ui/login")  # the session ended
        finally:
            driver.quit()


def test_a_login_whose_cookie_the_browser_refused_says_why(make_deps: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    deps = make_deps(webhook_secret=SECRET, allowed_hosts=("backoffice.test",))
    with WebhookServer(deps, port=0) as server:
        port = server.url.rsplit(":", 1)[1]
        driver = chromium(tmp_path, "--host-resolver-rules=MAP backoffice.test 127.0.0.1",
                          prefs={"profile.default_content_setting_values.cookies": 2})
        try:
            log_in_through_the_page(driver, f"http://backoffice.test:{port}")
            found = driver.find_elements(By.ID, "cookie-refused")
            assert found, f"no explanation at {driver.current_url}: {driver.page_source[:2000]}"
            why = found[0].text
            driver.save_screenshot(str(tmp_path / "login-cookie-refused.png"))
        finally:
            driver.quit()
    assert "did not send the session cookie back" in why
    assert "plain HTTP at backoffice.test" in why and "HTTPS" in why
