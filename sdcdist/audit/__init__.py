"""Audits: validated specs, plans of seeded cells, runs that fill the cube."""

from .plan import Cell, cell_seed, plan_cells
from .run import AuditResult, load_dataset, run_audit
from .spec import AuditSpec, load_spec, parse_spec

__all__ = ["AuditSpec", "load_spec", "parse_spec", "Cell", "plan_cells", "cell_seed",
           "run_audit", "AuditResult", "load_dataset"]
