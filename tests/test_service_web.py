"""The service's web page in a real headless Chromium (the system's, driven by Selenium):
upload and submit through the forms, watch the progress bar reach 100 %, see the ranking
table and the trade-off plot. The screenshot is kept under test-artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from _service import ROOT, Server, hash_token
from sdcdist.data import write_microdata
from sdcdist.data.synth import generate

pytestmark = pytest.mark.slow

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = ROOT / "test-artifacts"

SPEC = """name: web-test
seed: 3
methods:
  - {name: noise, params: [0.1, 0.3]}
  - {name: micmul, params: [3, 6]}
replicates: 1
metrics: [IL1s, DLD]
"""


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
                f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1600"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def test_page_uploads_submits_and_shows_results(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait
    token, line = hash_token("webuser")
    (tmp_path / "tokens.txt").write_text(line + "\n")
    server = Server(tmp_path / "root", tmp_path / "service.log",
                    "--tokens", str(tmp_path / "tokens.txt")).start()
    try:
        csv = tmp_path / "people.csv"
        write_microdata(generate(400, columns=4, seed=9), csv)
        d = browser
        d.get(server.url + "/")
        wait = WebDriverWait(d, 120)
        d.find_element(By.ID, "token").send_keys(token)
        d.find_element(By.ID, "save-token").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "auth-state"), "signed in"))
        d.find_element(By.ID, "upload-file").send_keys(str(csv))
        d.find_element(By.ID, "upload-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "upload-result"), "400 records"))
        assert Select(d.find_element(By.ID, "spec-dataset")).first_selected_option \
            .get_attribute("value").startswith("ds_")
        box = d.find_element(By.ID, "spec-text")
        box.clear()
        box.send_keys(SPEC)
        d.find_element(By.ID, "spec-submit").click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "spec-result"), "queued"))
        audit = d.find_element(By.ID, "spec-result").text.split()[1]
        wait.until(lambda _: d.find_element(
            By.CSS_SELECTOR, f"#audit-{audit} .bar").get_attribute("aria-valuenow") == "100")
        table = wait.until(EC.visibility_of_element_located((By.ID, f"rank-{audit}")))
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert len(rows) == 4                         # 2 noise + 2 micmul cells
        head = table.find_element(By.TAG_NAME, "thead").text
        assert "DLD" in head and "rank" in head
        img = wait.until(EC.visibility_of_element_located((By.ID, f"plot-{audit}")))
        wait.until(lambda _: d.execute_script(
            "const i = arguments[0]; return i.complete && i.naturalWidth > 100;", img))
        assert "done" in d.find_element(By.CSS_SELECTOR, f"#audit-{audit} .status").text
        assert d.find_element(By.CSS_SELECTOR, f"#audit-{audit} .bar > div") \
            .value_of_css_property("width") != "0px"
        d.execute_script("arguments[0].scrollIntoView()", img)
        ARTIFACTS.mkdir(exist_ok=True)
        shot = tmp_path / "service-page.png"
        assert d.save_screenshot(str(shot))
        shutil.copy(shot, ARTIFACTS / "service-page.png")
    finally:
        server.stop()
