"""The service's web page in a real headless Chromium (the system's, driven by Selenium).

Upload through the form (the answer lists each column's type and roles), build a spec
from the forms (registered methods with a grid, metrics, key columns), watch the audit
finish, see it ranked by the default risk-utility score with every metric explained and
the trade-off plot; then a second audit over two datasets (a dataset selector) beside the
first, whose results stay, with keys chosen per dataset; a cancelled audit says why, and
one resumed to done says done, with one count throughout.

The officer's whole scenario: upload Census, the numeric preset, the rules DLD <= 5 and
IL_S2 <= 20 (a malformed rule refused first), run, the recommendation, the comparison of
original and release, the release (byte for byte `sdcdist mask` with the cell's seed) and
both release reports (offline, the cube's numbers, no record content in the external one).

Screenshots are kept under test-artifacts/ (ignored by git)."""

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


#: A new connection for every request of the tests' own client: the server drops a
#: connection idle for 5 s (uvicorn's keep-alive), and a request sent on it just then (after
#: a long wait for the browser, on a loaded machine) is reset by the peer.
FRESH = httpx.Limits(max_keepalive_connections=0)


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
    opts.add_experimental_option("prefs", {
        "download.default_directory": str(tmp_path / "downloads"),
        "download.prompt_for_download": False, "download.directory_upgrade": True})
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
    head = [th.text.split("\n")[0] for th in t.find_elements(By.CSS_SELECTOR, "thead th")]
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
    http = httpx.Client(base_url=server.url, timeout=60, limits=FRESH,
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
        d.find_element(By.CSS_SELECTOR, "#upload-roles summary").click()   # roles: optional
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
                d.find_elements(By.CSS_SELECTOR, "input.metric")} == metrics
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
        d.find_element(By.ID, "more-metrics").click()          # IL1s is not in the preset
        d.find_element(By.CSS_SELECTOR, "input.metric[value='IL1s']").click()
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
        # what was ticked is shown, and what Score2 brought is marked so; one rank column
        head = [th.text for th in d.find_elements(By.CSS_SELECTOR, f"#rank-{first} thead th")]
        assert "IL1s" in head and "Score2" in head
        assert {"IL_S2\nadded by Score2", "DLD\nadded by Score2", "ID1\nadded by Score2",
                "ID2\nadded by Score2"} <= set(head)
        assert [h for h in head if "rank" in h] == ["rank"]
        assert [r["rank"] for r in rows] == [str(i) for i in range(1, 9)]
        by_score = http.get(f"/v1/audits/{first}/report", params={
            "by": "Score2", "format": "json"}).json()["rows"]
        assert [r["Score2"] for r in rows] == [f"{r['Score2']:.3f}" for r in by_score]
        # the least-loss cell (noise p=0.01) re-identifies most: a loss ranking's winner
        least_loss = min(by_score, key=lambda r: r["IL_S2"])
        assert (least_loss["method"], least_loss["param"]) == ("noise", 0.01)
        assert (rows[0]["method"], rows[0]["param"]) != ("noise", "0.010")
        assert float(rows[0]["DLD"]) < least_loss["DLD"]
        # -- each metric explained: unit, which end is better, definition ----------------
        d.find_element(By.CSS_SELECTOR, f"#audit-{first} details summary").click()
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
        # keys per dataset: one list each, the first's keys still ticked
        groups = d.find_elements(By.CSS_SELECTOR, "#spec-keys .keys")
        assert [g.find_element(By.TAG_NAME, "b").text for g in groups] == \
            ["Keys of people", "Keys of firms"]
        assert [c.get_attribute("value") for c in groups[0].find_elements(
            By.CSS_SELECTOR, "input.key") if c.is_selected()] == list(md.columns[:2])
        assert not [c for c in groups[1].find_elements(By.CSS_SELECTOR, "input.key")
                    if c.is_selected()]
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
        # cancel and resume: one count, and the final state once resumed to done
        small = http.post("/v1/audits", json={
            "name": "resume-me", "dataset": {"synthetic": {"rows": 300, "columns": 3}},
            "methods": [{"name": "rankswap", "params": [1, 2, 3, 4, 5, 6, 7, 8]}],
            "replicates": 5, "metrics": ["IL1s"]}).json()["id"]
        http.delete(f"/v1/audits/{small}")
        resume = wait.until(EC.visibility_of_element_located(
            (By.CSS_SELECTOR, f"#audit-{small} button.resume")))
        wait.until(lambda _: http.get(f"/v1/audits/{small}").json()["cells_done"] == int(
            d.find_element(By.CSS_SELECTOR, f"#audit-{small} .count").get_attribute("data-done")))
        n = http.get(f"/v1/audits/{small}").json()["cells_done"]
        wait.until(EC.text_to_be_present_in_element(
            (By.CSS_SELECTOR, f"#audit-{small} .msg"), f"({n} of 40 cells done"))
        assert d.find_element(By.CSS_SELECTOR, f"#audit-{small} .count").text.startswith(
            f"{n} of 40 cells")
        resume.click()
        wait.until(EC.text_to_be_present_in_element(
            (By.CSS_SELECTOR, f"#audit-{small} .status"), "done"))
        wait.until(EC.visibility_of_element_located((By.ID, f"rank-{small}")))
        assert d.find_element(By.CSS_SELECTOR, f"#audit-{small} .msg").text == ""
        assert d.find_element(By.CSS_SELECTOR, f"#audit-{small} .count").text == \
            "40 of 40 cells (100 %)"
        _shot(d, tmp_path, "service-page-audits.png")
    finally:
        http.close()
        server.stop()


def _wait_file(folder: Path, pattern: str, timeout: float = 60) -> Path:
    """The one finished download matching ``pattern`` in ``folder``."""
    import time
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = [p for p in folder.glob(pattern) if not p.name.endswith(".crdownload")]
        if got and not list(folder.glob("*.crdownload")):
            return got[0]
        time.sleep(0.2)
    raise TimeoutError(f"no download {pattern} in {folder}: {list(folder.iterdir())}")


def test_officer_scenario_from_upload_to_release(browser, tmp_path, run):
    """Upload Census, pick the numeric preset, set DLD <= 5 and IL_S2 <= 20, run, see the
    recommendation, compare, download the release and both reports."""
    import re

    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from sdcdist.data.refdata import reference_file
    census = tmp_path / "census.csv"
    shutil.copy(reference_file("census"), census)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    server = Server(tmp_path / "root", tmp_path / "service.log").start()
    http = httpx.Client(base_url=server.url, timeout=120, limits=FRESH)
    d = browser
    d.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow",
                                                   "downloadPath": str(downloads)})
    try:
        d.get(server.url + "/")
        wait = WebDriverWait(d, 120, ignored_exceptions=(StaleElementReferenceException,))
        wait.until(lambda _: d.find_elements(By.CSS_SELECTOR, "#presets button"))
        # no tokens: no token box
        assert not d.find_element(By.ID, "auth").is_displayed()

        # -- 1. data: upload Census; its keys are chosen for it ----------------------------
        d.find_element(By.ID, "upload-file").send_keys(str(census))
        d.find_element(By.ID, "upload-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "upload-result"), "1080 records"))
        ds = http.get("/v1/datasets").json()[0]["id"]
        wait.until(lambda _: d.find_element(By.TAG_NAME, "body")
                   .get_attribute("data-applicable") == ds + ":")
        # what cannot apply to an all-numeric file is not offered, and says why
        pram = d.find_element(By.ID, "method-pram")
        assert not pram.find_element(By.CSS_SELECTOR, "input.use").is_enabled()
        assert "categorical" in pram.get_attribute("title")
        kv = d.find_element(By.ID, "metric-kviol3")
        assert not kv.find_element(By.TAG_NAME, "input").is_enabled()
        assert kv.get_attribute("title").startswith("cannot apply: no categorical column")

        # the officer's keys, for this dataset
        keys = ["AFNLWGT", "AGI", "EMCONTRB"]
        for k in keys:
            d.find_element(By.CSS_SELECTOR, f'.keys[data-dataset="{ds}"] input[value="{k}"]').click()
        wait.until(lambda _: d.find_element(By.TAG_NAME, "body")
                   .get_attribute("data-applicable") == ds + ":" + ",".join(keys))
        # the data before masking, on these keys: every Census record is unique on them
        wait.until(EC.presence_of_element_located(
            (By.CSS_SELECTOR, f'#describe details[data-dataset="{ds}"]')))
        wait.until(lambda _: "on the keys AFNLWGT, AGI, EMCONTRB" in d.find_element(
            By.CSS_SELECTOR, f'#describe details[data-dataset="{ds}"] summary').text)
        assert "1080 records unique" in d.find_element(
            By.CSS_SELECTOR, f'#describe details[data-dataset="{ds}"] summary').text
        # -- 3. the numeric preset: a short set, the rest behind "more" --------------------
        d.find_element(By.ID, "preset-numeric").click()
        ticked = [c.get_attribute("data-method") for c in
                  d.find_elements(By.CSS_SELECTOR, "#method-table input.use") if c.is_selected()]
        assert ticked == ["noise", "rankswap", "micmul"]
        assert d.find_element(By.CSS_SELECTOR, "#metric-list input[value='Score2']").is_selected()
        assert not d.find_element(By.ID, "method-corrnoise").is_displayed()     # under more
        assert not d.find_element(By.ID, "metric-IL1s").is_displayed()
        # small grids, one replicate
        for m, v in (("noise", "0.1"), ("rankswap", "10"), ("micmul", "3")):
            box = d.find_element(By.CSS_SELECTOR, f"#method-{m} input.params")
            box.clear()
            box.send_keys(v)
        reps = d.find_element(By.ID, "spec-replicates")
        reps.clear()
        reps.send_keys("1")
        # -- 2. rules: a malformed one is refused by the server, nothing is queued ---------
        rules = d.find_element(By.ID, "rules")
        rules.send_keys("DLD =< 5")
        d.find_element(By.ID, "spec-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "rules-result"),
                                                    "cannot read the rule"))
        assert "422" in d.find_element(By.ID, "rules-result").text
        assert http.get("/v1/audits").json() == []
        rules.clear()
        rules.send_keys("DLD <= 5\nIL_S2 <= 20")
        _shot(d, tmp_path, "officer-1-setup.png")
        d.find_element(By.ID, "spec-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "spec-result"), "queued"))
        audit = http.get("/v1/audits").json()[0]["id"]
        assert http.get(f"/v1/audits/{audit}").json()["cells_total"] == 3

        # -- 4. results: one count, each cell judged, the recommendation --------------------
        wait.until(EC.visibility_of_element_located((By.ID, f"rank-{audit}")))
        count = d.find_element(By.CSS_SELECTOR, f"#audit-{audit} .count").text
        assert count == "3 of 3 cells (100 %)"
        rep = http.get(f"/v1/audits/{audit}/report", params={"format": "json"}).json()
        rec = rep["recommendation"]
        assert rec["rules"] == ["DLD <= 5", "IL_S2 <= 20"]
        rows = _table(d, audit)
        want = {(r["method"], f"{r['param']:g}" if r["param"] == int(r["param"])
                 else f"{r['param']:.3f}"): r for r in rep["rows"]}
        for row in rows:
            r = want[(row["method"], row["param"])]
            assert row["acceptable"] == r["acceptable"] and row["breaks"] == r["breaks"]
        head = [th.text for th in d.find_elements(By.CSS_SELECTOR, f"#rank-{audit} thead th")]
        assert [h for h in head if "rank" in h] == ["rank"]             # one rank column
        assert "IL_S2\nadded by Score2" in head and "DLD\nadded by Score2" in head
        box = d.find_element(By.ID, f"recommend-{audit}").text
        cell = rec["recommended"] or rec["closest"]
        label = f"{cell['method']} {'k' if cell['method'] == 'micmul' else 'p'}={cell['param']:g}"
        if rec["recommended"]:
            assert f"Recommended: {label}" in box
        else:
            assert "No cell is acceptable" in box and f"closest is {label}" in box
        wait.until(EC.text_to_be_present_in_element((By.ID, "release-cell"), label))
        plot = wait.until(EC.visibility_of_element_located((By.ID, f"plot-{audit}")))
        wait.until(lambda _: d.execute_script(          # the trade-off plot has loaded
            "return arguments[0].complete && arguments[0].naturalWidth > 100", plot))
        _shot(d, tmp_path, "officer-2-results.png")

        # -- 5. release: compare, download the release and both reports --------------------
        d.find_element(By.ID, "compare-show").click()
        wait.until(lambda _: d.find_element(By.ID, "compare").get_attribute("data-ready"))
        imgs = d.find_elements(By.CSS_SELECTOR, "#compare-distributions img")
        assert len(imgs) == 13
        wait.until(lambda _: all(d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 100", i) for i in imgs))
        assert "DLD" in d.find_element(By.CSS_SELECTOR, "#compare table.risk").text
        _shot(d, tmp_path, "officer-3-compare.png")
        d.find_element(By.ID, "release-download").click()
        got = _wait_file(downloads, "*.csv")
        cmp = http.get(f"/v1/audits/{audit}/compare", params={
            "method": cell["method"], "param": cell["param"], "replicate": 0}).json()
        masked = tmp_path / "mask.csv"
        r = run("mask", census, "--method", cell["method"], "--param", f"{cell['param']:g}",
                "--seed", cmp["seed"], "--spawn-key", ",".join(map(str, cmp["spawn_key"])),
                "--out", masked)
        assert r.exit_code == 0, r.output
        assert got.read_bytes() == masked.read_bytes()
        d.find_element(By.ID, "report-internal").click()
        internal = _wait_file(downloads, "*-internal.html").read_text()
        d.find_element(By.ID, "report-external").click()
        external = _wait_file(downloads, "*-external.html").read_text()
        for page in (internal, external):
            # offline: nothing to fetch, every image inline
            assert not re.search(r"https?://|<script|<link|@import|url\(", page, re.I)
            assert set(re.findall(r'src="([a-z]+):', page)) == {"data"}
            # its numbers are the cube's
            for metric in ("DLD", "ID1"):
                v = [x["value"] for x in http.get(f"/v1/audits/{audit}/cube", params={
                    "method": cell["method"], "param": cell["param"],
                    "metric": metric}).json()["records"]]
                m = re.search(rf"<tr><td>{metric}</td><td>[^<]*</td><td>([^<]*)</td>", page)
                assert float(m.group(1)) == pytest.approx(v[0], rel=1e-5)
            assert cmp["fingerprint"] in page
        assert "highest individual risk" in internal
        assert "highest individual risk" not in external
        assert "no record-level content" in external
        # no record value of Census in the external report, the page or the service's log
        from sdcdist.describe import describe
        from sdcdist.data import load_microdata
        md = load_microdata(str(census))
        riskiest = describe(md, keys=keys, top=10)["risk"]["riskiest"]
        assert f"<tr><td>{riskiest[0]['record']}</td><td>{riskiest[0]['risk']:.6g}</td>" \
            in internal
        for x in riskiest:
            assert f"<tr><td>{x['record']}</td><td>{x['risk']:.6g}</td>" not in external
        log = (tmp_path / "service.log").read_text()
        values = {str(int(v)) for v in md.values[:20].ravel() if abs(v) >= 100000}
        errors = " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, ".msg, #rules-result, #spec-result, #release-msg"))
        assert values and not [v for v in values if v in log or v in errors]
    finally:
        http.close()
        server.stop()
