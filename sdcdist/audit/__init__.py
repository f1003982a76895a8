"""Audits: validated specs, plans of seeded cells, runs that fill the cube, and
calibration at equal risk or equal utility."""

from .plan import Cell, cell_seed, plan_cells
from .run import AuditResult, load_dataset, run_audit
from .spec import AuditSpec, load_spec, parse_spec
from .calibrate import CalibrationResult, calibrate, calibration_table, open_calibration

__all__ = ["AuditSpec", "load_spec", "parse_spec", "Cell", "plan_cells", "cell_seed",
           "run_audit", "AuditResult", "load_dataset", "calibrate", "CalibrationResult",
           "calibration_table", "open_calibration"]
