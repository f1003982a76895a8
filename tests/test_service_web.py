"""The service's web page in a real headless Chromium (the system's, driven by Selenium).

Upload through the form (the answer lists each column's type and roles), build a spec
from the forms (registered methods with a grid, metrics, key columns), watch the audit
finish, see it ranked by the default risk-utility score with every metric explained and
the trade-off plot; then a second audit over two datasets (a dataset selector) beside the
first, whose results stay; a cancelled audit says why. Screenshots are kept under
test-artifacts/ (ignored by git)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from _service import ROOT, Server, hash_token
from sdcdist.data import Microdata, write_microdata
from sdcdist.data.synth import generate

pytestmark = pytest.mark.slow

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def browser(tmp_path):
    if not CHROMIUM.exists() or not DRIVER.exists():
        pytest.skip("/usr/bin/chromium and /usr/bin/chromedriver are not installed "
                    "(apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1250,1600"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def _shot(d, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot, kept in the test's folder and under test-artifacts/."""
    height = d.execute_script("return document.body.scrollHeight")
    d.set_window_size(1250, min(max(int(height) + 150, 900), 9000))
    shot = tmp_path / name
    assert d.save_screenshot(str(shot))
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)
    return shot


def _table(d, audit: str) -> list[dict[str, str]]:
    from selenium.webdriver.common.by import By
    t = d.find_element(By.ID, f"rank-{audit}")
    head = [th.text for th in t.find_elements(By.CSS_SELECTOR, "thead th")]
    return [dict(zip(head, (td.text for td in tr.find_elements(By.TAG_NAME, "td"))))
            for tr in t.find_elements(By.CSS_SELECTOR, "tbody tr")]


def test_page_builds_ranks_explains_and_keeps_audits(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait
    token, line = hash_token("webuser")
    (tmp_path / "tokens.txt").write_text(line + "\n")
    server = Server(tmp_path / "root", tmp_path / "service.log",
                    "--tokens", str(tmp_path / "tokens.txt")).start()
    http = httpx.Client(base_url=server.url, timeout=60,
                        headers={"Authorization": f"Bearer {token}"})
    try:
        people = tmp_path / "people.csv"
        md = generate(300, columns=4, seed=9)
        X = np.column_stack([md.values, np.arange(300) % 4])      # an integer-coded region
        write_microdata(Microdata(X, [*md.columns, "REGION"]), people)
        firms = tmp_path / "firms.csv"
        write_microdata(generate(250, columns=4, seed=4), firms)
        d = browser
        d.get(server.url + "/")
        # the page re-renders a table it reloads: an element read meanwhile is stale
        wait = WebDriverWait(d, 180, ignored_exceptions=(StaleElementReferenceException,))
        d.find_element(By.ID, "token").send_keys(token)
        d.find_element(By.ID, "save-token").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "auth-state"), "signed in"))

        # -- upload with roles: the answer shows each column's type and roles ----------
        keys = ",".join(md.columns[:2])
        d.find_element(By.ID, "upload-file").send_keys(str(people))
        d.find_element(By.ID, "upload-keys").send_keys(keys)
        d.find_element(By.ID, "upload-categorical").send_keys("REGION")
        d.find_element(By.ID, "upload-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "upload-result"), "300 records"))
        schema = {tr.find_elements(By.TAG_NAME, "td")[0].text:
                  [td.text for td in tr.find_elements(By.TAG_NAME, "td")[1:]]
                  for tr in d.find_elements(By.CSS_SELECTOR, "#upload-schema tbody tr")}
        assert schema["REGION"][:2] == ["categorical", "4"]
        assert schema[md.columns[0]] == ["numeric", "", "key"]
        assert "categorical: REGION" in d.find_element(By.ID, "upload-result").text

        # -- the forms list the registries -----------------------------------------------
        methods = {m["name"] for m in http.get("/v1/methods").json()}
        rows = d.find_elements(By.CSS_SELECTOR, "#method-table tbody tr")
        assert {r.get_attribute("id").removeprefix("method-") for r in rows} == methods
        metrics = {m["name"] for m in http.get("/v1/metrics").json()}
        assert {c.get_attribute("value") for c in
                d.find_elements(By.CSS_SELECTOR, "#metric-list input.metric")} == metrics
        # the key columns are those declared at upload, ticked
        ticked = [c.get_attribute("value") for c in
                  d.find_elements(By.CSS_SELECTOR, "#spec-keys input.key") if c.is_selected()]
        assert ticked == list(md.columns[:2])

        # -- a spec from the forms: a grid for rankswap, jpeg added, a metric added ------
        d.find_element(By.ID, "spec-name").clear()
        d.find_element(By.ID, "spec-name").send_keys("forms")
        reps = d.find_element(By.ID, "spec-replicates")
        reps.clear()
        reps.send_keys("1")
        row = d.find_element(By.ID, "method-rankswap")
        for cls, v in (("lo", "2"), ("hi", "12"), ("n", "3")):
            box = row.find_element(By.CSS_SELECTOR, f"input.{cls}")
            box.clear()
            box.send_keys(v)
        row.find_element(By.CSS_SELECTOR, "button.grid").click()
        assert row.find_element(By.CSS_SELECTOR, "input.params") \
            .get_attribute("value") == "2, 7, 12"
        noise = d.find_element(By.CSS_SELECTOR, "#method-noise input.params")
        noise.clear()
        noise.send_keys("0.01, 0.1, 0.3")
        d.find_element(By.CSS_SELECTOR, "#metric-list input[value='IL1s']").click()
        d.find_element(By.ID, "spec-to-yaml").click()
        yaml_text = d.find_element(By.ID, "spec-text").get_attribute("value")
        assert "params: [2, 7, 12]" in yaml_text and "metrics: [IL1s, Score2]" in yaml_text
        d.find_element(By.ID, "spec-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "spec-result"), "queued"))
        first = d.find_element(By.ID, "spec-result").text.split()[1]
        spec = http.get(f"/v1/audits/{first}").json()
        assert spec["cells_total"] == 3 + 3 + 2          # noise, rankswap grid, micmul

        wait.until(EC.visibility_of_element_located((By.ID, f"rank-{first}")))
        # -- ranked by the default risk-utility score, not by a loss ---------------------
        caption = d.find_element(By.ID, f"caption-{first}").text
        assert caption.startswith("Ranked by Score2")
        assert "50 % of its weight on disclosure risk" in caption
        rows = _table(d, first)
        assert len(rows) == 8
        by_score = http.get(f"/v1/audits/{first}/report", params={
            "by": "Score2", "format": "json"}).json()["rows"]
        assert [r["Score2"] for r in rows] == [f"{r['Score2']:.3f}" for r in by_score]
        # the least-loss cell (noise p=0.01) re-identifies most: a loss ranking's winner
        least_loss = min(by_score, key=lambda r: r["IL_S2"])
        assert (least_loss["method"], least_loss["param"]) == ("noise", 0.01)
        assert (rows[0]["method"], rows[0]["param"]) != ("noise", "0.010")
        assert float(rows[0]["DLD"]) < least_loss["DLD"]
        # -- each metric explained: unit, which end is better, definition ----------------
        explain = d.find_element(By.ID, f"explain-{first}").text
        for name, unit in (("DLD", "% of records"), ("IL_S2", "% relative error"),
                           ("ID1", "% of values")):
            assert name in explain and unit in explain
        assert "lower is better" in explain and "nearest original" in explain
        assert "DLD" in d.find_element(By.CSS_SELECTOR, f"#rank-{first} thead") \
            .find_elements(By.XPATH, ".//th[text()='DLD']")[0].get_attribute("title")
        img = wait.until(EC.visibility_of_element_located((By.ID, f"plot-{first}")))
        wait.until(lambda _: d.execute_script(
            "const i = arguments[0]; return i.complete && i.naturalWidth > 100;", img))
        assert "DLD against IL_S2" in img.get_attribute("alt")
        _shot(d, tmp_path, "service-page.png")

        # -- a second dataset and an audit over both: a selector; the first stays --------
        d.find_element(By.ID, "upload-file").send_keys(str(firms))
        for i in ("upload-keys", "upload-categorical"):
            d.find_element(By.ID, i).clear()
        d.find_element(By.ID, "upload-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "upload-result"), "250 records"))
        for c in d.find_elements(By.CSS_SELECTOR, "#spec-datasets input.ds"):
            if not c.is_selected():
                c.click()
        for c in d.find_elements(By.CSS_SELECTOR, "#method-table input.use"):
            if c.is_selected():
                c.click()
        d.find_element(By.CSS_SELECTOR, "#method-micmul input.use").click()
        d.find_element(By.ID, "spec-name").clear()
        d.find_element(By.ID, "spec-name").send_keys("two-datasets")
        d.find_element(By.ID, "spec-submit").click()
        wait.until(lambda _: first not in d.find_element(By.ID, "spec-result").text
                   and "queued" in d.find_element(By.ID, "spec-result").text)
        second = d.find_element(By.ID, "spec-result").text.split()[1]
        sel = wait.until(EC.visibility_of_element_located((By.ID, f"dataset-{second}")))
        wait.until(EC.visibility_of_element_located((By.ID, f"rank-{second}")))
        options = [o.text for o in sel.find_elements(By.TAG_NAME, "option")]
        assert options == ["people", "firms"]
        before = _table(d, second)
        from selenium.webdriver.support.ui import Select
        Select(sel).select_by_visible_text("firms")
        wait.until(lambda _: _table(d, second) != before)
        assert len(_table(d, second)) == 2                  # micmul k = 3, 5
        # the first audit's results are still on the page, beside the second's
        assert len(_table(d, first)) == 8
        assert d.find_element(By.ID, f"plot-{first}").is_displayed()

        # -- the expert's YAML box; a cancelled audit says why ------------------------------
        box = d.find_element(By.ID, "spec-text")
        box.clear()
        box.send_keys("name: to-cancel\nseed: 1\ndataset: {synthetic: {rows: 3000, "
                      "columns: 6}}\nmethods:\n  - {name: rankswap, params: [1, 2, 3, 4, "
                      "5, 6, 7, 8, 9, 10]}\nreplicates: 10\nmetrics: [Score2]\n")
        d.find_element(By.ID, "yaml-submit").click()
        wait.until(lambda _: second not in d.find_element(By.ID, "spec-result").text
                   and "queued" in d.find_element(By.ID, "spec-result").text)
        third = d.find_element(By.ID, "spec-result").text.split()[1]
        assert http.get(f"/v1/audits/{third}").json()["cells_total"] == 100
        cancel = wait.until(EC.visibility_of_element_located(
            (By.CSS_SELECTOR, f"#audit-{third} button.cancel")))
        cancel.click()
        wait.until(EC.text_to_be_present_in_element(
            (By.CSS_SELECTOR, f"#audit-{third} .msg"), "cancelled by webuser"))
        assert "cancelled" in d.find_element(By.CSS_SELECTOR, f"#audit-{third} .status").text
        assert len(_table(d, first)) == 8
        _shot(d, tmp_path, "service-page-audits.png")
    finally:
        http.close()
        server.stop()
