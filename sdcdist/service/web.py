"""The web page of the service (``GET /``): plain HTML and a little JavaScript in
``page.html`` beside this module, no build step.

A guided flow for a data-protection officer preparing a release, in five steps:

1. **Data.** Upload a file with its roles (key, confidential, weight, household id,
   integer-coded categorical columns); the answer lists every column's type and roles.
   Choose the dataset(s) to audit and, for each dataset separately, its key columns;
   "before masking" shows each as ``sdcdist describe`` does (``/v1/datasets/{id}/describe``).
2. **Rules.** Release rules ``METRIC OP NUMBER`` (``DLD <= 5``), one a line. They go
   into the spec's ``require:``, so the server reads them (:mod:`sdcdist.rules`) and a
   bad rule is refused with its 422 message, shown beside the rules.
3. **Grid.** A preset by data type (numeric, categorical keys, mixed, synthetic;
   ``/v1/presets``, derived from the registries' declarations) ticks a short set of
   methods and metrics; everything else sits behind "more". What cannot apply to the
   chosen datasets with their keys is not offered and says why on hover: the server
   decides (``/v1/datasets/{id}/applicable``, :func:`sdcdist.metrics.applicable` and the
   methods' declared checks). The YAML box stays for experts.
4. **Results.** Every audit keeps its box: progress cell by cell, cancel and resume
   with one count, and when cells are in, the ranking by the default risk-utility score
   with one rank column, each cell marked acceptable or not with the rules it breaks
   (``/report?require=``), what was ticked and what a score added ("added by Score2"),
   the recommendation (least-loss acceptable cell and the Pareto front, or "none
   acceptable" and the closest) and the trade-off plot.
5. **Release.** For the recommended (or a chosen) cell: download the release
   (``/release``), the release report, internal or external (``/release-report``), and
   the comparison of original against released (``/compare``: each variable's
   distribution in both files, the difference of the association matrices, each risk
   family's figures), drawn by :mod:`sdcdist.releasereport`.

The token box appears only when the service needs tokens (``/v1/health`` says so); the
token is kept in the browser's session storage and sent as a bearer header. Every text
from the service is put in the page as text (``textContent``), never as HTML; the page
logs nothing.
"""

from importlib.resources import files

#: The page itself (``page.html`` beside this module, shipped as package data).
PAGE = (files(__package__) / "page.html").read_text(encoding="utf-8")
