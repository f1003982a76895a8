"""Information loss and utility: how far the released file is from the original.

One module per family of measures, each registering its metrics on import
(``sdcdist.metrics`` imports them in the catalogue's order): :mod:`.infoloss`
(Table 1 errors, IL, IL1s, ...), :mod:`.ranks` (rank errors over the distributed sort),
:mod:`.propensity` (propensity scores), :mod:`.emd` (earth mover's distances),
:mod:`.categorical` (changed values, distances between contingency tables).
"""
