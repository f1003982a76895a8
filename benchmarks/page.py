"""The web page's time to first results on the demo spec, against the same audit through
the API and through the command line, in one run.

Run as ``python benchmarks/page.py [--workers 2] [--repeat 2]``. Needs Debian's
``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` and Selenium (the ``test`` extra).

Prints, for the demo audit (``examples/demo.yaml``: 5,000 synthetic records, 16 cells):

1. ``sdcdist audit`` on its own local cluster of ``--workers`` processes: the audit time
   it reports (cluster start and imports excluded) and the command's wall time;
2. through the service's API (upload the demo's data, submit, poll until done, ask for
   the ranking as JSON): submit-to-done and submit-to-ranking (the first ``/report`` opens
   and checks the finished cube), after one tiny warm-up audit (a running service is
   warm);
3. through the page in headless Chromium, on the same service: the page loaded (and the
   results of the earlier audits drawn), the spec typed in its YAML box, then from the
   click on "Submit YAML" to the first cell counted on the page, to the ranking table
   shown (first results), and to the trade-off plot drawn;
4. the ratios page/API (what the page adds: its polling every second, the report and
   summary requests, drawing) and page/command.

Every run starts a fresh service under a temporary root. The machine is shared: timings
are noisy, so ``--repeat`` runs the page and API measures several times and prints each.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import ROOT, Service, cli_audit  # noqa: E402

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                "--window-size=1250,1600"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=DriverService(str(DRIVER)), options=opts)
    d.set_page_load_timeout(120)
    return d


def page_run(d, svc: Service, doc: dict) -> dict[str, float]:
    """Seconds from "Submit YAML" to the first cell counted, the table and the plot."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    d.get(svc.url + "/")
    wait = WebDriverWait(d, 900, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda _: d.find_elements(By.CSS_SELECTOR, "#presets button"))
    before = {a["id"] for a in svc.http.get("/v1/audits").json()}
    # the earlier audits' results drawn first, so that their requests do not overlap the
    # timed audit
    for aid in before:
        wait.until(EC.visibility_of_element_located((By.ID, f"rank-{aid}")))
    time.sleep(2.0)
    d.find_element(By.CSS_SELECTOR, "#expert summary").click()
    box = d.find_element(By.ID, "spec-text")
    box.clear()
    d.execute_script("arguments[0].value = arguments[1];", box, yaml.safe_dump(doc))
    t0 = time.perf_counter()
    d.find_element(By.ID, "yaml-submit").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "spec-result"), "queued"))
    audit = next(a["id"] for a in svc.http.get("/v1/audits").json() if a["id"] not in before)
    wait.until(lambda _: int(d.find_element(By.CSS_SELECTOR, f"#audit-{audit} .count")
                             .get_attribute("data-done") or 0) >= 1)
    first_cell = time.perf_counter() - t0
    wait.until(EC.visibility_of_element_located((By.ID, f"rank-{audit}")))
    table = time.perf_counter() - t0
    img = wait.until(EC.visibility_of_element_located((By.ID, f"plot-{audit}")))
    wait.until(lambda _: d.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 100", img))
    plot = time.perf_counter() - t0
    return {"first_cell": first_cell, "table": table, "plot": plot}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    if not CHROMIUM.exists() or not DRIVER.exists():
        sys.exit("needs /usr/bin/chromium and /usr/bin/chromedriver")
    from sdcdist.data import write_microdata
    from sdcdist.data.synth import generate
    demo = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
    with tempfile.TemporaryDirectory(prefix="sdcdist-bench-page-") as tmp:
        tmp = Path(tmp)
        cli, cli_wall = cli_audit(ROOT / "examples" / "demo.yaml", tmp / "demo.zarr",
                                  a.workers)
        print(f"demo audit (16 cells, {a.workers} workers): sdcdist audit {cli:.1f} s "
              f"(command {cli_wall:.1f} s with cluster start and imports)", flush=True)
        svc = Service(tmp / "root", a.workers)
        d = browser(tmp / "profile")
        try:
            syn = demo["dataset"]["synthetic"]
            csv = tmp / "incomes.csv"
            write_microdata(generate(syn["rows"], columns=syn["columns"], seed=syn["seed"]),
                            csv)
            with csv.open("rb") as f:
                ds = svc.http.post("/v1/datasets", files={"file": ("incomes.csv", f)}).json()
            doc = dict(demo, dataset={"id": ds["id"], "name": demo["dataset"]["name"]})
            svc.submit({"name": "warm-up", "dataset": {"synthetic": {"rows": 100,
                                                                      "columns": 3}},
                        "methods": [{"name": "noise", "params": [0.1]}],
                        "metrics": ["IL1s"]})
            for i in range(a.repeat):
                # a new seed each time: a new audit, not an answer from a cache
                aid, done = svc.submit(dict(doc, seed=doc["seed"] + 2 * i))
                t0 = time.perf_counter()       # the first results: the ranking as JSON
                svc.http.get(f"/v1/audits/{aid}/report",
                             params={"format": "json"}).raise_for_status()
                api = done + time.perf_counter() - t0
                p = page_run(d, svc, dict(doc, seed=doc["seed"] + 2 * i + 1))
                print(f"run {i + 1}: API submit-to-done {done:.1f} s, to the ranking "
                      f"(first /report) {api:.1f} s; page: first cell "
                      f"{p['first_cell']:.1f} s, first results (ranking table) "
                      f"{p['table']:.1f} s, trade-off plot {p['plot']:.1f} s; page/API "
                      f"{p['table'] / api:.2f}, page/command audit {p['table'] / cli:.2f}, "
                      f"page/command wall {p['table'] / cli_wall:.2f}", flush=True)
        finally:
            d.quit()
            svc.stop()
            shutil.rmtree(tmp / "profile", ignore_errors=True)


if __name__ == "__main__":
    main()
