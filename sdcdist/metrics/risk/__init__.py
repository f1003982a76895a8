"""Disclosure risk: what an intruder learns from the released file.

One module per family of measures, each registering its metrics on import
(``sdcdist.metrics`` imports them in the catalogue's order): :mod:`.linkage`
(distance, rank and correlation linkage), :mod:`.interval` (interval disclosure),
:mod:`.prl` (probabilistic record linkage), :mod:`.frequency` (key-combination
frequencies), :mod:`.attribute` (what a key class discloses), :mod:`.suda` (special
uniques; their search in :mod:`.msu`), :mod:`.synthetic` (DCR, NNDR), :mod:`.cap`
(CategoricalCAP), :mod:`.household`, :mod:`.modrisk` (log-linear models; their fits in
:mod:`.loglinear`) and the package :mod:`.attacks` (singling out, linkability,
inference).
"""
